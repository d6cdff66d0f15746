"""One run at a time per run root: the lock object ``<run.root>/_lock.json``.

Every job that writes under a run root (``jobs/pipeline.py``, ``jobs/<stage>.py``) takes the lock before
it writes anything and releases it when it ends, however it ends. Two runs on one root would otherwise
interleave Delta commits on the same tables (the second one dies in a Delta protocol conflict after
minutes, or worse, both finish and the tables mix two configs).

The lock is a small JSON object: ``owner`` (user), ``host``, ``pid``, ``started_at`` and ``heartbeat_at``
(UTC, ISO 8601), ``command`` (the job's arguments) and a random ``token``. It is created atomically where
it lives:

* a local folder: the whole object written under a name of its own, then ``link(2)``-ed to the lock's
  name, which fails when the name exists (POSIX), so no reader ever sees it half written;
* ``s3://``: ``PutObject`` with ``If-None-Match: *``, which fails with 412 when the key exists (S3
  conditional writes, AWS S3 user guide "Conditional requests");
* any other Hadoop filesystem (``dbfs:``, ``abfss://``, ``hdfs://``): ``FileSystem.create(path,
  overwrite=false)`` through the Spark session, which fails when the file exists.

**Stale rule.** A lock is stale, and the next run takes it over with a line saying whose it was, when
its owner ran on this host and its pid is gone (a crash, ``kill -9``), or when its heartbeat is older
than :data:`STALE_AFTER_S` (an owner on another host that stopped refreshing it). The holder refreshes
``heartbeat_at`` every :data:`HEARTBEAT_S` seconds from a daemon thread. ``--force-unlock`` removes a
lock whose owner is known to be gone but whose heartbeat is still recent (it ran on another host); it
refuses a lock whose owner is alive on this host.
"""

from __future__ import annotations

import datetime as dt
import getpass
import json
import os
import secrets
import socket
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines.core.config import WinnowConfig
from udfs.errors import UserError

LOCK_NAME = "_lock.json"
"""Name of the lock object directly under ``run.root``."""

HEARTBEAT_S = 60.0
"""Seconds between two refreshes of the holder's ``heartbeat_at``."""

STALE_AFTER_S = 600.0
"""A lock whose heartbeat is older than this (10 heartbeats missed) is stale, wherever its owner ran."""


class RunLockedError(UserError):
    """The run root is held by another run that is alive (the message names it and what to do)."""


def lock_path(cfg: WinnowConfig) -> str:
    """Location of the lock object: ``<run.root>/_lock.json``."""
    return f"{cfg.run.root.rstrip('/')}/{LOCK_NAME}"


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


def describe(info: dict[str, Any]) -> str:
    """A lock's owner in words: ``pid 4711 on host h1 (user ana), started 2025-01-02T03:04:05+00:00``."""
    cmd = info.get("command")
    return (f"pid {info.get('pid')} on host {info.get('host')} (user {info.get('owner')}), started "
            f"{info.get('started_at')}" + (f": {cmd}" if cmd else ""))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by another user
        return True
    return True


def _alive_here(info: dict[str, Any]) -> bool:
    """Whether the lock ``info`` names a process of this host that is alive."""
    return (info.get("host") == socket.gethostname() and isinstance(info.get("pid"), int)
            and _pid_alive(info["pid"]))


def stale_reason(info: dict[str, Any], now: dt.datetime | None = None) -> str | None:
    """Why the lock ``info`` is stale (see the module docstring), or None when its owner may be alive.

    Args:
        info: the lock object's fields.
        now: the current UTC time (default: now).

    Returns:
        ``"its process is gone"``, ``"no heartbeat for N s"``, or None.
    """
    if info.get("host") == socket.gethostname() and isinstance(info.get("pid"), int):
        if not _pid_alive(info["pid"]):
            return "its process is gone"
    try:
        beat = dt.datetime.fromisoformat(str(info.get("heartbeat_at") or info.get("started_at")))
    except ValueError:
        return "it is unreadable"
    age = ((now or _now()) - beat).total_seconds()
    return f"no heartbeat for {age:.0f} s" if age > STALE_AFTER_S else None


# ------------------------------------------------------------------------------------------ backends
class _Local:
    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def create(self, text: str) -> bool:
        # Written whole under a name of its own, then hard-linked to the lock's name (link(2) fails when
        # the name exists): a run reading the lock never sees it empty, which read as "unreadable", i.e.
        # stale, and let a second run take a lock just made.
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.{secrets.token_hex(4)}.new")
        tmp.write_text(text, encoding="utf-8")
        try:
            os.link(tmp, self.path)
        except FileExistsError:
            return False
        except OSError:  # a filesystem without hard links (some FUSE mounts): create-exclusive, then write
            return self._create_open(text)
        finally:
            tmp.unlink(missing_ok=True)
        return True

    def _create_open(self, text: str) -> bool:
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        return True

    def read(self) -> str | None:
        try:
            return self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None

    def replace(self, text: str) -> None:
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(self.path)

    def delete(self, token: str | None = None) -> None:
        if token is None:
            self.path.unlink(missing_ok=True)
            return
        # Rename first: of two runs removing the same stale lock, only one succeeds.
        aside = self.path.with_name(f"{self.path.name}.{token}.stale")
        try:
            self.path.rename(aside)
        except FileNotFoundError:
            return
        aside.unlink(missing_ok=True)


class _S3:
    def __init__(self, path: str, cfg: WinnowConfig) -> None:
        from pipelines.core import storage

        self.bucket, self.key = storage.split_s3(path)
        self.s3 = storage.client(cfg.shard.storage)

    def create(self, text: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            self.s3.put_object(Bucket=self.bucket, Key=self.key, Body=text.encode(), IfNoneMatch="*")
        except ClientError as e:
            code = e.response.get("Error", {}).get("Code")
            if code in ("PreconditionFailed", "412", "ConditionalRequestConflict"):
                return False
            raise
        return True

    def read(self) -> str | None:
        from pipelines.core import storage

        try:
            return self.s3.get_object(Bucket=self.bucket, Key=self.key)["Body"].read().decode()
        except Exception as e:
            if storage.is_not_found(e):
                return None
            raise

    def replace(self, text: str) -> None:
        self.s3.put_object(Bucket=self.bucket, Key=self.key, Body=text.encode())

    def delete(self, token: str | None = None) -> None:
        self.s3.delete_object(Bucket=self.bucket, Key=self.key)


class _Hadoop:
    def __init__(self, path: str, spark: Any) -> None:
        jvm = spark._jvm  # type: ignore[attr-defined]
        self.jvm = jvm
        self.hpath = jvm.org.apache.hadoop.fs.Path(path)
        self.fs = self.hpath.getFileSystem(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]

    def create(self, text: str) -> bool:
        if self.fs.exists(self.hpath):
            return False
        try:
            out = self.fs.create(self.hpath, False)
        except Exception as e:  # FileAlreadyExistsException through Py4J: another run was quicker
            if "AlreadyExists" in str(e):
                return False
            raise
        try:
            out.write(bytearray(text.encode()))
        finally:
            out.close()
        return True

    def read(self) -> str | None:
        if not self.fs.exists(self.hpath):
            return None
        stream = self.fs.open(self.hpath)
        try:
            return bytes(self.jvm.org.apache.commons.io.IOUtils.toByteArray(stream)).decode()
        finally:
            stream.close()

    def replace(self, text: str) -> None:
        out = self.fs.create(self.hpath, True)
        try:
            out.write(bytearray(text.encode()))
        finally:
            out.close()

    def delete(self, token: str | None = None) -> None:
        self.fs.delete(self.hpath, False)


def needs_spark(cfg: WinnowConfig) -> bool:
    """True when the lock lives on a Hadoop filesystem other than a local folder or ``s3://`` (``dbfs:``,
    ``abfss://``, ...): it is taken once the Spark session exists."""
    from pipelines.core.local_state import is_local
    from pipelines.core.storage import is_s3

    root = cfg.run.root
    return not (is_local(root) or is_s3(root))


def _backend(cfg: WinnowConfig, spark: Any) -> Any:
    from pipelines.core.local_state import is_local
    from pipelines.core.storage import is_s3

    path = lock_path(cfg)
    if is_local(cfg.run.root):
        return _Local(path)
    if is_s3(cfg.run.root):
        return _S3(path, cfg)
    if spark is None:
        raise ValueError(f"the lock of run.root {cfg.run.root!r} needs a Spark session (needs_spark)")
    return _Hadoop(path, spark)


# ------------------------------------------------------------------------------------------ the lock
@dataclass
class RunLock:
    """A held lock; :meth:`release` (or leaving the ``with`` block) removes it and stops the heartbeat.

    Attributes:
        path: where the lock object is.
        info: the fields written (owner, host, pid, started_at, heartbeat_at, command, token).
        notes: lines to show the user (a stale or forced lock that was taken over).
    """

    path: str
    info: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    _backend: Any = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                text = self._backend.read()
                if text is None or json.loads(text).get("token") != self.info["token"]:
                    return  # removed with --force-unlock by another run: it is not ours any more
                self.info["heartbeat_at"] = _now().isoformat()
                self._backend.replace(_dump(self.info))
            except Exception:  # a lost heartbeat makes the lock look stale later; it must not kill the run
                continue

    def start_heartbeat(self) -> None:
        """Refresh ``heartbeat_at`` every :data:`HEARTBEAT_S` seconds from a daemon thread."""
        self._thread = threading.Thread(target=self._beat, name="winnow-lock-heartbeat", daemon=True)
        self._thread.start()

    def release(self) -> None:
        """Stop the heartbeat and remove the lock object when it is still this run's (idempotent)."""
        self._stop.set()
        if self._backend is None:
            return
        backend, self._backend = self._backend, None
        try:
            text = backend.read()
            if text is not None and json.loads(text).get("token") == self.info["token"]:
                backend.delete()
        except Exception as e:  # the run's outcome stands; the next run sees a stale lock and says so
            print(f"winnow: could not remove the run lock {self.path}: {e}", file=sys.stderr, flush=True)


def holder(cfg: WinnowConfig, spark: Any = None) -> str | None:
    """Who holds the lock of ``cfg.run.root`` now, in words (:func:`describe`), for a reader that takes no
    lock (``--dry-run``) to say that a run would be refused.

    Returns:
        The live owner's description; None when there is no lock, when it is stale (a run would take it
        over), or when it cannot be read here (a Hadoop filesystem without ``spark``, an unreadable object).
    """
    try:
        text = _backend(cfg, spark).read()
        info = json.loads(text) if text is not None else None
    except Exception:  # a plan must not fail on the lock; the run itself will take it or say why not
        return None
    if not isinstance(info, dict) or stale_reason(info) is not None:
        return None
    return describe(info)


def _dump(info: dict[str, Any]) -> str:
    return json.dumps(info, indent=1, sort_keys=True) + "\n"


def acquire(cfg: WinnowConfig, *, force_unlock: bool = False, spark: Any = None,
            command: str | None = None, heartbeat: bool = True) -> RunLock:
    """Take the lock of ``cfg.run.root`` for this process.

    Args:
        force_unlock: remove an existing lock even when its heartbeat is recent (the owner is known to be
            gone), unless its owner is alive on this host.
        spark: the Spark session, for a root on a Hadoop filesystem (:func:`needs_spark`).
        command: what this run is, written into the lock for the next run's message (default:
            this process's arguments).
        heartbeat: refresh ``heartbeat_at`` from a daemon thread while the lock is held.

    Returns:
        The held :class:`RunLock`; its ``notes`` say when a stale or forced lock was taken over.

    Raises:
        RunLockedError: another live run holds the lock (the message names it and the ways out).
    """
    backend = _backend(cfg, spark)
    now = _now().isoformat()
    info = {"owner": _user(), "host": socket.gethostname(), "pid": os.getpid(), "started_at": now,
            "heartbeat_at": now, "command": command if command is not None else " ".join(sys.argv),
            "token": secrets.token_hex(8)}
    path = lock_path(cfg)
    notes: list[str] = []
    for _ in range(3):  # another run may take or drop the lock between our read and our create
        if backend.create(_dump(info)):
            lock = RunLock(path, info, notes, backend)
            if heartbeat:
                lock.start_heartbeat()
            return lock
        text = backend.read()
        if text is None:
            continue
        try:
            held = json.loads(text)
        except ValueError:
            held = {}
        if force_unlock and _alive_here(held):
            raise RunLockedError(
                f"run.root {cfg.run.root} is in use by a run still alive on this host: {describe(held)} "
                f"(lock {path}). --force-unlock takes over only a lock whose owner is gone: stop that run "
                f"first (kill {held['pid']}); if that pid is no Winnow run (reused), delete {path}")
        why = "--force-unlock" if force_unlock else stale_reason(held)
        if why is None:
            raise RunLockedError(
                f"run.root {cfg.run.root} is in use by another run: {describe(held)} (lock {path}). Wait "
                f"for it to end, or use another run.root; if that run is gone, rerun with --force-unlock")
        notes.append(f"winnow: took over the lock of {path} ({why}): {describe(held)}")
        backend.delete(held.get("token") or "unknown")
    raise RunLockedError(f"run.root {cfg.run.root}: lock {path} keeps changing hands")


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user name in a container without /etc/passwd entry
        return str(os.getuid())
