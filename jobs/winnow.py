"""The ``winnow`` command: one entry point for the jobs (``[project.scripts]`` in pyproject.toml).

``winnow run|plan|stage NAME|inspect|verify|report|export|audit|gate [options]``; every subcommand takes the
options of the job it calls (``--conf``, ``--set``, and ``--from``/``--force``/``--dry-run`` for
``run``), and ``winnow <subcommand> --help`` shows them. The ``jobs/*.py`` files stay the
spark-submit entry points; this module only dispatches to their ``main`` functions.
"""

import os
import sys

# Python puts this script's folder first on sys.path, where jobs/tokenize.py and jobs/inspect.py would
# shadow the standard library modules of the same names (`python jobs/winnow.py` died in `import inspect`);
# put the project root there instead, as every other job does.
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path[0] = os.path.dirname(sys.path[0])

import importlib
from collections.abc import Callable, Sequence

from pipelines.core.chain import CHAIN, STAGES

COMMANDS: dict[str, str] = {
    "run": "run the configured chain (pipeline.stages), skipping the stages already complete",
    "plan": "print the plan (run/skip and why) without running anything: `run --dry-run`",
    "stage": "run one stage: winnow stage NAME [options]",
    "inspect": "show sampled removed/kept documents of a stage, or one document's path",
    "verify": "re-read every shard and check it against manifest.json",
    "report": "write report.html + stats.json from the run's tables (the report stage alone)",
    "export": "write a stage table as Parquet files (optionally sized and named for the Hugging Face Hub)",
    "audit": "check that the tokenizer fits the data (cost, round trip, coverage, prompts): audit.json",
    "gate": "train small models on two or more shard sets and compare them: gate --variant A --variant B",
}


def usage() -> str:
    """The text of ``winnow --help``: the subcommands and the stages, one line each (from the chain)."""
    width = max(map(len, [*COMMANDS, *STAGES]))
    lines = ["usage: winnow {" + ",".join(COMMANDS) + "} [--conf FILE] [--set KEY=VALUE] ...", "",
             "commands (winnow COMMAND --help for its options):"]
    lines += [f"  {name:<{width}}  {text}" for name, text in COMMANDS.items()]
    return "\n".join(lines) + "\n\n" + _stage_lines(width)


def _stage_lines(width: int) -> str:
    lines = "".join(f"  {s.name:<{width}}  {s.summary}\n" for s in CHAIN)
    return "stages (pipelines/core/chain.py, in chain order):\n" + lines


def _job(module: str) -> Callable[[list[str]], int]:
    return importlib.import_module(f"jobs.{module}").main


def _stage(argv: list[str]) -> int:
    if argv and argv[0] in ("-h", "--help"):
        # `winnow stage --help` is how a new user asks which names there are: answer, do not complain.
        sys.stdout.write("usage: winnow stage NAME [--conf FILE] [--set KEY=VALUE] ... "
                         "(winnow stage NAME --help for its options)\n\n")
        sys.stdout.write(_stage_lines(max(map(len, STAGES))))
        return 0
    if not argv or argv[0] not in STAGES:
        found = repr(argv[0]) if argv else "nothing"
        print(f"winnow stage: give a stage name; one of {list(STAGES)} (got {found})", file=sys.stderr)
        return 2
    name, rest = argv[0], argv[1:]
    module = importlib.import_module(f"jobs.{name}")
    main = getattr(module, "main", None)
    if main is not None:
        return main(rest)
    from jobs._cli import run_single_stage

    return run_single_stage(name, rest)


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch ``argv`` (default ``sys.argv[1:]``) to the job of its first word; returns the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        sys.stdout.write(usage()) if args else sys.stderr.write(usage())
        return 0 if args else 2
    cmd, rest = args[0], args[1:]
    if cmd in COMMANDS:
        from jobs._cli import called_as

        named = cmd == "stage" and rest and not rest[0].startswith("-")
        called_as(" ".join(["winnow", cmd, *(rest[:1] if named else [])]))
    if cmd == "run":
        return _job("pipeline")(rest)
    if cmd == "plan":
        # The same code path as `run --dry-run`, so it answers as fast as that does.
        return _job("pipeline")([*rest, "--dry-run"])
    if cmd == "stage":
        return _stage(rest)
    if cmd == "report":
        return _stage(["report", *rest])
    if cmd in ("inspect", "verify", "export", "audit", "gate"):
        return _job(cmd)(rest)
    print(f"winnow: unknown command {cmd!r}; one of {list(COMMANDS)}\n", file=sys.stderr)
    sys.stderr.write(usage())
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
