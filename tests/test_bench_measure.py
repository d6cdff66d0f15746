"""The benchmarks' CPU meter counts processes that end inside the measured block (Spark's Python workers)."""

from __future__ import annotations

import os
import signal
import time

from bench.common import Measure


def _burn(seconds: float) -> None:
    t = time.process_time()
    while time.process_time() - t < seconds:
        pass


def test_measure_counts_children_auto_reaped_under_ignored_sigchld():
    # pyspark.daemon ignores SIGCHLD, so the kernel drops its workers' CPU when they exit: a worker
    # alive at the start (1 s of past work) that works 1 s more and exits, and a worker born and gone
    # inside the block (1 s), must both count; the past second must not.
    old = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        r, w = os.pipe()
        r2, w2 = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            _burn(1.0)
            os.write(w2, b"r")
            os.read(r, 1)
            _burn(1.0)
            os._exit(0)
        os.read(r2, 1)
        with Measure(interval=0.05) as m:
            os.write(w, b"g")
            pid2 = os.fork()
            if pid2 == 0:  # pragma: no cover - child
                _burn(1.0)
                os._exit(0)
            _burn(0.3)
            deadline = time.time() + 60
            while time.time() < deadline and any(os.path.exists(f"/proc/{p}") for p in (pid, pid2)):
                time.sleep(0.05)
            time.sleep(0.5)
    finally:
        signal.signal(signal.SIGCHLD, old)
    assert 2.0 < m.cpu_s < 2.6, m.as_dict()


def test_measure_counts_workers_of_a_parent_that_ignores_sigchld_after_it_was_first_seen():
    # pyspark.daemon sets SIG_IGN a moment after it starts: the meter first sees it not ignoring, and
    # must still count the 1 s of a worker it forks later and that the kernel reaps.
    r, w = os.pipe()
    done_r, done_w = os.pipe()
    with Measure(interval=0.05) as m:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child: the daemon
            m._proc.stdin.close()  # a fork keeps the meter's pipe open; the JVM's daemon has no such fd
            time.sleep(0.5)
            signal.signal(signal.SIGCHLD, signal.SIG_IGN)
            if os.fork() == 0:  # the worker
                _burn(1.0)
                os.write(done_w, b"d")
                os._exit(0)
            os.read(r, 1)  # alive until the block has ended
            os._exit(0)
        os.read(done_r, 1)
        time.sleep(0.3)
    os.write(w, b"x")
    os.waitpid(pid, 0)
    assert 0.9 < m.cpu_s < 1.5, m.as_dict()
