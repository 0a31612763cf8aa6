"""The PettingZoo and the vector privacy wrappers account what was sent (docs/privacy.md,
"Privacy wrappers"): arms and messages are checked before anything is privatized or accounted,
a finished run sends nothing and is charged nothing, a running sum's tree counter is indexed by
pulls (communication steps never overflow it), and the two wrappers give identical reports and
deliveries for the same seed over runs with refused steps, communication steps and finished
runs."""

from __future__ import annotations

import numpy as np
import pytest

import fedbandit_env
from fedbandit_env.errors import ActionError, HorizonError
from fedbandit_env.wrappers import PrivacyVectorWrapper, PrivacyWrapper

N, M, T = 3, 3, 10
CHANNELS = {"n": {"kind": "neighbors", "dim": M}, "s": {"kind": "server", "dim": M}}
OPTIONS = {
    "laplace": {"n": {"epsilon": 1.0}, "s": {"epsilon": 0.5, "center": 0.5}},
    "gaussian": {"n": {"epsilon": 1.0, "delta": 1e-5, "mechanism": "gaussian"}},
    "running_sum": {"n": {"epsilon": 1.0, "running_sum": True}, "s": {"epsilon": 2.0}},
}
SEEDS = [3, 11, 7]
KW = {"num_agents": N, "num_arms": M, "horizon": T, "topology": "ring", "channels": CHANNELS}


def script(seed: int, steps: int = 40) -> list[tuple[bool, np.ndarray, dict, bool]]:
    """A run's scripted steps: (pull, arms (N,), sends and payloads per channel, refused). The
    pull pattern depends on the seed, so the runs of a batch finish at different steps;
    ``refused`` steps carry an arm out of range and must change nothing."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        pull = bool(rng.random() < 0.6)
        arms = rng.integers(0, M, N)
        refused = bool(rng.random() < 0.15)
        if refused:
            arms = arms.copy()
            arms[rng.integers(N)] = M + 2
        messages = {c: (rng.random(N) < 0.8, rng.uniform(0, 3, (N, M))) for c in CHANNELS}
        out.append((pull, arms, messages, refused))
    return out


def _actions(pull: bool, arms: np.ndarray, messages: dict) -> dict:
    return {
        f"agent_{i}": {
            "arm": int(arms[i]),
            "pull": int(pull),
            "messages": {
                c: {"send": int(send[i]), "payload": payload[i]}
                for c, (send, payload) in messages.items()
            },
        }
        for i in range(N)
    }


def run_parallel(options: dict, seed: int) -> list:
    """The PettingZoo wrapper on one run: (script step, privacy reports, the 'n' channel's
    delivered payloads (N, slots, dim) and mask) per accepted step, until the run's last pull;
    each refused step raises and is skipped."""
    env = PrivacyWrapper(fedbandit_env.make("FedBandit/Heterogeneous-v0", **KW), options)
    env.reset(seed=seed)
    trace = []
    for k, (pull, arms, messages, refused) in enumerate(script(seed)):
        if not env.agents:
            break
        if refused:
            with pytest.raises(ActionError, match="arm"):
                env.step(_actions(pull, arms, messages))
            continue
        obs, _, _, _, infos = env.step(_actions(pull, arms, messages))
        reports = [infos[f"agent_{i}"]["privacy"] for i in range(N)]
        got = [obs[f"agent_{i}"]["channels"]["n"] for i in range(N)]
        trace.append((k, reports, np.stack([g["payload"] for g in got]),
                      np.stack([g["mask"] for g in got]).astype(bool)))  # fmt: skip
    return trace


def run_vector(options: dict) -> dict[int, list]:
    """The vector wrapper on the batch of SEEDS, each run following its own script: the same
    per-run traces. A step refused in one run's script is tried for the whole batch (other runs
    at their next step) and must raise and change nothing; the batch then goes on."""
    venv = PrivacyVectorWrapper(
        fedbandit_env.make_vec("FedBandit/Heterogeneous-v0", num_runs=len(SEEDS), **KW), options
    )
    venv.reset(seed=SEEDS)
    scripts = [script(s) for s in SEEDS]
    cursor = [0] * len(SEEDS)
    traces: dict[int, list] = {b: [] for b in range(len(SEEDS))}

    def batch(refused_run: int | None = None):
        steps = [scripts[b][min(cursor[b], len(scripts[b]) - 1)] for b in range(len(SEEDS))]
        arms = np.stack([s[1] if s[3] is False or b == refused_run else np.zeros(N, np.int64)
                         for b, s in enumerate(steps)])  # fmt: skip
        pull = np.array([s[0] for s in steps])
        messages = {
            c: (np.stack([s[2][c][0] for s in steps]), np.stack([s[2][c][1] for s in steps]))
            for c in CHANNELS
        }
        return arms, messages, pull

    while not venv.engine.truncated:
        live = ~venv.engine.done_runs
        for b in np.flatnonzero(live):
            while scripts[b][cursor[b]][3]:
                with pytest.raises(ActionError, match="arm"):
                    venv.step(*batch(refused_run=int(b)))
                cursor[b] += 1
        obs, _, _, _, info = venv.step(*batch())
        delivered = obs.deliveries["n"]
        for b in np.flatnonzero(live):
            reports = info.privacy.agent_reports(int(b))
            traces[int(b)].append((cursor[b], reports, delivered.payload[b],
                                   delivered.mask[b].astype(bool)))  # fmt: skip
            cursor[b] += 1
    return traces


@pytest.mark.parametrize("kind", sorted(OPTIONS))
def test_the_two_wrappers_give_the_same_reports_and_deliveries(kind):
    options = OPTIONS[kind]
    traces = run_vector(options)
    ends = []
    for b, seed in enumerate(SEEDS):
        alone, batched = run_parallel(options, seed), traces[b]
        assert [k for k, *_ in alone] == [k for k, *_ in batched], (kind, seed)
        ends.append(alone[-1][0])
        for (k, rep_a, pay_a, mask_a), (_, rep_b, pay_b, mask_b) in zip(
            alone, batched, strict=True
        ):
            assert rep_a == rep_b, (kind, seed, k)
            np.testing.assert_array_equal(mask_a, mask_b)
            np.testing.assert_array_equal(np.where(mask_a[..., None], pay_a, 0.0),
                                          np.where(mask_b[..., None], pay_b, 0.0))  # fmt: skip
    assert len(set(ends)) > 1, "the scripts must make the runs finish at different steps"
    assert any(s[3] for seed in SEEDS for s in script(seed)[: ends[0]]), "a refused step"
    assert any(not s[0] for seed in SEEDS for s in script(seed)[: ends[0]]), "a communication step"


def test_a_refused_step_charges_nothing_and_keeps_the_noise_stream():
    """A bad arm in the vector wrapper: no epsilon, no message, and the next deliveries are
    those of a clean run with the same seed."""
    options = OPTIONS["laplace"]
    arms = np.zeros((1, N), dtype=np.int64)
    payload = np.full((1, N, M), 0.5)
    messages = {"n": (np.ones((1, N), dtype=bool), payload)}

    def fresh():
        venv = PrivacyVectorWrapper(
            fedbandit_env.make_vec("FedBandit/Heterogeneous-v0", num_runs=1, **KW), options
        )
        venv.reset(seed=5)
        return venv

    clean, refused = fresh(), fresh()
    bad = arms.copy()
    bad[0, 1] = 99
    with pytest.raises(ActionError, match="agent_1: arm"):
        refused.step(bad, messages)
    assert refused.privatizer.info().epsilon_spent.sum() == 0
    for _ in range(8):
        a = clean.step(arms, messages)
        b = refused.step(arms, messages)
        np.testing.assert_array_equal(a[0].deliveries["n"].payload, b[0].deliveries["n"].payload)
    assert a[4].privacy.epsilon_spent.tolist() == b[4].privacy.epsilon_spent.tolist()
    assert b[4].privacy.per_channel["n"]["messages"].tolist() == [[8] * N]


def test_a_finished_run_is_charged_nothing_and_the_ledger_agrees():
    """Run 0 pulls every step, run 1 communicates every other step: run 0 finishes first and
    its account stops where its ledger stops."""
    venv = PrivacyVectorWrapper(
        fedbandit_env.make_vec("FedBandit/Heterogeneous-v0", num_runs=2, **KW),
        {"n": {"epsilon": 1.0}},
    )
    venv.reset(seed=[0, 1])
    arms = np.zeros((2, N), dtype=np.int64)
    messages = {"n": (np.ones((2, N), dtype=bool), np.zeros((2, N, M)))}
    k = 0
    while not venv.engine.truncated:
        _, _, _, _, info = venv.step(arms, messages, np.array([True, k % 2 == 0]))
        k += 1
    ledger = info.ledger.total.messages.reshape(2, -1)  # (runs, ...) messages by link
    sent = info.privacy.per_channel["n"]["messages"]
    assert sent[0].tolist() == [T] * N  # run 0 took T steps, then sent nothing
    assert info.privacy.epsilon_spent[0].tolist() == [float(T)] * N
    assert sent[1].tolist() == [k] * N
    assert int(ledger[0].sum()) == int(sent[0].sum()) * 2  # a ring: each message to 2 neighbours


def test_running_sum_with_communication_steps_does_not_overflow_the_tree():
    """The tree counter is indexed by pulls: an episode with communication steps (more engine
    steps than the horizon) runs to the end in both wrappers."""
    options = {"n": {"epsilon": 1.0, "running_sum": True}}
    venv = PrivacyVectorWrapper(
        fedbandit_env.make_vec("FedBandit/Heterogeneous-v0", num_runs=1, **KW), options
    )
    venv.reset(seed=0)
    arms = np.zeros((1, N), dtype=np.int64)
    sums = np.zeros((1, N, M))
    steps = 0
    while not venv.engine.truncated:
        pull = steps % 3 != 2
        obs, rewards, *_ = venv.step(arms, {"n": (np.ones((1, N), dtype=bool), sums)}, pull)
        if pull:
            sums[..., 0] += rewards
        steps += 1
    assert steps > T
    env = PrivacyWrapper(fedbandit_env.make("FedBandit/Heterogeneous-v0", **KW), options)
    env.reset(seed=0)
    steps = 0
    while env.agents:
        actions = {f"agent_{i}": {"arm": 0, "pull": int(steps % 3 != 2),
                                  "messages": {"n": {"send": 1, "payload": np.zeros(M)}}}
                   for i in range(N)}  # fmt: skip
        env.step(actions)
        steps += 1
    assert steps > T
    with pytest.raises(HorizonError):
        venv.step(arms, {"n": (np.ones((1, N), dtype=bool), sums)})
