"""Folders that hold ingest's parsed records between the parse job and the writes (driver side).

A folder in ``/dev/shm`` is memory until removed, and a driver killed hard (SIGKILL, OOM) never runs
the stage's ``finally`` (SIGTERM does: the jobs turn it into an exception, ``jobs/_cli.py``).
So each folder made there is held by an exclusive ``flock`` on its owner file
for as long as the run that made it lives (the kernel drops the lock when the process dies, however it
dies), and every new spool first removes the folders of this prefix whose lock nobody holds. ``flock``
rather than a pid file: pids are reused and differ between pid namespaces that share one ``/dev/shm``.
"""

from __future__ import annotations

import fcntl
import glob
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass

log = logging.getLogger(__name__)

SPOOL_PREFIX = "winnow-ingest-records-"
"""Name prefix of every spool folder (what :func:`sweep_orphans` looks at)."""
OWNER_FILE = ".owner"
"""The file in a held spool folder whose ``flock`` the owning process holds."""


@dataclass
class Spool:
    """A spool folder; ``owner`` the descriptor holding its lock (``None`` for a folder Spark cleans)."""

    path: str
    owner: int | None = None

    def remove(self) -> None:
        """Delete the folder and its files, then drop the lock (idempotent)."""
        shutil.rmtree(self.path, ignore_errors=True)
        if self.owner is not None:
            os.close(self.owner)
            self.owner = None


def held_spool(parent: str) -> Spool:
    """A new folder in ``parent`` held by this process's lock, after :func:`sweep_orphans` of ``parent``.

    The lock file is made and locked under a temporary name and only then renamed to :data:`OWNER_FILE`,
    so a concurrent sweep never sees an owner file that is not yet locked.

    Raises:
        OSError: ``parent`` is not writable.
    """
    sweep_orphans(parent)
    path = tempfile.mkdtemp(prefix=SPOOL_PREFIX, dir=parent)
    tmp = os.path.join(path, f"{OWNER_FILE}.{os.getpid()}")
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.replace(tmp, os.path.join(path, OWNER_FILE))
    return Spool(path, fd)


def plain_spool(parent: str | None) -> Spool:
    """A new folder in ``parent`` (the system's temporary folder when ``None``) without a lock: for a
    folder that Spark removes with its session (its local directory)."""
    return Spool(tempfile.mkdtemp(prefix=SPOOL_PREFIX, dir=parent))


def sweep_orphans(parent: str) -> int:
    """Remove the spool folders in ``parent`` whose owner file nobody holds locked (their run died);
    a folder without an owner file is being made right now and is left alone. Returns how many went."""
    gone = 0
    for path in glob.glob(os.path.join(parent, f"{SPOOL_PREFIX}*")):
        if os.path.islink(path) or not os.path.isdir(path):  # not a folder this module made
            continue
        try:
            fd = os.open(os.path.join(path, OWNER_FILE), os.O_RDWR)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: a live run's folder
            continue
        else:
            shutil.rmtree(path, ignore_errors=True)
            gone += not os.path.exists(path)
        finally:
            os.close(fd)
    if gone:
        log.info("ingest: removed %d spool folder(s) of runs that died in %s", gone, parent)
    return gone
