"""Refs stage: detection quality (labelled set, PMC, unarXive) and throughput (plain batch vs Spark).

``python -m bench.refs [n_docs]`` prints both tables; :func:`run` returns the figures as a dict.

Quality is mention-level precision / recall of *dangling* mentions: a predicted dangling mention is a
true positive when a gold dangling mention of the same kind overlaps its span with the same label
(labelled set) or the same leading number (real papers, where "Figure 2A" is gold figure 2).

* labelled set: ``tests/data/refs/labelled.jsonl`` (written by ``make_labelled.py``); goal P >= 0.95,
  R >= 0.90; also per family (science, legal, licence, wiki, latex, hard negatives, ...), with goal
  P >= 0.95 on the non-science families together (``goals.refs_nonscience_precision``). The newer
  families were written together with the rules they test, so they are a regression check, not an
  independent estimate; the real samples below are.
* Wikipedia wikitext (through the MediaWiki reader), web crawl JSONL and WARC (``shared/data``): every
  flag was read and judged by a person (``bench/refs_judged_flags.json``, keys only, no text); precision
  = flags judged correct / flags judged, goal >= 0.9 (``goals.refs_real_nonscience_precision``). Flags no
  one judged yet are listed and left out of the figure.
* Papers as ingest reads them by default (the unarXive records resolved by the structured-record reader,
  the PMC articles through the JATS reader): every flag is judged, a converter placeholder ("Theorem REF")
  by rule (its number is lost), every other one by a person (``bench/refs_judged_flags.json``).
* PMC (``shared/data/scientific/pmc_*.nxml``): JATS converted to text with the stdlib XML parser, two
  views: *kept* (table-wrap and fig rendered as caption + rows) and *stripped* (both removed). Gold:
  every ``<xref ref-type="table|fig">`` whose target was stripped is dangling; nothing in *kept* is.
  "Supplemental Material, Table 1" is no xref and must not be flagged.
* unarXive (``unarxive_*.jsonl.gz``): body text where ``\\ref`` became ``REF``; *stripped* drops the
  ``{{table:..}}`` / ``{{figure:..}}`` float markers, *kept* puts "Table k: caption" / "Figure k:
  caption" (numbered in order of appearance) in their place. Gold, table and figure kinds only:
  every "Table REF" / "Fig. REF" (the number is lost) and, in *stripped*, every literal "Table 3" /
  "Figure 2"; in *kept* a literal mention is dangling only when the paper has fewer floats of the kind.
  This gold is itself rule-based (an independent, deliberately simple regex), so read it as a check
  of consistency on real text, not as human labels.

Throughput: the same documents through :func:`udfs.refs.refs_signals` on Arrow batches in this
process (plain batch) and through :func:`pipelines.refs.stage.check_refs` on a ``local[1]`` Spark session
(one core), in docs/s and MB/s of UTF-8 text; reference: datatrove's ``GopherQualityFilter`` (a
filter-stage CPU cost) on the same documents in the same run, as a ratio.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa

from udfs.refs import PLACEHOLDERS, find_mentions, refs_signals
from udfs.refs.vocab import DEFAULT_VOCAB

REPO = Path(__file__).resolve().parents[1]
LABELLED = REPO / "tests" / "data" / "refs" / "labelled.jsonl"
SHARED = Path(os.environ.get("WINNOW_SHARED_DATA", REPO.parent / "shared" / "data")) / "scientific"
MEASURED_KINDS = ("table", "figure")


# ------------------------------------------------------------------------------------------ scoring
def score(docs: Iterable[dict], kinds: tuple[str, ...] | None = None, by_number: bool = False) -> dict:
    """Precision / recall of dangling mentions over ``docs`` ({text, lang, dangling: [{kind,label,start,end}]}).

    Args:
        kinds: only score these kinds (None = all).
        by_number: compare labels by leading number ("2a" == "2").

    Returns:
        ``{"tp", "fp", "fn", "precision", "recall", "errors": [(doc id, "fp"/"fn", kind, label, excerpt)]}``.
    """
    tp = fp = fn = 0
    errors: list[tuple] = []

    def key(label: str) -> str:
        m = re.match(r"\d+", label)
        return m.group() if by_number and m else label

    for d in docs:
        text = d["text"]
        pred = [m for m in find_mentions(text, DEFAULT_VOCAB[d.get("lang", "en")]) if m.dangling]
        gold = [g for g in d["dangling"] if kinds is None or g["kind"] in kinds]
        pred = [p for p in pred if kinds is None or p.kind in kinds]
        used: set[int] = set()
        for p in pred:
            hit = next((j for j, g in enumerate(gold) if j not in used and g["kind"] == p.kind
                        and key(g["label"]) == key(p.label) and p.start < g["end"] and g["start"] < p.end), None)
            if hit is None:
                fp += 1
                errors.append((d.get("id"), "fp", p.kind, p.label, text[max(0, p.start - 50) : p.end + 30]))
            else:
                used.add(hit)
                tp += 1
        for j, g in enumerate(gold):
            if j not in used:
                fn += 1
                errors.append((d.get("id"), "fn", g["kind"], g["label"], text[max(0, g["start"] - 50) : g["end"] + 30]))
    return {"tp": tp, "fp": fp, "fn": fn, "precision": tp / (tp + fp) if tp + fp else 1.0,
            "recall": tp / (tp + fn) if tp + fn else 1.0, "errors": errors}


def labelled_docs(path: Path = LABELLED) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


FAMILIES = ("science", "legal", "licence", "wiki", "latex")
"""Category families of the labelled set (science, legal, licence, wiki-like, LaTeX); the rest is the original set ("base",
hard negatives under "negative", "multilingual")."""
NON_SCIENCE = ("legal", "licence", "wiki", "latex", "negative")
"""Families whose precision has the >= 0.95 goal: text where ``repair`` / ``drop`` must not cut anything."""


def family(category: str) -> str:
    head = category.split(".")[0]
    return head if head in (*FAMILIES, "negative", "multilingual") else "base"


def scores_by_family(docs: list[dict]) -> dict[str, dict]:
    """P/R per family of the labelled set, plus ``non_science`` (all of :data:`NON_SCIENCE` together)."""
    groups: dict[str, list[dict]] = {}
    for d in docs:
        groups.setdefault(family(d["category"]), []).append(d)
    groups["non_science"] = [d for d in docs if family(d["category"]) in NON_SCIENCE]
    out = {}
    for name, ds in groups.items():
        s = score(ds)
        out[name] = {k: v for k, v in s.items() if k != "errors"} | {"n_docs": len(ds), "errors": s["errors"][:5]}
    return out


JUDGED_FLAGS = REPO / "bench" / "refs_judged_flags.json"
"""Every dangling mention the detector flags on the shared non-science samples, judged by a person who
read it: ``{key: {"correct": bool, "why": str}}`` with key ``source|document|kind|label|start`` (no text of
the samples). A flag is correct when the document itself points at a part it does not hold; it is wrong
when the target is in the document or lies in another work (a contract's section, a linked paper)."""


def _nonscience_samples(shared: Path) -> dict[str, list[tuple[str, str, frozenset[str]]]]:
    """(document id, text, kinds whose targets ingest dropped) per source as ingest reads them: Wikipedia
    wikitext through the MediaWiki reader (default options: reference lists and tables dropped and
    recorded, as ``meta.dropped_structures`` tells the refs stage), web crawl JSONL (``text`` field) and
    WARC (HTML through trafilatura)."""
    from pipelines.refs.stage import STRUCTURE_KINDS
    from udfs.formats import explode_file
    from udfs.formats.mediawiki import wikitext_to_text
    from udfs.formats.records import ParseOptions

    sources: dict[str, list[tuple[str, str, frozenset[str]]]] = {}
    wiki = shared / "wikipedia" / "wtf_wikipedia_wikitext_pages.jsonl"
    if wiki.is_file():
        pages = [json.loads(x) for x in wiki.read_text(encoding="utf-8").splitlines() if x.strip()]
        read = [(p["id"], *wikitext_to_text(p["wikitext"], ParseOptions())) for p in pages]
        sources["wikipedia"] = [(i, t, frozenset(STRUCTURE_KINDS[x] for x in dropped)) for i, t, dropped in read]
    web: list[tuple[str, str, frozenset[str]]] = []
    none: frozenset[str] = frozenset()
    for path in sorted((shared / "web_crawl").glob("*.jsonl*")):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as f:
            web += [(f"{path.name}:{i}", json.loads(x).get("text") or "", none) for i, x in enumerate(f) if x.strip()]
    for path in sorted((shared / "web_crawl").glob("*.warc.gz")):
        for batch in explode_file(str(path), path.read_bytes(), ParseOptions()):
            texts = batch.column("text").to_pylist()
            web += [(f"{path.name}#{i}", t, none) for i, t in enumerate(texts) if t]
    if web:
        sources["web_crawl"] = web
    return sources


def shared_flags(shared: Path = SHARED.parent, judged_path: Path = JUDGED_FLAGS) -> dict[str, dict]:
    """What the detector flags on the real non-science samples (see :func:`_nonscience_samples`), and the
    precision of those flags against the judgements in :data:`JUDGED_FLAGS`.

    Returns:
        Per source: ``n_docs``, ``docs_flagged``, ``dangling_by_kind``, ``n_flags``, ``judged``, ``correct``,
        ``precision`` (correct / judged; 1.0 without flags), ``unjudged`` (keys of flags nobody judged yet:
        judge them before quoting the precision), ``wrong`` and ``samples`` (kind, label, excerpt).
        ``all`` totals the sources.
    """
    judged = json.loads(judged_path.read_text(encoding="utf-8")) if judged_path.is_file() else {}
    out = {name: _judge(name, docs, judged) for name, docs in _nonscience_samples(shared).items()}
    return out | {"all": _total(out)}


def _total(per_source: dict[str, dict]) -> dict:
    total = {k: sum(s[k] for s in per_source.values()) for k in ("n_flags", "judged", "correct")}
    return total | {"precision": total["correct"] / total["judged"] if total["judged"] else 1.0}


def _judge(name: str, docs: list[tuple[str, str, frozenset[str]]], judged: dict[str, dict],
           placeholders_correct: bool = False) -> dict:
    """The flags on ``docs`` ((id, text, held kinds)) of source ``name`` against the judgements
    ``judged`` (see :func:`shared_flags` for the keys returned). With ``placeholders_correct``, a flag whose
    label is a converter placeholder (``Table REF``: the number is lost) counts as judged correct by that
    rule, without a key, and ``placeholders`` counts them."""
    by_kind: dict[str, int] = {}
    flagged, samples, unjudged, wrong = 0, [], [], []
    n_flags = n_judged = n_correct = n_placeholders = 0
    for doc_id, t, held in docs:
        dangling = [m for m in find_mentions(t, held=held) if m.dangling]
        flagged += bool(dangling)
        for m in dangling:
            n_flags += 1
            by_kind[m.kind] = by_kind.get(m.kind, 0) + 1
            excerpt = " ".join(t[max(0, m.start - 40) : m.end + 20].split())
            key = f"{name}|{doc_id}|{m.kind}|{m.label}|{m.start}"
            verdict = judged.get(key)
            if placeholders_correct and m.label in PLACEHOLDERS:
                n_placeholders += 1
                verdict = {"correct": True}
            if verdict is None:
                unjudged.append(key)
            else:
                n_judged += 1
                n_correct += bool(verdict["correct"])
                if not verdict["correct"]:
                    wrong.append((key, verdict.get("why", ""), excerpt))
            if len(samples) < 12:
                samples.append((m.kind, m.label, excerpt))
    return {"n_docs": len(docs), "docs_flagged": flagged, "dangling_by_kind": dict(sorted(by_kind.items())),
            "n_flags": n_flags, "placeholders": n_placeholders, "judged": n_judged, "correct": n_correct,
            "precision": n_correct / n_judged if n_judged else 1.0, "unjudged": unjudged, "wrong": wrong,
            "samples": samples}


def _science_samples(shared: Path) -> dict[str, list[tuple[str, str, frozenset[str]]]]:
    """(paper id, text, kinds whose targets ingest dropped) per source as ingest reads papers by default:
    the unarXive records resolved by :mod:`udfs.formats.scirecords` (citations ``[n]`` with a References
    list, formulas ``$...$``, floats as caption lines) and the PMC articles through the JATS reader."""
    from bench.scirecords import VIEWS, documents
    from pipelines.refs.stage import STRUCTURE_KINDS
    from udfs.formats import ParseOptions, explode_file

    sources: dict[str, list[tuple[str, str, frozenset[str]]]] = {}
    for path in sorted(shared.glob("unarxive_*.jsonl.gz"))[:1]:
        docs, _ = documents(path, VIEWS["resolved"])
        sources["unarxive"] = [(d["src_id"], d["text"], frozenset()) for d in docs]
    pmc = []
    for path in sorted(shared.glob("pmc_*.nxml")):
        for batch in explode_file(str(path), path.read_bytes(), ParseOptions()):
            for r in batch.to_pylist():
                if r["kind"] == "doc":
                    dropped = dict(r.get("meta") or []).get("dropped_structures") or ""
                    held = frozenset(STRUCTURE_KINDS[x] for x in dropped.split(",") if x in STRUCTURE_KINDS)
                    pmc.append((path.stem, r["text"], held))
    if pmc:
        sources["pmc"] = pmc
    return sources


def science_flags(shared: Path = SHARED, judged_path: Path = JUDGED_FLAGS) -> dict[str, dict]:
    """What the detector flags on the real papers as ingest resolves them (:func:`_science_samples`): every
    flag of a converter placeholder is correct by construction (the text says "Theorem REF": the number is
    lost), every other flag was read and judged in :data:`JUDGED_FLAGS` (source ``unarxive`` / ``pmc``).

    Returns:
        Per source the keys of :func:`shared_flags` and ``placeholders`` (flags judged by that rule);
        ``all`` totals the sources.
    """
    judged = json.loads(judged_path.read_text(encoding="utf-8")) if judged_path.is_file() else {}
    out = {name: _judge(name, docs, judged, placeholders_correct=True)
           for name, docs in _science_samples(shared).items()}
    return out | {"all": _total(out)}


# ------------------------------------------------------------------------------------------ PMC
def _label_number(el: ET.Element | None) -> str:
    text = "".join(el.itertext()) if el is not None else ""
    m = re.search(r"\d+", text)
    return m.group() if m else "?"


class _JatsText:
    """Render a JATS ``<body>`` to text, recording the offsets of table / figure xrefs as gold."""

    def __init__(self, view: str, floats: dict[str, tuple[str, str]]) -> None:
        self.view, self.floats = view, floats
        self.parts: list[str] = []
        self.pos = 0
        self.gold: list[dict] = []

    def emit(self, s: str) -> None:
        self.parts.append(s)
        self.pos += len(s)

    def render_float(self, el: ET.Element) -> None:
        kind, num = self.floats.get(el.get("id"), ("table", "?"))
        cap = el.find("caption")
        caption = " ".join("".join(cap.itertext()).split()) if cap is not None else ""
        self.emit(f"\n\n{'Table' if kind == 'table' else 'Figure'} {num}: {caption}\n")
        for tr in el.iter("tr"):
            self.emit("\t".join(" ".join("".join(c.itertext()).split()) for c in tr) + "\n")
        self.emit("\n")

    def walk(self, el: ET.Element) -> None:
        if el.tag in ("table-wrap", "fig"):
            if self.view == "kept":
                self.render_float(el)
        elif el.tag == "xref" and el.get("ref-type") in ("table", "fig") and el.get("rid") in self.floats:
            start = self.pos
            self.emit("".join(el.itertext()))
            kind, num = self.floats[el.get("rid")]
            if self.view == "stripped":
                self.gold.append({"kind": kind, "label": num, "start": start, "end": self.pos})
        else:
            if el.tag == "title":
                self.emit("\n\n")
            if el.text:
                self.emit(el.text)
            for child in el:
                self.walk(child)
            if el.tag in ("p", "title"):
                self.emit("\n\n")
        if el.tail:
            self.emit(el.tail)


def pmc_views(path: Path) -> dict[str, dict]:
    """One JATS article as two labelled documents: ``kept`` and ``stripped`` (tables and figures removed)."""
    root = ET.parse(path).getroot()
    floats = {el.get("id"): ("table" if el.tag == "table-wrap" else "figure", _label_number(el.find("label")))
              for el in root.iter() if el.tag in ("table-wrap", "fig") and el.get("id")}
    views = {}
    for view in ("kept", "stripped"):
        out = _JatsText(view, floats)
        body = root.find(".//body")
        if body is not None:
            out.walk(body)
        group = root.find(".//floats-group")  # floats kept outside <body> (e.g. Environ. Health Perspect.)
        if group is not None and view == "kept":
            for el in group:
                if el.tag in ("table-wrap", "fig"):
                    out.render_float(el)
        refs = root.findall(".//ref-list/ref")
        if refs:
            out.emit("\n\nReferences\n")
            for i, ref in enumerate(refs, 1):
                out.emit(f"[{i}] " + " ".join("".join(ref.itertext()).split()) + "\n")
        views[view] = {"id": f"{path.stem}:{view}", "lang": "en", "text": "".join(out.parts), "dangling": out.gold}
    return views


# ------------------------------------------------------------------------------------------ unarXive
_FLOAT_MARK = re.compile(r"\{\{(table|figure):([0-9a-f-]+)\}\}")
_OTHER_MARK = re.compile(r"\{\{(?:formula|cite):[^}]+\}\}")
_ROMAN_GOLD = {r: str(i) for i, r in enumerate("I II III IV V VI VII VIII IX X".split(), 1)}
_GOLD_MENTION = re.compile(
    r"\b(tables?|tab|figures?|figs?|fig\.s)\.?[ ~\u00a0]*(REF|[A-Z]?\d+|(?-i:[IVX]+)\b)"
    r"((?:[ \u00a0]*(?:,|and|&|-|–)[ \u00a0]*(?:REF|\d+))*)",
    re.IGNORECASE,
)


def unarxive_views(line: str) -> dict[str, dict]:
    """One unarXive paper as ``kept`` and ``stripped`` labelled documents (see the module docstring)."""
    paper = json.loads(line)
    entries = paper.get("ref_entries") or {}
    order: dict[str, int] = {}
    counts = {"table": 0, "figure": 0}
    for block in paper["body_text"]:
        for kind, uid in _FLOAT_MARK.findall(block["text"]):
            if uid not in order and uid in entries:
                counts[kind] += 1
                order[uid] = counts[kind]
    views = {}
    for view in ("kept", "stripped"):
        chunks, section = [], None
        for block in paper["body_text"]:
            if block.get("section") != section:
                section = block.get("section")
                chunks.append(f"{block.get('sec_number') or ''} {section or ''}".strip())

            def put(mt: re.Match[str], view: str = view) -> str:
                kind, uid = mt.groups()
                if view == "stripped" or uid not in order:
                    return ""
                cap = " ".join(str(entries[uid].get("caption", "")).split())
                return f"\n{'Table' if kind == 'table' else 'Figure'} {order[uid]}: {cap}\n"

            text = _FLOAT_MARK.sub(put, block["text"])
            chunks.append(_OTHER_MARK.sub("x", text).strip())
        text = "\n\n".join(c for c in chunks if c)
        gold = []
        for mt in _GOLD_MENTION.finditer(text):
            kind = "table" if mt.group(1).lower().startswith("tab") else "figure"
            labels = [(mt.group(2), mt.start(), mt.end(2))]
            labels += [(x.group(), mt.start(3) + x.start(), mt.start(3) + x.end()) for x in re.finditer(r"REF|\d+", mt.group(3))]
            for label, start, end in labels:
                label = _ROMAN_GOLD.get(label, label)
                num = re.search(r"\d+", label)
                if label == "REF" or view == "stripped" or (num and int(num.group()) > counts[kind]):
                    gold.append({"kind": kind, "label": label, "start": start, "end": end})
        views[view] = {"id": f"{paper['paper_id']}:{view}", "lang": "en", "text": text, "dangling": gold}
    return views


def real_scores(shared: Path = SHARED) -> dict:
    """P/R on PMC and unarXive, per view, table and figure kinds."""
    out: dict[str, dict] = {}
    pmc = [pmc_views(p) for p in sorted(shared.glob("pmc_*.nxml"))]
    with gzip.open(next(iter(sorted(shared.glob("unarxive_*.jsonl.gz")))), "rt", encoding="utf-8") as f:
        arx = [unarxive_views(line) for line in f if line.strip()]
    for name, papers in (("pmc", pmc), ("unarxive", arx)):
        for view in ("kept", "stripped"):
            s = score([p[view] for p in papers], MEASURED_KINDS, by_number=True)
            out[f"{name}.{view}"] = {k: v for k, v in s.items() if k != "errors"} | {"n_docs": len(papers),
                                                                                     "errors": s["errors"][:20]}
    return out


# ------------------------------------------------------------------------------------------ speed
def bench_texts(n_docs: int, seed: int = 0) -> list[str]:
    """Synthetic corpus (:mod:`bench.corpus`) where every third document carries a scientific paragraph
    with table / figure / equation / citation mentions and, every sixth, their targets."""
    from bench.corpus import generate_texts

    texts = generate_texts(n_docs, seed)
    sci = ("As shown in Table 2 and Fig. 3b, the error drops; Eq. (4) gives the bound [12], [3, 7] "
           "(Smith et al., 2019). Section 4 discusses the limits.")
    targets = "\n\nTable 2: Errors.\n| a | b |\n|---|---|\n| 1 | 2 |\n\nReferences\n" + "\n".join(
        f"[{k}] A. Author. Title. 2019." for k in range(1, 13))
    return [t + "\n\n" + sci + (targets if i % 6 == 0 else "") if i % 3 == 0 else t for i, t in enumerate(texts)]


def _rate(fn, texts: list[str]) -> tuple[float, float]:
    mb = sum(len(t.encode()) for t in texts) / 1e6
    t0 = time.perf_counter()
    fn(texts)
    dt = time.perf_counter() - t0
    return len(texts) / dt, mb / dt


def speed(n_docs: int, seed: int = 0, spark=None) -> dict:
    texts = bench_texts(n_docs, seed)

    def plain(ts: list[str]) -> None:
        for i in range(0, len(ts), 1024):
            refs_signals(pa.array(ts[i : i + 1024], pa.string()))

    def gopher(ts: list[str]) -> None:
        from datatrove.data import Document
        from datatrove.pipeline.filters import GopherQualityFilter

        f = GopherQualityFilter()
        for i, t in enumerate(ts):
            f.filter(Document(text=t, id=str(i)))

    plain(texts[:50])  # compile the regexes outside the timed region
    out: dict[str, float] = {}
    out["plain_docs_per_s"], out["plain_mb_per_s"] = _rate(plain, texts)
    out["gopher_docs_per_s"], out["gopher_mb_per_s"] = _rate(gopher, texts)
    out["refs_vs_gopher"] = out["plain_docs_per_s"] / out["gopher_docs_per_s"]
    if spark is not None:
        from pipelines.refs.config import RefsConfig
        from pipelines.refs.stage import check_refs

        df = spark.createDataFrame([(str(i), t) for i, t in enumerate(texts)], "doc_id string, text string")
        df = df.repartition(1).cache()
        df.count()

        def on_spark(_: list[str]) -> None:
            df.transform(check_refs, RefsConfig()).select("n_dangling").write.format("noop").mode("overwrite").save()

        # The first run pays the Python workers' start-up (imports, regex compilation) once per worker;
        # the plain side had its warm-up above, so the goal compares the warm run and the cold one is kept.
        cold_docs_per_s, _ = _rate(on_spark, texts)
        out["spark_docs_per_s"], out["spark_mb_per_s"] = _rate(on_spark, texts)
        out["spark_vs_plain"] = out["spark_docs_per_s"] / out["plain_docs_per_s"]
        out["spark_cold_vs_plain"] = cold_docs_per_s / out["plain_docs_per_s"]
        df.unpersist()
    out["n_docs"] = n_docs
    out["mb"] = sum(len(t.encode()) for t in texts) / 1e6
    return out


def run(n_docs: int, seed: int = 0) -> dict:
    """All figures: quality on the labelled set and real papers, throughput per core.

    Returns:
        ``{"labelled": {...}, "real": {...}, "speed": {...}}`` (JSON-serialisable).
    """
    from pipelines.core.config import SparkConfig
    from pipelines.core.session import get_spark

    docs = labelled_docs()
    lab = score(docs)
    figures = {"labelled": {k: v for k, v in lab.items() if k != "errors"} | {"errors": lab["errors"][:20]}}
    figures["labelled_by_family"] = by_family = scores_by_family(docs)
    figures["goals"] = {"refs_nonscience_precision": by_family["non_science"]["precision"]}
    figures["real"] = real_scores() if SHARED.is_dir() else {}
    figures["shared_flags"] = flags = shared_flags() if SHARED.parent.is_dir() else {}
    if flags:
        figures["goals"]["refs_real_nonscience_precision"] = flags["all"]["precision"]
    figures["science_flags"] = science_flags() if SHARED.is_dir() else {}
    if figures["real"]:
        figures["goals"]["refs_real_science_recall"] = min(v["recall"] for v in figures["real"].values())
    spark = get_spark("winnow-bench-refs", SparkConfig(master="local[1]", shuffle_partitions=1,
                                                        conf={"spark.ui.enabled": "false"}))
    figures["speed"] = speed(n_docs, seed, spark)
    return figures


if __name__ == "__main__":
    res = run(int(sys.argv[1]) if len(sys.argv) > 1 else 3000)
    print(f"{'set':<20}{'P':>8}{'R':>8}{'tp':>6}{'fp':>6}{'fn':>6}")
    for name, s in [("labelled", res["labelled"]), *res["real"].items()]:
        print(f"{name:<20}{s['precision']:>8.3f}{s['recall']:>8.3f}{s['tp']:>6}{s['fp']:>6}{s['fn']:>6}")
    print(f"\n{'family':<20}{'P':>8}{'R':>8}{'tp':>6}{'fp':>6}{'fn':>6}{'docs':>6}")
    for name, s in res["labelled_by_family"].items():
        print(f"{name:<20}{s['precision']:>8.3f}{s['recall']:>8.3f}{s['tp']:>6}{s['fp']:>6}{s['fn']:>6}{s['n_docs']:>6}")
    for name, s in res["shared_flags"].items():
        if name == "all":
            print(f"\nnon-science flags: {s['correct']}/{s['judged']} judged correct (precision {s['precision']:.3f}), "
                  f"{s['n_flags'] - s['judged']} not judged")
            continue
        print(f"\n{name}: {s['docs_flagged']}/{s['n_docs']} documents flagged, dangling by kind {s['dangling_by_kind']}, "
              f"precision {s['precision']:.3f} ({s['correct']}/{s['judged']} judged, {len(s['unjudged'])} not judged)")
        for key, why, excerpt in s["wrong"]:
            print(f"  wrong  {key}: {why}\n         {excerpt}")
        for key in s["unjudged"][:20]:
            print(f"  unjudged {key}")
    for name, s in res["science_flags"].items():
        if name != "all":
            print(f"\n{name} (papers as ingest resolves them): {s['docs_flagged']}/{s['n_docs']} papers flagged, "
                  f"{s['n_flags']} flags ({s['placeholders']} converter placeholders), by kind {s['dangling_by_kind']}, "
                  f"{s['correct']}/{s['judged']} judged correct, {len(s['unjudged'])} not judged")
            for key, why, excerpt in s["wrong"]:
                print(f"  wrong  {key}: {why}\n         {excerpt}")
    sp = res["speed"]
    print(f"\n{sp['n_docs']} docs, {sp['mb']:.1f} MB, one core")
    for k in ("plain", "spark", "gopher"):
        if f"{k}_docs_per_s" in sp:
            print(f"{k:<10}{sp[f'{k}_docs_per_s']:>10.0f} docs/s{sp[f'{k}_mb_per_s']:>8.2f} MB/s")
    print(f"refs/gopher {sp['refs_vs_gopher']:.2f}x   spark/plain {sp.get('spark_vs_plain', float('nan')):.2f}x")
