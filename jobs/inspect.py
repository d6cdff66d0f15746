"""Look at documents before training on them.

``python jobs/inspect.py --run OUT --stage filter --reason gopher_repetition -n 5`` prints a seeded
sample of documents the filter removed for that reason (or family), with their signals and cut text;
``--kept`` samples what a stage kept; ``--doc-id ID`` shows one document's path through every stage and
what each stage noted on it (a local run root is read without Spark).
A ``--reason`` that matches nothing exits 1 naming the reasons the stage did remove, with their counts.
"""

import os
import sys

# Python puts this script's folder first on sys.path, where jobs/tokenize.py and jobs/inspect.py would
# shadow the standard library modules of the same names; put the project root there instead.
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path[0] = os.path.dirname(sys.path[0])

import argparse
from collections.abc import Sequence
from typing import Any

from jobs._cli import base_parser, parse_config, spark_config
from pipelines.core.chain import STAGES


def parser() -> argparse.ArgumentParser:
    """The inspect job's parser: the common options plus what to look at."""
    p = base_parser("inspect.py", "Show sampled removed/kept documents with their signals, or one document's path")
    p.add_argument("--run", metavar="ROOT", help="the run root to inspect (same as --set run.root=ROOT)")
    p.add_argument("--stage", choices=STAGES, metavar="STAGE",
                   help=f"stage to sample from; one of {list(STAGES)} (decontam: evaluation matches, spans marked; pii: documents with findings, marked; passages: documents with text cut, the cuts marked; with --reason, its removals)")
    p.add_argument("--reason", help="reason id or family prefix, e.g. gopher_repetition or dedup.near")
    p.add_argument("--kept", action="store_true", help="sample documents the stage kept instead of removed")
    p.add_argument("-n", type=int, default=5, help="documents to show (default 5)")
    p.add_argument("--chars", type=int, default=600, help="characters of text per document (default 600)")
    p.add_argument("--doc-id", help="show this document's path through every stage instead of sampling")
    return p


def _show_path(prog: str, spark: Any, cfg: Any, doc_id: str) -> int:
    """Print one document's path through every stage, each stage's notes on it indented below its line;
    1 when no table holds it. ``spark`` None: a local run root read without Spark."""
    from pipelines.core.samples import printable
    from pipelines.tools.doc_path import doc_path

    steps = doc_path(spark, cfg, doc_id)
    if not any(s["status"] in ("kept", "removed") for s in steps):
        # "absent" at every stage would read as "removed before each of them": say what it is.
        looked = [s["detail"].removeprefix("not in ") for s in steps if s["status"] == "absent"]
        where = f"looked in {', '.join(looked)} and removed" if looked else "no stage table exists yet"
        print(f"{prog}: no table of {cfg.run.root} holds doc_id {doc_id!r} ({where})", file=sys.stderr)
        return 1
    for step in steps:
        print(printable(f"{step['stage']:<9} {step['status']:<8} {step['detail']}"))
        for note in step.get("notes") or []:
            print(printable(f"{'':<9} {'':<8} {note}"))
    return 0


def _show_path_without_spark(prog: str, cfg: Any, doc_id: str) -> int | None:
    """:func:`_show_path` of a local run root read with delta-rs, no JVM started; None when the root is not
    local or a table needs Spark (the caller starts it)."""
    from pipelines.core import local_state

    if not local_state.can_read(cfg):
        return None
    try:
        return _show_path(prog, None, cfg, doc_id)
    except local_state.NeedsSpark:
        return None


def _root_exists_or_exit(p: argparse.ArgumentParser, cfg: Any) -> None:
    """Exit 1 naming ``run.root`` when it is a local folder that does not exist (a mistyped ``--run``),
    before Spark starts; it said "Delta table 'removed' not found ...; run the 'filter' stage first"."""
    from pipelines.core.preflight import local_path

    catalog = cfg.run.catalog and cfg.run.db_schema  # tables in a metastore: the root may hold none
    if not catalog and (root := local_path(cfg.run.root)) is not None and not os.path.isdir(root):
        p.exit(1, f"{p.prog}: no run at {cfg.run.root}: the folder does not exist; --run takes the run.root of a"
                  " run (out for `make run`)\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Print seeded samples of a stage's removed or kept documents, or one document's path; returns the exit status."""
    from pipelines.core import hooks
    from pipelines.core.samples import printable
    from pipelines.core.session import get_spark
    from pipelines.core.tables import MissingTableError
    from pipelines.tools import inspect

    p = parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    pre, _ = p.parse_known_args(argv)
    if pre.run:
        argv += ["--set", f"run.root={pre.run}"]
    args, cfg = parse_config(p, argv)
    if not args.doc_id and not args.stage:
        p.error("give --stage STAGE (with --reason or --kept) or --doc-id ID")
    if args.n < 1 or args.chars < 20:
        p.error(f"-n must be >= 1 and --chars >= 20; got -n {args.n}, --chars {args.chars}")
    _root_exists_or_exit(p, cfg)
    if args.doc_id and (status := _show_path_without_spark(p.prog, cfg, args.doc_id)) is not None:
        return status
    spark = get_spark("winnow-inspect", spark_config(cfg, quiet=True))
    try:
        if args.doc_id:
            return _show_path(p.prog, spark, cfg, args.doc_id)
        # A stage may show itself its own way (pipelines/<stage>/hooks.py): a whole view, or its own sample.
        options = {"reason": args.reason, "kept": args.kept, "n": args.n, "text_chars": args.chars}
        view = hooks.hook(args.stage, "inspect_view")
        text = view(spark, cfg, **options) if view is not None else None
        if text is not None:
            print(text)
            return 0
        own_sample = hooks.hook(args.stage, "inspect_sample")
        rows = own_sample(spark, cfg, **options) if own_sample is not None else None
        if rows is None:  # no sample of its own, or none for these options: the generic one
            own_sample = None
            rows = inspect.sample(spark, cfg, args.stage, **options)
        if args.reason and not rows:
            # An empty sample reads as "nothing to see"; mostly it is a misspelt reason: offer the real ones.
            found = inspect.reason_counts(spark, cfg, args.stage)
            listed = ", ".join(f"{r} ({c})" for r, c in found.items())
            where = f"its reasons: {listed}" if found else "it removed no document"
            print(printable(f"{p.prog}: no document removed by {args.stage} in {cfg.run.root} has reason {args.reason!r}"
                            f" or one in its family; {where}"), file=sys.stderr)
            return 1
    except ValueError as e:
        p.exit(2, f"{p.prog}: {e}\n")
    except MissingTableError as e:  # like the other jobs: 1, and what to run first
        p.exit(1, f"{p.prog}: {e}\n")
    own_what = hooks.hook(args.stage, "INSPECT_WHAT")
    what = "kept by" if args.kept else own_what if own_what and not args.reason else "removed by"
    why = f" for {args.reason}" if args.reason else ""
    shown = f"{len(rows)}"
    if len(rows) == args.n and own_sample is None:  # a sample of more: say of how many
        total = inspect.count(spark, cfg, args.stage, reason=args.reason, kept=args.kept)
        shown = f"{len(rows)} of {total}" if total > len(rows) else shown
    noun = "document" if shown == "1" else "documents"
    print(inspect.format_sample(rows, f"{shown} {noun} {what} {args.stage}{why} (seed {cfg.run.seed}) in {cfg.run.root}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
