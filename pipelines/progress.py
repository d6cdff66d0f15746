"""Progress of a running stage that a person can follow, read from Spark's status tracker.

While a stage runs, a daemon thread polls ``SparkContext.statusTracker()`` (the active Spark stages'
task counts, which Spark keeps anyway: nothing is counted twice) and prints one line:

``[dedup] 42s: 37/200 tasks of Spark stages [12, 13] (2.1 tasks/s); ~611/3,340 documents``

On a terminal the line is redrawn in place once a second (carriage return, no newline) and cleared at
the end, so the stage's end line follows on a clean line; in a log (not a terminal) one line is
written every ``pipeline.progress_s`` seconds instead, so a scheduler's log stays readable. The
document figure is the stage's input rows (the upstream stage's recorded ``rows_out``) times the
fraction of tasks done, an estimate, hence the ``~``; it is left out when the input count is unknown.
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from typing import IO, Any


class Progress:
    """Context manager printing the progress of the Spark jobs started inside it.

    Args:
        spark: the session whose status tracker is read.
        stage: the Winnow stage name, the line's prefix.
        every_s: seconds between lines when ``stream`` is not a terminal; a terminal gets a redraw
            every second.
        total_docs: the stage's input rows when known (for the ``~documents`` estimate).
        stream: where to write; default ``sys.stderr`` at the time of each line.
    """

    def __init__(self, spark: Any, stage: str, every_s: float, total_docs: int | None = None,
                 stream: IO[str] | None = None) -> None:
        self.spark, self.stage, self.total_docs = spark, stage, total_docs
        self._stream = stream
        self.tty = self.stream.isatty()
        self.every_s = 1.0 if self.tty else every_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._drawn = 0
        self._t0 = 0.0

    @property
    def stream(self) -> IO[str]:
        """The output stream (``sys.stderr`` unless given)."""
        return self._stream or sys.stderr

    def __enter__(self) -> Progress:
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name=f"winnow-progress-{self.stage}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self.tty and self._drawn:
            self.stream.write("\r" + " " * self._drawn + "\r")
            self.stream.flush()

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                line = self.line()
            except Exception:  # noqa: BLE001 - the session may be stopping; progress is best effort
                return
            if line is None:
                continue
            if self.tty:
                # A line longer than the terminal would wrap, and \r would then redraw only its tail.
                line = line[: max(20, shutil.get_terminal_size().columns - 1)]
                pad = max(0, self._drawn - len(line))
                self.stream.write("\r" + line + " " * pad)
                self._drawn = len(line)
            else:
                self.stream.write(line + "\n")
            self.stream.flush()

    def line(self) -> str | None:
        """The current progress line, or None when no Spark stage is active."""
        tracker = self.spark.sparkContext.statusTracker()
        ids = sorted(tracker.getActiveStageIds())
        infos = [i for i in (tracker.getStageInfo(s) for s in ids) if i is not None]
        if not infos:
            return None
        total = sum(i.numTasks for i in infos)
        done = sum(i.numCompletedTasks for i in infos)
        elapsed = time.monotonic() - self._t0
        line = (f"[{self.stage}] {elapsed:.0f}s: {done}/{total} tasks of Spark stages {ids} "
                f"({done / max(elapsed, 1e-9):.1f} tasks/s)")
        if self.total_docs:
            line += f"; ~{int(self.total_docs * done / max(total, 1)):,}/{self.total_docs:,} documents"
        return line
