"""The gating run: `python jobs/gate.py --variant out/base --variant out/dedup07 [--set gate.K=V]`.

Trains the same small transformer on each variant's shards for ``gate.seeds`` paired seeds, scores every
model on the same held-out text and writes ``<gate root>/gate.json`` and ``gate.html``. No Spark.
Exit status 0 when the gate ran; 1 when a variant or evaluation input cannot be used (one line naming
the path or key); 2 on a usage error: a bad config, fewer than two variants, one variant given twice,
a variant whose run is in progress, or a gate root another gate holds.
"""

import os
import sys

# Python puts this script's folder first on sys.path, where jobs/tokenize.py and jobs/inspect.py would
# shadow the standard library modules of the same names; put the project root there instead.
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path[0] = os.path.dirname(sys.path[0])

from collections.abc import Sequence

from jobs._cli import base_parser, parse_config


def main(argv: Sequence[str] | None = None) -> int:
    """Run the gate; returns 0 when it ran, 1 on an input that cannot be used, 2 on a usage error (see the
    module docstring)."""
    parser = base_parser("gate.py", "Train small models on two or more shard sets and compare them")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="PATH",
        help="a run root or shard folder Winnow wrote; repeatable, the first is the baseline "
        "(adds to gate.variants)",
    )
    parser.add_argument("--out", default=None, help="gate root (default gate.output, else <run.root>/gate)")
    parser.add_argument("--force-unlock", action="store_true",
                        help="take the gate root's lock even when the gate holding it looks alive")
    args, cfg = parse_config(parser, argv)
    g = cfg.gate.model_copy(
        update={"variants": [*cfg.gate.variants, *args.variant], "output": args.out or cfg.gate.output}
    )
    cfg = cfg.model_copy(update={"gate": g})
    try:
        import jax  # noqa: F401
        import optax  # noqa: F401
    except ImportError as e:
        # "winnow" on PyPI is another project: the extra is installed from this checkout
        parser.exit(2, f"{parser.prog}: error: the gate needs JAX and optax ({e}): install the gate extra"
                       " from the Winnow checkout, .venv/bin/pip install -e '.[gate]' (make test does)\n")
    from pipelines.core.lock import RunLockedError
    from pipelines.gate import run
    from pipelines.gate.shards import GateUsageError
    from udfs.errors import UserError

    say = (lambda line: None) if args.quiet else (lambda line: print(line, flush=True))
    try:
        command = " ".join([parser.prog, *(sys.argv[1:] if argv is None else argv)])
        paths = run(cfg, say, force_unlock=args.force_unlock, command=command)
    except UserError as e:
        print(f"{parser.prog}: error: {e}", file=sys.stderr, flush=True)
        return 2 if isinstance(e, GateUsageError | RunLockedError) else 1
    print(f"[gate] wrote {paths['json']} and {paths['html']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
