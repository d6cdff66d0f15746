"""The import layers, read from the source with ``ast`` (nothing is imported).

* ``pipelines/core/`` imports no stage package (nor ``pipelines.tools``): the framework finds a stage
  through the chain declaration, by name, at run time.
* nothing under ``pipelines/`` or ``udfs/`` imports ``jobs``;
* ``udfs/`` imports neither ``pyspark`` nor ``pipelines``;
* a stage package imports only ``pipelines.core``, ``udfs`` and itself, except the pairs in
  :data:`ALLOWED_CROSS_STAGE`;
* no import cycles among the modules of ``pipelines/``, ``udfs/`` and ``jobs/``, counting imports at
  module level (an import inside a function runs when called, after every module is loaded).

Imports under ``if TYPE_CHECKING:`` are annotations only and are left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("pipelines", "udfs", "jobs")

ALLOWED_CROSS_STAGE: dict[tuple[str, str], str] = {
    ("report", "filter"): "the report's filter section reads the filter's rule table and breakdown",
    ("report", "decontam"): "the report's contamination section",
    ("shard", "ingest"): "shard.mix is checked against the sources ingest reads (ingest's config section)",
    ("tokenize", "audit"): "the tokenize stage fills the tokenizer audit as it encodes, through the audit's "
                           "public begin/end (pipelines.audit.inline), so the corpus is read once",
}
"""``(importer, imported)`` stage packages allowed to import each other, and why."""


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.Module, module: str, is_package: bool) -> list[tuple[str, bool]]:
    """``(imported module, at module level)`` for every import of ``tree``, relative ones resolved."""
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.orelse:
                    visit(sub, top)
                continue
            if isinstance(child, ast.Import):
                found.extend((a.name, top) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parent = module.split(".")
                    parent = parent if is_package else parent[:-1]
                    parent = parent[: len(parent) - (child.level - 1)]
                    base = ".".join([*parent, base] if base else parent)
                found.append((base, top))
                found.extend((f"{base}.{a.name}", top) for a in child.names)
            inner_top = top and not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            visit(child, inner_top)

    visit(tree, True)
    return found


def _graph() -> dict[str, list[tuple[str, bool]]]:
    modules = {}
    for pkg in PACKAGES:
        for path in sorted((REPO / pkg).rglob("*.py")):
            name = _module_name(path)
            modules[name] = _imports(ast.parse(path.read_text(encoding="utf-8")), name, path.name == "__init__.py")
    known = set(modules)
    return {m: [(i, top) for i, top in imps if i in known] for m, imps in modules.items()}


GRAPH = _graph()


def _stage_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] == "pipelines" and len(parts) > 1 and parts[1] not in ("core", "tools"):
        return parts[1]
    return None


def _violations(rule) -> list[str]:
    return sorted({f"{m} imports {i}" for m, imps in GRAPH.items() for i, _ in imps if rule(m, i)})


def test_core_imports_no_stage_and_no_tool():
    assert not _violations(lambda m, i: m.startswith("pipelines.core")
                           and (_stage_of(i) is not None or i.startswith("pipelines.tools")))


def test_nothing_below_jobs_imports_jobs():
    assert not _violations(lambda m, i: not m.startswith("jobs") and i.split(".")[0] == "jobs")


def test_udfs_import_no_spark_and_no_pipelines():
    import_names = {m: [i for i, _ in imps] for m, imps in _graph().items()}
    assert not [m for m, imps in import_names.items() if m.startswith("udfs") and any(
        i.split(".")[0] == "pipelines" for i in imps)]
    spark = []
    for path in sorted((REPO / "udfs").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name, _ in _imports(tree, _module_name(path), path.name == "__init__.py"):
            if name.split(".")[0] == "pyspark":
                spark.append(f"{_module_name(path)} imports {name}")
    assert not spark


def test_a_stage_imports_only_core_udfs_and_itself():
    def crosses(m: str, i: str) -> bool:
        a, b = _stage_of(m), _stage_of(i)
        return a is not None and b is not None and a != b and (a, b) not in ALLOWED_CROSS_STAGE

    assert not _violations(crosses)


@pytest.mark.parametrize("pair", sorted(ALLOWED_CROSS_STAGE))
def test_each_allowed_exception_is_still_needed(pair):
    assert any(_stage_of(m) == pair[0] and _stage_of(i) == pair[1] for m, imps in GRAPH.items() for i, _ in imps)


def test_no_import_cycles_at_module_level():
    edges = {m: sorted({i for i, _ in imps if i != m}) for m, imps in GRAPH.items()}
    # a package's __init__ is imported with each of its modules: not a cycle of the code
    edges = {m: [i for i in targets if not m.startswith(i + ".")] for m, targets in edges.items()}
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def walk(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in edges.get(node, []):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                walk(nxt, stack)
        stack.pop()
        state[node] = 2

    for m in sorted(edges):
        if m not in state:
            walk(m, [])
    assert not cycles
