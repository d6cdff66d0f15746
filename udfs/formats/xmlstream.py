"""Streaming XML for the JATS and MediaWiki readers: safe ``iterparse`` settings, local tag names, and
releasing elements once read, so a bulk file is never held whole."""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any


def iterparse(f: IO[bytes], tag: tuple[str, ...] | None = None) -> Iterator[Any]:
    """Elements of ``f`` at their end tags (all, or those named by ``tag``), parsed without network access,
    DTD loading or external entity expansion (XXE), and without lxml's size limits (``huge_tree``: a
    MediaWiki dump's text is large).

    Raises:
        lxml.etree.XMLSyntaxError: the XML is malformed (after the elements before the error were yielded).
    """
    from lxml import etree

    kw = {"tag": tag} if tag else {}
    for _, el in etree.iterparse(f, events=("end",), recover=False, resolve_entities=False, no_network=True,
                                 load_dtd=False, huge_tree=True, **kw):
        yield el


def local_name(el: Any) -> str:
    """An element's tag without its namespace; ``""`` for comments and processing instructions."""
    tag = el.tag
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def free(el: Any) -> None:
    """Release an ``iterparse`` element that was read, and the siblings before it, so a streamed
    file holds one element at a time (lxml keeps the tree it built otherwise)."""
    el.clear(keep_tail=False)
    parent = el.getparent()
    if parent is not None:
        while el.getprevious() is not None:
            del parent[0]
