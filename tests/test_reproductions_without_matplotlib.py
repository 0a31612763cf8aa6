"""The paper reproductions run without matplotlib, the optional ``plots`` extra: on a plain
``pip install .`` every script's ``--help`` works, and a run writes its tables and claims file
and says in one line on stderr which extra draws the figure it did not draw.

Each case runs the script in a subprocess whose ``sys.meta_path`` starts with a finder that makes
``import matplotlib`` (and its submodules) raise ModuleNotFoundError, as on an installation
without the extra, then runs the module as ``python -m`` would (``runpy.run_module``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fedbandit_env.bench import claims as C

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "fedbandit_env.reproductions"
NOTE = 'figure not drawn: matplotlib is not installed; pip install "fedbandit[plots]" draws it'

# python -c HIDE_MATPLOTLIB + ...: the rest of the program runs as on an installation without
# matplotlib (import matplotlib, or any of its submodules, raises ModuleNotFoundError)
HIDE_MATPLOTLIB = """
import runpy
import sys


class NoMatplotlib:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("matplotlib", "mpl_toolkits"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NoMatplotlib())
for loaded in [m for m in sys.modules if m.partition(".")[0] in ("matplotlib", "mpl_toolkits")]:
    del sys.modules[loaded]
"""
# python -c RUN_MODULE MODULE ARGS...: MODULE run as `python -m MODULE ARGS...` would
RUN_MODULE = (
    HIDE_MATPLOTLIB
    + """
module = sys.argv[1]
sys.argv = [module, *sys.argv[2:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""
)

# every runnable reproduction (fedbandit reproduce NAME, and the field sanity modules that have
# a command line of their own)
MODULES = [
    "gossip",
    "dp_recsys",
    "commeff",
    "linear",
    "field",
    "byzres",
    "fed_mom",
    "vial",
    "field_sanity.sanity_coop_ucb2",
    "field_sanity.sanity_dducb",
    "field_sanity.sanity_gosine",
    "field_sanity.sanity_ldp_ucb",
]
# the field sanity modules without a command line: importing them must work
SANITY_LIBRARIES = ["sanity_dislinucb", "sanity_fed1_ucb", "sanity_fed2_ucb"]

# the smallest settings each script allows (a few seconds each)
TINY = {
    "linear": "--horizon 40 --runs 2 --executor serial".split(),
    "dp_recsys": "--agents 4 --arms 3 --horizon 120 --seeds 2 --delta-horizon 0".split(),
    # K = 3 and T = 400 clear CDP-MAB's first epoch; Fig. 8's single agents need T >= 4061
    "commeff": "--arms 3 --horizon 400 --seeds 2 --fig8-horizons 4100".split(),
    "byzres": "--rounds 100 --runs 2 --executor serial".split(),
    "vial": "--rounds 100 --runs 2 --rounds22 100 --runs22 2".split(),
    "gossip": "--rounds 100 --runs 2 --panels a --init-runs 2 --init-rounds 100 --executor serial".split(),
    "fed_mom": "--horizon 200 --runs 2 --fed2-runs 1 --executor serial".split(),
}


def _python(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def test_with_matplotlib_the_figure_helper_draws_and_says_nothing(capsys):
    pytest.importorskip("matplotlib")
    from fedbandit_env.reproductions import harness

    plt = harness.pyplot()
    assert plt is not None and plt.get_backend().lower() == "agg"
    assert capsys.readouterr().err == ""


def test_the_simulation_hides_matplotlib():
    done = _python(HIDE_MATPLOTLIB + "import matplotlib.pyplot\n")
    assert done.returncode == 1 and "ModuleNotFoundError" in done.stderr
    done = _python(HIDE_MATPLOTLIB + "import numpy\n")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("module", MODULES)
def test_help_works_without_matplotlib(module):
    done = _python(RUN_MODULE, f"{PACKAGE}.{module}", "--help")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "usage:" in done.stdout and not done.stderr


def test_the_field_sanity_libraries_import_without_matplotlib():
    """The field sanity modules without a command line of their own import."""
    done = _python(HIDE_MATPLOTLIB + "".join(f"import {PACKAGE}.field_sanity.{m}\n"
                                             for m in SANITY_LIBRARIES))  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.parametrize("module", sorted(TINY))
def test_tiny_run_without_matplotlib_writes_claims_and_names_the_extra(module, tmp_path):
    claims = tmp_path / "claims.json"
    out = tmp_path / "out"
    args = [*TINY[module], "--out", str(out), "--claims", str(claims)]
    done = _python(RUN_MODULE, f"{PACKAGE}.{module}", *args)
    assert done.returncode == 0, done.stderr[-3000:]
    meta, rows = C.read_claims(claims)
    assert rows and all(r.verdict in C.VERDICTS for r in rows) and meta["title"]
    assert C.to_markdown(rows) in done.stdout  # the table is printed (and written where it was)
    # exactly one line of stderr names the extra that draws the figure, and no figure is written
    notes = [line for line in done.stderr.splitlines() if "matplotlib" in line or "[plots]" in line]
    assert notes == [NOTE], done.stderr[-3000:]
    assert not list(out.rglob("*.png"))
