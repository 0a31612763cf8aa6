"""The paper reproductions ship in the package: ``fedbandit reproduce NAME`` runs a module of
fedbandit_env.reproductions, which a ``pip install`` puts in site-packages (no source checkout
or benchmarks/ folder needed)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fedbandit_env.bench.cli import FIGURES, REPRODUCTIONS

ROOT = Path(__file__).resolve().parents[1]
SKIP = (".venv", ".git", "build", "*.egg-info", "__pycache__", ".*_cache", "out", "*.sqlite")


def test_every_reproduction_is_a_module_of_the_package():
    for name, (module, _) in FIGURES.items():
        spec = importlib.util.find_spec(f"{REPRODUCTIONS}.{module}")
        assert spec is not None and spec.origin, name
        assert Path(spec.origin).is_relative_to(ROOT / "fedbandit_env" / "reproductions"), name


def test_the_build_finds_the_reproduction_packages():
    """pyproject's package discovery (setuptools, tool.setuptools.packages.find) includes the
    reproductions and the field sanity modules."""
    setuptools = pytest.importorskip("setuptools")
    find_packages = setuptools.find_packages

    found = set(find_packages(str(ROOT), include=["fedbandit_env*", "agents*", "baselines*"]))
    assert {f"{REPRODUCTIONS}", f"{REPRODUCTIONS}.field_sanity"} <= found


@pytest.mark.slow
def test_an_installed_copy_runs_a_reproduction(tmp_path):
    """``pip install --target`` of the checkout, then ``fedbandit reproduce field --help`` from
    that copy alone, in a folder without the checkout."""
    pytest.importorskip("setuptools")
    # build from a copy: an in-tree build would leave build/ in the checkout
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(*SKIP))
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--target", str(target), str(src)],
        check=True, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert (target / "fedbandit_env" / "reproductions" / "gossip.py").is_file()
    assert (
        target / "fedbandit_env" / "reproductions" / "field_sanity" / "sanity_dducb.py"
    ).is_file()
    code = (
        f"import sys; sys.path = [p for p in sys.path if p not in ('', {str(ROOT)!r}, {str(src)!r})]; "
        f"sys.path.insert(0, {str(target)!r}); "
        f"import fedbandit_env; assert fedbandit_env.__file__.startswith({str(target)!r}); "
        "from fedbandit_env.bench.cli import main; main(['reproduce', 'field', '--help'])"
    )
    env = {"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "fedbandit reproduce field" in done.stdout and "--only" in done.stdout
