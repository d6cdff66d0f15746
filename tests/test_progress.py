"""Stage progress from Spark's status tracker (pipelines/core/progress.py): lines in a log, a redrawn line
on a terminal (a real pty)."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
import time

from jobs import pipeline
from pipelines.core import runner as stage_module
from pipelines.core import tables
from pipelines.core.config import load_config
from tests.chain import REPO, session_conf_kept

LINE = re.compile(r"\[report\] \d+s: \d+/\d+ tasks of Spark stages \[[\d, ]+\] \(\d+\.\d tasks/s\)")


def _docs(spark, root, n=2000):
    cfg = load_config(overrides=[f"run.root={root}"])
    rows = [(f"d{i}", f"word{i % 97} " * (5 + i % 40)) for i in range(n)]
    tables.write_table(spark.createDataFrame(rows, "doc_id string, text string"), cfg, "documents")


def _args(root, every):
    return ["--set", f"run.root={root}", "--set", "pipeline.stages=[report]", "--set", "report.samples_per_reason=1",
            "--set", "spark.shuffle_partitions=4", "--set", f"pipeline.progress_s={every}"]


def with_a_slow_job(run_stage, seconds):
    """``run_stage`` that first runs a Spark job of 4 tasks of ``seconds`` each inside the stage: the
    report of 2,000 rows can finish between two progress ticks (CI saw no line at all)."""

    def run_stage_with_a_slow_job(spark_, cfg, name, **options):
        # A local function: cloudpickle ships it by value, the workers cannot import tests/.
        def slow(rows):
            time.sleep(seconds)
            yield from rows

        spark_.sparkContext.parallelize(range(4), 4).mapPartitions(slow).count()
        return run_stage(spark_, cfg, name, **options)

    return run_stage_with_a_slow_job


def test_log_gets_one_line_every_n_seconds(spark, tmp_path, capsys, monkeypatch):
    root = tmp_path / "run"
    _docs(spark, root)
    monkeypatch.setattr(stage_module, "run_stage", with_a_slow_job(stage_module.run_stage, 0.8))
    with session_conf_kept(spark):
        t0 = time.monotonic()
        assert pipeline.main(_args(root, 0.5)) == 0
        elapsed = time.monotonic() - t0
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("[report] ")]
    assert lines and all(LINE.fullmatch(line) for line in lines), lines
    assert "\r" not in err
    assert len(lines) <= elapsed / 0.5 + 1


def test_off_and_quiet_print_no_progress(spark, tmp_path, capsys):
    root = tmp_path / "run"
    _docs(spark, root, 50)
    with session_conf_kept(spark):
        assert pipeline.main(_args(root, 0)) == 0
        assert pipeline.main([*_args(root, 0.2), "--force", "--quiet"]) == 0
    assert "tasks of Spark stages" not in capsys.readouterr().err


DRIVER = """
import sys
from tests.test_progress import _args, _docs
from pipelines.core import runner as stage_module
from pipelines.core.config import SparkConfig
from pipelines.core.session import get_spark
from jobs import pipeline
spark = get_spark("pty", SparkConfig(master="local[2]", shuffle_partitions=4, conf={"spark.ui.enabled": "false"}))
_docs(spark, sys.argv[1])
from tests.test_progress import with_a_slow_job
stage_module.run_stage = with_a_slow_job(stage_module.run_stage, 1.5)  # redrawn once a second
sys.exit(pipeline.main(_args(sys.argv[1], 30)))
"""


def test_terminal_gets_a_line_redrawn_in_place(tmp_path):
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(tmp_path / "run")], cwd=REPO, stdin=subprocess.DEVNULL,
                            stdout=slave, stderr=slave, env={**os.environ, "PYTHONPATH": str(REPO)})
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the pty
            break
        if not chunk:
            break
        out += chunk
    assert proc.wait(timeout=600) == 0, out.decode(errors="replace")[-3000:]
    text = out.decode(errors="replace")
    drawn = re.findall(r"\r(\[report\] [^\r\n]*)", text)
    # Redrawn once a second (pipeline.progress_s=30 is for logs), each a progress line...
    assert any(LINE.match(d.rstrip()) for d in drawn), text[-3000:]
    # ...and cleared before the end line, which starts on a clean line.
    assert re.search(r"\r +\r\[report\] in=2000 out=2000", text), text[-3000:]


class _Tracker:
    """A status tracker whose active Spark stages a test sets: ``{stage_id: (tasks, completed)}``."""

    def __init__(self):
        self.stages: dict[int, tuple[int, int]] = {}

    def getActiveStageIds(self):
        return list(self.stages)

    def getStageInfo(self, sid):
        from pyspark.status import SparkStageInfo

        tasks, done = self.stages[sid]
        return SparkStageInfo(sid, 0, f"stage {sid}", tasks, 0, done, 0)


class _Clock:
    def __init__(self, t=1_000.0):
        self.t = t

    def __call__(self):
        return self.t


def _progress(**kw):
    import io
    from types import SimpleNamespace

    from pipelines.core.progress import Progress

    tracker, clock = _Tracker(), _Clock()
    spark = SimpleNamespace(sparkContext=SimpleNamespace(statusTracker=lambda: tracker))
    return Progress(spark, "dedup", 30, stream=io.StringIO(), clock=clock, **kw), tracker, clock


def test_rate_is_of_the_recent_tasks_not_of_the_whole_stage():
    p, tracker, clock = _progress()
    clock.t += 60  # a minute of planning and driver work, no Spark stage
    assert p.line() is None
    tracker.stages = {3: (8, 0)}
    assert p.line() == "[dedup] 60s: 0/8 tasks of Spark stages [3] (0.0 tasks/s)"
    clock.t += 1
    tracker.stages = {3: (8, 1)}
    # 1 task in the 1 s since the Spark stage was first seen, not 1 task / 61 s = 0.0 tasks/s.
    assert p.line() == "[dedup] 61s: 1/8 tasks of Spark stages [3] (1.0 tasks/s)"
    for done in range(2, 8):  # one line a second: the tracker is read every second
        clock.t += 1
        tracker.stages = {3: (8, done)}
        p.line()
    clock.t += 5
    tracker.stages = {4: (200, 30)}  # stage 3 ended (8 tasks) and stage 4 began
    # Over the last 10 s, since the read at 62 s (2 tasks done): the 6 other tasks of stage 3, which
    # ended between two reads, and 30 of stage 4: 36 tasks / 10 s.
    assert p.line() == "[dedup] 72s: 30/200 tasks of Spark stages [4] (3.6 tasks/s)"


def test_document_estimate_never_goes_back_within_the_stage():
    p, tracker, clock = _progress(total_docs=3_340)
    shown = []
    for stages in ({1: (10, 5)}, {1: (10, 10)}, {2: (200, 20)}, {2: (200, 190)}, {3: (4, 1)}):
        clock.t += 1
        tracker.stages = stages
        shown.append(p.line().rsplit("; ", 1)[1])
    # The second Spark job starts again at 0 tasks; the documents figure keeps the furthest pass.
    assert shown == ["~1,670/3,340 documents", *["~3,340/3,340 documents"] * 4]


def test_ingest_shows_bytes_of_input():
    p, tracker, clock = _progress(total_bytes=4_500_000_000)
    clock.t += 2
    tracker.stages = {0: (9, 3)}
    assert p.line().endswith("; ~1.5/4.5 GB of input")
    tracker.stages = {1: (2, 0)}
    assert p.line().endswith("; ~1.5/4.5 GB of input")


def test_ingest_line_names_its_bytes_of_input(spark, tmp_path, monkeypatch):
    from pipelines.core import progress, runs

    seen = {}
    real = progress.Progress

    def spy(*args, **kw):
        seen.update(stage=args[1], total_docs=args[3], total_bytes=kw.get("total_bytes"))
        return real(*args, **kw)

    monkeypatch.setattr(progress, "Progress", spy)
    inputs = tmp_path / "web.jsonl"
    inputs.write_text("".join(f'{{"text": "document {i}"}}\n' for i in range(5)))
    cfg = load_config(overrides=[f"run.root={tmp_path / 'run'}", f"ingest.inputs=[{inputs}]", "pipeline.progress_s=30",
                                 "spark.shuffle_partitions=4"])
    runs.run_and_record(spark, cfg, "ingest", log=lambda line: None)
    assert seen == {"stage": "ingest", "total_docs": None, "total_bytes": inputs.stat().st_size}
