"""S3 output against a real moto server on 127.0.0.1 behind a proxy that answers 503 SlowDown at random."""

from __future__ import annotations

import http.client
import os
import random
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pipelines.core import storage
from pipelines.core.config import StorageConfig

SLOWDOWN = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
            b"<Message>Please reduce your request rate.</Message></Error>")
HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade"}


class FaultProxy:
    """Forwards HTTP to ``upstream``; answers 503 SlowDown to a seeded ``fraction`` of requests."""

    def __init__(self, upstream: tuple[str, int], fraction: float, seed: int = 0):
        self.fraction, self.injected, self.forwarded = fraction, 0, 0
        # Object keys (path suffixes) whose PUT is answered 200 but leaves a short object behind: the proxy
        # forwards the PUT, then overwrites the object with its first half (same metadata). ``cut_times``
        # PUTs are cut (None: every one).
        self.cut_suffix: str | None = None
        self.cut_times: int | None = 1
        self.cut: list[str] = []
        self.requests: dict[str, int] = {}  # method -> requests received
        rng, lock, proxy = random.Random(seed), threading.Lock(), self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _handle(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    proxy.requests[self.command] = proxy.requests.get(self.command, 0) + 1
                    fault = rng.random() < proxy.fraction
                    proxy.injected += fault
                    proxy.forwarded += not fault
                if fault:
                    self.send_response(503)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(SLOWDOWN)))
                    self.end_headers()
                    self.wfile.write(SLOWDOWN)
                    return
                conn = http.client.HTTPConnection(*upstream, timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                conn.close()
                # Cut before answering: the client must never see a 200 for an object that is whole only
                # until a moment later (a race with its verification).
                path = self.path.split("?")[0]
                if (self.command == "PUT" and resp.status == 200 and proxy.cut_suffix and path.endswith(proxy.cut_suffix)
                        and "uploadId" not in self.path and (proxy.cut_times is None or len(proxy.cut) < proxy.cut_times)):
                    proxy.cut.append(path)
                    self._cut_short(path, headers)
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in HOP and k.lower() != "content-length":
                        self.send_header(k, v)
                length = resp.getheader("Content-Length") if self.command == "HEAD" else str(len(data))
                self.send_header("Content-Length", length or "0")
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            def _cut_short(self, path, headers):
                bucket, key = path.lstrip("/").split("/", 1)
                s3 = storage.client(StorageConfig(endpoint_url=f"http://{upstream[0]}:{upstream[1]}"))
                obj = s3.get_object(Bucket=bucket, Key=key)
                body = obj["Body"].read()
                s3.put_object(Bucket=bucket, Key=key, Body=body[: len(body) // 2], Metadata=obj["Metadata"])

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def moto_server():
    from moto.server import ThreadedMotoServer

    saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")}
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    storage.client(StorageConfig(endpoint_url=f"http://{host}:{port}")).create_bucket(Bucket="shards")
    yield host, port
    server.stop()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture
def proxy(moto_server):
    p = FaultProxy(moto_server, fraction=0.3, seed=7)
    yield p
    p.close()


def local_files(tmp_path, sizes):
    out = []
    rng = random.Random(1)
    for i, n in enumerate(sizes):
        p = tmp_path / f"f{i}.bin"
        p.write_bytes(rng.randbytes(n))
        out.append(storage.LocalFile(f"megatron/f{i}.bin", p, n, storage.sha256_file(p)))
    return out


def test_uploads_survive_injected_slowdowns_and_resume_idempotently(proxy, tmp_path):
    scfg = StorageConfig(endpoint_url=proxy.url, max_concurrency=4, multipart_threshold_mb=5, multipart_chunksize_mb=5,
                         verify_download=True)
    files = local_files(tmp_path, [6 * storage.MIB, 1000, 10, 70_000])
    stats = storage.upload(files, "s3://shards/idem", scfg)
    assert (stats["uploaded"], stats["skipped"]) == (4, 0)
    storage.verify_remote(files, "s3://shards/idem", scfg)
    assert proxy.injected > 0
    again = storage.upload(files, "s3://shards/idem", scfg)
    assert (again["uploaded"], again["skipped"]) == (0, 4)


def test_exhausted_retries_raise_storage_error(proxy, tmp_path):
    proxy.fraction = 1.0
    scfg = StorageConfig(endpoint_url=proxy.url, max_attempts=2)
    with pytest.raises(storage.StorageError, match="failed after 2 attempts"):
        storage.upload(local_files(tmp_path, [100]), "s3://shards/fail", scfg)
    # max_attempts counts every attempt, the first included: the one HEAD is sent twice, then it gives up.
    assert proxy.requests == {"HEAD": 2}


@pytest.mark.slow  # three shard-stage runs plus retry backoff
def test_shard_stage_to_s3_through_faults_and_no_manifest_when_retries_run_out(spark, proxy, moto_server, tmp_path):
    from pipelines.core import tables
    from pipelines.core.config import load_config
    from pipelines.core.runner import run_stage
    from pipelines.tools.verify import verify
    from tests.test_shard import TOK_SCHEMA, gpt2_props, tokenized_rows

    def cfg(out: str, attempts: int = 10):
        return load_config(overrides=[
            f"run.root={tmp_path / 'run'}", "spark.shuffle_partitions=2", "shard.num_shards=2", "shard.seq_len=32",
            f"shard.output={out}", f"shard.storage.endpoint_url={proxy.url}", f"shard.storage.max_attempts={attempts}",
            f"shard.storage.staging_dir={tmp_path / ('staging-' + out.rsplit('/', 1)[1])}",
        ])

    ok = cfg("s3://shards/run1")
    tables.write_table(spark.createDataFrame(tokenized_rows(200), TOK_SCHEMA), ok, "tokenized", properties=gpt2_props())
    first = run_stage(spark, ok, "shard")
    assert first.extra["upload"]["uploaded"] == 9 and proxy.injected > 0  # 4 Megatron, 2 MDS, index, 2 blend files
    direct = StorageConfig(endpoint_url=f"http://{moto_server[0]}:{moto_server[1]}")
    assert verify("s3://shards/run1", direct).problems == []
    # Data files then the index: two upload calls, each of one round. The data files are in place; the MDS
    # index and the 2 blend files go up again, since every run retracts what readers trust before writing.
    again = run_stage(spark, ok, "shard").extra["upload"]
    assert (again["uploaded"], again["skipped"], again["rounds"]) == (3, 6, 2)

    proxy.fraction = 1.0
    failing = cfg("s3://shards/run2", attempts=2)
    with pytest.raises(storage.StorageError):
        run_stage(spark, failing, "shard")
    keys = [o["Key"] for o in storage.client(direct).list_objects_v2(Bucket="shards", Prefix="run2/").get("Contents", [])]
    assert "run2/manifest.json" not in keys
    assert not (tmp_path / "staging-run2" / "manifest.json").exists()


@pytest.mark.slow  # four shard-stage runs
def test_a_short_object_is_uploaded_again_and_a_failed_run_leaves_no_index_or_manifest(spark, proxy, moto_server, tmp_path):
    from pipelines.core import tables
    from pipelines.core.config import load_config
    from pipelines.core.runner import run_stage
    from pipelines.tools.verify import verify
    from tests.test_shard import TOK_SCHEMA, gpt2_props, tokenized_rows

    direct = StorageConfig(endpoint_url=f"http://{moto_server[0]}:{moto_server[1]}")

    def cfg(attempts: int):
        return load_config(overrides=[
            f"run.root={tmp_path / 'run'}", "spark.shuffle_partitions=2", "shard.num_shards=2", "shard.seq_len=32",
            "shard.output=s3://shards/short", f"shard.storage.endpoint_url={proxy.url}",
            f"shard.storage.max_attempts={attempts}", f"shard.storage.staging_dir={tmp_path / 'staging'}",
        ])

    def visible() -> set[str]:
        listed = storage.client(direct).list_objects_v2(Bucket="shards", Prefix="short/").get("Contents", [])
        return {o["Key"].removeprefix("short/") for o in listed}

    tables.write_table(spark.createDataFrame(tokenized_rows(200), TOK_SCHEMA), cfg(10), "tokenized", properties=gpt2_props())
    # 1. Slowdowns plus one shard file cut short: it is uploaded again within the run, which succeeds.
    proxy.cut_suffix = "train/megatron/winnow_00001.bin"
    first = run_stage(spark, cfg(10), "shard")
    assert proxy.cut == ["/shards/short/train/megatron/winnow_00001.bin"] and proxy.injected > 0
    assert first.extra["upload"]["rounds"] == 3  # data files: all, then the short one again; then the index
    assert {"manifest.json", "train/mds/index.json"} <= visible()
    assert verify("s3://shards/short", direct).problems == []

    # 2. The same object comes back short on every attempt: the run fails after max_attempts rounds and a
    #    reader of the bucket finds neither a manifest nor an MDS index (the previous ones were retracted).
    proxy.cut, proxy.cut_times, proxy.fraction = [], None, 0.0
    tables.write_table(spark.createDataFrame(tokenized_rows(210), TOK_SCHEMA), cfg(2), "tokenized", properties=gpt2_props())
    with pytest.raises(storage.StorageError, match="after 2 upload rounds"):
        run_stage(spark, cfg(2), "shard")
    assert len(proxy.cut) == 2
    seen = visible()
    assert "manifest.json" not in seen and not any(k.endswith("index.json") for k in seen)

    # 3. The rerun without faults repairs the bucket.
    proxy.cut_suffix = None
    again = run_stage(spark, cfg(2), "shard")
    assert again.extra["upload"]["uploaded"] >= 1
    assert {"manifest.json", "train/mds/index.json"} <= visible()
    assert verify("s3://shards/short", direct).problems == []


def test_per_source_indexes_of_a_previous_run_are_retracted_whatever_its_sources(moto_server):
    from pipelines.shard.sources import retract_remote_indexes

    direct = StorageConfig(endpoint_url=f"http://{moto_server[0]}:{moto_server[1]}")
    keep = ["train/mds/index.json", "sources/a/mds/shard.00000.mds", "sources/a/megatron/winnow_00000.idx"]
    gone = ["sources/a/mds/index.json", "sources/b_c-12345678/mds/index.json"]
    for rel in keep + gone:
        storage.put_text("s3://shards/retract/run", rel, "{}", direct)
    retract_remote_indexes("s3://shards/retract/run", direct)
    listed = storage.client(direct).list_objects_v2(Bucket="shards", Prefix="retract/run/").get("Contents", [])
    assert sorted(o["Key"].removeprefix("retract/run/") for o in listed) == sorted(keep)
