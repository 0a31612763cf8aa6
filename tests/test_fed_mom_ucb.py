"""Fed-MoM-UCB (docs/fed-mom-ucb.md): the derived constants of the authors' code, an independent
plain-loop version of the schedule, the median of means and the elimination (exact on replayed
rewards and Byzantine uploads; within 3 standard errors with its own random draws), the
Gaussian client-means instance, the ``code_fedmom`` placement, the ``fedmom_sce1`` /
``fedmom_sce2`` attacks, the presets and bad input."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

import fedbandit_env
from agents.fed_mom_ucb import FedMoMUCB, alpha_of, derived_constants, s_of
from fedbandit_env.adversary import AdversaryConfig, make_attack
from fedbandit_env.bench import evaluate
from fedbandit_env.engine import PULL
from fedbandit_env.errors import ConfigError

HETERO = "FedBandit/Heterogeneous-v0"
MU = [0.3, 0.55, 0.9]
SIGMA, SIGMA_C = 0.5, 0.01


def small_env(n, *, runs=2, horizon=400, mapping="polynomial", lam=0.1, attack="fedmom_sce1",
              num_byzantine=2, beta=0.3, placement="code_fedmom"):  # fmt: skip
    B = FedMoMUCB(lam=lam, mapping=mapping, clients="environment").group_size(n)
    adversary = None
    if num_byzantine:
        adversary = {
            "num_byzantine": num_byzantine,
            "placement": placement,
            "attack": attack,
            "attack_kwargs": {"beta": beta},
        }
    return fedbandit_env.make_vec(
        HETERO,
        num_runs=runs,
        num_agents=n,
        num_arms=len(MU),
        horizon=horizon,
        means=MU,
        client_spread=SIGMA_C,
        global_means="generating",
        instance_seed=None,
        reward={"kind": "gaussian", "sigma": SIGMA},
        topology="star",
        channels={
            "server": {
                "kind": "server",
                "dim": len(MU),
                "aggregate": "median_of_means",
                "group_size": B,
                "grouping": "consecutive",
            }
        },
        adversary=adversary,
    )


# ------------------------------------------------------------------ F1: derived constants
def test_derived_constants_match_the_authors_code():
    k = derived_constants(10, 50_000, 0.2, "arithmetic", 1e-3, 0.05)
    assert (k.M, k.M_Z, k.B, k.G) == (89, 17, 1, 89)
    assert round(k.omega, 4) == 0.1386 and round(k.beta, 4) == 0.1886
    assert derived_constants(10, 100_000, 0.2).M == 92
    assert derived_constants(10, 100_000, 0.25).M == 96
    sce3 = [derived_constants(10, 50_000, 0.1, m) for m in ("geometric", "harmonic", "polynomial")]
    assert [(k.M, k.B) for k in sce3] == [(123, 2), (193, 2), (362, 4)]
    assert derived_constants(10, 50_000, 0.1, "geometric", beta=0.11).beta == 0.11
    assert s_of("linear", 3) == 30 and s_of("doubling", 0) == 1 and s_of("doubling", 4) == 16
    assert alpha_of(0.1, "harmonic") == pytest.approx(0.4 / 1.2)


# ------------------------------------------------------------------ the plain loop
def mom(values, B):
    """Median over the groups of B consecutive clients (the last takes the remainder) of the
    group means, one arm."""
    G = len(values) // B
    means = []
    for g in range(G):
        end = B * (g + 1) if g < G - 1 else len(values)
        group = values[B * g : end]
        means.append(sum(group) / len(group))
    return statistics.median(means)


def plain_fed_mom(K, T, k, sigma, sigma_c, schedule, reward_of, byz_upload, byz):
    """One run of Fed-MoM-UCB written from the authors' code's loop. ``reward_of(t, i, arm)``:
    client i's reward of pull t; ``byz_upload(r)``: the Byzantine clients' uploads (dict i ->
    K means) at the r-th phase end; ``byz``: the Byzantine ids. Returns the arms pulled and the
    honest uploads of each phase end."""
    N = k.M
    sums = [[0.0] * K for _ in range(N)]
    counts = [[0] * K for _ in range(N)]
    active = list(range(K))
    arms, uploads = [], []
    t, p, E, U = 0, 1, math.inf, None
    while t < T:
        if E > k.beta / 4 and len(active) > 1:
            L = s_of(schedule, p) - s_of(schedule, p - 1)
            E = k.width(s_of(schedule, p), sigma, sigma_c)
            p += 1
            for arm in sorted(active):
                for _ in range(L):
                    if t >= T:
                        break
                    for i in range(N):
                        sums[i][arm] += reward_of(t, i, arm)
                        counts[i][arm] += 1
                    arms.append(arm)
                    t += 1
            if t >= T:
                break
            own = [[sums[i][a] / max(counts[i][a], 1) for a in range(K)] for i in range(N)]
            uploads.append([own[i] for i in range(N) if i not in byz])
            fake = byz_upload(len(uploads) - 1)
            sent = [fake[i] if i in byz else own[i] for i in range(N)]
            U = [mom([sent[i][a] for i in range(N)], k.B) for a in range(K)]
            keep = [a for a in active if not U[a] <= max(U) - 2 * E]
            active = keep or active
        else:
            best = max(active, key=lambda a: (U[a], -a))
            arms += [best] * (T - t)
            break
    return arms, uploads


def record(env, policy, seed=0):
    """Run ``policy`` on ``env``; the arms and rewards of every pull, the honest uploads of
    every phase end and the Byzantine payloads the attack sent, per run."""
    obs, _ = env.reset(seed=seed)
    policy.reset(env.facts, env.agent_rng())
    attack = env.engine.adversary.attack
    byz_sent = []
    original = attack.payload

    def spy(channel, dim, view):
        send, payload = original(channel, dim, view)
        byz_sent.append((np.array(send), np.array(payload)))
        return send, payload

    attack.payload = spy
    arms, rewards, uploads, byz_payloads = [], [], [], []
    while not env.engine.truncated:
        action = policy.act(obs)
        obs, r, _, _, info = env.step(action.arms, action.messages, action.pull)
        shape = action.arms.shape
        send, payload = action.messages.get(
            "server", (np.zeros(shape, dtype=bool), np.zeros((*shape, len(MU))))
        )
        pulled = obs.phase == PULL
        arms.append(np.where(pulled, action.arms[:, 0], -1))
        rewards.append(r.copy())
        uploads.append((send.copy(), payload.copy()))
        byz_payloads.append(byz_sent[-1])  # the attack is asked every step
    return np.array(arms), np.array(rewards), uploads, byz_payloads, info


def test_agent_equals_the_plain_loop_on_replayed_rewards_and_byzantine_uploads():
    n, T = 14, 600  # polynomial lambda 0.1: B = floor(14 / ceil(3.36)) = 3, the last group of 5
    env = small_env(n, horizon=T)
    policy = FedMoMUCB(lam=0.1, mapping="polynomial", beta=0.3, clients="environment")
    arms, rewards, uploads, byz_payloads, info = record(env, policy)
    k = policy.k
    assert (k.B, k.G) == (3, 4)
    roles = info.roles
    for b in range(env.num_runs):
        byz = set(np.flatnonzero(roles[b] == 1).tolist())
        assert byz  # the attack is exercised
        steps = np.flatnonzero(arms[:, b] >= 0)
        talk = [s for s, (send, _) in enumerate(uploads) if send[b].any()]

        def byz_upload(r, b=b, byz=byz, talk=talk):
            payload = byz_payloads[talk[r]][1][b]
            return {i: payload[i].tolist() for i in byz}

        plain_arms, plain_uploads = plain_fed_mom(
            len(MU),
            T,
            k,
            SIGMA,
            SIGMA_C,
            "linear",
            lambda t, i, arm, b=b, steps=steps: float(rewards[steps[t], b, i]),
            byz_upload,
            byz,
        )
        assert arms[steps, b].tolist() == plain_arms
        assert len(plain_uploads) >= 2  # some phases and an elimination happened
        honest = [i for i in range(n) if i not in byz]
        for r, s in enumerate(talk[: len(plain_uploads)]):
            ours = uploads[s][1][b][honest]
            assert np.allclose(ours, np.array(plain_uploads[r]), rtol=0, atol=1e-12)


def test_commits_and_the_regret_agrees_with_an_independent_simulation_within_3_se():
    """The plain loop draws its own local means, rewards, Byzantine ids and fake samples."""
    n, T, runs = 9, 400, 40
    lam, beta = 0.2, 0.3
    k = derived_constants(len(MU), T, lam, "arithmetic", beta=beta, num_clients=n)
    gen = np.random.default_rng(12345)
    mu = np.array(MU)
    gaps = mu.max() - mu
    optimal = set(np.flatnonzero(gaps < beta).tolist())
    plain = []
    for _ in range(runs):
        local = gen.normal(mu[None, :], SIGMA_C, size=(n, len(MU)))
        byz = set(gen.integers(n, size=k.M_Z).tolist())
        fake_sums = {i: [0.0] * len(MU) for i in byz}
        fake_counts = {i: [0] * len(MU) for i in byz}
        pulls = []

        def reward_of(t, i, arm, local=local, fake_sums=fake_sums, fake_counts=fake_counts,
                      byz=byz, pulls=pulls):  # fmt: skip
            if i == 0:
                pulls.append(arm)
            if i in byz:
                u = gen.random()
                fake_sums[i][arm] += 0.1 * u if arm in optimal else 0.9 + 0.1 * u
                fake_counts[i][arm] += 1
            return float(local[i, arm] + SIGMA * gen.standard_normal())

        def byz_upload(r, fake_sums=fake_sums, fake_counts=fake_counts):
            return {
                i: [s / max(c, 1) for s, c in zip(fake_sums[i], fake_counts[i], strict=True)]
                for i in fake_sums
            }

        arms, _ = plain_fed_mom(len(MU), T, k, SIGMA, SIGMA_C, "linear", reward_of, byz_upload, byz)
        plain.append(sum(gaps[a] for a in arms))
    env_kwargs = dict(
        num_agents=n, num_arms=len(MU), horizon=T, means=MU, client_spread=SIGMA_C,
        global_means="generating", instance_seed=None,
        reward={"kind": "gaussian", "sigma": SIGMA}, topology="star",
        channels={"server": {"kind": "server", "dim": len(MU), "aggregate": "median_of_means",
                             "group_size": k.B, "grouping": "consecutive"}},
        adversary={"num_byzantine": k.M_Z, "placement": "code_fedmom",
                   "attack": "fedmom_sce1", "attack_kwargs": {"beta": beta}},
    )  # fmt: skip
    res = evaluate(
        HETERO,
        FedMoMUCB,
        runs=runs,
        seed=0,
        env_kwargs=env_kwargs,
        agent_kwargs={"lam": lam, "beta": beta, "clients": "environment"},
    )
    ours = res.regret_by_agent[:, -1, 0]  # lockstep: every client has the same regret
    se = math.sqrt(np.var(ours, ddof=1) / runs + np.var(plain, ddof=1) / runs)
    assert abs(ours.mean() - np.mean(plain)) <= 3 * se + 1e-9
    assert ours.mean() < 0.8 * gaps.mean() * T  # it learns: below uniform play


def test_run_b_of_a_batch_equals_that_seed_alone_and_lockstep():
    env = small_env(9, runs=3, horizon=200, mapping="arithmetic", lam=0.2)
    policy = FedMoMUCB(lam=0.2, beta=0.3, clients="environment")
    arms, rewards, *_ = record(env, policy, seed=5)
    solo = small_env(9, runs=1, horizon=200, mapping="arithmetic", lam=0.2)
    arms1, rewards1, *_ = record(solo, FedMoMUCB(lam=0.2, beta=0.3, clients="environment"), 6)
    n = min(len(arms1), len(arms))
    assert np.array_equal(arms[:n, 1], arms1[:n, 0])
    assert np.array_equal(rewards[:n, 1], rewards1[:n, 0])


# ------------------------------------------------------------------ environment pieces
def test_client_spread_instance_and_generating_global_means():
    env = small_env(50, runs=2, num_byzantine=0)
    env.reset(seed=0)
    eng = env.engine
    assert np.allclose(eng.global_expected, np.array(MU)[None, :])  # the generating means
    assert not np.allclose(eng.means[0], eng.means[1])  # drawn per run
    spread = (eng.means - np.array(MU)).std()
    assert 0.007 < spread < 0.013
    avg = fedbandit_env.make_vec(
        HETERO, num_runs=1, num_agents=50, means=MU, client_spread=0.2, instance_seed=3,
        reward={"kind": "gaussian", "sigma": 1.0}, channels=(),
    )  # fmt: skip
    avg.reset(seed=0)
    assert np.allclose(avg.engine.global_expected[0], avg.engine.means[0].mean(axis=0))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"global_means": "generating"}, "global_means: 'generating' expects client_spread"),
        ({"global_means": "mean"}, "global_means: expected one of"),
        ({"client_spread": -1.0, "means": MU}, "client_spread"),
        ({"client_spread": 0.1}, "means: client_spread expects a vector"),
        ({"client_spread": 0.1, "means": [MU, MU]}, "means: client_spread expects a vector"),
        ({"client_spread": 0.1, "means": MU, "instance": "gossip"}, "instance: client_spread"),
        ({"client_spread": 0.1, "family": "homogeneous", "means": MU}, "client_spread: only"),
    ],
)
def test_client_spread_validation(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        fedbandit_env.make_vec(HETERO, num_runs=1, **kwargs)


def test_code_fedmom_placement_draws_with_replacement():
    env = small_env(10, runs=200, horizon=5, num_byzantine=8)
    _, info = env.reset(seed=0)
    distinct = (info.roles == 1).sum(axis=1)
    assert distinct.max() <= 8 and distinct.min() >= 1
    assert distinct.mean() < 7.5  # with replacement: 10 (1 - 0.9^8) = 5.7 on average
    assert abs(distinct.mean() - 10 * (1 - 0.9**8)) < 0.3
    with pytest.raises(ConfigError, match="adversary.num_crashed: expected 0 with placement"):
        AdversaryConfig(num_byzantine=2, num_crashed=1, placement="code_fedmom")


@pytest.mark.parametrize("attack", ["fedmom_sce1", "fedmom_sce2"])
def test_fedmom_attacks_send_the_running_mean_of_their_fake_draws(attack):
    env = small_env(9, runs=2, horizon=300, mapping="arithmetic", lam=0.2, attack=attack, beta=0.3)
    policy = FedMoMUCB(lam=0.2, beta=0.3, clients="environment")
    arms, rewards, uploads, byz_payloads, info = record(env, policy)
    optimal = np.array(MU).max() - np.array(MU) < 0.3  # arm 2 only
    byz = info.roles == 1
    talk = [s for s, (send, _) in enumerate(uploads) if send.any()]
    assert talk
    for s in talk:
        send, payload = byz_payloads[s]
        b, i = np.nonzero(byz)
        assert send[b, i].all() == uploads[s][0][b, i].all()  # sends when the learner would
        values = payload[b, i]  # (Z, K)
        assert ((values[:, optimal] >= 0) & (values[:, optimal] < 0.1)).all()
        if attack == "fedmom_sce1":
            assert ((values[:, ~optimal] >= 0.9) & (values[:, ~optimal] < 1.0)).all()
        else:  # the honest payload elsewhere
            assert np.array_equal(values[:, ~optimal], uploads[s][1][b, i][:, ~optimal])
    # the running mean moves by one draw per pull: recover each draw from two uploads
    s0, s1 = talk[0], talk[1]
    b, i = np.argwhere(byz)[0]
    pulls0 = (arms[:s0, b] == 2).sum()
    pulls1 = (arms[:s1, b] == 2).sum()
    m0, m1 = byz_payloads[s0][1][b, i, 2], byz_payloads[s1][1][b, i, 2]
    added = (m1 * pulls1 - m0 * pulls0) / max(pulls1 - pulls0, 1)
    assert pulls1 > pulls0 and 0 <= added < 0.1


def test_fedmom_attack_errors_name_the_attack_and_field():
    with pytest.raises(ConfigError, match="attack 'fedmom_sce1': beta"):
        make_attack("fedmom_sce1", beta=-1)
    with pytest.raises(ConfigError, match="attack 'fedmom_sce2': beta"):
        make_attack("fedmom_sce2", beta=0)
    with pytest.raises(ConfigError, match="attack 'fedmom_sce1': knowledge: expected 'omniscient'"):
        AdversaryConfig(num_byzantine=1, attack="fedmom_sce1", knowledge="oblivious")
    with pytest.raises(
        ConfigError, match="attack 'fedmom_sce1': channel 'server': expected payload dim M"
    ):
        fedbandit_env.make_vec(
            HETERO, num_runs=1, num_agents=4, num_arms=3, channels={"server": {"kind": "server", "dim": 2}},
            adversary={"num_byzantine": 1, "attack": "fedmom_sce1"},
        ).reset(seed=0)  # fmt: skip


# ------------------------------------------------------------------ presets
@pytest.mark.parametrize(
    "scenario, lam, mapping, horizon, epsilon, beta",
    [(1, 0.2, "arithmetic", 50_000, 0.05, None), (2, 0.2, "arithmetic", 100_000, 0.05, 0.189),
     (3, 0.1, "geometric", 50_000, 0.01, 0.11)],
)  # fmt: skip
def test_presets_have_the_derived_constants(scenario, lam, mapping, horizon, epsilon, beta):
    env_id = f"FedBandit/Byzantine-FedMoM-Sce{scenario}-v0"
    k = derived_constants(10, horizon, lam, mapping, 1e-3, epsilon, beta)
    env = fedbandit_env.make_vec(env_id, num_runs=1)
    cfg = env.config
    assert (cfg.num_agents, cfg.horizon) == (k.M, horizon)
    assert cfg.channels["server"]["group_size"] == k.B
    assert cfg.adversary.num_byzantine == k.M_Z and cfg.adversary.placement == "code_fedmom"
    mu = np.asarray(cfg.client_means)
    preset_beta = cfg.adversary.attack_kwargs["beta"]
    assert np.array_equal(mu.max() - mu < preset_beta, mu.max() - mu < k.beta)
    policy = FedMoMUCB(lam=lam, mapping=mapping, epsilon=epsilon, beta=beta)
    env.reset(seed=0)
    policy.reset(env.facts, env.agent_rng())  # the derived M and B are accepted
    assert policy.k == k


def test_preset_runs_and_charges_c1_per_client_and_phase_end():
    res = evaluate(
        "FedBandit/Byzantine-FedMoM-Sce1-v0",
        FedMoMUCB,
        runs=2,
        seed=0,
        env_kwargs={"horizon": 4000},
        agent_kwargs={"clients": "environment"},
    )
    assert res.roles.shape == (2, 89) and (res.roles == 1).sum(axis=1).max() <= 17
    assert np.isfinite(res.honest_regret_mean).all()
    cost = res.cost.sum(axis=1)  # c1 = C = 1 per client upload: M = 89 per phase end
    assert cost.min() > 0 and np.all(cost % 89 == 0)


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"lam": 0.5}, "fed_mom_ucb: lam"),
        ({"lam": 0.0, "mapping": "geometric"}, "fed_mom_ucb: lam: expected eta"),
        ({"mapping": "median"}, "fed_mom_ucb: mapping: expected one of"),
        ({"schedule": "cubic"}, "fed_mom_ucb: schedule: expected one of"),
        ({"delta": 1.0}, "fed_mom_ucb: delta"),
        ({"beta": 0.0}, "fed_mom_ucb: beta"),
        ({"sigma": 0.0}, "fed_mom_ucb: sigma"),
        ({"sigma_c": -1}, "fed_mom_ucb: sigma_c"),
        ({"clients": "all"}, "fed_mom_ucb: clients: expected one of"),
    ],
)
def test_config_errors(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        FedMoMUCB(**kwargs)


def test_reset_errors_name_the_field_and_expected_value():
    env = small_env(9, runs=1, horizon=100, mapping="arithmetic", lam=0.2, num_byzantine=0)
    env.reset(seed=0)
    with pytest.raises(ConfigError, match=r"fed_mom_ucb: num_agents: expected M = \d+ clients"):
        FedMoMUCB(lam=0.2).reset(env.facts, env.agent_rng())
    with pytest.raises(
        ConfigError, match="fed_mom_ucb: channels.server.group_size: expected 3, got 1"
    ):
        FedMoMUCB(lam=0.1, mapping="polynomial", clients="environment").reset(
            env.facts, env.agent_rng()
        )
    plain = fedbandit_env.make_vec(HETERO, num_runs=1, num_agents=9, num_arms=3)
    plain.reset(seed=0)
    with pytest.raises(ConfigError, match="fed_mom_ucb: channels.server: expected"):
        FedMoMUCB(clients="environment").reset(plain.facts, plain.agent_rng())
