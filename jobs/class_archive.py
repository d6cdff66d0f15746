"""Write the JVM's class-data-sharing archive for local sessions (the install step's last part).

``python -m jobs.class_archive`` runs ``make run``'s chain in a child process whose JVM dumps the classes
it loaded as it exits (:func:`pipelines.core.session.class_archive` names the file; a local session maps
it when present). It lives here, above the library, because it runs the chain (:mod:`jobs.pipeline`).
"""

from __future__ import annotations

import os
import sys

# Run as a script, Python puts jobs/ first on sys.path (where jobs/tokenize.py and jobs/inspect.py shadow
# the standard library): put the project root there instead, as every job does.
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path[0] = os.path.dirname(sys.path[0])

import argparse  # noqa: E402
from pathlib import Path  # noqa: E402

from pyspark.sql import SparkSession  # noqa: E402

from pipelines.core.session import (  # noqa: E402
    CDS_DUMP_ENV,
    CDS_ENV,
    JAR_CACHE,
    cached_delta_jars,
    class_archive,
    prune_class_archives,
)


def make_class_archive() -> Path | None:
    """Write :func:`class_archive` for this machine: ``make run``'s chain (``conf/local.yaml`` on
    ``sample_data/``, into a scratch root) in a child process whose JVM dumps the classes it loaded as it
    exits (output to ``classes.log`` beside the archive; about a minute on 2 idle cores).

    Once written, the cache's archives but the last :data:`~pipelines.core.session.ARCHIVES_KEPT` used
    are deleted (:func:`~pipelines.core.session.prune_class_archives`).

    Returns:
        The archive, or None when the JVM could not write one (the log says why; sessions then start
        without it, as before).
    """
    import subprocess

    JAR_CACHE.mkdir(parents=True, exist_ok=True)
    log = JAR_CACHE / "classes.log"
    with log.open("w") as out:
        rc = subprocess.call([sys.executable, "-m", "jobs.class_archive", "--child"], stdout=out,
                             stderr=out, env={**os.environ, CDS_ENV: "0"})
    archive = class_archive(cached_delta_jars() or [])
    ok = rc == 0 and archive.is_file()
    state = f"written: {archive}" if ok else "NOT written"
    gone = prune_class_archives(archive) if ok else []
    state += f" ({len(gone)} older ones deleted)" if gone else ""
    print(f"JVM class archive {state}; its log is {log}", file=sys.stderr)
    return archive if ok else None


def _class_archive_child() -> None:
    # The classes worth archiving are the ones a run loads: run make run's chain (conf/local.yaml on
    # sample_data/) into a scratch root, with the JVM told to dump its classes when it exits.
    import tempfile

    from pyspark import SparkContext

    repo = Path(__file__).resolve().parents[1]
    if not (repo / "sample_data").is_dir() or not (repo / "jobs" / "pipeline.py").is_file():
        sys.exit("no sample_data/ and jobs/pipeline.py beside pipelines/: no chain to train the archive on")
    archive = class_archive(cached_delta_jars() or [])
    tmp = archive.with_name(archive.name + f".{os.getpid()}.tmp")
    os.environ[CDS_DUMP_ENV] = str(tmp)
    os.chdir(repo)
    sys.path.insert(0, str(repo))
    from jobs import pipeline

    with tempfile.TemporaryDirectory() as d:
        rc = pipeline.main(["--conf", "conf/local.yaml", "--quiet", "--set", f"run.root={d}/out"])
        proc = getattr(SparkContext._gateway, "proc", None)  # type: ignore[attr-defined]
        active = SparkSession.getActiveSession()
        if active is not None:
            active.stop()
        if proc is not None:  # the JVM writes the archive as it exits, after the end of its input
            proc.stdin.close()
            proc.wait(timeout=600)
    if rc == 0 and tmp.is_file():
        tmp.replace(archive)
    else:
        tmp.unlink(missing_ok=True)
        sys.exit(f"the chain exited with {rc} or the JVM wrote no archive")


def main(argv: list[str] | None = None) -> int:
    """``python -m jobs.class_archive``: write the archive (exit 0) or say why not (exit 1)."""
    p = argparse.ArgumentParser(prog="class_archive.py", description=(
        "Write the JVM class archive local sessions start from (the install step runs it; about a minute). "
        "It takes no --conf/--set: it runs make run's chain on sample_data/ into a scratch root."))
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)  # the archived run itself
    args = p.parse_args(argv)
    if args.child:
        _class_archive_child()
        return 0
    return 0 if make_class_archive() else 1


if __name__ == "__main__":
    sys.exit(main())
