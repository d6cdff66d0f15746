"""Verify published shards against their manifest: `python jobs/verify.py --conf conf/local.yaml [--root DIR|s3://..]`.

Exit status 0 when every check passes, 1 on any mismatch (each problem printed), 2 on a bad config.
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
    """Verify the shards against ``manifest.json``; returns 0 when every check passed, else 1."""
    from pipelines.tools.verify import verify

    parser = base_parser("verify.py", "Re-read every shard and check it against manifest.json")
    parser.add_argument("--root", default=None, help="shard root to verify (default: shard.output or <run.root>/shards)")
    args, cfg = parse_config(parser, argv)
    root = args.root or cfg.shard_root
    res = verify(root, cfg.shard.storage)
    for p in res.problems:
        print(f"MISMATCH {p}", flush=True)
    if res.decoded:  # a readable spot check: the tokens of the first shard's first documents, decoded
        print(f"[verify] the first {len(res.decoded)} documents of the first shard, decoded (first 64 tokens):",
              flush=True)
    for text in res.decoded:
        print(f"  {text[:80]!r}", flush=True)
    for w in res.warnings:
        print(f"WARNING {w}", flush=True)
    status = "OK" if res.ok else f"FAILED ({len(res.problems)} problems)"
    if res.warnings:
        status += f", {len(res.warnings)} warning{'s' if len(res.warnings) != 1 else ''}"
    print(f"[verify] {root}: {res.files_checked} files, {res.documents} documents, {res.tokens} tokens: {status}", flush=True)
    return 0 if res.ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
