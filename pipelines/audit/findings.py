"""Merged audit counters + the ``audit`` thresholds -> ranked findings and the figures behind them.

No Spark: :func:`summarize` takes a merged :class:`udfs.tokenizer_audit.Partial` and the facts of the
tokenizer, so the tokenize stage (inline), the audit job and the tests share it. A finding is a dict with
fixed keys: ``id`` (stable, ``audit.``-prefixed), ``severity`` (``error``: ids or text are wrong and
training would learn it; ``warn``: costly or risky, a person decides; ``info``: worth knowing, flags
nothing), ``title``, ``detail``, ``fix`` and ``examples``. Findings are ranked errors first, then warnings,
then notes, each by how much of the corpus they touch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pipelines.audit.config import AuditConfig
from pipelines.audit.cost import corpus_medians, cost_findings, cost_rows, whitespace_digits
from pipelines.audit.finding import SEVERITIES as SEVERITIES
from pipelines.audit.finding import finding, rank, share
from pipelines.core.words import plural
from udfs import tokenizer_audit as ta
from udfs.tokenize import LoadedTokenizer, encode_ids
from udfs.tokenizer_prompts import PromptSignal, ending_text

UINT16_IDS = 1 << 16
"""Ids a ``uint16`` shard can hold (0 .. 65535)."""


@dataclass(frozen=True)
class TokenizerFacts:
    """What the findings need to know about the tokenizer and the run.

    Attributes:
        spec: ``tokenize.tokenizer``.
        vocab_size: ids including added tokens.
        token_texts: each id's text (:func:`udfs.tokenizer_audit.token_texts`), for listings.
        special_ids: control ids that must never be content (EOS, BOS, added special tokens).
        special_encodings: each literal special-token string -> the ids it encodes to as text.
        shard_dtype: ``shard.dtype`` (``auto``, ``uint16``, ``int32``).
        engine: the engine that wrote the ids, and whether tiktoken can run the tokenizer.
    """

    spec: str
    vocab_size: int
    token_texts: list[str]
    special_ids: tuple[int, ...]
    special_encodings: dict[str, list[int]]
    shard_dtype: str = "auto"
    engine: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PromptSet:
    """The prompts of one evaluation set and their boundary signals.

    Attributes:
        name: the set's name (``decontam.eval_sets`` or ``audit.prompt_sets``).
        ids: item ids.
        prompts: prompt texts.
        signals: one :class:`udfs.tokenizer_prompts.PromptSignal` per prompt.
    """

    name: str
    ids: list[str]
    prompts: list[str]
    signals: list[PromptSignal]


_VOCAB_FACTS: dict[str, tuple[list[str], dict[int, str]]] = {}


def _vocab_facts(tok: LoadedTokenizer) -> tuple[list[str], dict[int, str]]:
    """Each id's text (:func:`udfs.tokenizer_audit.token_texts`) and the added special tokens by id (the
    unknown token left out: it is counted apart), once per process per tokenizer hash
    (:attr:`udfs.tokenize.LoadedTokenizer.fingerprint`)."""
    key = tok.fingerprint
    if key not in _VOCAB_FACTS:
        texts, _ = ta.token_texts(tok)
        model = tok.config.get("model") or {}
        unk = tok.token_id(model["unk_token"]) if isinstance(model.get("unk_token"), str) else None
        decoder = tok.tokenizer.get_added_tokens_decoder()  # type: ignore[attr-defined]
        _VOCAB_FACTS[key] = (texts, {i: t.content for i, t in decoder.items() if t.special and i != unk})
    return _VOCAB_FACTS[key]


def tokenizer_facts(
    tok: LoadedTokenizer,
    *,
    eos_id: int,
    bos_id: int | None,
    literals: tuple[str, ...],
    shard_dtype: str = "auto",
    engine: dict[str, Any] | None = None,
) -> TokenizerFacts:
    """The :class:`TokenizerFacts` of a loaded tokenizer.

    Args:
        tok: the run's tokenizer.
        eos_id: the EOS id the run frames documents with.
        bos_id: the BOS id, or None.
        literals: special-token strings to look for in the text (EOS/BOS token strings); the
            tokenizer's added special tokens are added.
        shard_dtype: ``shard.dtype``.
        engine: engine facts to report (``engine``, ``tiktoken_possible``, ...).

    The part that depends on the tokenizer alone (each id's text, its special tokens: ~0.2-0.3 s for
    GPT-2's 50,257 ids) is built once per process and tokenizer (:func:`_vocab_facts`, keyed by the
    tokenizer's hash), so a second audit or tokenize stage in the same process does not pay it again.
    """
    texts, added = _vocab_facts(tok)
    strings = tuple(dict.fromkeys([*literals, *added.values()]))
    ids = tuple(sorted({eos_id, *([bos_id] if bos_id is not None else []), *added}))
    encodings = {
        s: [int(i) for i in ids_] for s, ids_ in zip(strings, encode_ids(tok, list(strings)), strict=True)
    }
    return TokenizerFacts(tok.spec, tok.vocab_size, texts, ids, encodings, shard_dtype, engine or {})


# ------------------------------------------------------------------------------------------ round trip
def _roundtrip_findings(part: ta.Partial) -> list[dict[str, Any]]:
    rt, out = part.roundtrip, []
    checked = rt.get("checked", 0)
    bad = {k: rt.get(k, 0) for k in ta.RT_KINDS if k != "ok" and rt.get(k, 0)}
    if bad:
        serious = any(k in bad for k in ("lost_bytes", "other"))
        out.append(
            finding(
                "audit.roundtrip",
                "error" if serious else "warn",
                "decoded ids differ from the text",
                f"{sum(bad.values()):,} of {checked:,} checked documents do not round-trip: "
                + ", ".join(f"{k} {v:,}" for k, v in bad.items()),
                "lost_bytes: use byte fallback or a byte-level tokenizer; whitespace / normalisation: the "
                "tokenizer's normalizer or pre-tokenizer rewrites text; decide whether the model may learn "
                "that",
                share(sum(bad.values()), checked),
                [list(e) for e in part.rt_examples],
            )
        )
    if rt.get("invalid_utf8", 0):
        out.append(
            finding(
                "audit.invalid_utf8",
                "error",
                "decoding a document gives invalid UTF-8",
                f"{rt['invalid_utf8']:,} documents decode to bytes that are not UTF-8",
                "the ids are not the tokenizer's encoding of the text: check the tokenizer the run used",
                share(rt["invalid_utf8"], checked),
            )
        )
    return out


# ------------------------------------------------------------------------------------------ vocabulary
def _vocab_findings(
    part: ta.Partial, facts: TokenizerFacts, acfg: AuditConfig
) -> tuple[list[dict[str, Any]], dict]:
    out = []
    n = facts.vocab_size
    if n > UINT16_IDS:
        if facts.shard_dtype == "uint16":
            out.append(
                finding(
                    "audit.vocab_dtype",
                    "error",
                    "vocabulary too large for uint16 shards",
                    f"{n:,} ids do not fit shard.dtype=uint16 (ids 0..65535): larger ids wrap",
                    "set shard.dtype: int32 (or auto)",
                    1.0,
                )
            )
        else:
            out.append(
                finding(
                    "audit.vocab_dtype",
                    "info",
                    "shards need 4 bytes per token",
                    f"{n:,} ids need int32 shards (shard.dtype={facts.shard_dtype})",
                    "none needed; a vocabulary of at most 65,536 ids halves shard size",
                    0.0,
                )
            )
    special = np.zeros(n, dtype=bool)
    special[[i for i in facts.special_ids if 0 <= i < n]] = True
    counts = part.id_counts
    in_content = {
        facts.token_texts[i] or str(i): int(counts[i]) for i in facts.special_ids if 0 <= i < n and counts[i]
    }
    if in_content:
        out.append(
            finding(
                "audit.special_in_content",
                "error",
                "control tokens inside document content",
                "special ids occur inside documents (not as the EOS/BOS Winnow frames them with): "
                + ", ".join(f"{k!r} x{v:,}" for k, v in in_content.items()),
                "encode special-token strings as text (Winnow's tokenizer does); retokenize",
                share(sum(in_content.values()), int(counts.sum())),
            )
        )
    for s, (docs, occ) in sorted(part.specials.items()):
        out.append(
            finding(
                "audit.special_literal",
                "info",
                f"literal {s!r} in the text",
                f"{plural(docs, 'document')} hold {s!r} {plural(occ, 'time')}, encoded as text "
                f"{facts.special_encodings.get(s, [])}: the model learns to write it",
                "strip or escape the string at ingest if the model must never produce it",
                share(docs, sum(g.total("docs") for (d, _), g in part.groups.items() if d == "source")),
            )
        )
    total = int(counts.sum())
    never = np.flatnonzero((counts == 0) & ~special)
    rare = np.flatnonzero((counts > 0) & (counts < acfg.min_count) & ~special)
    judged = total >= acfg.min_tokens_per_id * n
    listed = acfg.max_listed_tokens
    coverage = {
        "tokens": total,
        "vocab_size": n,
        "never_seen": len(never),
        "rare": len(rare),
        "min_count": acfg.min_count,
        "judged": judged,
        "never_seen_tokens": [[int(i), facts.token_texts[i]] for i in never[:listed]],
        "rare_tokens": [[int(i), facts.token_texts[i], int(counts[i])] for i in rare[:listed]],
    }
    if len(never) or len(rare):
        why = (
            ""
            if judged
            else f"; the corpus holds {total / n:.1f} tokens per id, fewer than "
            f"min_tokens_per_id={acfg.min_tokens_per_id}, so this is not judged"
        )
        out.append(
            finding(
                "audit.undertrained",
                "warn" if judged else "info",
                "vocabulary ids the data never or rarely trains",
                f"{len(never):,} ids never seen and {len(rare):,} seen fewer than {acfg.min_count} times: "
                f"candidates for under-trained tokens (Land & Bartolo 2024){why}",
                "keep them out of prompts, or remove them from the vocabulary before training",
                share(len(never) + len(rare), n),
                [[int(i), facts.token_texts[i]] for i in never[: acfg.examples]],
            )
        )
    return out, coverage


# ------------------------------------------------------------------------------------------ prompts
def prompt_rows(
    sets: list[PromptSet], part: ta.Partial, facts: TokenizerFacts, acfg: AuditConfig
) -> list[dict[str, Any]]:
    """Per prompt set: prompts, affected prompts and why, the last tokens involved, and the fix."""
    rows = []
    for ps in sets:
        affected, last, endings = [], {}, {}
        for pid, sig in zip(ps.ids, ps.signals, strict=True):
            rare = (
                acfg.min_follow_share is not None
                and sig.seen >= acfg.prompt_min_count
                and sig.seen_then_kind < acfg.min_follow_share * sig.seen
            )
            if not sig.canonical or rare:
                affected.append(pid)
                key = facts.token_texts[sig.last_id] if sig.last_id >= 0 else ""
                last[key] = last.get(key, 0) + 1
                ending = ending_text(list(sig.ending))
                endings[ending] = endings.get(ending, 0) + 1
        spaces = sum(s.ends_in_space for s in ps.signals)
        rows.append(
            {
                "set": ps.name,
                "prompts": len(ps.prompts),
                "affected": len(affected),
                "ending_in_whitespace": spaces,
                "examples": affected[: acfg.examples],
                "last_tokens": _top(last),
                "endings": _top(endings),
                "fix": (
                    "strip the trailing whitespace from the prompts and start each answer with it "
                    "(prompt 'Answer:' + continuation ' Paris')"
                )
                if affected
                else "",
            }
        )
    return rows


def _top(counts: dict[str, int], n: int = 5) -> list[list[Any]]:
    """The ``n`` most frequent ``[key, count]``, ties by key."""
    return sorted(([k, v] for k, v in counts.items()), key=lambda kv: (-kv[1], kv[0]))[:n]


def _endings_line(row: dict[str, Any]) -> str:
    """``'Answer:' + ' ' (3 prompts), ...``: how the affected prompts end (token by token), most first."""
    if "endings" not in row:  # an audit.json written before the endings were kept
        return ", ".join(f"{t!r} ({n} prompts)" for t, n in row["last_tokens"])
    return ", ".join(f"{e} ({n} prompt{'s' if n != 1 else ''})" for e, n in row["endings"])


def _prompt_findings(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        finding(
            "audit.prompt_boundary",
            "warn",
            f"prompts of {r['set']!r} end on an unseen boundary",
            f"{r['affected']:,} of {r['prompts']:,} prompts end on a token the training data does not "
            f"continue into the answer that way; they end in {_endings_line(r)}",
            r["fix"],
            share(r["affected"], r["prompts"]),
            r["examples"],
        )
        for r in rows
        if r["affected"]
    ]


def _engine_findings(part: ta.Partial) -> list[dict[str, Any]]:
    if not part.engines.get("differ"):
        return []
    return [
        finding(
            "audit.engines",
            "error",
            "the hf and tiktoken engines give different ids",
            f"{part.engines['differ']:,} of {part.engines['checked']:,} sampled documents differ",
            "set tokenize.engine: hf",
            share(part.engines["differ"], part.engines["checked"]),
            part.engine_examples,
        )
    ]


def summarize(
    part: ta.Partial, facts: TokenizerFacts, acfg: AuditConfig, prompt_sets: list[PromptSet] = ()
) -> dict[str, Any]:  # type: ignore[assignment]
    """The audit document: ranked findings first, then the figures behind them.

    Args:
        part: the merged counters of every batch.
        facts: the tokenizer and run facts.
        acfg: the ``audit`` section.
        prompt_sets: the evaluation prompts and their boundary signals.

    Returns:
        ``findings`` (ranked, see the module docstring), ``flags`` (errors + warnings), ``tokenizer``,
        ``cost`` (``source`` / ``lang`` rows of :func:`cost_rows`), ``fertility_median`` (the corpus median
        document's tokens per word and bytes per token, the reference of the outliers), ``roundtrip``,
        ``coverage``, ``specials``, ``prompts``, ``engines`` and ``whitespace_digits``.
    """
    vocab, coverage = _vocab_findings(part, facts, acfg)
    prompts = prompt_rows(list(prompt_sets), part, facts, acfg)
    findings = rank(
        [
            *cost_findings(part, acfg),
            *_roundtrip_findings(part),
            *vocab,
            *_prompt_findings(prompts),
            *_engine_findings(part),
        ]
    )
    return {
        "findings": findings,
        "flags": sum(f["severity"] != "info" for f in findings),
        "tokenizer": {
            "spec": facts.spec,
            "vocab_size": facts.vocab_size,
            "shard_dtype": facts.shard_dtype,
            **facts.engine,
        },
        "cost": {dim: cost_rows(part, dim) for dim in ("source", "lang")},
        "fertility_median": dict(
            zip(("tokens_per_word", "bytes_per_token"), corpus_medians(part), strict=True)
        ),
        "roundtrip": {**part.roundtrip, "examples": [list(e) for e in part.rt_examples]},
        "coverage": coverage,
        "specials": {
            s: {"documents": d, "occurrences": o, "encoded_as": facts.special_encodings.get(s, [])}
            for s, (d, o) in sorted(part.specials.items())
        },
        "prompts": prompts,
        "engines": {**part.engines, "examples": part.engine_examples},
        "whitespace_digits": whitespace_digits(part),
    }
