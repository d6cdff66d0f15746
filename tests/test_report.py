"""The run report: stats drawn from whichever tables exist, escaped HTML checked in headless Chromium."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from pipelines.core import tables
from pipelines.core.config import load_config

DOC_SCHEMA = (
    "doc_id string, text string, source string, url string, meta map<string,string>, input_file string, "
    "n_chars int, n_bytes int, n_replaced int"
)
XSS = (
    'Hello <script>document.body.setAttribute("data-pwned","script")</script> and '
    '<img src=x onerror="document.body.setAttribute(\'data-pwned\',\'img\')"> & "quotes" end.'
)


def _doc(doc_id: str, text: str, source: str = "web") -> tuple:
    return (doc_id, text, source, f"https://example.org/{doc_id}", {}, "in.jsonl", len(text), len(text.encode()), 0)


@pytest.fixture(scope="module")
def report_run(spark, tmp_path_factory):
    """A run root holding documents, quarantine, filtered, removed (filter, with the XSS document) and
    dup_clusters, then the report stage run on it."""
    from pipelines.report import stage as report

    root = tmp_path_factory.mktemp("report") / "run"
    cfg = load_config(overrides=[f"run.root={root}", "report.samples_per_reason=2", "report.text_chars=400"])
    docs = [_doc("a", "alpha beta gamma"), _doc("b", "delta epsilon"), _doc("c", XSS), _doc("d", "zeta eta theta iota")]
    tables.write_table(spark.createDataFrame(docs, DOC_SCHEMA), cfg, "documents")
    tables.write_table(
        spark.createDataFrame([("in.jsonl", 3, "malformed_json", "{oops")], "input_file string, record long, reason string, excerpt string"),
        cfg, "quarantine",
    )
    # Signals as the filter stage stores them: one struct per rule family, plus top-level LID columns.
    filt = f"{DOC_SCHEMA}, gopher_quality struct<word_count:int, name:string>, lang string, lang_score double"
    tables.write_table(spark.createDataFrame([(*docs[0], (3, "x"), "en", 0.9), (*docs[3], (4, "x"), "en", 0.8)], filt), cfg, "filtered")
    removed = spark.createDataFrame(
        [(*docs[1], (2, "x"), "de", 0.4, ["lang.score"]),
         (*docs[2], (12, "x"), "en", 0.7, ["gopher_quality.word_count", "c4.javascript"])],
        f"{filt}, reason array<string>",
    )
    tables.write_removed(removed, cfg, "filter")
    tables.write_table(
        spark.createDataFrame([("a", "k1", "representative"), ("x", "k1", "exact"), ("y", "k1", "exact"),
                               ("b", "k2", "representative"), ("z", "k2", "near"), ("w", "k2", "exact")],
                              "doc_id string, cluster_id string, kind string"),
        cfg, "dup_clusters",
    )
    manifest = {
        "dtype": "uint16", "formats": ["megatron"], "totals": {"documents": 2, "tokens": 30, "bytes": 200},
        "balance": {"max_tokens": 20, "min_tokens": 10}, "shuffle_quality": {"longest_same_source_run": 1},
        "token_share_by_source": {"web": 1.0},
        "files": [{"path": f"megatron/s_{k:05d}.{ext}", "format": "megatron", "kind": ext, "shard": k, "tokens": t}
                  for k, t in ((0, 20), (1, 10)) for ext in ("bin", "idx")],
    }
    (root / "shards").mkdir(parents=True)
    (root / "shards" / "manifest.json").write_text(json.dumps(manifest))
    rep = report.run(spark, cfg)
    return cfg, rep, root


def test_stats_from_existing_tables(report_run):
    cfg, rep, root = report_run
    stats = json.loads((root / "report" / "stats.json").read_text())
    assert (rep.rows_in, rep.rows_out) == (2, 2)  # documents in the last step of the funnel
    assert stats["funnel"] == [
        {"step": "read", "table": "input records", "documents": 5, "records": 5, "quarantined": 1},
        {"step": "ingest", "table": "documents", "documents": 4, "bytes": 16 + 13 + len(XSS.encode()) + 19, "tokens": None},
        {"step": "filter", "table": "filtered", "documents": 2, "bytes": 16 + 19, "tokens": None},
        {"step": "shard", "table": "shards", "documents": 2, "bytes": None, "tokens": 30, "shard_bytes": 200},
    ]
    assert stats["shards"] == {
        "n_shards": 2, "tokens_per_shard": [20, 10], "max_over_mean": 20 / 15, "balance": {"max_tokens": 20, "min_tokens": 10},
        "shuffle_quality": {"longest_same_source_run": 1}, "token_share_by_source": {"web": 1.0}, "dtype": "uint16",
        "formats": ["megatron"], "split": None, "splits": {}}  # a manifest from before the train/validation split
    assert stats["removals"] == [
        {"stage": "ingest", "reason": "quarantine.malformed_json", "documents": 1, "bytes": None},
        {"stage": "filter", "reason": "c4.javascript", "documents": 1, "bytes": len(XSS.encode())},
        {"stage": "filter", "reason": "gopher_quality.word_count", "documents": 1, "bytes": len(XSS.encode())},
        {"stage": "filter", "reason": "lang.score", "documents": 1, "bytes": 13},
    ]
    assert sorted(stats["signal_values"]) == ["gopher_quality.word_count", "lang_score"]
    words = stats["signal_values"]["gopher_quality.word_count"]
    assert sorted(words["kept"] + words["removed"]) == [2.0, 3.0, 4.0, 12.0] and len(words["removed"]) == 2
    assert stats["language_mix"] == {"kept": [{"value": "en", "documents": 2}],
                                     "removed": [{"value": "de", "documents": 1}, {"value": "en", "documents": 1}]}
    assert stats["filter_breakdown"] == {
        "by_source": {"web": {"in": 4, "kept": 2, "removed": {"gopher_quality.word_count": 1, "lang.score": 1}}},
        "by_profile": {"None": {"in": 4, "kept": 2, "removed": {"gopher_quality.word_count": 1, "lang.score": 1}}},
        "removed_language": 1, "removed_quality": 1, "replacement_char_documents": 0,
        "source_warnings": []}  # 2 of 4 removed: not more than filter.warn_source_removed (0.5)
    assert stats["cluster_sizes"] == [{"kind": "exact", "size": 3, "clusters": 1}, {"kind": "near", "size": 3, "clusters": 1}]
    assert stats["token_lengths"] == [] and stats["broken_refs"] == []
    assert [(s["reason"], s["doc_id"]) for s in stats["samples"]] == [
        ("c4.javascript", "c"), ("gopher_quality.word_count", "c"), ("lang.score", "b")]
    # A sample shows the scalar signals and the struct of its reason's family only.
    assert stats["samples"][2]["signals"] == {"lang": "de", "lang_score": 0.4, "n_chars": 13, "n_bytes": 13, "n_replaced": 0}
    assert stats["samples"][1]["signals"]["gopher_quality.word_count"] == 12


def test_short_gil_turns_sets_the_switch_interval_for_its_block_only():
    import sys

    from pipelines.report.stage import DRAWING_SWITCH_INTERVAL_S, short_gil_turns

    before = sys.getswitchinterval()
    with short_gil_turns():
        assert sys.getswitchinterval() == pytest.approx(DRAWING_SWITCH_INTERVAL_S)
    assert sys.getswitchinterval() == before
    with pytest.raises(RuntimeError), short_gil_turns(0.001):
        raise RuntimeError("a failing part of the report")
    assert sys.getswitchinterval() == before


def test_thresholds_found_by_name():
    from pipelines.report.stage import thresholds

    section = {"gopher_quality": {"min_words": 50, "max_words": None, "max_x": 1}, "c4": {"min_words": 3},
               "langid": {"min_score": 0.65}, "quality_model": {"min_score": 0.5}, "min_ratio": 0.2}
    assert thresholds(section, "gopher_quality.word_count") == [{"key": "gopher_quality.min_words", "value": 50.0, "keeps": ">="}]
    assert thresholds(section, "lang_score") == [{"key": "langid.min_score", "value": 0.65, "keeps": ">="}]
    assert thresholds(section, "ratio") == [{"key": "min_ratio", "value": 0.2, "keeps": ">="}]
    assert thresholds(section, "gopher_quality.other") == []
    symbol = {"gopher_quality": {"max_symbol_word_ratio": 0.1}}
    assert thresholds(symbol, "gopher_quality.hash_word_ratio") == [{"key": "gopher_quality.max_symbol_word_ratio", "value": 0.1, "keeps": "<="}]


def test_html_escapes_document_text(report_run):
    _, _, root = report_run
    page = (root / "report" / "report.html").read_text()
    assert "<script>document" not in page and "<img src=x" not in page
    assert "&lt;script&gt;document.body.setAttribute(&quot;data-pwned&quot;" in page
    assert "http://" not in page.replace("http-equiv", "") and "https://" not in page.split("<body>")[1].replace("https://example.org/", "")
    assert len(re.findall(r'<img src="data:image/svg\+xml;base64,', page)) >= 3


def test_report_of_ingest_only_run(spark, make_cfg):
    from pipelines.report import stage as report

    cfg = make_cfg("report.samples_per_reason=0")
    tables.write_table(spark.createDataFrame([_doc("a", "one two")], DOC_SCHEMA), cfg, "documents")
    stats = report.collect_stats(spark, cfg)
    assert stats["funnel"] == [
        {"step": "read", "table": "input records", "documents": 1, "records": 1, "quarantined": 0},
        {"step": "ingest", "table": "documents", "documents": 1, "bytes": 7, "tokens": None},
    ]
    assert (stats["removals"], stats["samples"], stats["signal_values"]) == ([], [], {})


def test_documents_with_replacement_characters_count_those_that_arrived_with_them(spark, make_cfg):
    from pipelines.filter.report import filter_breakdown

    cfg = make_cfg()
    docs = [_doc("ok", "fine text"), _doc("in", "caf\ufffd au lait"), _doc("in2", "x\ufffd")]
    replaced = (*_doc("bytes", "caf\ufffd")[:-1], 1)  # invalid UTF-8 replaced by ingest
    tables.write_table(spark.createDataFrame([*docs, replaced], DOC_SCHEMA), cfg, "documents")
    tables.write_table(spark.createDataFrame([_doc("ok", "fine text")], DOC_SCHEMA), cfg, "filtered")
    # Was 1: only n_replaced > 0 counted, not a U+FFFD that the input file already held.
    assert filter_breakdown(spark, cfg)["replacement_char_documents"] == 3
    # The report counts them in its one query over every table (report.table_totals).
    from pipelines.report import stage as report

    assert report.collect_stats(spark, cfg)["filter_breakdown"]["replacement_char_documents"] == 3


def test_table_sum_of_no_rows_is_zero_documents_and_unknown_bytes():
    from pipelines.report.stage import table_sum

    # An empty table grouped by a key (decontaminated by decontam_action) has no rows in table_totals.
    assert table_sum([]) == {"documents": 0, "bytes": None, "tokens": None}
    rows = [{"documents": 2, "bytes": None, "tokens": 5}, {"documents": 1, "bytes": 3, "tokens": None}]
    assert table_sum(rows) == {"documents": 3, "bytes": 3, "tokens": 5}


def test_language_mix_orders_by_documents_then_value_none_first():
    from pipelines.report.stage import language_mix

    rows = [{"part": "kept", "lang": v, "count": n} for v, n in (("de", 2), (None, 2), ("en", 5), ("ar", 2))]
    groups = {"rows": [*rows, {"part": "removed", "lang": "fr", "count": 1}], "lang": {"kept": True, "removed": False}}
    # As Spark's orderBy(desc(n), asc(lang)).limit(3); the removed part has no lang column.
    assert language_mix(None, None, groups, limit=3) == {
        "kept": [{"value": "en", "documents": 5}, {"value": None, "documents": 2}, {"value": "ar", "documents": 2}],
        "removed": []}


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium not installed (.ci/run installs it)")
def test_report_renders_in_headless_chromium_without_running_document_script(report_run, tmp_path):
    _, _, root = report_run
    url = (root / "report" / "report.html").as_uri()
    base = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--no-first-run", "--enable-logging=stderr", "--v=0"]
    dom = subprocess.run([*base, f"--user-data-dir={tmp_path / 'p1'}", "--dump-dom", url],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "<h1>Winnow run report</h1>" in dom.stdout
    # The document's markup is shown as text, and neither its <script> nor its onerror handler ran.
    assert "&lt;script&gt;document.body.setAttribute(\"data-pwned\"" in dom.stdout
    assert "data-pwned=" not in dom.stdout.replace('setAttribute("data-pwned"', "").replace("setAttribute('data-pwned'", "")
    assert [ln for ln in dom.stderr.splitlines() if "CONSOLE" in ln] == []
    shot = tmp_path / "report.png"
    r = subprocess.run([*base, f"--user-data-dir={tmp_path / 'p2'}", "--window-size=1200,2400", f"--screenshot={shot}", url],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and shot.stat().st_size > 10_000, r.stderr[-2000:]
    assert [ln for ln in r.stderr.splitlines() if "CONSOLE" in ln] == []


def test_report_job_fails_fast_on_bad_config():
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "jobs" / "report.py"
    r = subprocess.run([sys.executable, str(script), "--set", "report.hist_bins=1"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "report.hist_bins" in r.stderr, r.stderr


def test_report_of_a_root_without_tables_fails(spark, make_cfg):
    from pipelines.core import tables
    from pipelines.report import stage as report

    cfg = make_cfg()
    with pytest.raises(tables.MissingTableError, match="no 'documents' table under run.root="):
        report.run(spark, cfg)


def _drawn(monkeypatch, draw):
    """The matplotlib figure a report plot function draws (its ``data:`` URI not made)."""
    from pipelines.report import html as report_html

    figures = []

    def keep(fig, fmt):
        figures.append(fig)
        return "data:,"

    monkeypatch.setattr(report_html, "figure_uri", keep)
    draw(report_html)
    (fig,) = figures
    return fig.axes[0]


def test_histogram_spans_the_data_and_draws_an_outside_threshold_as_an_arrow(monkeypatch):
    from matplotlib.colors import to_hex

    from pipelines.report.html import KEPT_COLOR, REMOVED_COLOR

    values = {"kept": [120.0, 300.0, 900.0, 1500.0], "removed": [40.0, 60.0, 2000.0]}
    lines = [{"key": "gopher_quality.min_words", "keeps": ">=", "value": 50.0},
             {"key": "gopher_quality.max_words", "keeps": "<=", "value": 100000.0}]
    ax = _drawn(monkeypatch, lambda h: h.histogram(values, "word_count", "svg", 10, lines))
    lo, hi = ax.get_xlim()
    assert 0 < lo < 40 and 2000 < hi < 2100  # the data's range, not the threshold at 100,000
    texts = [t.get_text() for t in ax.texts]
    assert "max_words: <= 100000 kept (off the axis)" in texts  # outside: an arrow with its value
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["kept (4)", "removed (3)", "min_words: >= 50 kept"]  # inside: a dashed line
    # Kept and removed: Okabe-Ito blue and orange, the removed part hatched.
    kept, removed = ax.patches[:2]
    assert to_hex(kept.get_facecolor()) == KEPT_COLOR.lower() and to_hex(removed.get_facecolor()) == REMOVED_COLOR.lower()
    assert removed.get_hatch() == "///" and not kept.get_hatch()
    # Counts: integer ticks only.
    assert all(float(t).is_integer() for t in ax.get_yticks())


def test_bar_charts_of_counts_have_integer_ticks(monkeypatch):
    ax = _drawn(monkeypatch, lambda h: h.bars(["a", "b"], [1, 2], "documents", "svg"))
    assert all(float(t).is_integer() for t in ax.get_yticks())
