"""The plain engine step and channels (docs/architecture.md): fresh deliveries and charges,
exact aggregating deliveries, the per-run reward streams, the arm and payload checks.

* the buffered streams hand out each run's own chunked draws, in order, whatever the other
  runs consume, and never write an array they handed out;
* every delivery record and charge is fresh: a learner may keep or write it;
* the ledger's step charge is the sum of the channels' charges, a silent channel adds nothing;
* a step in which no run pulls touches no reward stream;
* the arm check names the first bad arm.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fedbandit_env
from fedbandit_env.errors import ActionError
from fedbandit_env.seeding import BufferedStream

KINDS = ["uniform", "normal", "exponential"]


# ----------------------------------------------------------------------------- streams
def _chunks(generator, kind, shape, chunk):
    draw = {"uniform": "random", "normal": "standard_normal", "exponential": "standard_exponential"}
    return getattr(generator, draw[kind])((chunk, *shape))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shape", [(), (4,), (2, 3)])
def test_buffered_steps_are_each_runs_chunked_draws(kind, shape):
    seqs = [np.random.SeedSequence(s) for s in (1, 2, 3)]
    stream = BufferedStream([np.random.Generator(np.random.PCG64(s)) for s in seqs], kind, shape)
    gens = [np.random.Generator(np.random.PCG64(s)) for s in seqs]
    per_run = [
        np.concatenate([_chunks(g, kind, shape, stream.chunk) for _ in range(2)]) for g in gens
    ]
    got = np.stack([stream.next() for _ in range(2 * stream.chunk)], axis=1)
    assert np.array_equal(got, np.stack(per_run))


@pytest.mark.parametrize("runs", [1, 3])
def test_buffered_outputs_are_never_written_again(runs):
    seqs = [np.random.SeedSequence(s) for s in range(runs)]
    stream = BufferedStream(
        [np.random.Generator(np.random.PCG64(s)) for s in seqs], "uniform", (4,)
    )
    kept = [stream.next() for _ in range(3 * stream.chunk + 1)]
    copies = [k.copy() for k in kept]
    for _ in range(2 * stream.chunk):
        stream.next()
    assert all(np.array_equal(k, c) for k, c in zip(kept, copies, strict=True))


@settings(max_examples=30, deadline=None)
@given(common=st.integers(0, 70), kind=st.sampled_from(KINDS), seed=st.integers(0, 2**16))
def test_buffered_runs_stay_exact_when_they_diverge(common, kind, seed):
    """``common`` steps where every run consumes, then steps where only some do: every run sees
    its own stream in order, as if drawn alone."""
    shape = (300,)
    seqs = [np.random.SeedSequence(s) for s in (seed, seed + 1, seed + 2)]
    stream = BufferedStream([np.random.Generator(np.random.PCG64(s)) for s in seqs], kind, shape)
    alone = [BufferedStream([np.random.Generator(np.random.PCG64(s))], kind, shape) for s in seqs]
    rng = np.random.default_rng(seed)
    for step in range(common + 80):
        advance = np.ones(3, dtype=bool) if step < common else rng.random(3) < 0.6
        got = stream.next(advance)
        for b, one in enumerate(alone):
            assert np.array_equal(got[b], one.next(advance[b : b + 1])[0])


# ----------------------------------------------------------------------------- engine step
THREE_CHANNELS = {
    "n": {"kind": "neighbors", "dim": 2, "reduce": "sum"},
    "p": {"kind": "neighbors", "dim": 2},
    "s": {"kind": "server", "dim": 2},
}


def _three_channel_env():
    venv = fedbandit_env.make_vec(
        "FedBandit/Homogeneous-v0",
        num_runs=2,
        num_agents=4,
        num_arms=3,
        horizon=20,
        channels=THREE_CHANNELS,
    )
    venv.reset(seed=1)
    return venv


def test_deliveries_and_charges_are_fresh_and_writable():
    venv = _three_channel_env()
    ones = np.ones((2, 4, 2))
    kept = []
    for _ in range(4):
        obs, _, _, _, info = venv.step(np.zeros((2, 4), dtype=np.int64), {"n": ones, "p": ones})
        arrays = [a for d in obs.deliveries.values() for a in vars(d).values()]
        arrays += list(vars(info.ledger.step).values())
        assert all(a.flags.writeable for a in arrays if isinstance(a, np.ndarray))
        kept.append(obs.deliveries)
    assert kept[0]["n"].value is not kept[1]["n"].value
    assert kept[0]["p"].mask is not kept[1]["p"].mask
    kept[0]["n"].value[:] = -1.0  # a learner may write what it was given
    assert not (kept[1]["n"].value == -1.0).any()


def test_the_step_charge_is_the_sum_of_the_channels_and_a_silent_channel_adds_nothing():
    venv = _three_channel_env()
    rng = np.random.default_rng(2)
    totals = 0
    for t in range(10):
        send = rng.random((2, 4)) < 0.5
        messages = {"n": (send, rng.random((2, 4, 2)))}
        if t % 2:
            messages["s"] = (~send, rng.random((2, 4, 2)))
        _, _, _, _, info = venv.step(rng.integers(0, 3, (2, 4)), messages)
        degrees = venv.engine.config.topology.degrees  # "n" sends to every neighbour
        want = (send * degrees).sum(axis=1)
        if t % 2:  # "s": the uploads, then the broadcast to all 4 agents if any arrived
            uploads = (~send).sum(axis=1)
            want = want + uploads + np.where(uploads > 0, 4, 0)
        assert np.array_equal(info.ledger.step.messages.sum(axis=1), want)
        totals += want
        assert np.array_equal(info.ledger.total.messages.sum(axis=1), totals)


@pytest.mark.parametrize("env_id", ["FedBandit/Homogeneous-v0", "FedBandit/LinearContextual-v0"])
def test_a_step_nobody_pulls_in_touches_no_reward_stream(env_id):
    """Every run communicates (as DP-Dec-UCB's rounds do): nothing is drawn, so the pulls that
    follow see the draws of a run that never communicates; the decision sets stay."""
    kw = dict(num_runs=3, num_agents=2, num_arms=3, horizon=30)
    talk, plain = (fedbandit_env.make_vec(env_id, **kw) for _ in range(2))
    talk.reset(seed=4)
    plain.reset(seed=4)
    arms = np.random.default_rng(0).integers(0, 3, (30, 3, 2))
    nobody = np.zeros(3, dtype=bool)
    for t in range(30):
        before = talk.engine.linear.context if talk.engine.linear is not None else None
        obs, rewards, *_ = talk.step(arms[t], pull=nobody)
        assert not rewards.any() and np.all(obs.phase == 1)
        if before is not None:
            assert np.array_equal(obs.context, before)
        a, b = talk.step(arms[t]), plain.step(arms[t])
        assert np.array_equal(a[1], b[1])
        assert np.array_equal(a[-1].cumulative_regret, b[-1].cumulative_regret)
        if b[0].context is not None:
            assert np.array_equal(a[0].context, b[0].context)


# ----------------------------------------------------------------------------- arm check
@pytest.mark.parametrize(
    ("arms", "bad"),
    [
        (np.array([[0, 1], [2, -1]]), "run 1, agent_1: arm: expected an int in [0, 2], got -1"),
        (np.array([[0, 3], [2, 1]], dtype=np.int32), "run 0, agent_1: arm: expected an int in"),
        (np.array([[0, 1], [2**64 - 1, 1]], dtype=np.uint64), "run 1, agent_0: arm"),
    ],
)
def test_the_arm_check_names_the_first_bad_arm(arms, bad):
    venv = fedbandit_env.make_vec(
        "FedBandit/Homogeneous-v0", num_runs=2, num_agents=2, num_arms=3, horizon=5
    )
    venv.reset(seed=0)
    with pytest.raises(ActionError, match=bad.replace("[", r"\[").replace("]", r"\]")):
        venv.step(arms)


def test_small_integer_arms_are_accepted_and_copied():
    venv = fedbandit_env.make_vec(
        "FedBandit/Homogeneous-v0", num_runs=1, num_agents=3, num_arms=3, horizon=5
    )
    venv.reset(seed=0)
    arms = np.array([[0, 2, 1]], dtype=np.uint8)
    obs, *_ = venv.step(arms)
    arms[0, 0] = 1
    assert obs.last_arm.dtype == np.int64 and obs.last_arm.tolist() == [[0, 2, 1]]
