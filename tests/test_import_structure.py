"""The package's layers (docs/architecture.md: dependencies point down only), read from the
source.

Every ``import`` statement of ``fedbandit_env`` is parsed with :mod:`ast`, including imports
inside functions (a lazy import is still a dependency) and ``importlib.import_module("...")``
calls with a literal module name (an import all the same). The engine, the network channels and
the contextual processes must reach no view, data-set module or bench module, the package's
top-level modules must import each other without a circle, and so must its modules (a lazy
import that closes a circle is a circle too).
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "fedbandit_env"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted((ROOT / PACKAGE).rglob("*.py"))}


def imported(module: str) -> set[str]:
    """The package modules ``module`` imports anywhere in its source (``from a import b`` counts
    as importing ``a.b`` when that is a module, else ``a``)."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                out.add(full if full in MODULES else base)
        elif isinstance(node, ast.Call) and _is_import_module(node.func) and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                out.add(first.value)
    return {m for m in out if m in MODULES}


def _is_import_module(func: ast.expr) -> bool:
    """``importlib.import_module`` or a bare ``import_module``."""
    if isinstance(func, ast.Attribute):
        return func.attr == "import_module"
    return isinstance(func, ast.Name) and func.id == "import_module"


GRAPH = nx.DiGraph()
for _name in MODULES:
    GRAPH.add_node(_name)
    GRAPH.add_edges_from((_name, dep) for dep in imported(_name))

VIEWS = ("parallel_env", "vector_env", "rl", "wrappers")
FORBIDDEN_BELOW_ENGINE = (*VIEWS, "datasets", "bench")


def layer(module: str) -> str:
    """The top-level module or subpackage of ``fedbandit_env`` that ``module`` belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def reached(module: str) -> set[str]:
    return nx.descendants(GRAPH, module)


LOW_MODULES = sorted(
    m
    for m in MODULES
    if m in (f"{PACKAGE}.engine", f"{PACKAGE}.linear", f"{PACKAGE}.contextual")
    or layer(m) == "network"
)


def test_the_graph_sees_the_known_edges():
    """The parser is not blind: edges we know exist are found (top-level and lazy imports, and
    ``importlib.import_module`` strings)."""
    assert f"{PACKAGE}.engine" in imported(f"{PACKAGE}.parallel_env")
    assert f"{PACKAGE}.jax" in imported(f"{PACKAGE}.bench.backends")
    assert f"{PACKAGE}.network" in imported(f"{PACKAGE}.engine")
    assert f"{PACKAGE}.datasets.classification" in imported(f"{PACKAGE}.datasets.envs")
    assert f"{PACKAGE}.contextual" in imported(f"{PACKAGE}.engine")
    assert len(LOW_MODULES) >= 8


@pytest.mark.parametrize("module", LOW_MODULES)
def test_engine_network_and_processes_import_no_view_dataset_or_bench(module):
    below = reached(module)
    assert PACKAGE not in below, f"{module} imports the package root, which imports every view"
    bad = sorted(m for m in below if layer(m) in FORBIDDEN_BELOW_ENGINE)
    assert not bad, f"{module} reaches {bad}; the engine layer must not know views, data or bench"


@pytest.mark.parametrize(
    "module", [f"{PACKAGE}.datasets.classification", f"{PACKAGE}.datasets.diabetes"]
)
def test_dataset_processes_import_no_view(module):
    bad = sorted(m for m in reached(module) if layer(m) in (*VIEWS, "bench") or m == PACKAGE)
    assert not bad, f"{module} reaches {bad}"


def test_no_circular_import_among_top_level_modules():
    top = nx.DiGraph()
    for a, b in GRAPH.edges:
        if layer(a) and layer(b) and layer(a) != layer(b):
            top.add_edge(layer(a), layer(b))
    cycles = list(nx.simple_cycles(top))
    assert not cycles, f"import circles among fedbandit_env modules: {cycles[:5]}"


def test_figures_and_the_html_page_import_no_circle():
    """The page imports the figures, never the other way round; both take their matplotlib
    helpers from bench.plotting."""
    figures, html = f"{PACKAGE}.bench.figures", f"{PACKAGE}.bench.html"
    assert figures in imported(html) and html not in reached(figures)
    assert f"{PACKAGE}.bench.plotting" in imported(figures) & imported(html)


def _cycles_between_modules() -> list[list[str]]:
    """Circles among the package's modules, a package's ``__init__`` excepted: it imports its
    own submodules to re-export them, and a submodule importing a sibling through the package
    name is not a circle of code."""
    graph = nx.DiGraph()
    for a, b in GRAPH.edges:
        if MODULES[a].name == "__init__.py" or MODULES[b].name == "__init__.py":
            continue
        graph.add_edge(a, b)
    return list(nx.simple_cycles(graph))


def test_no_circular_import_among_modules():
    """No circle between any two modules, lazy imports included: the JAX rollout and the bench's
    evaluate share ``fedbandit_env.checkpoints``; the leaderboard and the robust matrices share
    ``fedbandit_env.bench.text``."""
    cycles = _cycles_between_modules()
    assert not cycles, f"import circles among fedbandit_env modules: {cycles[:5]}"
