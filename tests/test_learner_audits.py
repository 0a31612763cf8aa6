"""Targeted privacy audits of every private learner (fedbandit_env.bench.audit_agent;
docs/privacy.md "Auditing learners"): at epsilon = 1 each audit stays at or below the epsilon of
the audited release and reaches at least half of it, and a broken variant (noise scale reduced)
audits above it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedbandit_env.bench.audit_agent import (
    TARGETS,
    audit_learner,
    half_noise_variant,
    linear_audit_limits,
    locate,
)
from fedbandit_env.bench.privacy_audit import audit_samples
from fedbandit_env.errors import ConfigError, UnknownIdError

# learner, kwargs at epsilon = 1, privacy-wrapper epsilon, trials
CASES = {
    "gossip_fed_ucb": ({"epsilon": 1.0}, None, 5000),
    "dp_mw_ucb": ({"epsilon": 1.0}, None, 4000),
    "dp_dec_ucb": ({"epsilon": 1.0}, None, 4000),
    "cdp_mab": ({"epsilon": 1.0}, None, 1500),
    "ddp_mab": ({"epsilon": 1.0}, None, 1500),
    "hdp_mab": ({"epsilon": 1.0}, None, 1500),
    "ucb1_shared": ({}, 1.0, 12000),
    "fed_lin_ucb": ({"epsilon": 1.0}, None, 1500),
    "fed_lin_ucb_decentralized": ({"epsilon": 1.0}, None, 1500),
}
@pytest.mark.parametrize("agent_id", list(CASES))
def test_audit_is_within_the_claim_reaches_half_of_it_and_catches_the_broken_variant(agent_id):
    kwargs, wrapper_epsilon, trials = CASES[agent_id]
    ok = audit_learner(agent_id, kwargs, trials=trials, wrapper_epsilon=wrapper_epsilon)
    claim = ok.claim
    assert claim is not None and claim < math.inf
    assert ok.declared is not None and claim <= ok.declared + 1e-12
    assert ok.epsilon_lower <= claim  # a correct learner is not refuted
    assert ok.epsilon_lower >= 0.5 * claim  # power: at least half the release's epsilon
    assert not ok.exceeds_claim()
    bad = audit_learner(
        agent_id, kwargs, trials=trials, wrapper_epsilon=wrapper_epsilon, broken=True
    )
    assert bad.claim == pytest.approx(claim)
    assert bad.epsilon_lower > claim and bad.exceeds_claim()  # the bug is caught


def test_per_release_epsilons_follow_the_mechanisms():
    gossip = audit_learner("gossip_fed_ucb", {"epsilon": 1.0}, trials=100)
    # the counter's budget split over its levels (4 at this horizon): one block per release
    assert gossip.declared == 1.0 and gossip.per_release == pytest.approx(1.0 / 4)
    hybrid = audit_learner("dp_mw_ucb", {"epsilon": 1.0}, trials=100)
    assert hybrid.per_release == pytest.approx(0.5)  # first release: Lap(2D/epsilon)
    linear = audit_learner("fed_lin_ucb", {"epsilon": 1.0}, trials=100)
    # one Gram-tree node at the declared delta = 0.1 is (almost) 0-DP: sigma_N is huge
    assert linear.per_release == 0.0


def test_the_release_is_located_not_hard_coded():
    """The candidates are found by comparing the two inputs under common seeds: a learner whose
    first message comes one step later is audited on that later message."""
    from agents.dp_master_worker_ucb import DPMasterWorkerUCB

    class Late(DPMasterWorkerUCB):
        """Sends nothing on the step it would first send on (a one-step shift)."""

        def act(self, obs):
            action = super().act(obs)
            if obs.step == 2:
                for name, (send, payload) in action.messages.items():
                    action.messages[name] = (np.zeros_like(send), payload)
            return action

    tgt = TARGETS["dp_mw_ucb"]
    first = locate(lambda: DPMasterWorkerUCB(epsilon=1.0), "dp_mw_ucb", tgt, None, pilot=16)
    late = locate(lambda: Late(epsilon=1.0), "dp_mw_ucb", tgt, None, pilot=16)
    assert first[0][0] == 2
    assert late[0][0] > first[0][0]


def test_audits_are_deterministic_for_a_seed():
    a = audit_learner("dp_mw_ucb", {"epsilon": 1.0}, trials=300, seed=3)
    b = audit_learner("dp_mw_ucb", {"epsilon": 1.0}, trials=300, seed=3)
    c = audit_learner("dp_mw_ucb", {"epsilon": 1.0}, trials=300, seed=4)
    assert a.result == b.result and a.candidates == b.candidates
    assert c.result.counts != a.result.counts


def test_audits_are_deterministic_with_either_stream_mode():
    """Block streams (default) and per-run Generators (``block=False``) each give the same audit
    for a seed; both locate the same releases. Commeff's epoch noise goes through the batch's
    whole-batch draw in block mode."""
    for agent_id in ("cdp_mab", "dp_mw_ucb"):
        block = [audit_learner(agent_id, {"epsilon": 1.0}, trials=200, seed=1) for _ in range(2)]
        slow = [audit_learner(agent_id, {"epsilon": 1.0}, trials=200, seed=1, block=False)
                for _ in range(2)]
        assert block[0].result == block[1].result and slow[0].result == slow[1].result
        assert block[0].candidates == slow[0].candidates


def test_linear_learners_cannot_be_audited_above_zero_at_their_delta():
    """The whole Gram-tree transcript of one observation is at most a Gaussian whose total
    variation is below the declared delta = 0.1: its exact epsilon at that delta is 0, so every
    audit's bound is 0. At delta = 0.01 the same calibration leaves a positive epsilon."""
    from fedbandit_env.bench.audit_agent import linear_audit_limits

    for agent_id in ("fed_lin_ucb", "fed_lin_ucb_decentralized"):
        lim = linear_audit_limits(agent_id, {"epsilon": 1.0})
        assert lim.delta == 0.1 and lim.m == 5
        assert lim.sigma_N == pytest.approx(53.589, abs=1e-3)
        assert lim.pair_node_mu < lim.node_mu
        assert lim.transcript_mu == pytest.approx(math.sqrt(2 * lim.rho))
        assert lim.transcript_tv < lim.delta and lim.transcript_epsilon == 0.0
        assert 0.0 < lim.rho_epsilon < 1.0  # the accountant's stream figure is within the claim
    tighter = linear_audit_limits("fed_lin_ucb", {"epsilon": 1.0, "delta": 0.01})
    assert tighter.transcript_tv > tighter.delta and tighter.transcript_epsilon > 0.0


def test_transcript_scope_is_checked_against_the_composed_claim():
    one = audit_learner("ucb1_shared", {}, trials=600, wrapper_epsilon=1.0)
    all_ = audit_learner("ucb1_shared", {}, trials=600, wrapper_epsilon=1.0, scope="transcript")
    messages = len({c[:2] for c in all_.candidates})
    assert len({c[:2] for c in one.candidates}) == 1
    assert messages > 1 and all_.claim == pytest.approx(1.0 * messages)
    assert all_.epsilon_lower <= all_.claim


def test_non_private_learner_audits_its_leak_but_has_no_claim():
    leak = audit_learner("ucb1_shared", {}, trials=400)
    assert leak.declared is None and leak.claim is None and not leak.exceeds_claim()
    assert leak.epsilon_lower > 2.0
    with pytest.raises(ConfigError, match="ucb1_shared: audit: the learner is not private"):
        audit_learner("ucb1_shared", {}, trials=400, broken=True)
    with pytest.raises(ConfigError, match="gossip_ucb: audit: the learner is not private"):
        audit_learner("gossip_ucb", {}, trials=400, require_claim=True)


@pytest.mark.parametrize(
    "call, error, pattern",
    [
        (lambda: audit_learner("no_such_learner"), UnknownIdError, "no_such_learner"),
        (lambda: audit_learner("dp_mw_ucb", trials=99), ConfigError,
         r"dp_mw_ucb: audit: trials: expected an int >= 100, got 99"),
        (lambda: audit_learner("dp_mw_ucb", trials=True), ConfigError, "trials"),
        (lambda: audit_learner("dp_mw_ucb", scope="all"), ConfigError, "scope"),
        (lambda: audit_learner("ucb1", wrapper_epsilon=1.0), ConfigError,
         "ucb1: audit: the learner sends no messages, nothing to audit"),
        (lambda: audit_learner("ucb1_shared", wrapper_epsilon=-1.0), ConfigError,
         "wrapper_epsilon: expected a positive finite number"),
        (lambda: audit_learner("ucb1", trials=200), ConfigError, "sends no messages"),
        (lambda: audit_learner("gossip_ucb", trials=200, broken=True), ConfigError,
         "gossip_ucb: audit: the learner is not private"),
        (lambda: audit_learner("dp_mw_ucb", trials=100.5), ConfigError, "trials"),
        (lambda: linear_audit_limits("dp_mw_ucb"), ConfigError, "not a private Gram-tree"),
        (lambda: linear_audit_limits("no_such_learner"), UnknownIdError, "no_such_learner"),
    ],
)
def test_bad_audit_inputs_are_clear_errors(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()


def test_half_noise_variant_declares_the_given_epsilon_and_runs_at_twice_it():
    from agents.gossip_ucb import GossipFedUCB

    broken = half_noise_variant(GossipFedUCB)(epsilon=0.5)
    assert broken.epsilon == 1.0 and broken.privacy_epsilon == 0.5
    assert half_noise_variant(GossipFedUCB)().privacy_epsilon == GossipFedUCB().privacy_epsilon


def test_multi_release_audit_selects_on_held_out_samples():
    """Several candidate releases: only one carries the shift; the audit finds it, and the
    likelihood-ratio feature that combines two shifted releases beats either alone."""
    rng = np.random.default_rng(0)
    n = 20_000
    a = rng.laplace(0.0, 1.0, size=(n, 3))
    b = rng.laplace(0.0, 1.0, size=(n, 3))
    b[:, 1] += 1.0  # one release at epsilon 1
    one = audit_samples(a, b, names=["r0", "r1", "r2"])
    assert "r1" in one.event and 0.75 < one.epsilon_lower <= 1.0
    b[:, 2] += 1.0  # two releases: epsilon 2 by composition
    both = audit_samples(a, b, likelihood_ratio=True)
    assert "llr" in both.event and 1.0 < both.epsilon_lower <= 2.0
    assert audit_samples(a, a.copy()).epsilon_lower < 0.1


# -- leaderboard and CLI ------------------------------------------------------------------------
def _entry(label: str, epsilon):
    from fedbandit_env.bench.leaderboard import Entry

    return Entry(
        env_key='{"env_id": "FedBandit/Homogeneous-v0", "env_kwargs": {"num_arms": 2}}',
        env_id="FedBandit/Homogeneous-v0", label=label, agent_id=label, runs=2, mean=1.0,
        ci_low=0.5, ci_high=1.5, normalized=None, messages=0.0, floats=0.0, epsilon=epsilon,
        rank=1, baseline="ucb1", steps=np.array([1]), curves=np.zeros((2, 1)),
    )


def test_leaderboard_shows_the_audited_bound_and_flags_a_refuted_claim():
    from fedbandit_env.bench.html import _table
    from fedbandit_env.bench.leaderboard import AuditMark, attach_audits, to_markdown

    plain = [_entry("gossip_fed_ucb", 1.0), _entry("bad_learner", 1.0), _entry("ucb1", None)]
    assert "audited" not in to_markdown(plain)  # no audits: the table is unchanged
    entries = attach_audits(plain, {"gossip_fed_ucb": AuditMark(0.169, 0.25),
                                    "bad_learner": AuditMark(2.1, 1.0)})
    md = to_markdown(entries)
    # the audited column comes after the paired comparison with the baseline
    assert "| privacy ε | paired Δ vs ucb1 (95% CI) | audited ε (95%) |" in md
    assert "| 1 | — | ≥ 0.169 (claim 0.25) |" in md
    assert "**⚠ ≥ 2.1 (claim 1) EXCEEDS**" in md
    ucb1 = [line for line in md.splitlines() if "| ucb1 |" in line]
    assert ucb1 and ucb1[0].endswith("| — | — |")  # ucb1: no declaration, not audited
    page = _table(entries)
    assert "<td class='audit-exceeds'>⚠ ≥ 2.1 (claim 1) EXCEEDS</td>" in page
    assert "<td>≥ 0.169 (claim 0.25)</td>" in page
    heads = [h.split(">", 1)[1] for h in page.split("</th>")[:-1]]
    assert heads[-3:] == ["privacy ε", "paired Δ vs ucb1 (95% CI)", "audited ε (95%)"]


def test_cli_audits_every_private_learner_family(capsys):
    from fedbandit_env.bench.cli import main

    main(["audit", "cdp_mab", "--epsilon", "1", "--trials", "300"])
    out = capsys.readouterr().out
    assert "cdp_mab {'epsilon': 1.0}: declared epsilon 3, per-release epsilon 3" in out
    assert "consistent with the claim" in out
    with pytest.raises(SystemExit) as refuted:  # a refuted claim is a failure: exit status 1
        main(["audit", "ucb1_shared", "--epsilon", "1", "--trials", "300", "--broken"])
    assert refuted.value.code == 1
    out, err = capsys.readouterr()
    assert "under the privacy wrapper (epsilon 1 per message)" in out and "EXCEEDS" in out
    assert "the audit refutes the privacy claim of ucb1_shared" in err
    main(["audit", "gossip_ucb", "--wrapper-epsilon", "1", "--trials", "300"])  # any learner
    assert "gossip_ucb under the privacy wrapper (epsilon 1 per message) {}: declared epsilon 1" in (
        capsys.readouterr().out
    )
    main(["audit", "fed_lin_ucb", "--trials", "200"])
    assert "fed_lin_ucb {}: declared epsilon 1" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["audit", "gossip_fed_ucb", "--kwargs", '{"epsilon": Infinity}', "--epsilon", "1",
              "--trials", "200"])
    assert "gossip_fed_ucb: audit: the learner is not private" in capsys.readouterr().err
    for target in ("dp_mw_ucb", "laplace"):
        with pytest.raises(SystemExit):
            main(["audit", target, "--trials", "50"])
        assert "argument --trials: expected an integer >= 100, got '50'" in (
            capsys.readouterr().err
        )


def test_leaderboard_audits_audit_private_rows_only():
    import json
    from types import SimpleNamespace

    from fedbandit_env.bench.audit_agent import leaderboard_audits

    def row(label, agent_id, epsilon, kwargs):
        return SimpleNamespace(label=label, agent_id=agent_id, epsilon=epsilon,
                               config=json.dumps({"agent_kwargs": kwargs}))

    notes = []
    marks = leaderboard_audits(
        [row("dp_mw_ucb", "dp_mw_ucb", 1.0, {"epsilon": 1.0}),
         row("dp_mw_ucb", "dp_mw_ucb", 1.0, {"epsilon": 1.0}),  # one audit per label
         row("ucb1", "ucb1", None, {}),
         row("gossip_ucb", "gossip_ucb", math.inf, {}),
         row("ghost", "ghost_learner", 1.0, {})],
        trials=300, note=notes.append,
    )
    assert set(marks) == {"dp_mw_ucb"}
    assert marks["dp_mw_ucb"].claim == pytest.approx(0.5) and not marks["dp_mw_ucb"].exceeds
    assert notes and "ghost not audited" in notes[0]


def test_cli_leaderboard_audit_column(tmp_path, capsys):
    from fedbandit_env.bench.cli import main
    from fedbandit_env.bench.executors import run_suite
    from fedbandit_env.bench.store import ResultsStore
    from fedbandit_env.bench.suites import Cell, Suite

    env, small = "FedBandit/Homogeneous-v0", {"num_agents": 3, "num_arms": 2}
    cells = (
        Cell(env, "ucb1", 60, 2, small, {}, label="ucb1"),
        Cell(env, "dp_mw_ucb", 60, 2, small, {"epsilon": 1.0}, label="dp_mw_ucb"),
    )
    store = tmp_path / "r.sqlite"
    run_suite(Suite("tiny", cells, baseline="ucb1"), ResultsStore(store), quiet=True)
    main(["leaderboard", "--store", str(store)])
    assert "audited" not in capsys.readouterr().out
    main(["leaderboard", "--store", str(store), "--audit", "--audit-trials", "300"])
    out = capsys.readouterr().out
    assert "| privacy ε | paired Δ vs ucb1 (95% CI) | audited ε (95%) |" in out
    line = next(x for x in out.splitlines() if "| dp_mw_ucb |" in x)
    assert "(claim 0.5) |" in line and "EXCEEDS" not in line


def test_short_buffers_are_restored_even_on_error():
    from fedbandit_env import seeding
    from fedbandit_env.bench.audit_agent import _short_buffers

    saved = seeding.MAX_CHUNK_STEPS
    with pytest.raises(RuntimeError):
        with _short_buffers(16):
            assert seeding.MAX_CHUNK_STEPS == 17 and seeding.chunk_steps((1,)) == 17
            raise RuntimeError("boom")
    assert seeding.MAX_CHUNK_STEPS == saved


def test_locate_compares_transcripts_of_different_lengths():
    """DP-MW-UCB's server rounds depend on its decisions, so on the two neighbouring inputs the
    same seeds can take different numbers of engine steps (here: the broken variant with one
    Generator per run); the pilot compares the common steps and the audit still catches it."""
    bad = audit_learner("dp_mw_ucb", {"epsilon": 1.0}, trials=1000, broken=True, block=False)
    assert bad.exceeds_claim()


def test_leaderboard_audit_exits_1_when_an_audit_refutes_a_claim(tmp_path, capsys, monkeypatch):
    """A learner that declares epsilon 1 but adds a hundredth of the noise: `leaderboard --audit`
    flags it and exits with status 1 (a script or CI sees the refutation)."""
    from agents.dp_master_worker_ucb import DPMasterWorkerUCB
    from fedbandit_env.agent_registry import _AGENTS
    from fedbandit_env.bench.audit_agent import TARGETS, half_noise_variant
    from fedbandit_env.bench.cli import main
    from fedbandit_env.bench.executors import run_suite
    from fedbandit_env.bench.store import ResultsStore
    from fedbandit_env.bench.suites import Cell, Suite

    monkeypatch.setitem(_AGENTS, "leaky_dp_mw_ucb", half_noise_variant(DPMasterWorkerUCB, 100.0))
    monkeypatch.setitem(TARGETS, "leaky_dp_mw_ucb", TARGETS["dp_mw_ucb"])
    env, small = "FedBandit/Homogeneous-v0", {"num_agents": 3, "num_arms": 2}
    cells = (Cell(env, "ucb1", 60, 2, small, {}, label="ucb1"),
             Cell(env, "leaky_dp_mw_ucb", 60, 2, small, {"epsilon": 1.0}))  # fmt: skip
    store = tmp_path / "r.sqlite"
    run_suite(Suite("tiny", cells, baseline="ucb1"), ResultsStore(store), quiet=True)
    with pytest.raises(SystemExit) as status:
        main(["leaderboard", "--store", str(store), "--audit", "--audit-trials", "1000"])
    assert status.value.code == 1
    out, err = capsys.readouterr()
    line = next(x for x in out.splitlines() if "| leaky_dp_mw_ucb |" in x)
    assert "EXCEEDS" in line
    assert "refutes the privacy claim of leaky_dp_mw_ucb" in err
