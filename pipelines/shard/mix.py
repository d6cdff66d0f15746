"""Shard stage: the data mix of the train set (``shard.mix``), applied after the validation split.

Each source ``s`` (the ingest ``source`` column) is given an *epoch count* ``E_s`` (a float): directly
(``epochs``), from ``target_tokens / T_s``, or from its ``weight`` (share of the train tokens; see
:func:`plan_mix`). Its documents are then copied ``floor(E_s)`` times, plus once more for the shortest
prefix, in *pick hash* order (the first 13 hex digits of ``sha256("<seed>:mixpick:<doc_id>")``), whose
tokens reach ``frac(E_s) * T_s`` (:func:`pick_cuts`, the search of ``pipelines/shard/split.py``): 2.5 =
every document twice plus a seeded half of the tokens; 0.3 = a seeded 30 %. The realised amount exceeds
the asked one by less than one document; the choice depends on the seed and the ``doc_id`` only, never
on partitioning.

**Order.** Copy ``p`` (the *pass*, 0-based) of a document gets a stream position
``t = (p + l_p * v) / E_s`` in [0, 1), where ``l_p = min(1, E_s - p)`` is the length of pass ``p`` and
``v`` in [0, 1) is a fresh hash of ``(seed, p, doc_id)``. Each source is therefore spread evenly over the
whole train stream (the mix is the same at every point of it), and pass ``p`` of a source occupies
``[p / E_s, (p + l_p) / E_s)``: every selected document appears once in a pass before any appears in the
next. The shuffle key is ``t`` as 13 hex digits followed by 51 hex digits of that hash, so the shard
stage's range buckets, balanced cuts and writers work unchanged.

**Repeat distance.** For a repeated source, ``v = (g + u) / 2`` where the *group* ``g`` in {0, 1} is a
hash bit of ``(seed, doc_id)`` (the same in every pass) and ``u`` a fresh hash of ``(seed, p, doc_id)``:
every pass lists group A (g = 0) then group B, each in a fresh order. Between a document's copies in
passes ``p`` and ``p + 1`` therefore lie at least all of ``B_p`` (if it is in A) or all of ``A_{p+1}``
(if it is in B), so in the stream the distance (difference of positions) is at least
``min_p min(|B_p|, |A_{p+1}|) + 1``, counting only copies of the same source (other sources only add to
it). The bound is computed from exact counts (one slim Spark job) and a source whose bound is below
``min_repeat_distance`` fails the run; it is a lower bound, about half a pass (half the partial pass
when the epoch count has a fraction).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipelines.shard.config import MixSourceConfig
from udfs.errors import UserError

PASS = "_pass"
GROUP = "_group"
_FRAC_HEX = 13
"""Hex digits of a hash read as a fraction of 2^52 (exact in a double)."""


@dataclass(frozen=True)
class SourcePlan:
    """How much of one source the train set holds.

    Attributes:
        docs: documents of the source in train before the mix.
        tokens: their tokens.
        epochs: E_s, copies per document on average (float > 0).
        asked_share: expected share of the train tokens (``weight`` when given).
        min_repeat_distance: ``shard.mix.<source>.min_repeat_distance`` (None without a mix entry).
    """

    docs: int
    tokens: int
    epochs: float
    asked_share: float
    min_repeat_distance: int | None = None
    pick_cut: int | None = None
    """Documents whose pick hash (an int < 2^52) is below this get the partial pass (:func:`pick_cuts`)."""

    @property
    def full_passes(self) -> int:
        """Passes holding every document (``floor(E_s)``)."""
        return math.floor(self.epochs)

    @property
    def fraction(self) -> float:
        """Share of the documents in the last, partial pass (``frac(E_s)``)."""
        return self.epochs - self.full_passes


def plan_mix(counts: dict[str, tuple[int, int]], mix: dict[str, MixSourceConfig]) -> dict[str, SourcePlan]:
    """Epoch count per source from the config and the train set's sizes (driver only, no Spark).

    Weights: with every source weighted, the output is the largest that repeats no document,
    ``T_out = min_s T_s / w_s``; beside fixed amounts ``F`` (epochs, target_tokens) the weighted sources
    take their share of ``T_out = F / (1 - sum w)``. ``E_s = w_s * T_out / T_s``.

    Args:
        counts: ``{source: (documents, tokens)}`` of the train set.
        mix: ``shard.mix``.

    Returns:
        ``{source: SourcePlan}`` for every source of ``counts``.

    Raises:
        UserError: a source of the data is not in ``mix``, or a ``mix`` source has no document (names
            the key ``shard.mix.<source>`` and the sources found).
    """
    found = sorted(counts)
    for s in sorted(mix):
        if s not in counts:
            raise UserError(f"shard.mix.{s}: no document of source {s!r} in the train set (earlier stages "
                            f"may have removed all of them: drop its entry); "
                            f"allowed source names (found in the data): {found}")
    for s in found:
        if s not in mix:
            raise UserError(f"shard.mix.{s}: source {s!r} has {counts[s][0]} documents but no mix entry; "
                            f"once shard.mix is set every source needs one (e.g. shard.mix.{s}.epochs=1); "
                            f"found: {found}")
    fixed = {s: (m.epochs * counts[s][1] if m.epochs is not None else float(m.target_tokens))
             for s, m in mix.items() if m.weight is None}
    weights = {s: float(m.weight) for s, m in mix.items() if m.weight is not None}
    if fixed:
        total = sum(fixed.values()) / (1.0 - sum(weights.values()))
    else:
        total = min(counts[s][1] / w for s, w in weights.items())
    out = {}
    for s, m in sorted(mix.items()):
        want = weights[s] * total if s in weights else fixed[s]
        # Rounded so that a weighted source that sets the output size gets exactly one pass, not 0.999...
        epochs = round(want / counts[s][1], 12)
        out[s] = SourcePlan(docs=counts[s][0], tokens=counts[s][1], epochs=epochs, asked_share=want / total,
                            min_repeat_distance=m.min_repeat_distance)
    return out


def copies(seed: int, doc_id: str, full_passes: int, pick_cut: int) -> int:
    """Copies of one document in the train set (Python twin of :func:`apply_mix`, for inspection).

    Args:
        seed: ``run.seed``.
        doc_id: the document.
        full_passes: its source's ``floor(E_s)`` (the manifest's ``mix.<source>.full_passes``).
        pick_cut: its source's :attr:`SourcePlan.pick_cut` (``mix.<source>.pick_cut``).
    """
    digest = hashlib.sha256(f"{seed}:mixpick:{doc_id}".encode()).hexdigest()
    return full_passes + (1 if int(digest[:_FRAC_HEX], 16) < pick_cut else 0)


def _pick(seed: int) -> Column:
    """The pick hash of ``doc_id`` as a long < 2^52."""
    digest = F.sha2(F.concat(F.lit(f"{seed}:mixpick:"), F.col("doc_id")), 256)
    return F.conv(F.substring(digest, 1, _FRAC_HEX), 16, 10).cast("long")


def pick_cuts(df: DataFrame, seed: int, plans: dict[str, SourcePlan]) -> dict[str, SourcePlan]:
    """Set each source's :attr:`SourcePlan.pick_cut`: the shortest pick-hash prefix reaching frac(E_s) * T_s.

    Two slim Spark jobs, as in :func:`pipelines.shard.split.plan_split`: token sums per (source, top 16
    bits of the pick hash) to the driver (at most 65,536 rows per source), then the rows of the one bucket
    per source where the amount is reached.

    Args:
        df: the train documents (``doc_id``, ``source``, ``n_tokens``).
        seed: ``run.seed``.
        plans: :func:`plan_mix`.

    Returns:
        ``plans`` with ``pick_cut`` set (0 for a source without a partial pass).
    """
    need = {s: p.fraction * p.tokens for s, p in plans.items() if p.fraction > 0}
    cuts = {s: 0 for s in plans}
    if need:
        low = 4 * _FRAC_HEX - 16
        keyed = df.select(F.coalesce(F.col("source"), F.lit("")).alias("source"), _pick(seed).alias("_pick"),
                          F.col("n_tokens").cast("long").alias("n_tokens")).filter(F.col("source").isin(list(need)))
        keyed = keyed.withColumn("_b", F.shiftright("_pick", low))
        hist: dict[str, list[tuple[int, int]]] = {s: [] for s in need}
        for r in keyed.groupBy("source", "_b").agg(F.sum("n_tokens").alias("t")).collect():
            hist[r["source"]].append((int(r["_b"]), int(r["t"])))
        where: dict[str, tuple[int, float]] = {}
        for s, cells in hist.items():
            done = 0
            for b, t in sorted(cells):
                if done + t >= need[s]:
                    where[s] = (b, need[s] - done)
                    break
                done += t
        cond = None
        for s, (b, _) in where.items():
            one = (F.col("source") == F.lit(s)) & (F.col("_b") == F.lit(b))
            cond = one if cond is None else cond | one
        rows: dict[str, list[tuple[int, int]]] = {s: [] for s in where}
        for r in keyed.filter(cond).collect():
            rows[r["source"]].append((int(r["_pick"]), int(r["n_tokens"])))
        for s, (b, rest) in where.items():
            got = 0
            inner = sorted(rows[s])
            cuts[s] = (b + 1) << low  # the whole bucket, unless a document inside it reaches the amount
            for i, (_, t) in enumerate(inner):
                got += t
                if got >= rest:
                    cuts[s] = inner[i + 1][0] if i + 1 < len(inner) else (b + 1) << low
                    break
    return {s: SourcePlan(p.docs, p.tokens, p.epochs, p.asked_share, p.min_repeat_distance, cuts[s])
            for s, p in plans.items()}


def _fraction(text: Column) -> Column:
    """The first 13 hex digits of ``text`` as a double in [0, 1)."""
    return F.conv(F.substring(text, 1, _FRAC_HEX), 16, 10).cast("long") / F.lit(float(1 << (4 * _FRAC_HEX)))


def _per_source(plans: dict[str, SourcePlan], value) -> Column:
    """A literal per source (a ``when`` chain over the few sources)."""
    col = None
    for s, p in plans.items():
        col = (F.when if col is None else col.when)(F.col("source") == F.lit(s), F.lit(value(p)))
    return col


def apply_mix(df: DataFrame, seed: int, plans: dict[str, SourcePlan]) -> DataFrame:
    """The train copies with their shuffle key.

    Args:
        df: train documents with ``doc_id`` (string, unique), ``source`` (string) and the other columns.
        seed: ``run.seed``.
        plans: :func:`plan_mix`.

    Returns:
        One row per copy: ``df``'s columns plus ``_pass`` (int, 0-based copy number), ``_group`` (int, 0/1)
        and ``_key`` (string, 64 hex digits; stream order = ascending key).
    """
    df = df.withColumn("source", F.coalesce(F.col("source"), F.lit("")))  # as source_counts counts it
    epochs = _per_source(plans, lambda p: float(p.epochs)).cast("double")
    if any(p.pick_cut is None for p in plans.values()):
        raise ValueError("shard mix: call pick_cuts before apply_mix (a source has no pick_cut)")
    full = _per_source(plans, lambda p: p.full_passes)
    cut = _per_source(plans, lambda p: p.pick_cut).cast("long")
    copies = full + F.when(_pick(seed) < cut, 1).otherwise(0)
    out = df.withColumn("_copies", copies).filter(F.col("_copies") > 0).withColumn("_epochs", epochs)
    out = out.withColumn(PASS, F.explode(F.sequence(F.lit(0), F.col("_copies") - 1)))
    h = F.sha2(F.concat(F.lit(f"{seed}:mix:"), F.col(PASS).cast("string"), F.lit(":"), F.col("doc_id")), 256)
    group_hash = F.sha2(F.concat(F.lit(f"{seed}:mixgroup:"), F.col("doc_id")), 256)
    group = (F.conv(F.substring(group_hash, 1, 1), 16, 10).cast("int") >= 8).cast("int")
    out = out.withColumn(GROUP, group).withColumn("_h", h)
    u = _fraction(F.col("_h"))
    v = F.when(F.col("_epochs") > 1.0, (F.col(GROUP) + u) / 2.0).otherwise(u)
    length = F.least(F.lit(1.0), F.col("_epochs") - F.col(PASS))
    t = (F.col(PASS) + length * v) / F.col("_epochs")
    top = (1 << (4 * _FRAC_HEX)) - 1
    pos = F.least(F.floor(t * F.lit(float(1 << (4 * _FRAC_HEX)))).cast("long"), F.lit(top))
    key = F.concat(F.lpad(F.lower(F.hex(pos)), _FRAC_HEX, "0"), F.substring(F.col("_h"), 1, 64 - _FRAC_HEX))
    return out.withColumn("_key", key).drop("_copies", "_h", "_epochs")


def mix_section(plans: dict[str, SourcePlan], rows: list[tuple[str, int, int, int, int]]) -> dict[str, dict]:
    """The manifest's ``mix`` block, and the repeat-distance check.

    Args:
        plans: :func:`plan_mix`.
        rows: :func:`mix_counts` of :func:`apply_mix`'s output.

    Returns:
        ``{source: {...}}`` with ``documents_in`` / ``tokens_in`` (train, before the mix),
        ``documents_selected`` / ``tokens_selected`` (at least one copy), ``documents_repeated`` (two
        copies or more), ``documents_out`` / ``tokens_out`` (copies), ``epochs_asked`` (E_s),
        ``epochs_realised`` (tokens out / in),
        ``share_asked``, ``share_realised`` (of the train tokens), ``min_repeat_distance`` (asked) and
        ``repeat_distance_bound`` (the guaranteed smallest distance, None without repeats).

    Raises:
        UserError: a source's guaranteed distance is below its ``min_repeat_distance`` (names the key).
    """
    cells: dict[str, dict[tuple[int, int], tuple[int, int]]] = {s: {} for s in plans}
    for s, p, g, n, t in rows:
        cells[s][(int(p), int(g))] = (int(n), int(t))
    total = sum(t for c in cells.values() for _, t in c.values()) or 1
    out = {}
    for s, plan in plans.items():
        c = cells[s]
        passes = 1 + max((p for p, _ in c), default=-1)
        docs = [sum(c.get((p, g), (0, 0))[0] for g in (0, 1)) for p in range(passes)]
        tokens_out = sum(t for _, t in c.values())
        bound = None
        if passes > 1:
            group = {(p, g): n for (p, g), (n, _) in c.items()}
            bound = 1 + min(min(group.get((p, 1), 0), group.get((p + 1, 0), 0)) for p in range(passes - 1))
            if bound < (plan.min_repeat_distance or 1):
                raise UserError(
                    f"shard.mix.{s}.min_repeat_distance={plan.min_repeat_distance}: with {plan.docs} "
                    f"documents and epochs {plan.epochs:.6g} the repeat order guarantees only {bound} "
                    f"documents between two copies; allowed: 1..{bound} (or give the source fewer repeats)")
        out[s] = {
            "documents_in": plan.docs, "tokens_in": plan.tokens,
            "documents_selected": docs[0] if docs else 0,
            "tokens_selected": sum(c.get((0, g), (0, 0))[1] for g in (0, 1)),
            "documents_repeated": docs[1] if passes > 1 else 0,
            "documents_out": sum(docs), "tokens_out": tokens_out,
            "epochs_asked": plan.epochs, "epochs_realised": tokens_out / plan.tokens,
            "full_passes": plan.full_passes, "pick_cut": plan.pick_cut,
            "share_asked": plan.asked_share, "share_realised": tokens_out / total,
            "min_repeat_distance": plan.min_repeat_distance, "repeat_distance_bound": bound,
        }
    return out


def mix_counts(copies: DataFrame) -> list[tuple[str, int, int, int, int]]:
    """``(source, pass, group, copies, tokens)`` per cell of :func:`apply_mix`'s output (one Spark job)."""
    agg = copies.groupBy("source", PASS, GROUP).agg(F.count("*").alias("n"), F.sum("n_tokens").alias("t"))
    return [(r["source"], r[PASS], r[GROUP], r["n"], r["t"]) for r in agg.collect()]


def source_counts(df: DataFrame) -> dict[str, tuple[int, int]]:
    """``{source: (documents, tokens)}`` of ``df`` (one slim Spark job; a null source counts as "")."""
    agg = df.groupBy(F.coalesce(F.col("source"), F.lit("")).alias("s")).agg(
        F.count("*").alias("d"), F.sum("n_tokens").alias("t"))
    return {r["s"]: (int(r["d"]), int(r["t"])) for r in agg.collect()}
