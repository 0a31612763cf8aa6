"""Roles (docs/adversary.md): the ``adversary=`` keyword, placements, crashes, honest metrics and
the Byzantine ledger column; ``adversary=None`` leaves every environment bit-identical."""

from __future__ import annotations

import numpy as np
import pytest

import fedbandit_env
from fedbandit_env.adversary import BYZANTINE, CRASHED, HONEST, AdversaryConfig
from fedbandit_env.adversary.roles import byzantine_neighbours
from fedbandit_env.bench.evaluate import evaluate
from fedbandit_env.errors import ConfigError
from fedbandit_env.policy import TeamAction

HET = "FedBandit/Heterogeneous-v0"
HOM = "FedBandit/Homogeneous-v0"


def _venv(adversary=None, num_runs=3, **kwargs):
    base = {"num_agents": 6, "num_arms": 3, "horizon": 30, "topology": "ring"}
    return fedbandit_env.make_vec(HET, num_runs=num_runs, **{**base, **kwargs},
                                  **({} if adversary == "absent" else {"adversary": adversary}))  # fmt: skip


class RoundRobin:
    """Every agent pulls arm t mod M and sends its own [arm count (M), reward sums (M)]."""

    def __init__(self, venv):
        self.venv = venv
        self.t = 0

    def act(self, obs):
        B, N, M = self.venv.num_runs, self.venv.num_agents, self.venv.num_arms
        arms = np.full((B, N), self.t % M, dtype=np.int64)
        self.t += 1
        messages = {}
        for name, ch in self.venv.channels.items():
            payload = np.broadcast_to(np.arange(ch.dim, dtype=float) + self.t, (B, N, ch.dim))
            messages[name] = (np.ones((B, N), dtype=bool), np.ascontiguousarray(payload))
        return TeamAction(arms, messages)


def _trajectory(venv, steps=None, seed=0):
    obs, info = venv.reset(seed=seed)
    policy = RoundRobin(venv)
    out = []
    for _ in range(steps or venv.horizon):
        action = policy.act(obs)
        obs, rewards, _, _, info = venv.step(action.arms, action.messages)
        out.append((rewards, obs, info))
    return out


def _deliveries(obs):
    arrays = []
    for delivery in obs.deliveries.values():
        arrays.extend(np.asarray(v) for v in vars(delivery).values())
    return arrays


# -- adversary=None is today's environment ---------------------------------------------------------
@pytest.mark.parametrize("adversary", [None, {"num_byzantine": 0}, AdversaryConfig()])
def test_no_adversary_is_bit_identical_through_evaluate(adversary):
    kwargs = {"num_agents": 5, "num_arms": 4, "horizon": 150, "topology": "ring"}
    base = evaluate(HET, "ucb1_shared", runs=3, seed=4, env_kwargs=kwargs)
    got = evaluate(
        HET, "ucb1_shared", runs=3, seed=4, env_kwargs={**kwargs, "adversary": adversary}
    )
    assert base.roles is None
    assert np.array_equal(got.regret_by_agent, base.regret_by_agent)
    for name in ("messages", "floats", "cost"):
        assert np.array_equal(getattr(got, name), getattr(base, name))
    if adversary is None:
        assert got.roles is None
    else:
        assert got.roles.dtype == np.int8 and (got.roles == HONEST).all()
    # the honest metrics equal the all-agent ones
    assert np.array_equal(got.honest_regret_mean, base.final_regret_per_agent)
    assert np.array_equal(got.honest_regret_sum, base.final_regret_network)
    assert np.array_equal(got.honest_regret_max, base.regret_by_agent[:, -1].max(axis=1))


@pytest.mark.parametrize("adversary", [None, {"num_byzantine": 0, "num_crashed": 0}])
def test_no_adversary_is_bit_identical_step_by_step(adversary):
    chans = {"neighbors": {"kind": "neighbors", "dim": 3, "drop_prob": 0.2}, "gossip": "gossip"}
    base = _trajectory(_venv("absent", channels=chans))
    got = _trajectory(_venv(adversary, channels=chans))
    for (r0, o0, i0), (r1, o1, i1) in zip(base, got, strict=True):
        assert np.array_equal(r0, r1)
        for a, b in zip(_deliveries(o0), _deliveries(o1), strict=True):
            assert np.array_equal(a, b)
        assert np.array_equal(i0.cumulative_regret, i1.cumulative_regret)
        assert i0.ledger.summary(1) == i1.ledger.summary(1)
        assert i0.roles is None and i0.honest.all()
    summary = base[-1][2].ledger.summary(0)["total"]
    assert summary["byzantine_messages"] == 0 and summary["byzantine_floats"] == 0


def test_roles_move_no_reward_or_network_draw():
    """Same seeds, f = 0 and f = 2 with a loud attack: every agent's rewards for the same arms
    and the gossip channel's random edges are identical."""
    chans = {"neighbors": {"kind": "neighbors", "dim": 3}, "gossip": {"kind": "gossip", "dim": 3}}
    reward = {"kind": "gaussian", "sigma": 1.0}
    base = _trajectory(_venv(None, channels=chans, reward=reward))
    adv = {"num_byzantine": 2, "num_crashed": 1, "attack": "uniform", "crash_at": 5}
    got = _trajectory(_venv(adv, channels=chans, reward=reward))
    roles = got[0][2].roles
    assert (roles == BYZANTINE).sum() == 6 and (roles == CRASHED).sum() == 3
    for (r0, o0, _), (r1, o1, _) in zip(base, got, strict=True):
        assert np.array_equal(r0, r1)  # honest, Byzantine and crashed agents alike
        assert np.array_equal(o0.deliveries["gossip"].partner, o1.deliveries["gossip"].partner)


# -- placements ------------------------------------------------------------------------------------
def _roles(adversary, num_runs=4, seed=0, **kwargs):
    venv = _venv(adversary, num_runs=num_runs, **kwargs)
    _, info = venv.reset(seed=seed)
    return info.roles


def test_fixed_and_first_placements():
    roles = _roles({"placement": "fixed", "byzantine_ids": [4, 1], "crashed_ids": [5]})
    want = np.array([0, 1, 0, 0, 1, 2], dtype=np.int8)
    assert roles.dtype == np.int8 and (roles == want).all()
    roles = _roles({"placement": "first", "num_byzantine": 2, "num_crashed": 1})
    assert (roles == np.array([1, 1, 2, 0, 0, 0])).all()


def test_degree_placements_break_ties_to_the_lowest_id():
    # path 0-1-2-3-4: degrees 1 2 2 2 1
    roles = _roles({"placement": "max_degree", "num_byzantine": 2, "num_crashed": 1},
                   num_agents=5, topology="path")  # fmt: skip
    assert (roles == np.array([0, 1, 1, 2, 0])).all()
    roles = _roles({"placement": "min_degree", "num_byzantine": 1, "num_crashed": 1},
                   num_agents=5, topology="path")  # fmt: skip
    assert (roles == np.array([1, 0, 0, 0, 2])).all()
    roles = _roles({"placement": "max_degree", "num_byzantine": 1}, num_agents=6, topology="star")
    assert (roles == np.array([1, 0, 0, 0, 0, 0])).all()


def test_uniform_placement_is_per_run_distinct_and_reproducible():
    adv = {"num_byzantine": 3, "num_crashed": 2}
    roles = _roles(adv, num_runs=8, num_agents=10)
    assert ((roles == BYZANTINE).sum(axis=1) == 3).all()
    assert ((roles == CRASHED).sum(axis=1) == 2).all()
    assert len({r.tobytes() for r in roles}) > 1  # runs differ
    assert np.array_equal(roles, _roles(adv, num_runs=8, num_agents=10))  # same seeds, same roles
    assert not np.array_equal(roles, _roles(adv, num_runs=8, num_agents=10, seed=100))
    for b in (0, 5):  # run b of the batch is its seed run alone
        alone = _roles(adv, num_runs=1, num_agents=10, seed=b)
        assert np.array_equal(alone[0], roles[b])


def test_local_f_placement_bounds_every_honest_agents_byzantine_neighbours():
    adv = {"placement": "local_f", "num_byzantine": 4, "local_f": 1}
    venv = _venv(adv, num_runs=6, num_agents=12)
    _, info = venv.reset(seed=3)
    neighbors = venv.config.topology.neighbors
    for row in info.roles:
        assert (row == BYZANTINE).sum() == 4
        assert byzantine_neighbours(row, neighbors)[row == HONEST].max() <= 1
    assert venv.config.adversary.local_f == 1
    assert fedbandit_env.make_vec(HET, adversary={"placement": "local_f", "num_byzantine": 2}
                                  ).config.adversary.local_f == 2  # fmt: skip


def test_an_impossible_local_f_placement_fails_after_1000_tries():
    venv = _venv({"placement": "local_f", "num_byzantine": 2, "local_f": 1}, num_agents=5,
                 topology="complete")  # fmt: skip
    with pytest.raises(ConfigError, match=r"adversary\.local_f: .*1000 tries"):
        venv.reset(seed=0)


# -- crashes ---------------------------------------------------------------------------------------
def test_crashed_agents_send_nothing_from_their_crash_pull_on():
    adv = {"placement": "fixed", "crashed_ids": [2], "crash_at": 5}
    chans = {"neighbors": {"kind": "neighbors", "dim": 3}}
    venv = _venv(adv, channels=chans, horizon=12)
    obs, _ = venv.reset(seed=0)
    policy = RoundRobin(venv)
    for t in range(1, 13):
        action = policy.act(obs)
        obs, _, _, _, info = venv.step(action.arms, action.messages)
        mask = obs.deliveries["neighbors"].mask  # agent 2's slot at agents 1 and 3
        heard = mask[:, 1, 1] & mask[:, 3, 0]
        assert heard.all() == (t < 5) and heard.any() == (t < 5), t
        assert (info.ledger.step.sent[:, 2] == (2 if t < 5 else 0)).all()
        assert (info.ledger.step.sent[:, [0, 1, 3, 4, 5]] == 2).all()
    assert (info.ledger.total.sent[:, 2] == 2 * 4).all()
    assert (info.roles[:, 2] == CRASHED).all() and not info.honest[:, 2].any()
    assert (info.cumulative_regret[:, 2] >= 0).all()  # still bookkept, never an honest metric


def test_crash_at_uniform_draws_one_pull_per_crashed_agent_and_run():
    venv = _venv({"num_crashed": 3, "crash_at": "uniform"}, num_runs=6, num_agents=8, horizon=40)
    venv.reset(seed=1)
    adversary = venv.engine.adversary
    at = adversary.crash_pull[adversary.roles == CRASHED]
    assert at.size == 18 and at.min() >= 1 and at.max() <= 40 and len(set(at.tolist())) > 1
    assert (adversary.crash_pull[adversary.roles != CRASHED] == 41).all()
    assert _venv({"num_crashed": 1}, horizon=31).config.adversary.crash_at == 15


def test_crashed_and_byzantine_agents_are_excluded_from_the_honest_metrics():
    kwargs = {"num_agents": 6, "num_arms": 3, "horizon": 120, "topology": "ring",
              "adversary": {"num_byzantine": 1, "num_crashed": 1, "attack": "zeros"}}  # fmt: skip
    res = evaluate(HET, "ucb1_shared", runs=4, seed=0, env_kwargs=kwargs)
    final = res.regret_by_agent[:, -1]
    honest = res.roles == HONEST
    assert (honest.sum(axis=1) == 4).all()
    want = np.array([final[b, honest[b]].mean() for b in range(4)])
    np.testing.assert_allclose(res.honest_regret_mean, want, rtol=1e-12)
    np.testing.assert_allclose(res.honest_regret_sum, want * 4, rtol=1e-12)
    assert np.array_equal(res.honest_regret_max, [final[b, honest[b]].max() for b in range(4)])
    summary = res.summary()
    assert summary["honest_regret_mean"] == pytest.approx(want.mean())


# -- views -----------------------------------------------------------------------------------------
def test_roles_are_in_the_infos_never_in_the_observations():
    env = fedbandit_env.make(HOM, num_agents=4, horizon=5, topology="ring",
                             adversary={"placement": "fixed", "byzantine_ids": [3]})  # fmt: skip
    obs, infos = env.reset(seed=0)
    assert [infos[a]["role"] for a in env.possible_agents] == [0, 0, 0, 1]
    assert all("role" not in str(o.keys()) for o in obs.values())
    assert "role" not in fedbandit_env.make(HOM).reset(seed=0)[1]["agent_0"]
    venv = _venv({"num_byzantine": 1})
    vobs, _ = venv.reset(seed=0)
    assert "roles" not in vars(vobs)
    facts = vars(venv.facts)
    assert "adversary" not in facts and "roles" not in facts


# -- refused options -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("adversary", "match"),
    [
        ({"num_byzantine": 6}, r"adversary\.num_byzantine: expected num_byzantine \+ num_crashed"),
        (
            {"num_byzantine": 3, "num_crashed": 3},
            r"adversary\.num_byzantine: .*at least one honest",
        ),
        ({"num_crashed": 6}, r"adversary\.num_crashed: .*at least one honest"),
        ({"num_byzantine": -1}, r"adversary\.num_byzantine: expected an int >= 0"),
        ({"placement": "ring"}, r"adversary\.placement: expected one of \['uniform'"),
        ({"num_crashed": 1, "crash_at": 31}, r"adversary\.crash_at: .*\[1, horizon = 30\]"),
        ({"num_crashed": 1, "crash_at": 0}, r"adversary\.crash_at: expected an int >= 1"),
        ({"num_crashed": 1, "crash_at": "late"}, r"adversary\.crash_at: expected an int pull"),
        ({"placement": "fixed", "byzantine_ids": [6]}, r"adversary\.byzantine_ids: .*\[0, 5\]"),
        ({"placement": "fixed", "byzantine_ids": [1, 1]}, r"adversary\.byzantine_ids: .*distinct"),
        ({"placement": "fixed"}, r"adversary\.byzantine_ids: placement='fixed' expects"),
        ({"byzantine_ids": [1]}, r"adversary\.byzantine_ids: only with placement='fixed'"),
        ({"num_byzantine": 1, "local_f": 1}, r"adversary\.local_f: only with placement"),
        ({"attack": "loud"}, r"attack: unknown id 'loud'; registered attacks: \[.*'silent'"),
        ({"knowledge": "partial"}, r"adversary\.knowledge: expected one of"),
        ({"attack": "reverse", "knowledge": "oblivious"}, r"attack 'reverse': knowledge"),
        ({"num_byzantine": 1, "rate": 2}, r"adversary: unknown key\(s\) \['rate'\]"),
        ("zhu", r"adversary: expected None, a dict or an AdversaryConfig"),
    ],
)
def test_bad_role_options_are_refused_by_name(adversary, match):
    with pytest.raises(ConfigError, match=match):
        _venv(adversary)


def test_unknown_attacked_channels_are_refused_at_reset():
    venv = _venv({"num_byzantine": 1, "channels": ["server"]}, channels=("neighbors",))
    with pytest.raises(
        ConfigError, match=r"adversary\.channels: unknown channel\(s\) \['server'\]"
    ):
        venv.reset(seed=0)


def test_the_jax_backend_names_an_unknown_attack():
    """Roles and the built-in attacks run on JAX (tests/test_jax_adversary.py, which also
    checks the refusal of an attack registered at run time); an unknown id gets numpy's
    error."""
    pytest.importorskip("jax")
    from fedbandit_env.jax import make as jax_make

    jax_make(HOM, adversary={"num_byzantine": 1})  # built-in: runs on JAX
    with pytest.raises(ConfigError, match=r"attack: unknown id 'no_such_attack'"):
        jax_make(HOM, adversary={"num_byzantine": 1, "attack": "no_such_attack"})


def test_a_crashed_agent_is_down_in_the_communication_steps_before_its_crash_pull():
    adv = {"placement": "fixed", "crashed_ids": [0], "crash_at": 3}
    venv = _venv(adv, num_runs=1, channels={"neighbors": {"kind": "neighbors", "dim": 2}})
    venv.reset(seed=0)
    message = {"neighbors": np.ones((1, 6, 2))}
    sent = []
    for pull in (True, True, False, True, False):
        _, _, _, _, info = venv.step(np.zeros((1, 6), dtype=int), message, pull=pull)
        sent.append(int(info.ledger.step.sent[0, 0]))
    assert sent == [2, 2, 0, 0, 0]


def test_the_docs_examples_run():
    """Every python block of docs/adversary.md runs as written."""
    import re
    from pathlib import Path

    from fedbandit_env.adversary.attacks import _ATTACKS

    text = (Path(__file__).resolve().parents[1] / "docs" / "adversary.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 4
    spaces: list[dict] = []
    try:
        for k, code in enumerate(blocks):
            namespace: dict = {}
            exec(compile(code, f"docs/adversary.md block {k}", "exec"), namespace)  # noqa: S102
            spaces.append(namespace)
        assert spaces[2]["info"].roles is not None
        assert len(spaces[3]["fit"].values) > 1  # the ring gives several d_Z values
    finally:
        _ATTACKS.pop("constant", None)
