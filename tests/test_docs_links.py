"""The README and ``docs/`` stay true to the repository: every relative link resolves, every config key is named.

No Spark, no imports of Winnow: the checks read Markdown and ``conf/default.yaml`` as text.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])

PENDING: set[str] = set()
"""Pages that the README already lists and that their stage's package brings with it. A link to one of
them may dangle while the page is missing; once the page exists it is checked like any other, and
``test_pending_pages_are_still_missing`` asks for its removal from this set."""

DATA_MAPPINGS = {("refs", "vocab")}
"""Block mappings whose keys are data, not settings (one block per language): each entry must be named,
its keys are those of the first entry (``refs.vocab.en``), documented once."""

_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*$", text, re.M)}


def _links(page: Path) -> list[str]:
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)
    return [t for t in _LINK.findall(text) if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


def _documented_text() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in PAGES)


def _block_keys(node: yaml.Node, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Dotted key paths of the block mappings of a composed YAML document (flow mappings are values)."""
    if not isinstance(node, yaml.MappingNode) or (path and node.flow_style):
        return []
    keys: list[tuple[str, ...]] = []
    for i, (key, value) in enumerate(node.value):
        here = (*path, key.value)
        keys.append(here)
        if path in DATA_MAPPINGS and i > 0:
            continue
        keys += _block_keys(value, here)
    return keys


def test_pages_exist() -> None:
    assert (ROOT / "docs").is_dir() and len(PAGES) > 1


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in _links(page):
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        rel = dest.relative_to(ROOT).as_posix() if dest.is_relative_to(ROOT) else str(dest)
        if not dest.exists():
            if rel not in PENDING:
                broken.append(f"{target}: no file {rel}")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {rel}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_pending_pages_are_still_missing() -> None:
    landed = sorted(p for p in PENDING if (ROOT / p).exists())
    assert not landed, f"{landed} exist now: remove them from PENDING in tests/test_docs_links.py"


def test_every_config_key_is_documented() -> None:
    node = yaml.compose((ROOT / "conf" / "default.yaml").read_text(encoding="utf-8"))
    text = _documented_text()
    # a section is named as `name:` (its page says where it lives), a key by its dotted path
    names = [f"`{k[0]}:`" if len(k) == 1 else f"`{'.'.join(k)}`" for k in _block_keys(node)]
    missing = [n for n in names if n not in text]
    assert not missing, f"keys of conf/default.yaml named nowhere in README.md or docs/: {missing}"


def test_slug() -> None:
    assert _slug("Benchmarks (`make bench`)") == "benchmarks-make-bench"
    assert _slug("What `make run` gives you") == "what-make-run-gives-you"
