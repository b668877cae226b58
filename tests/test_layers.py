"""The import layering of lmbridge's provider configuration, read from the source with ``ast``.

The description of a provider (:mod:`lmbridge.entries`, :mod:`lmbridge.config_fields`,
:mod:`lmbridge.formats`) sits below everything that reads it: the sources of entries
(:mod:`lmbridge.sources`), the gateway that builds providers from them, and the loader
(:mod:`lmbridge.config`) that joins the two. In these layers every import counts, also one
inside a function or under ``TYPE_CHECKING``: moving an import into a function hides a cycle
from Python, not from the layering. Across all of lmbridge, module-level imports form no cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

DESCRIPTION = {"lmbridge.entries", "lmbridge.config_fields", "lmbridge.formats"}
"""The description of a provider: fields, trust classes, formats, entries."""
BELOW_DESCRIPTION = {"lmbridge.errors", "lmbridge.network"}
"""What the description itself may use."""


def _modules() -> dict[str, tuple[Path, bool]]:
    out: dict[str, tuple[Path, bool]] = {}
    for path in sorted((SRC / "lmbridge").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        package = parts[-1] == "__init__"
        if package:
            parts = parts[:-1]
        out[".".join(parts)] = (path, package)
    return out


MODULES = _modules()


def _statements(tree: ast.AST, in_functions: bool) -> list[ast.AST]:
    """Every node of ``tree``; without the bodies of functions unless ``in_functions``."""
    out: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        out.append(node)
        for child in ast.iter_child_nodes(node):
            if in_functions or not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                todo.append(child)
    return out


def _imports(name: str, in_functions: bool = True) -> set[str]:
    """Every lmbridge module ``name`` imports: at module level (``TYPE_CHECKING`` blocks too)
    and, with ``in_functions``, inside functions."""
    path, package = MODULES[name]
    found: set[str] = set()
    for node in _statements(ast.parse(path.read_text("utf-8")), in_functions):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if package else name.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            # "from . import formats" imports the module lmbridge.formats
            targets = [
                f"{module}.{a.name}" if f"{module}.{a.name}" in MODULES else module
                for a in node.names
            ]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:  # "lmbridge.x.attr" -> "lmbridge.x"
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


GRAPH = {name: _imports(name) for name in MODULES}
"""Every import, wherever it is."""
MODULE_LEVEL = {name: _imports(name, in_functions=False) for name in MODULES}
"""The imports at module level (``TYPE_CHECKING`` blocks included)."""
CONFIGURATION = DESCRIPTION | BELOW_DESCRIPTION | {"lmbridge.config"}
"""The provider configuration's modules, with the sources and the gateway (by prefix)."""


def _in(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def test_the_scan_sees_the_imports_it_checks() -> None:
    # The scanner itself: a relative import, a package import and "from . import module".
    assert "lmbridge.entries" in GRAPH["lmbridge.config"]
    assert "lmbridge.gateway" in GRAPH["lmbridge.config"]
    assert "lmbridge.formats" in GRAPH["lmbridge.entries"]
    assert "lmbridge.entries" in GRAPH["lmbridge.gateway._provider"]
    assert "lmbridge.sources.settings" in GRAPH["lmbridge.config"]


def test_the_description_of_a_provider_imports_only_what_lies_below_it() -> None:
    for name in DESCRIPTION:
        extra = GRAPH[name] - DESCRIPTION - BELOW_DESCRIPTION
        assert not extra, f"{name} imports {sorted(extra)}"
    for name in BELOW_DESCRIPTION:
        assert not GRAPH[name] - BELOW_DESCRIPTION, (name, GRAPH[name])


def test_sources_only_produce_entries() -> None:
    sources = [n for n in MODULES if _in(n, "lmbridge.sources")]
    assert "lmbridge.sources.settings" in sources
    for name in sources:
        extra = {
            m for m in GRAPH[name] if not _in(m, "lmbridge.sources")
        } - DESCRIPTION - BELOW_DESCRIPTION
        assert not extra, f"{name} imports {sorted(extra)}"


def test_the_gateway_does_not_import_the_loader_or_a_source() -> None:
    for name in (n for n in MODULES if _in(n, "lmbridge.gateway")):
        up = {m for m in GRAPH[name] if m == "lmbridge.config" or _in(m, "lmbridge.sources")}
        assert not up, f"{name} imports {sorted(up)}"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components: each one of more than one module is a cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return cycles


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle_in_the_provider_configuration_even_through_functions() -> None:
    def inside(name: str) -> bool:
        return name in CONFIGURATION or _in(name, "lmbridge.sources") or _in(
            name, "lmbridge.gateway"
        )

    graph = {n: {m for m in GRAPH[n] if inside(m)} for n in MODULES if inside(n)}
    assert _cycles(graph) == []


def test_no_import_cycle_among_lmbridge_modules_at_module_level() -> None:
    # The package itself is left out: its names load lazily (importlib), and every module may
    # read its __version__.
    graph = {
        n: {m for m in deps if m != "lmbridge"} for n, deps in MODULE_LEVEL.items() if n != "lmbridge"
    }
    assert _cycles(graph) == []
