"""Import structure: reference agents do not depend on the baselines package.

The shared learner kernels (tie-breaking arg-max, hyperparameter checks, the OFUL action) live in
:mod:`fedbandit_env.kernels`; ``baselines.index`` and ``baselines.linucb`` re-export them under
the same names. Every module of ``agents`` (subpackages included) is parsed with ``ast`` and must
not import ``baselines`` in any form.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import baselines.index
import baselines.linucb
from fedbandit_env import kernels

ROOT = Path(__file__).resolve().parents[1]
AGENT_FILES = sorted((ROOT / "agents").rglob("*.py"))


def baselines_imports(tree: ast.AST) -> list[str]:
    """Every ``import baselines...`` / ``from baselines... import ...`` in a module, including
    imports inside functions and ``importlib.import_module("baselines...")`` calls."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] == "baselines"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] == "baselines":
                found.append(node.module)
        elif isinstance(node, ast.Call) and node.args:
            name = getattr(node.func, "attr", getattr(node.func, "id", ""))
            first = node.args[0]
            if name in ("import_module", "__import__") and isinstance(first, ast.Constant):
                if str(first.value).split(".")[0] == "baselines":
                    found.append(str(first.value))
    return found


def test_the_agents_package_has_modules_to_check():
    names = {p.relative_to(ROOT / "agents").as_posix() for p in AGENT_FILES}
    assert {"gossip_ucb.py", "fed_lin_ucb.py", "commeff/base.py"} <= names


@pytest.mark.parametrize("path", AGENT_FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_agents_module_imports_baselines(path):
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    assert baselines_imports(tree) == [], f"{path.relative_to(ROOT)} imports baselines"


@pytest.mark.parametrize(
    "source",
    [
        "import baselines",
        "import baselines.index as bi",
        "from baselines.index import check_number",
        "from baselines import index",
        "def f():\n    from baselines.linucb import ucb_choice",
        "import importlib\nimportlib.import_module('baselines.index')",
    ],
)
def test_the_check_sees_every_form_of_import(source):
    assert baselines_imports(ast.parse(source)) != []


def test_the_check_ignores_other_imports():
    source = "from fedbandit_env.kernels import check_number\nimport numpy\nfrom . import base"
    assert baselines_imports(ast.parse(source)) == []


def test_the_kernels_keep_their_public_names_in_baselines():
    assert baselines.index.argmax_one_uniform is kernels.argmax_one_uniform
    assert baselines.index.argmax_uniform_ties is kernels.argmax_uniform_ties
    assert baselines.index.check_number is kernels.check_number
    assert baselines.linucb.ucb_choice is kernels.ucb_choice
    assert baselines.linucb.check_linear is kernels.check_linear


def test_argmax_one_uniform_breaks_ties_by_the_rows_uniform():
    index = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, 1.0, 0.0, 0.0]])
    assert kernels.argmax_one_uniform(index, np.array([0.2, 0.9])).tolist() == [1, 0]
    assert kernels.argmax_one_uniform(index, np.array([0.7, 0.9])).tolist() == [2, 0]


def _reference_argmax(index, u):
    """The definition: the floor(u k)-th of the k exactly maximal arms of each row."""
    rows = index.reshape(-1, index.shape[-1])
    out = []
    for row, v in zip(rows, u.reshape(-1), strict=True):
        tied = np.flatnonzero(row == row.max())
        out.append(tied[min(int(v * tied.size), tied.size - 1)])
    return np.array(out).reshape(index.shape[:-1])


@pytest.mark.parametrize("levels", [2, 3, 50])
def test_argmax_one_uniform_equals_its_definition_with_many_ties(levels):
    rng = np.random.default_rng(levels)
    index = rng.integers(0, levels, (40, 7, 6)).astype(np.float64)
    index[3, 2] = np.inf
    index[5, 1, :2] = np.inf
    u = rng.random((40, 7))
    assert np.array_equal(kernels.argmax_one_uniform(index, u), _reference_argmax(index, u))
