"""The job entry points fail fast on bad configuration, before any Spark session starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
JOBS = ["ingest", "dedup", "filter", "refs", "decontam", "tokenize", "shard", "pipeline"]


@pytest.mark.parametrize("job", JOBS)
def test_bad_config_exits_2_naming_the_key(job):
    r = subprocess.run(
        [sys.executable, str(REPO / "jobs" / f"{job}.py"), "--set", "ingest.format=docx"],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )
    assert r.returncode == 2, r.stderr
    assert "ingest.format" in r.stderr and "'docx'" in r.stderr


@pytest.mark.parametrize("job", sorted(p.name for p in (REPO / "jobs").glob("[!_]*.py")))
def test_help_lists_conf_and_set(job):
    # Run as a script, as spark-submit does: every job must survive its folder being first on sys.path
    # (jobs/inspect.py and jobs/tokenize.py shadow the standard library there; jobs/winnow.py died of it).
    r = subprocess.run([sys.executable, str(REPO / "jobs" / job), "--help"], capture_output=True, text=True, cwd=REPO,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    # train_quality trains a fastText model from files, class_archive runs make run's chain: no config
    if job not in ("train_quality.py", "class_archive.py"):
        assert "--conf" in r.stdout and "--set" in r.stdout


def test_user_errors_print_their_message_without_a_traceback(capsys, monkeypatch):
    from jobs._cli import _user_error_hook
    from pipelines.core.tables import MissingTableError
    from pipelines.ingest.stage import NoInputFilesError

    monkeypatch.delenv("WINNOW_TRACEBACK", raising=False)
    monkeypatch.setattr(sys, "argv", ["jobs/filter.py"])
    monkeypatch.setattr("pipelines.core.session.logs_off_quietly", lambda: pytest.fail("logs off for a user error"))
    for err in (MissingTableError("Delta table 'deduped' not found at 'out/tables/deduped'; run the 'dedup' stage first"),
                NoInputFilesError("ingest.inputs: 'x/*.jsonl' matches no file")):
        _user_error_hook(type(err), err, None)
        assert capsys.readouterr().err == f"filter.py: error: {err}\n"
    monkeypatch.delenv("MAKELEVEL", raising=False)
    _user_error_hook(KeyboardInterrupt, KeyboardInterrupt(), None)  # Ctrl-C: one line, no traceback
    assert capsys.readouterr().err == "filter.py: interrupted; the stage did not complete; the same command again runs it\n"
    monkeypatch.setattr(sys, "argv", ["jobs/pipeline.py"])
    monkeypatch.setenv("MAKELEVEL", "1")  # make run
    _user_error_hook(KeyboardInterrupt, KeyboardInterrupt(), None)
    assert capsys.readouterr().err == "pipeline.py: interrupted; the same make command again skips the stages that completed\n"
    monkeypatch.setattr(sys, "argv", ["jobs/filter.py"])
    from py4j.protocol import Py4JNetworkError

    broken = Py4JNetworkError("Answer from Java side is empty")  # a clean-up call the same Ctrl-C broke
    broken.__context__ = KeyboardInterrupt()
    _user_error_hook(type(broken), broken, None)
    assert capsys.readouterr().err.startswith("filter.py: interrupted;")
    _user_error_hook(KeyError, KeyError("bug"), None)  # anything else keeps its traceback
    assert "KeyError: 'bug'" in capsys.readouterr().err
    monkeypatch.setenv("WINNOW_TRACEBACK", "1")
    _user_error_hook(NoInputFilesError, NoInputFilesError("x"), None)
    assert "NoInputFilesError: x" in capsys.readouterr().err


def test_out_of_memory_prints_one_line_naming_the_settings(capsys, monkeypatch):
    from py4j.protocol import Py4JError, Py4JNetworkError

    from jobs._cli import _user_error_hook, memory_error

    monkeypatch.delenv("WINNOW_TRACEBACK", raising=False)
    monkeypatch.setattr(sys, "argv", ["jobs/ingest.py"])
    silenced = []  # the JVM's logs go off before the line: what it logs as it winds down would follow it
    monkeypatch.setattr("pipelines.core.session.logs_off_quietly", lambda: silenced.append(1))
    jvm = Py4JError("An error occurred while calling o123.save.\n: org.apache.spark.SparkException: Job aborted due to "
                    "stage failure: ... java.lang.OutOfMemoryError: Java heap space\n\tat java.base/...")
    _user_error_hook(type(jvm), jvm, None)
    err = capsys.readouterr().err
    assert err.startswith("ingest.py: error: out of memory in the Spark JVM (java.lang.OutOfMemoryError)") and err.count("\n") == 1
    assert silenced == [1]
    for key in ("spark.driver.memory", "spark.executor.memory", "ingest.batch_rows", "ingest.batch_bytes", "spark.arrow_batch_rows"):
        assert key in err
    try:
        try:
            raise Py4JNetworkError("Answer from Java side is empty")
        except Py4JNetworkError as inner:
            raise RuntimeError("stage failed") from inner
    except RuntimeError as chained:
        assert "JVM stopped answering" in memory_error(chained)
    assert "a Python worker" in memory_error(MemoryError())
    # what the next call says after an OOM in a task thread stopped a local run's SparkContext (seen on
    # dedup of 480,000 documents with a 3 GB heap)
    gone = Py4JError('An error occurred while calling o1171.collectToPython.\n: java.lang.NullPointerException: Cannot '
                     'invoke "org.apache.spark.scheduler.DAGScheduler.cleanupQueryJobs(long)" because the return value '
                     'of "org.apache.spark.SparkContext.dagScheduler()" is null')
    assert "SparkContext stopped" in memory_error(gone)
    assert memory_error(ValueError("bad value")) is None


def test_full_disk_prints_one_line_and_leaves_no_temporary_file(tmp_path, capsys, monkeypatch):
    import errno
    from pathlib import Path

    from jobs._cli import _user_error_hook
    from pipelines.core import tables

    monkeypatch.delenv("WINNOW_TRACEBACK", raising=False)
    monkeypatch.setattr(sys, "argv", ["jobs/report.py"])
    silenced = []
    monkeypatch.setattr("pipelines.core.session.logs_off_quietly", lambda: silenced.append(1))
    target = tmp_path / "report" / "report.html"

    def full(self, *a, **k):
        raise OSError(errno.ENOSPC, "No space left on device", str(self))

    monkeypatch.setattr(Path, "write_text", full)
    try:
        tables.write_text(None, str(target), "<html>")
    except OSError as e:
        _user_error_hook(type(e), e, None)
    else:
        raise AssertionError("write_text must raise on a full disk")
    err = capsys.readouterr().err
    assert err.startswith(f"report.py: error: no space left on device writing {target}.tmp.") and err.count("\n") == 1
    assert list((tmp_path / "report").iterdir()) == []
    jvm = RuntimeError("py4j: java.io.IOException: No space left on device")  # as Spark reports it
    _user_error_hook(type(jvm), jvm, None)
    assert capsys.readouterr().err.startswith("report.py: error: no space left on device. Free space")
    assert silenced == [1, 1]


def test_a_jvm_that_does_not_start_is_one_line(tmp_path):
    r = subprocess.run([sys.executable, str(REPO / "jobs" / "ingest.py"), "--conf", "conf/local.yaml",
                        "--set", f"run.root={tmp_path}/run", "--set", "spark.conf={spark.driver.memory: 999999999999g}"],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr and "ingest.py: error: the Spark driver JVM exited as it started" in r.stderr
