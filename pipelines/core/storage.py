"""Object-store output for shards: ``s3://bucket/prefix`` roots, written locally then uploaded.

* Uploads go through one boto3 transfer manager (multipart above ``multipart_threshold_mb``, at most
  ``max_concurrency`` requests in flight over all files).
* Every request uses botocore's ``adaptive`` retry mode: 503 SlowDown, 429 and 5xx answers back off
  (exponential backoff with jitter plus a client-side token bucket); ``max_attempts`` is the total number
  of attempts per request, the first one included (botocore's ``total_max_attempts``; its
  ``max_attempts`` key counts retries only, so 5 there sends 6 requests).
* Idempotent: an object whose size and ``x-amz-meta-sha256`` match the local file is not uploaded
  again, so a re-run after a failure resumes.
* :func:`verify_remote` checks every object (HEAD size + sha256 metadata, or a full re-download with
  ``verify_download``); the caller uploads the manifest only after it passes.

Source: boto3 ``TransferConfig``/``create_transfer_manager``; botocore retries guide (adaptive mode).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from pipelines.core.config import StorageConfig

MIB = 1024 * 1024


class StorageError(RuntimeError):
    """An upload or remote check failed after all retries; no manifest has been written."""


@dataclass(frozen=True)
class LocalFile:
    """A file to publish: path relative to the output root, local path, size in bytes, sha256 hex."""

    rel: str
    local: Path
    size: int
    sha256: str


def is_s3(uri: str) -> bool:
    """True for ``s3://`` (and ``s3a://``) URIs."""
    return uri.startswith(("s3://", "s3a://"))


def split_s3(uri: str) -> tuple[str, str]:
    """``s3://bucket/a/b`` -> ``("bucket", "a/b")`` (prefix without trailing slash).

    Raises:
        ValueError: not an s3 URI, or no bucket.
    """
    if not is_s3(uri):
        raise ValueError(f"not an s3:// URI: {uri!r}")
    rest = uri.split("://", 1)[1]
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise ValueError(f"s3 URI without bucket: {uri!r}")
    return bucket, prefix.strip("/")


def _key(prefix: str, rel: str) -> str:
    return f"{prefix}/{rel}" if prefix else rel


def client(scfg: StorageConfig):
    """A boto3 S3 client with adaptive retries and a connection pool sized for ``max_concurrency``."""
    import boto3
    from botocore.config import Config

    conf = Config(
        retries={"mode": "adaptive", "total_max_attempts": scfg.max_attempts},
        max_pool_connections=max(10, scfg.max_concurrency + 2),
        connect_timeout=10,
        read_timeout=60,
    )
    return boto3.client("s3", endpoint_url=scfg.endpoint_url, region_name=scfg.region, config=conf)


def sha256_file(path: Path, chunk: int = 8 * MIB) -> str:
    """Hex sha256 of a file, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def _remote_matches(s3, bucket: str, key: str, f: LocalFile) -> bool:
    from botocore.exceptions import ClientError

    try:
        head = s3.head_object(Bucket=bucket, Key=key)
    except ClientError as e:
        if e.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            return False
        raise
    return int(head["ContentLength"]) == f.size and head.get("Metadata", {}).get("sha256") == f.sha256


def upload(files: list[LocalFile], root: str, scfg: StorageConfig) -> dict[str, int]:
    """Upload ``files`` under ``root`` (``s3://bucket/prefix``), skipping identical objects.

    Returns:
        ``{"uploaded": n, "skipped": n, "bytes_uploaded": n}``.

    Raises:
        StorageError: an upload still failed after ``max_attempts`` (names the object and the error).
    """
    from boto3.s3.transfer import TransferConfig, create_transfer_manager

    bucket, prefix = split_s3(root)
    s3 = client(scfg)
    tconf = TransferConfig(
        multipart_threshold=scfg.multipart_threshold_mb * MIB,
        multipart_chunksize=scfg.multipart_chunksize_mb * MIB,
        max_concurrency=scfg.max_concurrency,
        use_threads=True,
    )
    stats = {"uploaded": 0, "skipped": 0, "bytes_uploaded": 0}
    try:
        todo = [f for f in files if not _remote_matches(s3, bucket, _key(prefix, f.rel), f)]
        stats["skipped"] = len(files) - len(todo)
        with create_transfer_manager(s3, tconf) as mgr:
            futures = [
                (f, mgr.upload(str(f.local), bucket, _key(prefix, f.rel), extra_args={"Metadata": {"sha256": f.sha256}}))
                for f in todo
            ]
            for f, fut in futures:
                fut.result()
                stats["uploaded"] += 1
                stats["bytes_uploaded"] += f.size
    except StorageError:
        raise
    except Exception as e:  # botocore/s3transfer raise many types; all mean the same here
        raise StorageError(f"upload to {root!r} failed after {scfg.max_attempts} attempts per request: {e}") from e
    return stats


def verify_remote(files: list[LocalFile], root: str, scfg: StorageConfig) -> None:
    """Check that every file is in the bucket with its size and sha256.

    HEAD size + ``sha256`` metadata by default; with ``verify_download`` every object is downloaded and
    hashed again.

    Raises:
        StorageError: an object is missing or differs (lists them), or the checks failed after retries.
    """
    bucket, prefix = split_s3(root)
    s3 = client(scfg)
    bad = []
    try:
        for f in files:
            key = _key(prefix, f.rel)
            if not _object_ok(s3, bucket, key, f, scfg.verify_download):
                bad.append(key)
    except Exception as e:
        raise StorageError(f"remote verification of {root!r} failed: {e}") from e
    if bad:
        raise StorageError(f"{len(bad)} objects under {root!r} are missing or differ from the local shards: {bad[:5]}")


def upload_verified(files: list[LocalFile], root: str, scfg: StorageConfig) -> dict[str, int]:
    """Upload ``files`` and check every object; an object that comes back missing, short or different is
    uploaded again, up to ``max_attempts`` rounds in all.

    Returns:
        The summed :func:`upload` statistics of every round, plus ``rounds``.

    Raises:
        StorageError: an upload failed after retries, or objects still differ after ``max_attempts`` rounds.
    """
    bucket, prefix = split_s3(root)
    s3 = client(scfg)
    total = {"uploaded": 0, "skipped": 0, "bytes_uploaded": 0, "rounds": 0}
    todo = files
    for _ in range(scfg.max_attempts):
        stats = upload(todo, root, scfg)
        # "skipped": objects already in place before this run (the first round's count).
        stats["skipped"] = stats["skipped"] if total["rounds"] == 0 else 0
        total["rounds"] += 1
        for k, v in stats.items():
            total[k] += v
        try:
            todo = [f for f in todo if not _object_ok(s3, bucket, _key(prefix, f.rel), f, scfg.verify_download)]
        except Exception as e:
            raise StorageError(f"remote verification of {root!r} failed: {e}") from e
        if not todo:
            return total
    raise StorageError(f"{len(todo)} objects under {root!r} still differ from the local files after "
                       f"{scfg.max_attempts} upload rounds: {[f.rel for f in todo][:5]}")


def _object_ok(s3, bucket: str, key: str, f: LocalFile, download: bool) -> bool:
    if download:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        return len(body) == f.size and hashlib.sha256(body).hexdigest() == f.sha256
    return _remote_matches(s3, bucket, key, f)


def put_text(root: str, rel: str, text: str, scfg: StorageConfig) -> None:
    """Upload a small text object (the manifest) under ``root``.

    Raises:
        StorageError: the upload failed after retries.
    """
    bucket, prefix = split_s3(root)
    data = text.encode("utf-8")
    try:
        client(scfg).put_object(
            Bucket=bucket, Key=_key(prefix, rel), Body=data, Metadata={"sha256": hashlib.sha256(data).hexdigest()}
        )
    except Exception as e:
        raise StorageError(f"upload of {rel!r} to {root!r} failed: {e}") from e


def get_bytes(root: str, rel: str, scfg: StorageConfig) -> bytes:
    """Read an object under an ``s3://`` root, or a file under a local root."""
    if not is_s3(root):
        return (Path(root) / rel).read_bytes()
    bucket, prefix = split_s3(root)
    return client(scfg).get_object(Bucket=bucket, Key=_key(prefix, rel))["Body"].read()


def is_not_found(err: BaseException) -> bool:
    """True when ``err`` (from :func:`get_bytes`) says the object or file does not exist; False for
    anything else (access denied, throttling, a network failure), which must not pass for "absent"."""
    if isinstance(err, FileNotFoundError):
        return True
    code = str(getattr(err, "response", {}).get("Error", {}).get("Code", ""))
    return code in ("NoSuchKey", "404", "NotFound")


def delete(root: str, rel: str, scfg: StorageConfig) -> None:
    """Delete one object (missing is fine): used to retract a stale manifest before a re-run."""
    bucket, prefix = split_s3(root)
    try:
        client(scfg).delete_object(Bucket=bucket, Key=_key(prefix, rel))
    except Exception as e:
        raise StorageError(f"cannot delete {rel!r} under {root!r}: {e}") from e
