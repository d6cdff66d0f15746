"""Mojibake repair (``ingest.normalize.fix_mojibake``): text that was decoded with the wrong charset
before it reached us (``Ä°stanbul`` for ``İstanbul``, ``ðŸ˜Š`` for an emoji) is re-decoded with ftfy.

Only ftfy's encoding repair runs: every cosmetic "fix" is off, so text that is already right, or
ambiguous, comes back byte-identical (curly quotes, full-width letters, ligatures, HTML entities,
line breaks, C1 controls, Unicode normal form are left to the rest of ingest or as they are). ftfy
itself changes a text only when the repaired form is much less "bad" than the original (its
``badness`` heuristic), which is what keeps ambiguous Latin-1 text such as ``Ã©`` in a French name
list from being touched unless the whole sequence is clearly UTF-8 read as windows-1252.

Source: ftfy (Speer, 2024, https://ftfy.readthedocs.io), ``TextFixerConfig``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any


@lru_cache(maxsize=1)
def config() -> Any:
    """The ftfy configuration: encoding repair only."""
    from ftfy import TextFixerConfig

    return TextFixerConfig(
        unescape_html=False,
        remove_terminal_escapes=False,
        fix_encoding=True,
        restore_byte_a0=False,  # "Ã " -> "à" guesses a lost byte: ambiguous, left as it is
        replace_lossy_sequences=True,
        # Off: it rewrites "Ã " inside otherwise right text ("a lone Ã" -> "a lone à"); a text mixing
        # right and broken accents keeps its broken ones (the conservative side of ambiguous).
        decode_inconsistent_utf8=False,
        fix_c1_controls=False,
        fix_latin_ligatures=False,
        fix_character_width=False,
        uncurl_quotes=False,
        fix_line_breaks=False,
        fix_surrogates=False,
        remove_control_chars=False,
        normalization=None,
        # True: ftfy 6.3's explain=False path also runs the sloppy "Ã " repair that
        # decode_inconsistent_utf8=False turns off (tests/test_ingest_charset.py pins the result).
        explain=True,
    )


def fix(text: str) -> str:
    """``text`` with its mojibake repaired; the same string when there is nothing (sure) to repair."""
    from ftfy import fix_text

    return fix_text(text, config())


def fix_all(texts: list[str]) -> list[int]:
    """Repair ``texts`` in place; returns the indices of the texts that changed.

    The ftfy call is skipped for pure-ASCII texts (they cannot hold mojibake): most of a web corpus.
    """
    changed = []
    for i, t in enumerate(texts):
        if t.isascii():
            continue
        f = fix(t)
        if f != t:
            texts[i] = f
            changed.append(i)
    return changed
