"""udfs/formats/latex.py: LaTeX sources to text that the refs stage understands (invented sources)."""

from __future__ import annotations

import gzip

import pyarrow as pa

from udfs.formats import ParseOptions, explode_file
from udfs.formats.latex import latex_to_text
from udfs.refs import find_mentions

PAPER = r"""\documentclass{article}
\usepackage{amsmath}
\newcommand{\R}[1]{\mathbb{R}^{#1}}
\title{Bread rising}
\begin{document}
\maketitle
\section{Intro}\label{sec:intro}
We see Table~\ref{tab:a}, Figure~\ref{fig:a} and Eq.~\eqref{eq:1} as in \cite{smith,lee} and \citep[p.~3]{smith}. % a comment
\begin{equation}E = mc^2 \label{eq:1}\end{equation}
\subsection{More}
Section~\ref{sec:intro} said so; Table~\ref{tab:gone} is not here.
\begin{table}\caption{Rise per hour.}\label{tab:a}
\begin{tabular}{ll} Hour & Height \\ 1 & 2 cm \end{tabular}\end{table}
\begin{figure}\includegraphics[width=3cm]{a.png}\caption{A loaf.}\label{fig:a}\end{figure}
\begin{thebibliography}{9}
\bibitem{smith} A. Smith. Bread. 2001.
\bibitem[Lee(2002)]{lee} B. Lee. Dough. 2002.
\end{thebibliography}
\end{document}
"""


def test_refs_labels_citations_and_bibliography_in_the_forms_refs_knows():
    text, meta = latex_to_text(PAPER)
    assert text.startswith("Bread rising\n\nIntro\n\n\\label{sec:intro}\nWe see Table \\ref{tab:a}, Figure \\ref{fig:a}")
    assert "as in [1, 2] and [1]." in text and "a comment" not in text
    assert "\\begin{equation}E = mc^2 \\label{eq:1}\\end{equation}" in text
    assert "\\label{tab:a}" in text and "\\label{fig:a}" in text and "graphics" not in text
    assert "\n\nReferences\n" in text and "[1] A. Smith. Bread. 2001." in text and "[2] B. Lee. Dough. 2002." in text
    assert "2026" not in text and meta == {}  # no \maketitle date; the bibliography is in the file


def test_the_refs_stage_resolves_every_mention_but_the_missing_table():
    text, _ = latex_to_text(PAPER)
    dangling = [text[m.start:m.end] for m in find_mentions(text) if m.dangling]
    assert dangling == ["Table \\ref{tab:gone}"]


def test_external_bibliography_lists_the_cited_keys():
    text, meta = latex_to_text("As \\cite{knuth84} shows.\n\\bibliographystyle{plain}\n\\bibliography{refs}\n")
    assert text == "As [1] shows.\n\nReferences\n\n[1] knuth84"
    assert meta == {"bibliography": "external"}


def test_tex_file_through_explode_file_and_bad_latex_never_crashes():
    rows = pa.Table.from_batches(list(explode_file("p.tex.gz", gzip.compress(PAPER.encode()), ParseOptions()))).to_pylist()
    assert rows[0]["kind"] == "doc" and rows[0]["text"].startswith("Bread rising")
    odd = r"\begin{document} unbalanced { braces \ref{x and $ math \end{itemize}"
    rows = pa.Table.from_batches(list(explode_file("odd.tex", odd.encode(), ParseOptions()))).to_pylist()
    assert rows[0]["kind"] in ("doc", "quarantine") and rows[-1]["kind"] == "file"
