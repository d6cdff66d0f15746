"""LaTeX sources (``.tex``) to text with pylatexenc, keeping what the refs stage needs.

One file is one document. The text keeps, in the forms :mod:`udfs.refs` recognises:

* ``\\ref{key}`` / ``\\eqref{key}`` / ``\\autoref{key}`` / ``\\cref{key}`` as ``\\ref{key}`` (``\\eqref{key}``
  for the equation form): with the keyword before them ("Table \\ref{tab:a}") they are mentions;
* ``\\label{key}`` as ``\\label{key}``: the target that resolves them;
* ``\\cite{a,b}`` (and ``\\citep``, ``\\citet``, ...) as numeric citations ``[1, 2]``, numbered by first
  citation; ``thebibliography`` becomes a ``References`` heading and one ``[n] ...`` line per
  ``\\bibitem`` (the targets of the citations). A ``\\bibliography{file}`` (an external ``.bib``) gives
  the same heading with ``[n] key`` lines for the cited keys, and ``meta["bibliography"] = "external"``;
* section titles as their own paragraphs; math as its LaTeX source (``math_mode="verbatim"``), so
  numbered equations keep their ``\\label``; ``\\includegraphics``, ``\\maketitle`` and comments dropped
  (the title block's date would make the output depend on the day).

Source: pylatexenc 2.x ``LatexNodes2Text`` (https://pylatexenc.readthedocs.io) with its default macro
database extended as above.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any


class _Citations:
    """Numbers of the citation keys of the document being converted (reset per document)."""

    def __init__(self) -> None:
        self.numbers: dict[str, int] = {}
        self.bibitems = 0
        self.external = False

    def number(self, key: str) -> int:
        return self.numbers.setdefault(key.strip(), len(self.numbers) + 1)


_STATE = _Citations()
_CITES = ("cite", "citep", "citet", "citealp", "citealt", "citeauthor", "citeyear", "parencite", "textcite",
          "autocite", "nocite")
_REFS = ("ref", "autoref", "cref", "Cref", "pageref", "vref")
_SECTIONS = ("part", "chapter", "section", "subsection", "subsubsection", "paragraph")


def _arg(n: Any, i: int = -1) -> str:
    args = n.nodeargd.argnlist if n.nodeargd is not None else []
    a = args[i] if args else None
    if a is None:
        return ""
    v = a.latex_verbatim()
    return v[1:-1] if v.startswith("{") and v.endswith("}") else v


def _text_arg(n: Any, l2tobj: Any = None, **_: Any) -> str:
    args = n.nodeargd.argnlist if n.nodeargd is not None else []
    a = args[-1] if args else None
    return l2tobj.nodelist_to_text([a]).strip() if a is not None and l2tobj is not None else _arg(n)


def _cite(n: Any, **_: Any) -> str:
    keys = [k for k in _arg(n).split(",") if k.strip()]
    if n.macroname == "nocite" or not keys:
        return ""
    return "[" + ", ".join(str(_STATE.number(k)) for k in keys) + "]"


def _bibitem(n: Any, **_: Any) -> str:
    _STATE.bibitems += 1
    return f"\n[{_STATE.number(_arg(n))}] "


def _bibliography(n: Any, **_: Any) -> str:
    _STATE.external = True
    return "\n\nReferences\n" + "".join(f"\n[{i}] {k}" for k, i in _STATE.numbers.items()) + "\n\n"


@lru_cache(maxsize=1)
def converter() -> Any:
    """The configured ``LatexNodes2Text`` and walker context (built once per process)."""
    from pylatexenc import latexwalker as lw
    from pylatexenc import macrospec as ms
    from pylatexenc.latex2text import (
        EnvironmentTextSpec,
        LatexNodes2Text,
        MacroTextSpec,
        SpecialsTextSpec,
        get_default_latex_context_db,
    )

    wdb = lw.get_default_latex_context_db()
    wdb.add_context_category(
        "winnow",
        prepend=True,
        macros=[ms.MacroSpec(c, "*[[{") for c in _CITES]
        + [ms.MacroSpec("bibitem", "[{"), ms.MacroSpec("caption", "*[{"), ms.MacroSpec("bibliography", "{"),
           ms.MacroSpec("bibliographystyle", "{"),
           ms.MacroSpec("includegraphics", "*[{"), *(ms.MacroSpec(r, "*{") for r in _REFS)],
        environments=[ms.EnvironmentSpec("thebibliography", "{")],
    )

    def keep(name: str):
        return lambda n, **_: f"\\{name}{{{_arg(n)}}}"

    def heading(n: Any, l2tobj: Any = None, **kw: Any) -> str:
        return f"\n\n{_text_arg(n, l2tobj)}\n\n"

    tdb = get_default_latex_context_db()
    tdb.add_context_category(
        "winnow",
        prepend=True,
        macros=[MacroTextSpec(c, simplify_repl=_cite) for c in _CITES]
        + [MacroTextSpec(r, simplify_repl=keep("ref")) for r in _REFS]
        + [MacroTextSpec("eqref", simplify_repl=keep("eqref")),
           MacroTextSpec("label", simplify_repl=keep("label")),
           MacroTextSpec("bibitem", simplify_repl=_bibitem),
           MacroTextSpec("bibliography", simplify_repl=_bibliography),
           MacroTextSpec("includegraphics", discard=True), MacroTextSpec("maketitle", discard=True),
           MacroTextSpec("bibliographystyle", discard=True),
           MacroTextSpec("title", simplify_repl=heading), MacroTextSpec("caption", simplify_repl=heading)]
        + [MacroTextSpec(s, simplify_repl=heading) for s in _SECTIONS],
        environments=[EnvironmentTextSpec("thebibliography", simplify_repl=_thebibliography)],
        # "Table~\ref" is a tie, not a character of the text: a plain space, as the refs stage expects.
        specials=[SpecialsTextSpec("~", " ")],
    )
    return wdb, LatexNodes2Text(latex_context=tdb, math_mode="verbatim", strict_latex_spaces=True)


def _thebibliography(n: Any, l2tobj: Any = None, **_: Any) -> str:
    return "\n\nReferences\n" + (l2tobj.nodelist_to_text(n.nodelist) if l2tobj is not None else "") + "\n\n"


_BLANKS = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")
_ENTRY = re.compile(r"^\[(\d+)\][ \t]+", re.MULTILINE)


def latex_to_text(source: str) -> tuple[str, dict[str, str]]:
    """``(text, meta)`` of one LaTeX source (see the module docstring); never raises on bad LaTeX
    (pylatexenc's tolerant parsing keeps what it can)."""
    from pylatexenc.latexwalker import LatexWalker

    global _STATE
    _STATE = _Citations()
    wdb, l2t = converter()
    nodes, _, _ = LatexWalker(source, latex_context=wdb, tolerant_parsing=True).get_latex_nodes()
    text = l2t.nodelist_to_text(nodes)
    text = _BLANKS.sub("\n\n", "\n".join(line.rstrip() for line in text.split("\n"))).strip()
    text = _ENTRY.sub(r"[\1] ", text)
    meta = {"bibliography": "external"} if _STATE.external else {}
    return text, meta
