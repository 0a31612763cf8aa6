"""The test session compiles with most of XLA's optimizations off: the same arithmetic.

``tests/conftest.py`` sets ``JAX_DISABLE_MOST_OPTIMIZATIONS=1`` for the session (its workers and
the subprocesses they start) unless the caller set it: XLA's HLO passes, which decide what a
program computes, run as always; its LLVM back end compiles at -O0 without the expensive passes,
which compiles each program faster on CPU (DEVELOPERS.md, "Tests"). The two levels
round some float32 sums differently in the last bits (LLVM -O0 and -O1 both moved the last bits
of cumulative regrets), so here one rollout of each kind of work (KL-UCB's iterations over
shared statistics; the private linear agent's tree counter and solves; a Byzantine attack
against ByzRes-UCB's robust fusion; the commeff agents' Laplace noise and elimination) is
compiled at the default level in a subprocess: the messages and floats sent must be the same
and the regret curves equal to float32 rounding.

The cells cover distinct kernels: each compiled program has an HLO instruction kind (opcode
and element type) that no other cell's has (KL-UCB: an f32 clamp; fed_lin_ucb:
count-leading-zeros, an f32 pad; ByzRes-UCB: a u32 sort, an s32 scatter; cdp_mab: s32 divide
and remainder, sign). A ``thompson_beta`` cell (Beta draws) was dropped: every instruction kind
of its compiled program (log, log1p, sqrt, rsqrt, its while loop, threefry's bit operations,
...) is also in one of these four, so it compiled no kernel they do not, at two compiles' cost.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("jax")

VAR = "JAX_DISABLE_MOST_OPTIMIZATIONS"
HOMOGENEOUS = "FedBandit/Homogeneous-v0"
SMALL = {"num_agents": 4, "num_arms": 4, "horizon": 120, "topology": "ring"}
CELLS = {
    "kl_ucb_shared": (HOMOGENEOUS, "kl_ucb_shared", SMALL, {}),
    "fed_lin_ucb": ("FedBandit/LinearContextual-v0", "fed_lin_ucb",
                    {"num_agents": 3, "num_arms": 4, "dim": 3, "horizon": 120}, {"epsilon": 1.0}),
    "byzres_ucb": (HOMOGENEOUS, "byzres_ucb",
                   {**SMALL, "num_agents": 6, "topology": "complete",
                    "adversary": {"num_byzantine": 1, "attack": "reverse"}}, {"f": 1}),
    "cdp_mab": (HOMOGENEOUS, "cdp_mab", {**SMALL, "topology": "star", "horizon": 400}, {}),
}  # fmt: skip


def cell_arrays(name: str) -> list[np.ndarray]:
    """The regret curves and communication totals of one cell's JAX rollout (seeds 0, 1)."""
    from fedbandit_env.bench.evaluate import evaluate

    env_id, agent, env_kwargs, agent_kwargs = CELLS[name]
    res = evaluate(env_id, agent, runs=2, env_kwargs=env_kwargs, agent_kwargs=agent_kwargs,
                   backend="jax")  # fmt: skip
    return [np.asarray(a) for a in (res.regret_by_agent, res.messages, res.floats, res.cost)]


def write_cells(path: str) -> None:
    """Every cell's arrays into one ``.npz`` (run by the subprocess)."""
    np.savez(path, **{f"{n}_{i}": a for n in CELLS for i, a in enumerate(cell_arrays(n))})


def test_the_session_compiles_with_most_optimizations_off():
    import jax

    if os.environ.get(VAR) != "1":
        pytest.skip(f"the caller set {VAR}={os.environ.get(VAR)!r}")
    assert jax.config.read("jax_disable_most_optimizations")


def test_the_default_level_computes_the_same_up_to_rounding(tmp_path):
    import jax

    if not jax.config.read("jax_disable_most_optimizations"):
        pytest.skip("this session compiles at the default level: nothing to compare")
    path = tmp_path / "default.npz"
    code = f"from tests.test_compile_flags import write_cells; write_cells({str(path)!r})"
    env = {**os.environ, VAR: "0", "JAX_PLATFORMS": "cpu"}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=600,
                   cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # fmt: skip
    default = np.load(path)
    for name in CELLS:
        regret, *counts = cell_arrays(name)
        np.testing.assert_allclose(regret, default[f"{name}_0"], rtol=1e-5, atol=1e-4,
                                   err_msg=name)  # fmt: skip
        for i, ours in enumerate(counts, start=1):
            np.testing.assert_array_equal(ours, default[f"{name}_{i}"], err_msg=name)
