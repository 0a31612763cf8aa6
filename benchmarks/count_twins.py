"""How much of the algorithms exists twice: the counts behind issue "One source for the math"
(docs/architecture.md, "Shared kernels").

Reads the source as text (nothing is imported or run) and prints, for the tree it is given
(``--root``, default this checkout), one table:

* **JAX functions**: every ``def`` (module-level, nested or a method) under
  ``fedbandit_env/jax``, ``agents/jax`` and ``baselines/jax``;
* **same name**: those for which a numpy module (any other package module) defines a function
  of the same name;
* **repeats a numpy function**: of those, the ones whose body repeats one of the numpy
  functions of that name up to the array module: after dropping the signature, docstring and
  comments and writing ``jnp`` as ``np`` and ``jax.random`` as ``rng``, the two bodies' Python
  tokens match with a ``difflib`` ratio of at least 0.6 (:data:`RATIO`) and the JAX body has
  at least eight tokens (:data:`MIN_TOKENS`). A shared kernel called by both engines is not a repeat (it is one
  function), and neither is a JAX function whose body is one ``return f(...)`` (a delegation
  to one, such as ``make_params`` or ``channel_spec``); a repeat that must stay names its
  reason in its docstring, a sentence starting ``Twice:`` (``--list`` prints them, and the
  count of repeats without one);
* **"twin" in JAX code**: occurrences of the word ``twin`` in those three folders;
* **numpy learner classes imported by JAX learners**: names that modules under ``agents/jax``
  and ``baselines/jax`` import from a numpy module and that name a numpy learner class (a
  class with an ``act`` method or an ``agent_id``): what a JAX learner builds or reads its numpy
  twin through;
* **core lines**: the lines of ``fedbandit_env/engine.py``, ``fedbandit_env/seeding.py`` and
  the ``network`` and ``privacy`` packages (the plain numpy reference core).

Run: ``python benchmarks/count_twins.py`` (``--root DIR`` for another checkout, e.g. a
``git worktree`` of an older commit, to print before and after side by side with ``--before``).
"""

from __future__ import annotations

import argparse
import ast
import difflib
import io
import re
import sys
import textwrap
import tokenize
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import record  # noqa: E402

JAX_DIRS = ("fedbandit_env/jax", "agents/jax", "baselines/jax")
PACKAGES = ("fedbandit_env", "agents", "baselines")
CORE = ("fedbandit_env/engine.py", "fedbandit_env/seeding.py", "fedbandit_env/network",
        "fedbandit_env/privacy")  # fmt: skip
RATIO = 0.6
MIN_TOKENS = 8


@dataclass(frozen=True)
class Function:
    name: str
    where: str
    body: tuple[str, ...]
    delegates: bool = False  # its body is one ``return call(...)``
    reason: str = ""  # the docstring's "Twice: ..." sentence: why it must stay a repeat


@dataclass(frozen=True)
class Counts:
    jax_functions: int
    same_name: int
    repeats: tuple[tuple[str, str, float, str], ...]
    twin_words: int
    numpy_learner_imports: int
    core_lines: int


def _body(node: ast.AST, lines: list[str]) -> tuple[str, ...]:
    """The normalised body lines of a function: no signature, docstring, comment or blank."""
    first = node.body[0]
    skip_doc = (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    )
    if skip_doc and len(node.body) == 1:
        return ()
    start = node.body[1 if skip_doc else 0].lineno - 1
    text = "\n".join(lines[start : node.end_lineno])
    text = re.sub(r"\bjnp\b", "np", text)
    text = re.sub(r"\bjax\.random\b", "rng", text)
    tokens = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(textwrap.dedent(text)).readline):
            if tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                            tokenize.DEDENT, tokenize.ENDMARKER):  # fmt: skip
                continue
            tokens.append(tok.string)
    except (tokenize.TokenError, IndentationError):  # pragma: no cover - parsed above
        return ()
    return tuple(tokens)


def _is_docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


def functions(path: Path, root: Path) -> list[Function]:
    text = path.read_text()
    lines = text.splitlines()
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            where = f"{path.relative_to(root)}:{node.lineno}"
            stmts = [b for b in node.body if not _is_docstring(b)]
            delegates = (
                len(stmts) == 1
                and isinstance(stmts[0], ast.Return)
                and isinstance(stmts[0].value, ast.Call)
            )
            doc = ast.get_docstring(node) or ""
            found = re.search(r"Twice:\s*(.+?)(?:\n\s*\n|$)", doc, flags=re.S)
            reason = " ".join(found.group(1).split()) if found else ""
            out.append(Function(node.name, where, _body(node, lines), delegates, reason))
    return out


def _is_jax(rel: str) -> bool:
    return any(rel == d or rel.startswith(d + "/") for d in JAX_DIRS)


def _learner_classes(path: Path) -> set[str]:
    """Names of the classes in ``path`` that define an ``act`` method or set an ``agent_id``
    (numpy learners and their registered variants); a dataclass (a configuration or params
    record that holds an ``agent_id`` field) is not a learner."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        dataclass = isinstance(node, ast.ClassDef) and any(
            "dataclass" in ast.unparse(d) for d in node.decorator_list
        )
        if isinstance(node, ast.ClassDef) and not dataclass and any(
            (isinstance(b, ast.FunctionDef) and b.name == "act")
            or (
                isinstance(b, ast.Assign | ast.AnnAssign)
                and "agent_id"
                in ast.unparse(b.targets[0] if isinstance(b, ast.Assign) else b.target)
            )
            for b in node.body
        ):
            out.add(node.name)
    return out


def _imported(path: Path) -> set[tuple[str, str]]:
    """(module, name) of every ``from agents.x / baselines.x import name`` of ``path``, and of
    every ``alias.name`` where ``alias`` is such an imported module (``from baselines import
    ucb as np_ucb`` ... ``np_ucb.UCB1``)."""
    out = set()
    tree = ast.parse(path.read_text())
    modules = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] in ("agents", "baselines"):
                for alias in node.names:
                    out.add((node.module, alias.name))
                    modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id in modules:
                out.add((modules[node.value.id], node.attr))
    return out


def count(root: Path) -> Counts:
    jax_fns: list[Function] = []
    numpy_fns: dict[str, list[Function]] = {}
    learners: set[tuple[str, str]] = set()
    imports: set[tuple[str, str, str]] = set()
    twin_words = 0
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if _is_jax(rel):
                jax_fns += functions(path, root)
                text = path.read_text()
                twin_words += len(re.findall(r"\btwins?\b", text, flags=re.IGNORECASE))
                if rel.startswith(("agents/jax", "baselines/jax")):
                    imports |= {(rel, m, n) for m, n in _imported(path) if ".jax" not in m}
            else:
                for fn in functions(path, root):
                    numpy_fns.setdefault(fn.name, []).append(fn)
                module = rel[:-3].replace("/", ".").removesuffix(".__init__")
                learners |= {(module, name) for name in _learner_classes(path)}
    numpy_learner_imports = sum((m, n) in learners for _, m, n in imports)
    same = [f for f in jax_fns if f.name in numpy_fns and not f.name.startswith("__")]
    repeats = []
    for fn in same:
        if len(fn.body) < MIN_TOKENS or fn.delegates:
            continue
        ratio = max(
            difflib.SequenceMatcher(None, fn.body, other.body).ratio()
            for other in numpy_fns[fn.name]
        )
        if ratio >= RATIO:
            repeats.append((fn.name, fn.where, round(ratio, 2), fn.reason))
    core = 0
    for part in CORE:
        paths = [root / part] if part.endswith(".py") else sorted((root / part).rglob("*.py"))
        core += sum(len(p.read_text().splitlines()) for p in paths if p.exists())
    return Counts(len(jax_fns), len(same), tuple(repeats), twin_words, numpy_learner_imports, core)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--before", type=Path, default=None, help="an older checkout to compare")
    parser.add_argument("--list", action="store_true", help="list the repeated functions")
    record.add_json_option(parser)
    args = parser.parse_args(argv)
    record.start(__file__, args)
    trees = [("now", args.root)] + ([("before", args.before)] if args.before else [])
    counted = {label: count(path) for label, path in trees}
    labels = [label for label, _ in trees]
    print("What exists twice (benchmarks/count_twins.py; definitions in its docstring)")
    print("| count | " + " | ".join(labels) + " |")
    print("|---|" + "---|" * len(labels))
    rows = [
        ("JAX functions", lambda c: c.jax_functions),
        ("same name as a numpy function", lambda c: c.same_name),
        ("repeats a numpy function", lambda c: len(c.repeats)),
        ("... without a stated reason", lambda c: sum(not r[3] for r in c.repeats)),
        ('"twin" in JAX code', lambda c: c.twin_words),
        ("numpy learner classes imported by JAX learners", lambda c: c.numpy_learner_imports),
        ("core lines (engine, seeding, network, privacy)", lambda c: c.core_lines),
    ]
    for name, get in rows:
        print(f"| {name} | " + " | ".join(f"{get(counted[label]):,}" for label in labels) + " |")
    if args.list:
        print()
        print("Repeated functions (now)")
        print("| function | where | ratio | reason (its docstring's \"Twice:\") |")
        print("|---|---|---|---|")
        for name, where, ratio, reason in sorted(counted["now"].repeats, key=lambda r: -r[2]):
            print(f"| {name} | {where} | {ratio} | {reason or '(none)'} |")


if __name__ == "__main__":
    main()
