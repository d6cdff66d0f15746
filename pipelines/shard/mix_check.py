"""``shard.mix`` names sources: check them against the data as early as the data allows.

A document's source is its record's ``ingest.fields.source`` field when the format has fields (JSONL,
JSON, CSV/TSV, Parquet) and the field is set, else its file name's stem (``web_en-00000.jsonl.gz`` ->
``web_en-00000``; :func:`udfs.formats.records.split_name`). So:

1. **Before Spark** (:func:`check_file_sources`, from :func:`pipelines.core.preflight.check`): when no input
   file can carry a source field, every possible source is a local file's stem; a ``shard.mix`` key that
   is none of them fails the run (exit 2) before anything runs.
2. **Right after ingest** (:func:`check_ingested_sources`, called by ``jobs/pipeline.py`` and
   ``jobs/ingest.py``): ingest records its documents per source (``extra.documents_by_source``, from the
   one aggregation it runs anyway); a key with no document fails the run (exit 2) before dedup starts.
   A source with documents and no entry is a warning only: the shard stage refuses it unless every one
   of its documents is removed on the way, which only the later stages know.
3. **At the shard stage** (:func:`pipelines.shard.mix.plan_mix`): the train set's own counts, as before.

Only a run that will reach the shard stage (``shard`` in ``pipeline.stages``) is checked.
"""

from __future__ import annotations

import glob as globlib
from collections.abc import Iterable, Mapping
from typing import Any

from pipelines.core.config import WinnowConfig
from pipelines.ingest.config import IngestConfig
from udfs.errors import UserError

FIELD_FORMATS = frozenset({"jsonl", "json", "csv", "tsv", "parquet"})
"""Formats whose records may name their source (:func:`udfs.formats.jsonl.from_mapping`); the others
(text, WARC/WET, JATS, LaTeX, MediaWiki) always take the file name's stem."""


class MixSourceError(UserError, ValueError):
    """A ``shard.mix`` key names no source of the data; the message names ``shard.mix.<source>``."""


def _unknown(mix: Iterable[str], found: Iterable[str], whence: str) -> None:
    found = sorted(set(found))
    missing = sorted(set(mix) - set(found))
    if missing:
        keys = ", ".join(f"shard.mix.{s}" for s in missing)
        raise MixSourceError(f"{keys}: no such source {whence}; sources found: {found} (a source is the "
                             "record's ingest.fields.source field, else the input file name's stem)")


def file_sources(icfg: IngestConfig) -> set[str] | None:
    """The stems of the local input files when they are every source the data can have, else None.

    None when a glob is not local (or uses ``{a,b}``, which Python's glob does not know) or when some
    file's format can carry a source field and ``ingest.fields.source`` is set.
    """
    from pipelines.core.local_state import input_files
    from pipelines.core.preflight import local_path
    from udfs.formats.records import file_format, split_name

    if icfg.fields.source is not None and icfg.format in FIELD_FORMATS:
        return None
    paths = [local_path(g) for g in icfg.inputs]
    if any(p is None or "{" in p for p in paths) or not all(globlib.glob(p) for p in paths):
        return None
    stems = set()
    for path, _, _ in input_files(paths):
        fmt, _ = file_format(path, icfg.format)
        if fmt in FIELD_FORMATS and icfg.fields.source is not None:
            return None
        if fmt is not None:  # a file of no known format is quarantined whole: no document, no source
            stems.add(split_name(path)[0])
    return stems


def check_file_sources(cfg: WinnowConfig) -> None:
    """Before Spark: every ``shard.mix`` key is a stem of an input file, when file names decide sources.

    Raises:
        MixSourceError: names each unknown ``shard.mix.<source>`` and the stems found.
    """
    if not cfg.shard.mix:
        return
    stems = file_sources(cfg.ingest)
    if stems is not None:
        _unknown(cfg.shard.mix, stems, "among the input files (their names are the sources: no input "
                                       "format here has a source field, or ingest.fields.source is null)")


def check_ingested_sources(mix: Mapping[str, Any], extra: Mapping[str, Any]) -> list[str]:
    """Right after ingest: every ``shard.mix`` key has documents, from ingest's recorded counts.

    Args:
        mix: ``shard.mix``.
        extra: ingest's ``extra`` (the stage report's, or its completion record's, parsed).

    Returns:
        Warning lines for sources with documents but no mix entry (the shard stage will refuse them
        unless their documents are all removed first); [] without a mix or without the counts (a
        record written before ingest counted per source).

    Raises:
        MixSourceError: a key with no document, naming ``shard.mix.<source>`` and the sources found.
    """
    counts = extra.get("documents_by_source")
    if not mix or counts is None:
        return []
    if not extra.get("documents_by_source_omitted"):  # all sources listed: an absent one has no document
        _unknown(mix, counts, "among the documents ingest wrote")
    return [f"winnow: warning: shard.mix.{s}: source {s!r} has {n} documents after ingest but no mix entry; "
            f"the shard stage will refuse it if any of them are left after filtering "
            f"(e.g. --set shard.mix.{s}.epochs=1)"
            for s, n in sorted(counts.items()) if s not in mix]
