"""PII stage: quality on the labelled set, secrets vs detect-secrets, throughput vs datatrove's approach.

``python -m bench.pii [n_docs]`` prints the tables; :func:`run` returns the figures as a dict.

* quality: per-kind precision / recall of :func:`udfs.pii.find_pii` on the labelled set written by
  ``tests/pii_labelled.py`` (exact spans), and the same for datatrove's ``PIIFormatter`` regexes
  (e-mail, IPv4: the only kinds it has) on the same documents.
* secrets: detect-secrets 1.5 (Yelp; named plugins only, its entropy plugins flag every word) on the
  same documents, line by line as it scans files, scored by value; the reason we keep our own rules.
* speed, MB/s of UTF-8 text per core from CPU seconds, on the synthetic corpus (:mod:`bench.corpus`)
  with invented PII put in every fifth document, and on the shared web_crawl sample when present:
  (a) :func:`udfs.pii.pii_batch` on plain Arrow batches in this process, cut as the stage cuts them
  (``pii.batch_mb``, :func:`pipelines.pii.stage.arrow_batch_settings`); (b) the Spark stage
  (:func:`pipelines.pii.stage.redact_pii`, ``local[1]``, ``noop`` sink), CPU seconds of the whole process tree;
  (c) datatrove's approach over the same kinds: one ``re`` pattern per kind applied with ``sub`` one
  after the other (its ``PIIReplacer``), with the same validators, in one process.
  ``spark_overhead`` = (b) / (a) in CPU seconds on the same text of at least :data:`SPARK_MIN_MB`
  (a smaller corpus repeated whole), plain and Spark runs alternating; ``spark_job_floor_cpu_s`` is
  the fixed cost of one stage job (a one-document frame).
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import time
from pathlib import Path

import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("WINNOW_SHARED_DATA", REPO.parent / "shared" / "data")) / "web_crawl"

# datatrove's approach for every kind: a pattern per kind, validated, substituted in turn.
_BASELINE = {
    "email": r"\b[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@(?:[A-Za-z0-9](?:[A-Za-z0-9-]*"
             r"[A-Za-z0-9])?\.)+[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?",
    "ip": r"(?:(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\.){3}(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)",
    "ipv6": r"\b(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{1,4}\b",
    "phone": r"(?:\+\d{1,3}[ .-]?)?\(?\d{2,5}\)?[ .-]?\d{2,5}[ .-]?\d{2,5}(?:[ .-]?\d{2,5})?",
    "card": r"\b(?:\d[ -]?){12,18}\d\b",
    "iban": r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b",
    "aws_key_id": r"\b(?:AKIA|ASIA)[A-Z2-7]{16}\b",
    "aws_secret": r"(?i:aws.?secret.?access.?key)\W{1,4}[A-Za-z0-9/+]{40}",
    "github_token": r"\bgh[pousr]_[A-Za-z0-9]{36}\b|github_pat_\w{82}",
    "slack_token": r"\bxox[abposr]-[A-Za-z0-9-]{10,80}",
    "google_api_key": r"\bAIza[0-9A-Za-z_-]{35}",
    "private_key": r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
    "password": r"(?i:password|passwd|pwd|secret)\s*[:=]\s*\S{4,}",
}


def baseline_formatter():
    """A ``text -> text`` function: datatrove's ``PIIReplacer`` for each kind of :data:`_BASELINE`."""
    import phonenumbers
    from datatrove.pipeline.formatters.pii import PIIReplacer, public_ip_validator

    from udfs.pii_rules import card_issuer, iban_ok, luhn_ok

    def phone(v: str) -> bool:
        try:
            return phonenumbers.is_valid_number(phonenumbers.parse(v, None if v.startswith("+") else "US"))
        except phonenumbers.NumberParseException:
            return False

    def card(v: str) -> bool:
        d = v.replace(" ", "").replace("-", "")
        return bool(card_issuer(d)) and luhn_ok(d)

    validators = {"ip": public_ip_validator, "phone": phone, "card": card, "iban": lambda v: iban_ok(v.replace(" ", ""))}
    replacers = [PIIReplacer(rx, f"<{k.upper()}>", validators.get(k)) for k, rx in _BASELINE.items()]

    def fmt(text: str) -> str:
        for r in replacers:
            text = r.replace(text)
        return text

    return fmt


# ---------------------------------------------------------------------------------------- quality
def quality() -> dict:
    """Per-kind P/R of ours (defaults and switches on) and of datatrove's PIIFormatter (email, ipv4)."""
    from datatrove.pipeline.formatters.pii import PIIFormatter

    from tests import pii_labelled
    from udfs.pii import DEFAULT_KINDS, PiiOptions, find_pii
    from udfs.pii_rules import KINDS

    docs = pii_labelled.build()
    out: dict = {"n_docs": len(docs), "n_chars": sum(len(d.text) for d in docs)}
    for name, opts, switched in (("ours", PiiOptions(kinds=DEFAULT_KINDS), False),
                                 ("ours_switches_on", PiiOptions(kinds=KINDS, email_obfuscated=True), True)):
        res = pii_labelled.score(docs, [find_pii(d.text, opts) for d in docs], switched)
        out[name] = {k: {m: (round(v, 4) if isinstance(v, float) else v) for m, v in s.items() if m != "errors"}
                     | {"errors": s["errors"][:5]} for k, s in sorted(res.items())}
    # datatrove: find what its formatter replaced by matching its patterns with its validators.
    f = PIIFormatter()
    found = []
    for d in docs:
        spans = [("email", m.start(), m.end()) for m in f.emails_replacer.regex.finditer(d.text)]
        spans += [("ipv4", m.start(), m.end()) for m in f.ip_replacer.regex.finditer(d.text) if f.ip_replacer.validator(m.group())]
        found.append(spans)
    res = pii_labelled.score(docs, found)
    out["datatrove"] = {k: {m: round(res[k][m], 4) for m in ("precision", "recall")} | {"tp": res[k]["tp"], "fp": res[k]["fp"]}
                        for k in ("email", "ipv4") if k in res}
    return out


_DS_TYPES = {"AWS Access Key": "aws_key_id", "GitHub Token": "github_token", "Slack Token": "slack_token",
             "Private Key": "private_key", "Secret Keyword": "password"}


def secrets_vs_detect_secrets() -> dict:
    """detect-secrets' named plugins on the labelled set, per kind: values found / gold values (recall
    by value) and findings not in the gold (false positives), next to ours; and lines/s."""
    try:
        from detect_secrets.core.scan import scan_line
        from detect_secrets.settings import transient_settings
    except ImportError:
        return {"skipped": "detect-secrets is not installed (pip install detect-secrets)"}
    from tests import pii_labelled

    docs = pii_labelled.build()
    plugins = [{"name": n} for n in ("AWSKeyDetector", "GitHubTokenDetector", "SlackDetector", "PrivateKeyDetector",
                                     "KeywordDetector")]
    stats = {k: {"gold": 0, "found": 0, "fp": 0} for k in (*_DS_TYPES.values(), "aws_secret", "google_api_key")}
    n_lines = 0
    t0 = time.process_time()
    with transient_settings({"plugins_used": plugins}):
        for d in docs:
            gold = {}
            for kind, s, e in d.gold:
                if kind in stats:
                    gold.setdefault(kind, set()).add(d.text[s:e])
            for kind, vals in gold.items():
                stats[kind]["gold"] += len(vals)
            seen = {}
            for line in d.text.splitlines():
                n_lines += 1
                for sec in scan_line(line):
                    kind = _DS_TYPES.get(sec.type)
                    if kind:
                        seen.setdefault(kind, set()).add(sec.secret_value)
            for kind, vals in seen.items():
                g = gold.get(kind, set())
                hit = {v for v in vals if any(v == x or (kind == "private_key" and v in x) for x in g)}
                stats[kind]["found"] += len(hit)
                stats[kind]["fp"] += len(vals - hit)
    cpu = time.process_time() - t0
    for s in stats.values():
        s["recall_by_value"] = round(s["found"] / s["gold"], 4) if s["gold"] else None
    return {"per_kind": stats, "lines": n_lines, "lines_per_cpu_s": round(n_lines / cpu, 1)}


# ------------------------------------------------------------------------------------------ speed
def bench_texts(n_docs: int, seed: int = 0) -> list[str]:
    """Synthetic corpus (:mod:`bench.corpus`); every fifth document gets a paragraph of invented PII."""
    from bench.corpus import generate_texts
    from tests.pii_labelled import PII_KINDS, Values

    v = Values(seed)
    texts = generate_texts(n_docs, seed)
    out = []
    for i, t in enumerate(texts):
        if i % 5 == 0:
            kinds = [PII_KINDS[(i + j) % len(PII_KINDS)] for j in range(3)]
            t += "\n\nContact: " + ", ".join(getattr(v, k)() for k in kinds) + ". Released 2024-05-01, v1.2.3.\n"
        out.append(t)
    return out


def web_texts() -> list[str]:
    """Texts of the shared web_crawl JSONL samples (empty when the folder is missing)."""
    texts: list[str] = []
    for p in sorted(SHARED.glob("*.jsonl*")) if SHARED.is_dir() else []:
        opener = gzip.open if p.suffix == ".gz" else open
        with opener(p, "rt", encoding="utf-8") as f:
            for line in f:
                try:
                    t = json.loads(line).get("text")
                except (json.JSONDecodeError, AttributeError):
                    continue
                if isinstance(t, str):
                    texts.append(t)
    return texts


SPARK_MIN_MB = 128.0
"""Least text (MB) the Spark stage and its plain batches are compared on: about one input split of Spark's
default ``spark.sql.files.maxPartitionBytes`` (128 MiB of Parquet, more text than that once
decompressed), what one task of the stage reads from a large input. A Spark job costs ~0.2 CPU s whatever
its input (building and planning the query, scheduling the task, the Python runner's start; see
``spark_job_floor_cpu_s``), as much as detecting PII in the 3.7 MB web_crawl sample takes: on that sample
alone the ratio measures the job's fixed cost, not the stage's cost per byte. A smaller corpus is
repeated (whole copies, fresh ``doc_id``) up to this size, on both sides."""

def _batch_cuts(texts: pa.Array, max_bytes: int, max_rows: int) -> list[tuple[int, int]]:
    """``(start, end)`` row ranges cut as Spark cuts Arrow batches: rows are added until the batch
    holds ``max_rows`` rows or ``max_bytes`` bytes of text (the row that crosses the limit included)."""
    import numpy as np
    import pyarrow.compute as pc

    ends = np.cumsum(pc.binary_length(texts).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64))
    cuts, start = [], 0
    while start < len(texts):
        before = int(ends[start - 1]) if start else 0
        end = min(int(np.searchsorted(ends, before + max_bytes, side="left")) + 1, start + max_rows, len(texts))
        cuts.append((start, end))
        start = end
    return cuts


SPEED_ROUNDS = 3
"""Plain and Spark runs alternate this many times; ``spark_overhead`` is the median of the rounds' ratios,
each taken within the same minute (the machine's speed drifts between minutes)."""


def speed(texts: list[str], spark=None, min_spark_mb: float = SPARK_MIN_MB, rounds: int = SPEED_ROUNDS) -> dict:
    """MB/s per core (CPU seconds) of plain batches, the Spark stage and datatrove's approach.

    Args:
        texts: the documents.
        spark: a ``local[1]`` session, or None for the plain and datatrove figures only.
        min_spark_mb: least MB of text for the Spark-vs-plain comparison (:data:`SPARK_MIN_MB`);
            ``texts`` is repeated whole up to it for that comparison only.
        rounds: alternating plain/Spark rounds (:data:`SPEED_ROUNDS`).

    Returns:
        ``n_docs``, ``mb``, ``plain_mb_s_core``, ``datatrove_approach_mb_s_core``,
        ``plain_vs_datatrove_approach``; with ``spark``: ``spark_copies`` and ``spark_mb`` (the text the
        comparison ran on), ``spark_plain_mb_s_core`` and ``spark_mb_s_core`` (best round of each),
        ``spark_overhead`` (median over rounds of Spark CPU s / plain CPU s on the same text),
        ``spark_overhead_rounds``, ``spark_wall_s``, ``spark_job_floor_cpu_s`` (the stage's job over a
        one-document frame: the fixed cost per job), ``spark_scan_cpu_s`` (a job that only reads the
        same cached frame: the input's share of the Spark figure) and ``spark_vs_datatrove_approach``.
    """
    import math
    import statistics

    from bench.common import Measure, text_bytes, time_spark
    from pipelines.core.tables import session_conf
    from pipelines.pii.config import PiiConfig
    from pipelines.pii.stage import BATCH_MAX_ROWS, arrow_batch_settings, redact_pii
    from udfs.pii import PiiOptions, pii_batch

    cfg = PiiConfig()
    mb = text_bytes(texts) / 1e6
    arr = pa.array(texts, pa.string())
    opts = PiiOptions()
    pii_batch(arr[:50], opts)  # compile outside the timed region

    def plain(a: pa.Array) -> float:
        cuts = _batch_cuts(a, cfg.batch_mb * 1_000_000, BATCH_MAX_ROWS)
        with Measure() as m:
            for start, end in cuts:
                pii_batch(a[start:end], opts)
        return m.cpu_s

    out = {"n_docs": len(texts), "mb": round(mb, 3), "plain_mb_s_core": round(mb / plain(arr), 3)}
    fmt = baseline_formatter()
    fmt(texts[0])
    with Measure() as m:
        for t in texts:
            fmt(t)
    out["datatrove_approach_mb_s_core"] = round(mb / m.cpu_s, 3)
    out["plain_vs_datatrove_approach"] = round(out["plain_mb_s_core"] / out["datatrove_approach_mb_s_core"], 3)
    if spark is not None:
        copies = max(1, math.ceil(min_spark_mb / mb)) if mb else 1
        big = texts * copies
        big_mb = mb * copies
        big_arr = pa.array(big, pa.string())
        df = spark.createDataFrame([(str(i), t) for i, t in enumerate(big)], "doc_id string, text string")
        df = df.repartition(1).cache()
        df.count()
        one = spark.createDataFrame([("0", texts[0])], "doc_id string, text string").cache()
        one.count()

        def stage(frame):
            return lambda: frame.transform(redact_pii, cfg)

        with session_conf(spark, arrow_batch_settings(cfg)):  # the batches the stage's run() sets
            time_spark(stage(df), warmup=1, repeat=1)  # Python workers started, regexes compiled
            plain_s, spark_s, walls = [], [], []
            for _ in range(max(1, rounds)):
                plain_s.append(plain(big_arr))
                t = time_spark(stage(df), warmup=0, repeat=1)
                spark_s.append(t["best_cpu_s"])
                walls.append(t["best_s"])
            floor = time_spark(stage(one), warmup=1, repeat=max(1, rounds))
            scan = time_spark(lambda: df, warmup=1, repeat=max(1, rounds))
        ratios = [s / p for s, p in zip(spark_s, plain_s, strict=True)]
        out["spark_copies"] = copies
        out["spark_mb"] = round(big_mb, 3)
        out["spark_plain_mb_s_core"] = round(big_mb / min(plain_s), 3)
        out["spark_mb_s_core"] = round(big_mb / min(spark_s), 3)
        out["spark_wall_s"] = round(min(walls), 3)
        out["spark_overhead"] = round(statistics.median(ratios), 3)
        out["spark_overhead_rounds"] = [round(r, 3) for r in ratios]
        out["spark_job_floor_cpu_s"] = floor["best_cpu_s"]
        out["spark_scan_cpu_s"] = scan["best_cpu_s"]
        out["spark_vs_datatrove_approach"] = round(out["spark_mb_s_core"] / out["datatrove_approach_mb_s_core"], 3)
        df.unpersist()
        one.unpersist()
    return out


def run(n_docs: int, seed: int = 0) -> dict:
    """All figures: ``{"quality", "secrets", "speed": {"synthetic", "web_crawl"}, "goals"}`` (JSON-serialisable)."""
    from pipelines.core.config import SparkConfig
    from pipelines.core.session import get_spark

    figures = {"quality": quality(), "secrets": secrets_vs_detect_secrets()}
    spark = get_spark("winnow-bench-pii", SparkConfig(master="local[1]", shuffle_partitions=1,
                                                       conf={"spark.ui.enabled": "false"}))
    figures["speed"] = {"synthetic": speed(bench_texts(n_docs, seed), spark)}
    web = web_texts()
    if web:
        figures["speed"]["web_crawl"] = speed(web, spark)
    figures["goals"] = {"spark_overhead": max(s.get("spark_overhead") or 0 for s in figures["speed"].values())}
    return figures


if __name__ == "__main__":
    res = run(int(sys.argv[1]) if len(sys.argv) > 1 else 3000)
    print(json.dumps({k: v for k, v in res.items()}, indent=1, default=str)[:12000])
