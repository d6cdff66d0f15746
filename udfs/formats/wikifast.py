"""A fast reader of the common wikitext constructs, for :mod:`udfs.formats.mediawiki`.

mwparserfromhell builds a node tree of every page (about 2 MB/s per core for the parse alone); most
article wikitext is prose with templates, links, references, formatting, headings, lists and tables
that are dropped. This reader scans such a page once with regular expressions and bracket matching
and writes the same text as the tree walk of :func:`udfs.formats.mediawiki.mw_render` (the template
decisions are shared: :class:`udfs.formats.mediawiki._Page`). A page holding anything it does not
read exactly as mwparserfromhell does returns ``None`` and is read by mwparserfromhell instead:
template arguments (``{{{1}}}``), tables when they are kept or inside templates, unknown or unclosed
HTML-like tags, unclosed comments, brackets or braces that do not match, headings that do not close,
definition lines holding ``:``, links whose target holds markup, external links whose label holds
links or templates. Bold and italic apostrophes are removed before either reader sees the page
(:func:`strip_quotes`).

Source: MediaWiki markup spec (https://www.mediawiki.org/wiki/Markup_spec); mwparserfromhell 0.7's
tokenizer (``mwparserfromhell/parser/tokenizer.py``) for what counts as a tag, a link, a heading.
"""

from __future__ import annotations

import re
from html.entities import name2codepoint
from typing import Any

from udfs.formats.wikitemplates import HOLE

_LITERAL_TAGS = {
    "nowiki",
    "pre",
    "math",
    "source",
    "syntaxhighlight",
    "chem",
    "ce",
    "hiero",
    "score",
    "timeline",
    "graph",
    "gallery",
    "templatedata",
    "imagemap",
    "inputbox",
    "categorytree",
    "section",
}
_HOLE_TAGS = {"math", "chem", "ce", "hiero", "score", "graph"}
_SHOWN_LITERAL = {"nowiki", "pre", "source", "syntaxhighlight"}
_CONTAINER_TAGS = {
    "ref",
    "references",
    "small",
    "big",
    "sup",
    "sub",
    "span",
    "div",
    "center",
    "blockquote",
    "poem",
    "u",
    "s",
    "del",
    "ins",
    "i",
    "b",
    "abbr",
    "cite",
    "code",
    "tt",
    "var",
    "em",
    "strong",
    "font",
    "onlyinclude",
    "includeonly",
    "noinclude",
    "p",
    "q",
    "kbd",
    "samp",
    "strike",
    "mark",
    "bdi",
    "dfn",
}
_SINGLE_TAGS = {"br", "hr", "wbr"}
_SCHEMES = (
    "http://",
    "https://",
    "ftp://",
    "ftps://",
    "//",
    "mailto:",
    "irc://",
    "news:",
    "sftp://",
    "git://",
    "svn://",
    "telnet://",
    "ssh://",
    "gopher://",
    "nntp://",
    "mms://",
    "ircs://",
)

_SPECIAL = re.compile(r"\{\{|\[\[|\[|<|&|\n")
_BRACKETS = re.compile(r"\{\{|\}\}|\[\[|\]\]|\||<!--|<(?=[a-zA-Z/])")
_NESTED = re.compile(r"\[\[.*?\]\]|\{\{.*?\}\}|<[^>]*>|[a-z]+://[^\s\]]*")
_LABEL_SCAN = re.compile(r"\]|\[\[|\{\{|\n")
_EQ_SCAN = re.compile(r"\{\{|\}\}|\[\[|\]\]|=|<!--|<(?=[a-zA-Z/])")
_TAG = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9]*)(\s[^<>]*?)?\s*(/?)>")
_ENTITY = re.compile(r"&(?:#(\d{1,7})|#[xX]([0-9a-fA-F]{1,6})|([a-zA-Z][a-zA-Z0-9]{1,31}));")
_HEADING = re.compile(r"(={1,6})([^\n]+?)\1[ \t]*(?=\n|$|<!--)")
_LIST = re.compile(r"[*#:;]+")
_HR = re.compile(r"-{4,}")
_TABLE_LINE = re.compile(r"^[ \t]*(\{\||\|\})", re.M)
_EXT = re.compile(r"\[(?:" + "|".join(re.escape(s) for s in _SCHEMES) + r")[^\s\[\]<>\"]+", re.I)


class _Fallback(Exception):
    """The page holds a construct this reader does not read as mwparserfromhell does."""


_RUNS = re.compile(r"('{2,})")
_PROTECTED = re.compile(
    r"(<!--.*?-->|<(nowiki|pre|math|source|syntaxhighlight|chem|ce|score|timeline)\b[^>]*>.*?</\2\s*>)",
    re.S | re.I,
)


def _line_quotes(line: str) -> str:
    """One line without its bold and italic apostrophes, literal apostrophes kept (MediaWiki's
    ``Parser::doQuotes``: four apostrophes are one literal and a bold, more than five are literals and a
    bold italic; when italics and bolds are both odd in number, one bold is an apostrophe and an italic)."""
    parts = _RUNS.split(line)
    italics = bolds = 0
    for i in range(1, len(parts), 2):
        n = len(parts[i])
        if n == 4:
            parts[i - 1] += "'"
            parts[i], n = "'" * 3, 3
        elif n > 5:
            parts[i - 1] += "'" * (n - 5)
            parts[i], n = "'" * 5, 5
        italics += n in (2, 5)
        bolds += n in (3, 5)
    if italics % 2 and bolds % 2:
        single = multi = space = -1
        for i in range(1, len(parts), 2):
            if len(parts[i]) != 3:
                continue
            x1, x2 = parts[i - 1][-1:], parts[i - 1][-2:-1]
            if x1 == " ":
                space = i if space < 0 else space
            elif x2 == " ":
                single = i
                break
            elif multi < 0:
                multi = i
        pick = single if single > -1 else multi if multi > -1 else space
        if pick > -1:
            parts[pick - 1] += "'"
    return "".join(parts[0::2])


def strip_quotes(source: str) -> str:
    """The wikitext without bold and italic markup (apostrophes that are text kept), line by line as
    MediaWiki reads them; comments and the contents of ``nowiki``, ``pre``, ``math``, ``source``,
    ``syntaxhighlight`` and similar tags are left as written.

    Args:
        source: wikitext.

    Returns:
        The wikitext, each other construct unchanged.

    >>> strip_quotes("The ''Star'''s and '''bold''' text")
    "The Star's and bold text"
    """
    if "''" not in source:
        return source
    pieces = _PROTECTED.split(source)
    out = []
    for k in range(0, len(pieces), 3):
        text = pieces[k]
        if "''" in text:
            text = "\n".join(_line_quotes(x) if "''" in x else x for x in text.split("\n"))
        out.append(text)
        if k + 1 < len(pieces):
            out.append(pieces[k + 1])
    return "".join(out)


def _entity(m: re.Match) -> str:
    dec, hexa, name = m.groups()
    try:
        if name is not None:
            return chr(name2codepoint[name]) if name in name2codepoint else m.group()
        cp = int(dec) if dec is not None else int(hexa, 16)
        return chr(cp) if 0 < cp <= 0x10FFFF else m.group()
    except (ValueError, KeyError):
        return m.group()


class _Reader:
    def __init__(self, src: str, page: Any) -> None:
        self.src, self.page = src, page
        self.keep_tables = page.opts.mediawiki_tables == "keep"

    # ---------------------------------------------------------------------------- matching
    def _skip_tag(self, i: int) -> int:
        """End of the tag (and its contents for literal and container tags) starting at ``i``."""
        src = self.src
        if src.startswith("<!--", i):
            j = src.find("-->", i + 4)
            if j < 0:
                raise _Fallback
            return j + 3
        m = _TAG.match(src, i)
        if not m:
            return i + 1
        close, name, _, selfc = m.groups()
        name = name.lower()
        if close or selfc or name in _SINGLE_TAGS:
            return m.end()
        if name in _LITERAL_TAGS or name in _CONTAINER_TAGS:
            return self._close(name, m.end())[1]
        raise _Fallback

    def _close(self, name: str, start: int) -> tuple[int, int]:
        """``(start of the closing tag, its end)`` of tag ``name`` opened before ``start``."""
        pat = re.compile(rf"<(/?){name}(?:\s[^<>]*?)?\s*(/?)>", re.I)
        depth, pos = 1, start
        literal = name in _LITERAL_TAGS or name == "ref"
        while True:
            m = pat.search(self.src, pos)
            if not m:
                raise _Fallback
            if m.group(1):
                depth -= 1
                if depth == 0:
                    return m.start(), m.end()
            elif not m.group(2):
                if literal:
                    raise _Fallback
                depth += 1
            pos = m.end()

    def _match(self, i: int, close: str) -> tuple[int, list[int]]:
        """For ``{{`` or ``[[`` at ``i``: the index of its closing ``close`` and the pipes at its level."""
        src, stack, pipes, pos = self.src, [close], [], i + 2
        while True:
            m = _BRACKETS.search(src, pos)
            if not m:
                raise _Fallback
            t = m.group()
            if t == "{{":
                stack.append("}}")
            elif t == "[[":
                stack.append("]]")
            elif t in ("}}", "]]"):
                if stack[-1] != t:
                    if len(stack) > 1 or t == "}}":
                        raise _Fallback
                    pos = m.end()  # a stray "]]" inside a template: text
                    continue
                stack.pop()
                if not stack:
                    return m.start(), pipes
            elif t == "|":
                if len(stack) == 1:
                    pipes.append(m.start())
            else:
                pos = self._skip_tag(m.start())
                continue
            pos = m.end()

    # ---------------------------------------------------------------------------- rendering
    def text(self, s: str) -> str:
        if "&" in s:
            s = _ENTITY.sub(_entity, s)
        return s

    def render(self, a: int, b: int) -> str:
        src, out, pos = self.src, [], a
        if a == 0 or src[a - 1] == "\n":
            pos = self.line_start(a, b, out)
        while pos < b:
            m = _SPECIAL.search(src, pos, b)
            if not m:
                out.append(self.text(src[pos:b]))
                break
            out.append(self.text(src[pos : m.start()]))
            t, i = m.group(), m.start()
            if t == "\n":
                out.append("\n")
                pos = self.line_start(i + 1, b, out)
            elif t == "{{":
                pos = self.template(i, b, out)
            elif t == "[[":
                pos = self.link(i, b, out)
            elif t == "[":
                pos = self.ext_link(i, b, out)
            elif t == "<":
                pos = self.tag(i, b, out)
            else:  # "&" not starting an entity is text
                e = _ENTITY.match(src, i)
                out.append(_entity(e) if e else "&")
                pos = e.end() if e else i + 1
        return "".join(out)

    def line_start(self, i: int, b: int, out: list[str]) -> int:
        src = self.src
        if i >= b:
            return i
        c = src[i]
        if c == "=":
            m = _HEADING.match(src, i, b)
            if not m or "=" in (m.group(2)[:1] + m.group(2)[-1:]):
                raise _Fallback
            out.append(f"\n\n{self.render(m.start(2), m.end(2)).strip()}\n\n")
            return m.end()
        if c in "*#:;":
            m = _LIST.match(src, i, b)
            if ";" in m.group():
                end = src.find("\n", i)
                if ":" in _NESTED.sub("", src[m.end() : (end if end >= 0 else len(src))]):
                    raise _Fallback
            return m.end()
        if c == "-" and (m := _HR.match(src, i, b)):
            return m.end()
        if c in "{ \t" and (t := _TABLE_LINE.match(src, i)) and t.start(1) < b and t.group(1) == "{|":
            return self.table(t.start(1), b, out)
        return i

    def table(self, i: int, b: int, out: list[str]) -> int:
        if self.keep_tables:
            raise _Fallback
        depth = 0
        for m in _TABLE_LINE.finditer(self.src, i):
            if m.start(1) >= b:
                break
            depth += 1 if m.group(1) == "{|" else -1
            if depth == 0:
                self.page.dropped.add("table")
                out.append("\n\n")
                return m.end(1)
        raise _Fallback

    def template(self, i: int, b: int, out: list[str]) -> int:
        end, pipes = self._match(i, "}}")
        if end + 2 > b:
            raise _Fallback
        src = self.src
        bounds = [i + 2, *pipes, end]
        name = _strip_comments(src[bounds[0] : bounds[1]]).strip()
        if not name or any(c in name for c in "{}[]<>\n") or "{|" in src[i:end]:
            raise _Fallback
        raw: dict[str, Any] = {}
        n = 0
        for a, z in zip(bounds[1:-1], bounds[2:], strict=True):
            a += 1
            eq = self._top_level_eq(a, z)
            if eq is None:
                n += 1
                raw[str(n)] = (a, z)
            else:
                raw[src[a:eq].strip()] = (eq + 1, z)
        out.append(self.page.template(name, raw, lambda r: self.render(*r)))
        return end + 2

    def _top_level_eq(self, a: int, z: int) -> int | None:
        """The first ``=`` of a parameter outside nested templates, links and tags (a named parameter)."""
        src, depth, pos = self.src, 0, a
        while (m := _EQ_SCAN.search(src, pos, z)) is not None:
            t = m.group()
            if t == "=":
                if depth == 0:
                    return m.start()
            elif t in ("{{", "[["):
                depth += 1
            elif t in ("}}", "]]"):
                depth -= 1
            else:
                pos = self._skip_tag(m.start())
                continue
            pos = m.end()
        return None

    def link(self, i: int, b: int, out: list[str]) -> int:
        end, pipes = self._match(i, "]]")
        if end + 2 > b:
            raise _Fallback
        src = self.src
        title = src[i + 2 : pipes[0] if pipes else end]
        if any(c in title for c in "{}<>[]\n"):
            raise _Fallback
        if self.page.link_dropped(title):
            return end + 2
        if not pipes:
            out.append(self.text(title).lstrip(":"))
        else:
            out.append(self.render(pipes[0] + 1, end))
        return end + 2

    def ext_link(self, i: int, b: int, out: list[str]) -> int:
        src = self.src
        m = _EXT.match(src, i, b)
        if not m:
            out.append("[")
            return i + 1
        k = m.end()
        if k < b and src[k] == "]":
            return k + 1
        if k >= b or src[k] not in " \t":
            raise _Fallback
        start = pos = k + 1  # the label is what follows the first space
        while True:
            t = _LABEL_SCAN.search(src, pos, b)
            if t is None or t.group() == "\n":  # no closing bracket on the line: "[" and a bare URL
                out.append("[")
                return i + 1
            if t.group() == "]":
                out.append(self.render(start, t.start()))
                return t.end()
            end, _ = self._match(t.start(), "]]" if t.group() == "[[" else "}}")
            pos = end + 2

    def tag(self, i: int, b: int, out: list[str]) -> int:
        src = self.src
        if src.startswith("<!--", i):
            j = src.find("-->", i + 4)
            if j < 0 or j + 3 > b:
                raise _Fallback
            return j + 3
        m = _TAG.match(src, i, b)
        if not m:
            if i + 1 < b and (src[i + 1].isalpha() or src[i + 1] == "/"):
                raise _Fallback
            out.append("<")
            return i + 1
        close, name, _, selfc = m.groups()
        name = name.lower()
        if close and name in _CONTAINER_TAGS:  # a closing tag with no opening one: text
            out.append(m.group())
            return m.end()
        if close:
            raise _Fallback
        if name in _SINGLE_TAGS:
            out.append("\n" if name == "br" else "")
            return m.end()
        if name not in _LITERAL_TAGS and name not in _CONTAINER_TAGS:
            raise _Fallback
        if selfc:
            if name == "ref":
                out.append(self.page.reference(""))
            return m.end()
        return self.element(name, m, b, out)

    def element(self, name: str, m: re.Match, b: int, out: list[str]) -> int:
        """A tag with contents: footnote, hole, literal text, nothing, or its rendered contents."""
        src = self.src
        try:
            c0, c1 = self._close(name, m.end())
        except _Fallback:
            if name in _LITERAL_TAGS or name == "ref":
                raise
            out.append(m.group())  # an opening tag never closed: text
            return m.end()
        if c1 > b:
            raise _Fallback
        if name == "ref":
            if not _well_formed(src[m.end() : c0]):
                raise _Fallback
            out.append(self.page.reference(self.render(m.end(), c0) if self.page.keep_refs else ""))
        elif name in _HOLE_TAGS:
            out.append(HOLE)
        elif name in _SHOWN_LITERAL:
            out.append(self.text(src[m.end() : c0]))
        elif name in _LITERAL_TAGS or name == "references":
            pass
        else:
            out.append(self.render(m.end(), c0))
        return c1


_COMMENTS = re.compile(r"<!--.*?(?:-->|$)", re.S)
_CLOSING = re.compile(r"</([a-zA-Z][a-zA-Z0-9]*)\s*>")


def _well_formed(s: str) -> bool:
    """Whether a footnote's contents close every comment and open every tag they close (else
    mwparserfromhell may not read the ``<ref>`` as a tag at all)."""
    if s.count("<!--") != s.count("-->"):
        return False
    return all(re.search(rf"<{m.group(1)}[\s/>]", s[: m.start()], re.I) for m in _CLOSING.finditer(s))


def _strip_comments(s: str) -> str:
    return _COMMENTS.sub("", s) if "<!--" in s else s


def fast_render(source: str, page: Any) -> str | None:
    """The page's text before :func:`udfs.formats.mediawiki.finish`, or ``None`` when the page holds a
    construct this reader leaves to mwparserfromhell (see the module docstring).

    Args:
        source: the wikitext.
        page: the page's rendering state (:class:`udfs.formats.mediawiki._Page`); on ``None`` its
            counts are left as they were.

    Returns:
        The raw text, holes of dropped templates marked with :data:`HOLE`.
    """
    if "{{{" in source:
        return None
    saved = (set(page.dropped), page.rendered, page.dropped_templates, page.invalid_dates)
    try:
        return _Reader(source, page).render(0, len(source))
    except Exception:  # _Fallback, deep nesting, or a reader bug: mwparserfromhell reads the page
        page.dropped, page.rendered, page.dropped_templates, page.invalid_dates = saved
        return None
