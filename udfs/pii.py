"""PII and secret detection and redaction over Arrow batches (pure: no Spark, no I/O).

One pass per document: the combined regex of :mod:`udfs.pii_rules` finds every kind at once; each
candidate is then checked by its kind's validator (octets and ranges, Luhn and issuer, IBAN mod-97,
libphonenumber, placeholder rules). Findings go into flat per-batch lists (kind, start, end, hash),
never into per-match Python objects beyond the regex match itself, and become Arrow arrays once per
batch. A vectorised RE2 pre-check (``pyarrow.compute.match_substring_regex``) skips the documents in which
no detector can match, so they never reach the Python regex.

Offsets are 0-based code-point offsets into the input text, end exclusive; only the value is spanned
(``password=hunter22`` spans ``hunter22``). ``value_hash`` is the first 32 hex digits of sha256 over
the salt and the value: the value itself is never stored.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import phonenumbers
import pyarrow as pa
import pyarrow.compute as pc

from udfs import pii_rules
from udfs.pii_rules import DETECTOR_KIND, KINDS, VALUE_GROUP

DEFAULT_REPLACEMENTS: dict[str, str] = {k: f"<{k.upper()}>" for k in KINDS}
"""Replacement token per kind, e.g. ``<EMAIL>``, ``<IPV4>``, ``<AWS_SECRET>``."""

DEFAULT_KINDS: tuple[str, ...] = tuple(k for k in KINDS if k != "shell_user")
"""Kinds reported by default: all but ``shell_user`` (prompts are left alone unless asked)."""

SPAN_TYPE = pa.struct([
    ("kind", pa.string()), ("start", pa.int32()), ("end", pa.int32()), ("value_hash", pa.string()),
])
RESULT_SCHEMA = pa.schema([
    ("redacted_text", pa.string()),  # null when nothing was replaced
    ("pii_counts", pa.map_(pa.string(), pa.int32())),
    ("pii_spans", pa.list_(SPAN_TYPE)),
    ("pii_n", pa.int32()),  # findings of redactable kinds (the drop rule counts these)
    ("pii_top", pa.string()),  # most frequent redactable kind (ties: KINDS order); null without findings
])

# RE2 (Arrow) pre-check: a superset of what any detector needs. Documents without one of these are
# skipped; the Python regex then runs only on the rest.
_TRIGGER = (
    r"@|\d\.\d{1,3}\.\d{1,3}\.\d|[0-9A-Fa-f]:[0-9A-Fa-f]{0,4}:|::|\d[\d ()./-]{5,}\d|\+\d|\b[A-Z]{2}\d\d"
    r"|PRIVATE KEY|A[KSBCGIRNP][A-Z]{2}[A-Z2-7]{16}|gh[pousr]_|github_pat_|xox[abposr]-|hooks\.slack|AIza"
    r"|(?i:pass|pwd|secret|api_?key|token)|(?i:[\[({]\s?at\s?[\])}])"
)


@dataclass(frozen=True)
class PiiOptions:
    """What to find and what to replace.

    Attributes:
        kinds: kinds to report (see :data:`udfs.pii_rules.KINDS`). Without ``shell_user``, the
            ``user@host`` of a shell prompt (``alice@box:~$``) is left alone, never reported as e-mail.
        replacements: kind -> replacement token, for the kinds whose matches are replaced in the text;
            a reported kind missing here is reported but left in the text (e.g. ``ip_private``).
        email_obfuscated: also find ``name [at] domain [dot] org`` forms (reported as ``email``).
        email_example_domains: report addresses at RFC 2606/6761 reserved domains (``example.com``).
        phone_regions: ISO 3166 regions tried, in order, for numbers written without ``+``.
        hash_salt: prefix of every hashed value.
    """

    kinds: tuple[str, ...] = DEFAULT_KINDS
    replacements: dict[str, str] = field(
        default_factory=lambda: {k: v for k, v in DEFAULT_REPLACEMENTS.items() if k != "ip_private"})
    email_obfuscated: bool = False
    email_example_domains: bool = False
    phone_regions: tuple[str, ...] = ("US", "GB", "DE", "FR")
    hash_salt: str = ""

    def __hash__(self) -> int:
        return hash((self.kinds, tuple(sorted(self.replacements.items())), self.email_obfuscated,
                     self.email_example_domains, self.phone_regions, self.hash_salt))


@lru_cache(maxsize=8)
def _pattern(email_obfuscated: bool):
    detectors = tuple(d for d in pii_rules.DETECTORS if email_obfuscated or d != "email_obfuscated")
    return pii_rules.combined_pattern(detectors)


def phone_ok(value: str, regions: tuple[str, ...]) -> bool:
    """libphonenumber validity of a phone candidate: ``+CC`` numbers as written, others in ``regions``."""
    n_digits = sum(c.isdigit() for c in value)
    if not 7 <= n_digits <= 15:
        return False
    for region in (None,) if value.startswith("+") else regions:
        try:
            if phonenumbers.is_valid_number(phonenumbers.parse(value, region)):
                return True
        except phonenumbers.NumberParseException:
            continue
    return False


def _kind_of(detector: str, value: str, m, opts: PiiOptions) -> str | None:
    """The kind a candidate match reports, or None when its validator rejects it (a look-alike)."""
    if detector.startswith("skip_"):
        return None
    if detector == "email":
        return None if not opts.email_example_domains and pii_rules.is_reserved_email(value) else "email"
    if detector in ("ipv4", "ipv6"):
        return pii_rules.ip_kind(value)
    if detector == "card":
        digits = value.replace(" ", "").replace("-", "")
        return "card" if pii_rules.card_issuer(digits) and pii_rules.luhn_ok(digits) else None
    if detector == "iban":
        return "iban" if pii_rules.iban_ok(value.replace(" ", "")) else None
    if DETECTOR_KIND[detector] == "phone":
        return "phone" if phone_ok(value, opts.phone_regions) else None
    if detector == "password":
        ok = pii_rules.password_ok(value, bool(m.group("password_q")), m.group("password_op"))
        return "password" if ok else None
    return DETECTOR_KIND[detector]


def find_pii(text: str, opts: PiiOptions) -> list[tuple[str, int, int]]:
    """Every finding of ``text`` as ``(kind, start, end)`` code-point offsets, in text order (for tests)."""
    out: list[tuple[str, int, int]] = []
    for m in _pattern(opts.email_obfuscated).finditer(text):
        det = m.lastgroup
        s, e = m.span(VALUE_GROUP[det]) if det in VALUE_GROUP else m.span()
        if det == "password":  # a closing bracket or full stop after the value is punctuation
            e = s + len(text[s:e].rstrip(".)]}>"))
        kind = _kind_of(det, text[s:e], m, opts)
        if kind is not None and kind in opts.kinds:
            out.append((kind, s, e))
    return out


def _scan(texts: pa.Array, opts: PiiOptions) -> dict[int, list[tuple[str, int, int]]]:
    """Findings per document index (documents without findings absent).

    The documents are cut into lines and the RE2 pre-check runs over all lines of the batch at once
    (Arrow, C++); the Python regex then sees only the lines that passed it (about a tenth of web
    text), with their code-point offset in the document added. A document holding ``PRIVATE KEY`` is
    scanned whole, since a PEM block spans lines.
    """
    out: dict[int, list[tuple[str, int, int]]] = {}
    whole = pc.fill_null(pc.match_substring(texts, "PRIVATE KEY"), False).to_numpy(zero_copy_only=False)
    for i in np.flatnonzero(whole):
        found = find_pii(texts[int(i)].as_py(), opts)
        if found:
            out[int(i)] = found
    lines = pc.split_pattern(texts, "\n")
    flat = pc.list_flatten(lines)
    if len(flat) == 0:
        return out
    hit = pc.fill_null(pc.match_substring_regex(flat, _TRIGGER), False).to_numpy(zero_copy_only=False)
    idx = np.flatnonzero(hit)
    if not len(idx):
        return out
    # Code-point start of every line within its document: running start over the batch minus the
    # running start of the document's first line.
    lengths = pc.utf8_length(flat).to_numpy(zero_copy_only=False).astype(np.int64) + 1
    starts = np.cumsum(lengths) - lengths
    offsets = lines.offsets.to_numpy()
    doc_of = np.searchsorted(offsets, idx, side="right") - 1
    base = starts[idx] - starts[offsets[doc_of]]
    candidates = pc.take(flat, pa.array(idx)).to_pylist()
    for line, d, b in zip(candidates, doc_of.tolist(), base.tolist(), strict=True):
        if whole[d]:
            continue
        found = find_pii(line, opts)
        if found:
            out.setdefault(d, []).extend((k, s + b, e + b) for k, s, e in found)
    return out


def pii_batch(texts: pa.Array, opts: PiiOptions, redact: bool = True) -> pa.RecordBatch:
    """Find PII in every document of a batch and (optionally) redact it.

    Args:
        texts: string (or large_string) array, one document per row; null counts as empty.
        opts: what to find and how to replace it.
        redact: replace the values of the kinds in ``opts.replacements``; False only reports them.

    Returns:
        A batch of :data:`RESULT_SCHEMA`, one row per input row: ``redacted_text`` string (null when
        unchanged), ``pii_counts`` map<string,int32> (kind -> findings, empty map without findings),
        ``pii_spans`` list<struct<kind string, start int32, end int32, value_hash string>> (offsets into
        the input text), ``pii_n`` int32 (findings of replaceable kinds), ``pii_top`` string.
    """
    texts = texts.cast(pa.string()) if texts.type != pa.string() else texts
    n = len(texts)
    found_by_doc = _scan(texts, opts)
    salt = opts.hash_salt.encode()
    repl = opts.replacements if redact else {}
    counted = set(opts.replacements)
    redacted: list[str | None] = [None] * n
    tops: list[str | None] = [None] * n
    n_counted = [0] * n
    span_off, count_off = [0], [0]
    sp_kind: list[str] = []
    sp_start: list[int] = []
    sp_end: list[int] = []
    sp_hash: list[str] = []
    c_kind: list[str] = []
    c_n: list[int] = []
    for i in range(n):
        found = found_by_doc.get(i)
        if found:
            text = texts[i].as_py()
            counts: dict[str, int] = {}
            pieces, pos = [], 0
            for kind, s, e in found:
                sp_kind.append(kind)
                sp_start.append(s)
                sp_end.append(e)
                sp_hash.append(hashlib.sha256(salt + text[s:e].encode()).hexdigest()[:32])
                counts[kind] = counts.get(kind, 0) + 1
                token = repl.get(kind)
                if token is not None:
                    pieces += (text[pos:s], token)
                    pos = e
            if pos:
                pieces.append(text[pos:])
                redacted[i] = "".join(pieces)
            for kind in sorted(counts, key=KINDS.index):
                c_kind.append(kind)
                c_n.append(counts[kind])
            mine = {k: v for k, v in counts.items() if k in counted}
            if mine:
                n_counted[i] = sum(mine.values())
                tops[i] = max(sorted(mine, key=KINDS.index), key=mine.__getitem__)
        span_off.append(len(sp_kind))
        count_off.append(len(c_kind))
    spans = pa.StructArray.from_arrays(
        [pa.array(sp_kind, pa.string()), pa.array(sp_start, pa.int32()), pa.array(sp_end, pa.int32()),
         pa.array(sp_hash, pa.string())],
        fields=list(SPAN_TYPE),
    )
    return pa.RecordBatch.from_arrays(
        [
            pa.array(redacted, pa.string()),
            pa.MapArray.from_arrays(pa.array(count_off, pa.int32()), pa.array(c_kind, pa.string()),
                                    pa.array(c_n, pa.int32())),
            pa.ListArray.from_arrays(pa.array(span_off, pa.int32()), spans),
            pa.array(n_counted, pa.int32()),
            pa.array(tops, pa.string()),
        ],
        schema=RESULT_SCHEMA,
    )
