"""Progress of a running stage that a person can follow, read from Spark's status tracker.

While a stage runs, a daemon thread polls ``SparkContext.statusTracker()`` (the active Spark stages'
task counts, which Spark keeps anyway: nothing is counted twice) and prints one line:

``[dedup] 42s: 37/200 tasks of Spark stages [12, 13] (2.1 tasks/s); ~611/3,340 documents``

On a terminal the line is redrawn in place once a second (carriage return, no newline) and cleared at
the end, so the stage's end line follows on a clean line; in a log (not a terminal) one line is
written every ``pipeline.progress_s`` seconds instead, so a scheduler's log stays readable.

What the figures mean:

* ``42s``: time since the Winnow stage started.
* ``37/200 tasks``: of the Spark stages active now (a Winnow stage runs several Spark jobs one after
  the other, so this count starts again with each).
* ``tasks/s``: tasks finished over the last :data:`RATE_WINDOW_S` seconds, counting every Spark stage
  seen, those that ended since included (the tracker is read every second, whatever the interval of
  the lines, and a Spark stage that is no longer active counts all its tasks); until a window has
  passed, tasks done by the active Spark stages since the first of them was seen. Never over the
  whole Winnow stage's elapsed time, which showed 0.0 tasks/s at 1 of 8 tasks after a first minute
  spent elsewhere.
* ``~611/3,340 documents``: the stage's input rows (the upstream stage's recorded ``rows_out``) times
  the largest share of tasks done that any set of active Spark stages has reached in this Winnow
  stage: the furthest pass over the data so far. It never goes back when the next Spark job starts;
  reaching the total means every document has been through the first pass, not that the stage is
  done. Left out when the input count is unknown.
* ``~1.2/4.5 GB of input`` (ingest, which has no upstream count): the bytes of the input files (the
  listing the split plan is made from) times the same share.
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import IO, Any

RATE_WINDOW_S = 10.0
"""Seconds of task completions the rate is measured over: long enough to smooth a few uneven tasks,
short enough to follow a change of Spark stage within a few redraws."""


def human_bytes(n: float) -> tuple[float, str]:
    """``(value, unit)`` of ``n`` bytes in decimal units (B, kB, MB, GB, TB), the unit for the total.

    >>> human_bytes(4_500_000_000)
    (4.5, 'GB')
    """
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000:
            return n, unit
        n /= 1000
    return n, "TB"


class Progress:
    """Context manager printing the progress of the Spark jobs started inside it.

    Args:
        spark: the session whose status tracker is read.
        stage: the Winnow stage name, the line's prefix.
        every_s: seconds between lines when ``stream`` is not a terminal; a terminal gets a redraw
            every second.
        total_docs: the stage's input rows when known (for the ``~documents`` estimate).
        stream: where to write; default ``sys.stderr`` at the time of each line.
        total_bytes: bytes of the stage's raw input when known (ingest), for ``~... of input``.
        clock: seconds since the epoch (Spark's stage submission times are epoch milliseconds);
            tests pass a fake one.
    """

    def __init__(self, spark: Any, stage: str, every_s: float, total_docs: int | None = None,
                 stream: IO[str] | None = None, total_bytes: int | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.spark, self.stage, self.total_docs, self.total_bytes = spark, stage, total_docs, total_bytes
        self._stream = stream
        self._clock = clock
        self.tty = self.stream.isatty()
        self.every_s = 1.0 if self.tty else every_s
        self.tick_s = min(1.0, self.every_s)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._drawn = 0
        self._t0 = clock()
        self._done: dict[int, int] = {}  # Spark stage id -> most tasks seen completed
        self._seen: dict[int, float] = {}  # Spark stage id -> when it was first seen active
        self._tasks: dict[int, int] = {}  # Spark stage id -> its number of tasks
        self._samples: deque[tuple[float, int]] = deque()  # (time, tasks completed in all Spark stages seen)
        self._share = 0.0  # the furthest share of tasks done of any set of active Spark stages

    @property
    def stream(self) -> IO[str]:
        """The output stream (``sys.stderr`` unless given)."""
        return self._stream or sys.stderr

    def __enter__(self) -> Progress:
        self._t0 = self._clock()
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
        last = self._clock()
        while not self._stop.wait(self.tick_s):
            try:
                line = self.line()  # every tick: the rate needs the task counts of every second
            except Exception:  # noqa: BLE001 - the session may be stopping; progress is best effort
                return
            if line is None or self._clock() - last < self.every_s - 1e-3:
                continue
            last = self._clock()
            if self.tty:
                # A line longer than the terminal would wrap, and \r would then redraw only its tail.
                line = line[: max(20, shutil.get_terminal_size().columns - 1)]
                pad = max(0, self._drawn - len(line))
                self.stream.write("\r" + line + " " * pad)
                self._drawn = len(line)
            else:
                self.stream.write(line + "\n")
            self.stream.flush()

    def _rate(self, now: float, infos: list[Any], done: int) -> float:
        """Tasks per second over the last window, or, before a window has passed, of the active Spark
        stages since the first of them was seen."""
        active = {i.stageId for i in infos}
        for sid in self._done.keys() - active:
            # A Spark stage no longer active has ended: its last tasks may have finished after the
            # previous read, so count it whole (a failed stage fails the Winnow stage anyway).
            self._done[sid] = self._tasks[sid]
        for i in infos:
            self._done[i.stageId] = max(self._done.get(i.stageId, 0), i.numCompletedTasks)
            self._tasks[i.stageId] = i.numTasks
            self._seen.setdefault(i.stageId, now)
        total_done = sum(self._done.values())
        while len(self._samples) > 1 and self._samples[1][0] <= now - RATE_WINDOW_S:
            self._samples.popleft()  # keep the newest sample at least a window old as the anchor
        anchor = self._samples[0] if self._samples else None
        self._samples.append((now, total_done))
        if anchor is not None and now - anchor[0] >= RATE_WINDOW_S:
            return (total_done - anchor[1]) / (now - anchor[0])
        since = now - min(self._seen[i.stageId] for i in infos)
        return done / since if since > 0 else 0.0

    def line(self) -> str | None:
        """The current progress line, or None when no Spark stage is active."""
        tracker = self.spark.sparkContext.statusTracker()
        ids = sorted(tracker.getActiveStageIds())
        infos = [i for i in (tracker.getStageInfo(s) for s in ids) if i is not None]
        if not infos:
            return None
        now = self._clock()
        total = sum(i.numTasks for i in infos)
        done = sum(i.numCompletedTasks for i in infos)
        rate = self._rate(now, infos, done)
        self._share = max(self._share, min(1.0, done / max(total, 1)))
        line = (f"[{self.stage}] {now - self._t0:.0f}s: {done}/{total} tasks of Spark stages {ids} "
                f"({rate:.1f} tasks/s)")
        if self.total_docs:
            line += f"; ~{int(self.total_docs * self._share):,}/{self.total_docs:,} documents"
        elif self.total_bytes:
            value, unit = human_bytes(self.total_bytes)
            line += f"; ~{value * self._share:.1f}/{value:.1f} {unit} of input"
        return line
