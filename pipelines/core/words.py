"""Counts in words for the lines Winnow prints: ``1 document``, ``2 documents``."""

from __future__ import annotations


def plural(n: int, word: str, many: str | None = None) -> str:
    """``n`` and ``word``, in the plural unless ``n`` is 1, thousands separated.

    Args:
        n: the count.
        word: the singular noun.
        many: the plural when it is not ``word + "s"``.

    >>> plural(1, "document"), plural(2, "shard"), plural(0, "sample"), plural(12000, "token")
    ('1 document', '2 shards', '0 samples', '12,000 tokens')
    """
    return f"{n:,} {word if n == 1 else many or word + 's'}"
