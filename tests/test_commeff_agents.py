"""CDP/DDP/HDP-MAB (Algorithms 1, 3 and 5 of Li & Song): exact equalities, closed-form costs,
noise scale, invariants, the figures' orderings at a CI scale, light cone, determinism and bad
input."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fedbandit_env
from agents import CDPMAB, DDPMAB, HDPMAB
from agents.commeff import schedule
from fedbandit_env.bench import evaluate
from fedbandit_env.errors import ConfigError

HOMOG = "FedBandit/Homogeneous-v0"
HETERO = "FedBandit/Heterogeneous-v0"


def _play(policy, runs=4, seed=0, env_id=HOMOG, record=False, **env_kwargs):
    """Run a policy through the vector view; returns (venv, arms (T, B, N), regret (B, N))."""
    if "channels" not in env_kwargs:
        preview = fedbandit_env.make_vec(env_id, num_runs=1, **env_kwargs).config
        env_kwargs["channels"] = policy.channel_spec(preview)
    venv = fedbandit_env.make_vec(env_id, num_runs=runs, **env_kwargs)
    obs, _ = venv.reset(seed=seed)
    policy.reset(venv.facts, venv.agent_rng())
    arms, info = [], None
    while not venv.engine.truncated:  # engine steps: pulls and communication steps
        action = policy.act(obs)
        if record:  # -1: a communication step, or a run that has finished its pulls
            live = ~venv.engine.done_runs
            if action.pull is not None:
                live &= action.pull
            arms.append(np.where(live[:, None], action.arms, -1))
        obs, _, _, _, info = venv.step(action.arms, action.messages, action.pull)
    return venv, (np.stack(arms) if record else None), info.cumulative_regret


def _pulled(arms, b):
    """Run b's pulled arms (T, N) from a recorded (steps, B, N) array."""
    keep = arms[:, b, 0] >= 0
    return arms[keep, b]


SMALL = dict(num_agents=12, num_arms=8, horizon=2500, instance_seed=None)


# ------------------------------------------------------------------ exact equalities
def test_ddp_complete_and_hdp_singletons_equal_cdp_exactly():
    _, cdp_arms, cdp_regret = _play(CDPMAB(epsilon=0.5), record=True, **SMALL)
    _, ddp_arms, ddp_regret = _play(DDPMAB(epsilon=0.5), record=True, topology="complete", **SMALL)
    hybrid = {"topology": "hybrid", "topology_kwargs": {"sizes": [1] * 12}}
    _, hdp_arms, hdp_regret = _play(HDPMAB(epsilon=0.5), record=True, **hybrid, **SMALL)
    assert np.array_equal(cdp_arms, ddp_arms)
    assert np.array_equal(cdp_arms, hdp_arms)
    assert np.array_equal(cdp_regret, ddp_regret)
    assert np.array_equal(cdp_regret, hdp_regret)


def test_hdp_with_complete_and_star_components_equals_cdp():
    """Algorithm 5: complete or star components have t_delay = 0, hence CDP's regret (weighted)."""
    _, cdp_arms, _ = _play(CDPMAB(), record=True, **SMALL)
    for graph in ("complete", "star"):
        hybrid = {
            "topology": "hybrid",
            "topology_kwargs": {"sizes": [5, 4, 3], "component_graph": graph},
        }
        _, arms, _ = _play(HDPMAB(), record=True, **hybrid, **SMALL)
        assert np.array_equal(cdp_arms, arms), graph


# ------------------------------------------------------------------ ledger closed forms
EASY = dict(num_arms=4, means=[0.9, 0.8, 0.6, 0.2], horizon=2500)


@pytest.mark.parametrize(
    ("topology", "per_round", "delay"), [("complete", 1225, 0), ("star", 98, 1), ("ring", 1250, 24)]
)
def test_ddp_gis_cost_per_round_matches_spec(topology, per_round, delay):
    """Exact GIS accounting at M = 50, c2 = 1: complete 1225, star 98, ring 1250."""
    pol = DDPMAB()
    venv, _, _ = _play(pol, runs=2, num_agents=50, topology=topology, c2=1.0, **EASY)
    assert pol.delay == delay
    assert np.all(pol.active.sum(axis=2) == 1)  # finished: every round's hops were charged
    assert np.all(pol.uploads >= 2)
    assert np.array_equal(venv.engine.ledger.total.cost[:, 0], per_round * pol.uploads)
    assert np.all(venv.engine.ledger.total.cost[:, 1] == 0)


def test_cdp_cost_is_c1_n_rounds_with_participation():
    """Thm 1/2: c1 * ceil(pM) per round (docs/commeff.md, decision 12: broadcast free)."""
    for p in (1.0, 0.3):
        pol = CDPMAB(participation=p)
        venv, _, _ = _play(pol, runs=3, num_agents=20, c1=25.0, **EASY)
        assert pol.n_eff == math.ceil(p * 20)
        assert np.array_equal(venv.engine.ledger.total.cost[:, 1], 25.0 * pol.n_eff * pol.uploads)


@pytest.mark.parametrize(
    ("graph", "cost_model", "per_round"),
    [
        ("star", "edges", 345),
        ("star", "path", 345),
        ("complete", "edges", 1200),
        ("complete", "path", 345),
    ],
)
def test_hdp_cost_models_match_spec(graph, cost_model, per_round):
    """Table II cases 5 and 1 (five components of 20, c1 = 50, c2 = 1) under both cost models
    (decision 13)."""
    topo = {"sizes": [20] * 5, "component_graph": graph}
    pol = HDPMAB(cost_model=cost_model)
    venv, _, _ = _play(
        pol,
        runs=2,
        num_agents=100,
        c1=50.0,
        c2=1.0,
        topology="hybrid",
        topology_kwargs=topo,
        **EASY,
    )
    assert np.all(pol.uploads >= 2)
    assert np.array_equal(venv.engine.ledger.total.cost.sum(axis=1), per_round * pol.uploads)


# ------------------------------------------------------------------ privacy
@pytest.mark.parametrize(
    ("privacy", "epsilon", "p"),
    [
        ("paper", 0.2, 1.0),
        ("per_message", 3.0, 1.0),
        ("paper", 0.2, 0.25),
        ("per_message", 3.0, 0.25),
    ],
)
def test_laplace_scale_is_one_over_n_eff_eps_n(privacy, epsilon, p):
    """After epoch 1, ybar - (own epoch mean) ~ Lap(1/(eps_msg n_1)), with
    eps_msg = N_eff eps in paper mode and N_eff = ceil(pM) under partial participation (M = 10,
    p = 0.25: N_eff = 3, where round(pM) = floor(pM) = 2)."""
    pol = CDPMAB(epsilon=epsilon, privacy=privacy, participation=p)
    kw = dict(num_agents=10, num_arms=8, horizon=3000, instance_seed=None)
    venv = fedbandit_env.make_vec(HOMOG, num_runs=8, channels=pol.channel_spec(_cfg(kw)), **kw)
    obs, _ = venv.reset(seed=1)
    pol.reset(venv.facts, venv.agent_rng())
    while not (pol.uploads > 0).all():
        action = pol.act(obs)
        obs, *_ = venv.step(action.arms, action.messages, action.pull)
    n_eff = math.ceil(p * 10)
    assert pol.n_eff == n_eff
    eps_msg = epsilon * (n_eff if privacy == "paper" else 1)
    scale = 1.0 / (eps_msg * pol.n[0, 0])
    assert pol.epsilon_effective == pytest.approx(eps_msg)
    while not (pol.rounds_done > 0).all():
        action = pol.act(obs)
        obs, *_ = venv.step(action.arms, action.messages, action.pull)
    for hist in pol.history:  # the mechanism's scale, b_r = 1/(N_eff eps n_r) in paper mode
        assert hist[0].noise_scale == pytest.approx(scale, rel=1e-12)
    noise = pol.ybar - pol.own_sum / pol.s_prev[..., None]  # epoch 1: s_prev = its s_int
    assert np.mean(np.abs(noise)) == pytest.approx(scale, rel=0.08)  # E|Lap(b)| = b
    assert np.mean(noise**2) == pytest.approx(2 * scale**2, rel=0.2)


def _cfg(kw):
    return fedbandit_env.make_vec(HOMOG, num_runs=1, **kw).config


def test_no_noise_at_infinite_epsilon():
    pol = CDPMAB(epsilon=math.inf)
    _play(pol, runs=2, num_agents=5, num_arms=4, horizon=600, means=[0.9, 0.6, 0.3, 0.1])
    assert all(rec.h == 0.0 for hist in pol.history for rec in hist)


# ------------------------------------------------------------------ invariants
def test_best_arm_survives_and_round_bound():
    pol = CDPMAB()
    runs = 20
    venv, _, _ = _play(
        pol, runs=runs, num_agents=10, num_arms=10, horizon=20_000, instance_seed=None
    )
    survived = 0
    for b, inst in enumerate(venv.engine.instances):
        gaps = np.sort(inst.global_means)[::-1]
        min_gap = gaps[0] - gaps[1]
        assert pol.rounds_done[b] <= schedule.max_rounds(min_gap)
        survived += bool(pol.active[b, :, inst.best_arm].all())
        for rec in pol.history[b]:
            assert rec.c + rec.h <= rec.tilde / 2
    assert survived >= runs - 1


def test_round_budget_commits_after_r_rounds():
    pol = CDPMAB(rounds=2, delta=0.3)
    means = [0.9, 0.85, 0.8, 0.75, 0.7]
    _play(pol, runs=3, num_agents=10, num_arms=5, horizon=4000, means=means)
    assert np.all(pol.rounds_done == 2)
    assert np.all(pol.active.sum(axis=2) > 1)  # decision 5: committed to the best aggregate
    assert pol.history[0][-1].tilde == pytest.approx(0.3)
    assert np.all(pol.phase == 2)  # committed


# ------------------------------------------------------------------ orderings of the figures
def _paired_gap(worse, better):
    """Mean paired difference and its standard error."""
    d = worse - better
    return d.mean(), d.std(ddof=1) / math.sqrt(len(d))


def _final(policy, runs, **env_kwargs):
    res = evaluate(
        HOMOG,
        policy,
        runs=runs,
        seed=0,
        env_kwargs=env_kwargs,
        checkpoints=np.array([env_kwargs["horizon"]]),
    )
    return res.final_regret_network, res.cost.sum(axis=1)


@pytest.mark.slow
def test_item1_regret_decreases_in_epsilon():
    kw = dict(num_agents=5, num_arms=10, horizon=3000, instance_seed=None)
    finals = [_final(CDPMAB(epsilon=e), 32, **kw)[0] for e in (0.1, 0.3, 0.5, 1.0, math.inf)]
    for worse, better in zip(finals, finals[1:], strict=False):
        gap, se = _paired_gap(worse, better)
        assert gap > 2 * se > 0


@pytest.mark.slow
def test_item2_regret_decreases_and_cost_increases_in_p():
    kw = dict(num_agents=20, num_arms=20, horizon=4000, instance_seed=None)
    out = [_final(CDPMAB(participation=p), 8, **kw) for p in (0.2, 0.4, 0.6, 0.8, 1.0)]
    for (r_lo, c_lo), (r_hi, c_hi) in zip(out, out[1:], strict=False):
        gap, se = _paired_gap(r_lo, r_hi)
        assert gap > 2 * se > 0
        assert c_hi.mean() > c_lo.mean()


def test_item6_graph_orderings():
    kw = dict(num_agents=30, num_arms=6, horizon=2000, means=[0.9, 0.8, 0.7, 0.6, 0.5, 0.4])
    graphs = [("complete", {}), ("star", {}), ("erdos_renyi", {"p": 0.1}), ("ring", {})]
    out = {g: _final(DDPMAB(), 8, topology=g, topology_kwargs=tk, **kw) for g, tk in graphs}
    cdp, _ = _final(CDPMAB(), 8, **kw)
    assert np.array_equal(out["complete"][0], cdp)
    for a, b in (("star", "erdos_renyi"), ("erdos_renyi", "ring")):
        gap, se = _paired_gap(out[b][0], out[a][0])
        assert gap > 2 * se > 0, (a, b)
    cost = {g: c.mean() for g, (_, c) in out.items()}
    assert cost["star"] < cost["erdos_renyi"] < cost["complete"]
    assert cost["ring"] == pytest.approx(cost["complete"], rel=0.1)


def test_item7_hybrid_cases():
    kw = dict(
        num_agents=100,
        num_arms=6,
        horizon=2000,
        means=[0.9, 0.8, 0.7, 0.6, 0.5, 0.4],
        c1=50.0,
        c2=1.0,
    )
    cases = {
        1: ([20] * 5, "complete", {}),
        2: ([53, 24, 10, 6, 7], "complete", {}),
        3: ([100], "complete", {}),
        4: ([20] * 5, "erdos_renyi", {"p": 0.2}),
        5: ([20] * 5, "star", {}),
        6: ([1] * 100, "complete", {}),
    }
    out = {}
    for case, (sizes, graph, params) in cases.items():
        topo = {"sizes": sizes, "component_graph": graph, **params}
        out[case] = _final(HDPMAB(), 6, topology="hybrid", topology_kwargs=topo, **kw)
    for case in (2, 3, 5, 6):
        assert np.array_equal(out[case][0], out[1][0]), case
    gap, se = _paired_gap(out[4][0], out[1][0])
    assert gap > 2 * se > 0
    cost = {c: v[1].mean() for c, v in out.items()}
    assert cost[5] < cost[4] < cost[1] < cost[2] < cost[3]
    assert cost[6] > 3 * cost[1]


# ------------------------------------------------------------------ light cone, determinism
HORIZON_LC = 700
T_CHANGE = 30


def _light_cone_run(policy, n, perturb=None, **env):
    kw = dict(
        num_agents=n,
        num_arms=4,
        horizon=HORIZON_LC,
        means=np.tile([0.6, 0.4, 0.35, 0.3], (n, 1)),
        **env,
    )
    kw["channels"] = policy.channel_spec(_cfg_h(kw))
    venv = fedbandit_env.make_vec(HETERO, num_runs=3, **kw)
    obs, _ = venv.reset(seed=5)
    policy.reset(venv.facts, venv.agent_rng())
    name = policy.channel_name
    arms, msgs = [], []
    for t in range(1, HORIZON_LC + 1):
        if perturb is not None and t == T_CHANGE:
            venv.engine.means[:, perturb, :] = [0.0, 0.0, 0.0, 1.0]
        action = policy.act(obs)
        arms.append(action.arms.copy())
        send, payload = action.messages.get(name, (np.zeros((3, n), bool), np.zeros((3, n, 4))))
        msgs.append(np.where(send[..., None], payload, 0.0))
        obs, *_ = venv.step(action.arms, action.messages, action.pull)
    return np.stack(arms), np.stack(msgs), venv


def _cfg_h(kw):
    return fedbandit_env.make_vec(HETERO, num_runs=1, **kw).config


@pytest.mark.parametrize(
    ("factory", "n", "env"),
    [
        (DDPMAB, 7, {"topology": "ring"}),
        (DDPMAB, 6, {"topology": "path"}),
        (
            HDPMAB,
            7,
            {"topology": "hybrid", "topology_kwargs": {"sizes": [4, 3], "component_graph": "path"}},
        ),
    ],
)
@pytest.mark.parametrize("j", [0, 2])
def test_light_cone(factory, n, env, j):
    base_arms, base_msgs, venv = _light_cone_run(factory(), n, **env)
    arms, msgs, _ = _light_cone_run(factory(), n, perturb=j, **env)
    if factory is HDPMAB:
        delay = venv.engine.channels["hierarchical"].delay
        dist = np.full((n, n), delay + 1)  # members -> sink -> server -> everyone
        np.fill_diagonal(dist, 0)
    else:
        dist = venv.config.topology.hop_distances
    for i in range(n):
        changed = np.nonzero(
            (arms[:, :, i] != base_arms[:, :, i]).any(axis=1)
            | (msgs[:, :, i] != base_msgs[:, :, i]).any(axis=(1, 2))
        )[0]
        assert changed.size > 0, f"agent {i} never saw agent {j}'s change"
        assert changed[0] + 1 > T_CHANGE + dist[i, j], (i, j, changed[0] + 1)


def test_determinism_and_batch_equals_single_runs():
    kw = dict(topology="star", **SMALL)
    _, arms_a, reg_a = _play(DDPMAB(epsilon=0.3), runs=3, seed=7, record=True, **kw)
    _, arms_b, reg_b = _play(DDPMAB(epsilon=0.3), runs=3, seed=7, record=True, **kw)
    assert np.array_equal(arms_a, arms_b) and np.array_equal(reg_a, reg_b)
    for b in range(3):
        _, arms_1, reg_1 = _play(DDPMAB(epsilon=0.3), runs=1, seed=7 + b, record=True, **kw)
        assert np.array_equal(_pulled(arms_1, 0), _pulled(arms_a, b))
        assert np.array_equal(reg_1[0], reg_a[b])


def test_parallel_env_view_matches_vector_view():
    kw = dict(num_agents=4, num_arms=3, horizon=400, means=[0.8, 0.5, 0.2])
    pol = CDPMAB()
    kw["channels"] = pol.channel_spec(_cfg(kw))
    env = fedbandit_env.make(HOMOG, **kw)
    traj = fedbandit_env.run_episode(env, pol, seed=11)
    _, arms, _ = _play(CDPMAB(), runs=1, seed=11, record=True, **kw)
    dict_arms = np.array(
        [
            [a[f"agent_{i}"]["arm"] if a[f"agent_{i}"].get("pull", 1) else -1 for i in range(4)]
            for a, *_ in traj
        ]
    )
    assert (dict_arms == -1).any()  # the rounds were communication steps
    assert np.array_equal(dict_arms, arms[:, 0])


# ------------------------------------------------------------------ bad input
def _reset(policy, env_id=HOMOG, **kw):
    venv = fedbandit_env.make_vec(env_id, num_runs=1, **kw)
    venv.reset(seed=0)
    policy.reset(venv.facts, venv.agent_rng())


@pytest.mark.parametrize(
    ("policy", "kw", "pattern"),
    [
        (lambda: CDPMAB(), {"channels": ("neighbors",)}, r"cdp_mab: channels\.server"),
        (lambda: DDPMAB(), {"channels": ("server",)}, r"ddp_mab: channels\.flood"),
        (lambda: HDPMAB(), {"channels": ("flood",)}, r"hdp_mab: channels\.hierarchical"),
        (
            lambda: DDPMAB(),
            {
                "topology": "hybrid",
                "topology_kwargs": {"sizes": [3, 3]},
                "channels": {"flood": {"kind": "flood", "dim": 4, "ttl": 1}},
            },
            r"ddp_mab: topology",
        ),
        (
            lambda: DDPMAB(),
            {"topology": "ring", "channels": {"flood": {"kind": "flood", "dim": 4, "ttl": 1}}},
            r"ddp_mab: channels\.flood\.ttl",
        ),
        (
            lambda: CDPMAB(),
            {"horizon": 50, "channels": {"server": {"dim": 4}}},
            r"cdp_mab: horizon",
        ),
        (
            lambda: CDPMAB(),
            {"reward": {"kind": "gaussian", "sigma": 1.0}, "channels": {"server": {"dim": 4}}},
            r"cdp_mab: reward",
        ),
        (
            lambda: CDPMAB(participation=0.5),
            {"channels": {"server": {"dim": 4}}},
            r"cdp_mab: participation",
        ),
        (
            lambda: CDPMAB(),
            {"channels": {"server": {"dim": 4, "aggregate": "sum"}}},
            r"cdp_mab: channels\.server\.aggregate",
        ),
        (
            lambda: CDPMAB(),
            {"channels": {"server": {"dim": 4, "drop_prob": 0.1}}},
            r"cdp_mab: channels\.server\.drop_prob",
        ),
    ],
)
def test_bad_input_raises_before_first_step(policy, kw, pattern):
    env = {"num_agents": 6, "num_arms": 4, "horizon": 5000, "topology": "ring", **kw}
    with pytest.raises(ConfigError, match=pattern):
        _reset(policy(), **env)


@pytest.mark.parametrize(
    ("make", "pattern"),
    [
        (lambda: CDPMAB(epsilon=0), r"cdp_mab: epsilon"),
        (lambda: DDPMAB(epsilon=-1), r"ddp_mab: epsilon"),
        (lambda: HDPMAB(rounds=3), r"hdp_mab: delta"),
        (lambda: CDPMAB(participation=0.0), r"cdp_mab: participation"),
        (lambda: HDPMAB(aggregation="sum"), r"hdp_mab: aggregation"),
    ],
)
def test_bad_parameters_raise_at_construction(make, pattern):
    with pytest.raises(ConfigError, match=pattern):
        make()


def test_registered_ids():
    assert {"cdp_mab", "ddp_mab", "hdp_mab"} <= set(fedbandit_env.list_agents())
    assert isinstance(fedbandit_env.make_agent("ddp_mab", epsilon=0.5), DDPMAB)


def test_per_run_delta_equals_single_runs():
    kw = dict(num_agents=6, num_arms=5, horizon=3000, instance_seed=None)
    _, arms, _ = _play(CDPMAB(rounds=3, delta=(0.3, 0.1)), runs=2, seed=4, record=True, **kw)
    for b, d in enumerate((0.3, 0.1)):
        _, single, _ = _play(CDPMAB(rounds=3, delta=d), runs=1, seed=4 + b, record=True, **kw)
        assert np.array_equal(_pulled(single, 0), _pulled(arms, b))
    with pytest.raises(ConfigError, match=r"cdp_mab: delta: expected one number or 3"):
        _play(CDPMAB(rounds=3, delta=(0.3, 0.1)), runs=3, **kw)


def test_hdp_unweighted_aggregation_equals_weighted_for_equal_sizes():
    """Decision 10: with equal component sizes the mean of component means is the all-agent mean."""
    topo = {
        "topology": "hybrid",
        "topology_kwargs": {"sizes": [4, 4, 4], "component_graph": "path"},
    }
    _, w_arms, _ = _play(HDPMAB(), record=True, **topo, **SMALL)
    pol = HDPMAB(aggregation="unweighted")
    venv, u_arms, _ = _play(pol, record=True, **topo, **SMALL)
    assert venv.facts.channels["hierarchical"]["aggregate"] == "unweighted"
    assert pol.delay == 1  # path of 4: sink eccentricity 2
    assert np.array_equal(w_arms, u_arms)


# ------------------------------------------------------------------ the quiet-act countdown
def _always_checking(cls):
    """The agent with its countdown of quiet acts off: every act looks for ended epochs and
    closed rounds (the behaviour before the countdown)."""
    return type(f"Checking{cls.__name__}", (cls,), {"_quiet_acts": lambda self: 0})


@pytest.mark.parametrize("timing", ["paper", "latency"])
@pytest.mark.parametrize(
    ("cls", "topology"), [(CDPMAB, "ring"), (DDPMAB, "path"), (HDPMAB, "star")]
)
def test_skipping_quiet_acts_changes_nothing(cls, topology, timing):
    """Between epoch ends and round closes the act skips their checks; the arms, the pull
    pattern, the regret and every round's record equal those of an agent that checks every act."""
    kw = dict(num_agents=6, num_arms=5, horizon=6000, instance_seed=None, topology=topology)
    fast_policy, slow_policy = cls(timing=timing), _always_checking(cls)(timing=timing)
    _, fast_arms, fast_regret = _play(fast_policy, record=True, **kw)
    _, slow_arms, slow_regret = _play(slow_policy, record=True, **kw)
    assert np.array_equal(fast_arms, slow_arms)
    assert np.array_equal(fast_regret, slow_regret)
    assert fast_policy.history == slow_policy.history
    assert all(len(h) >= 1 for h in fast_policy.history)  # every run closed a round
