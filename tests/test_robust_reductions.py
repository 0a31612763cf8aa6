"""Robust reductions of the ``neighbors`` and ``server`` channels (docs/channels.md, "Robust
reductions"; fedbandit_env/network/robust.py): median, trimmed mean, median of means and
geometric median equal a plain Python reduction over the messages that arrived (written here with
sorted lists and ``statistics.median``), on several graphs and with drops; the ``degenerate`` flag
of the trimmed mean; the random grouping's own stream; the charges of any other reduction; the
configuration errors; the PettingZoo view."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fedbandit_env
from fedbandit_env.agent_views import channel_delivery
from fedbandit_env.errors import ConfigError
from fedbandit_env.graphs import Topology
from fedbandit_env.network import NeighborsAggregate, NeighborsChannel, ServerChannel
from fedbandit_env.seeding import BatchedRNG

SEEDS = [4, 5, 6]
TOPOLOGIES = {
    "ring": lambda: Topology.from_graph("ring", 9),
    "complete": lambda: Topology.from_graph("complete", 8),
    "random_regular": lambda: Topology.from_graph("random_regular", 10, seed=2, degree=4),
    "star": lambda: Topology.from_graph("star", 7),
    "hybrid_complete": lambda: Topology.hybrid([4, 1, 5, 3], "complete"),
}
CASES = {
    "median": ("median", {}),
    "trimmed_mean-1": ("trimmed_mean", {}),
    "trimmed_mean-0": ("trimmed_mean", {"trim": 0}),
    "trimmed_mean-2": ("trimmed_mean", {"trim": 2}),
    "median_of_means-1": ("median_of_means", {}),
    "median_of_means-2": ("median_of_means", {"group_size": 2}),
    "median_of_means-3": ("median_of_means", {"group_size": 3}),
    "median_of_means-2-random": ("median_of_means", {"group_size": 2, "grouping": "random"}),
    "geometric_median": ("geometric_median", {}),
}


# ------------------------------------------------------------ plain Python references
def ref_weiszfeld(points: list[list[float]]) -> list[float]:
    """Weiszfeld's algorithm (Vardi & Zhang's modified step) as a loop over points: from the
    coordinate-wise median; points within 1e-8 of the estimate coincide with it; at most 100
    steps, stop once a step is below 1e-6; then the nearest point if its sum of distances is
    smaller by more than a relative 1e-6."""
    dim = len(points[0])
    z = [statistics.median(p[k] for p in points) for k in range(dim)]
    for _ in range(100):
        far = [p for p in points if math.dist(p, z) >= 1e-8]
        eta = len(points) - len(far)
        if not far:
            break
        weights = [1.0 / math.dist(p, z) for p in far]
        total = sum(weights)
        mean = [sum(w * p[k] for w, p in zip(weights, far, strict=True)) / total
                for k in range(dim)]  # fmt: skip
        pull = [sum(w * (p[k] - z[k]) for w, p in zip(weights, far, strict=True))
                for k in range(dim)]  # fmt: skip
        r = math.hypot(*pull)
        g = 0.0 if eta == 0 else (1.0 if r == 0 else min(1.0, eta / r))
        new = [(1 - g) * m + g * zk for m, zk in zip(mean, z, strict=True)]
        step = math.dist(new, z)
        z = new
        if step < 1e-6:
            break
    nearest = min(points, key=lambda p: math.dist(p, z))  # a data point, if clearly better
    at_point = sum(math.dist(p, nearest) for p in points)
    return list(nearest) if at_point < (1 - 1e-6) * sum(math.dist(p, z) for p in points) else z


def reference(reduce: str, points: list[list[float]], trim=1, group_size=1):
    """(value, degenerate) of ``reduce`` over ``points`` (the arrived payloads, in grouping
    order: ascending sender id, or the drawn order of the random grouping)."""
    if not points:
        return None, False
    if reduce == "geometric_median":
        return ref_weiszfeld(points), False
    dim, c = len(points[0]), len(points)
    out, degenerate = [], False
    for k in range(dim):
        col = [p[k] for p in points]
        if reduce == "median":
            out.append(statistics.median(col))
        elif reduce == "trimmed_mean":
            s = sorted(col)
            if c <= 2 * trim:
                degenerate = True
                out.append(statistics.median(s))
            else:
                kept = s[trim : c - trim]
                out.append(sum(kept) / len(kept))
        else:  # median of means
            groups = max(1, c // group_size)
            parts = [col[g * group_size : (g + 1) * group_size] for g in range(groups - 1)]
            parts.append(col[(groups - 1) * group_size :])
            out.append(statistics.median([sum(p) / len(p) for p in parts]))
    return out, degenerate


def assert_close(reduce, got, want, points, what):
    scale = max(1.0, max(abs(x) for p in points for x in p))
    if reduce == "median":
        assert np.array_equal(got, want), what
    elif reduce == "geometric_median":
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * scale, err_msg=what)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * scale, err_msg=what)


# -------------------------------------------------------------------------- neighbors
def neighbors_pair(topo, dim, reduce, options, drop_prob):
    """The padded channel (which shows what arrived) and the reducing one, on the same seeds,
    and the random grouping's uniforms (its own sub-stream ``grouping``) when it has one."""
    kw = {"c1": 1.0, "c2": 2.0, "drop_prob": drop_prob}
    padded = NeighborsChannel("n", topo, dim, **kw)
    robust = NeighborsChannel("n", topo, dim, reduce=reduce, **options, **kw)
    for ch in (padded, robust):
        ch.reset(BatchedRNG.for_runs(SEEDS, "network").child("channel/n"))
    order = None
    if options.get("grouping") == "random":
        rng = BatchedRNG.for_runs(SEEDS, "network").child("channel/n").child("grouping")
        order = rng.buffered("uniform", (topo.num_agents, padded.max_degree))
    return padded, robust, order


def random_messages(rng, n, dim, step, integer):
    send = rng.random((len(SEEDS), n)) < (0.8 if step > 1 else 0.2)
    payload = rng.standard_normal((len(SEEDS), n, dim)) * 10.0 ** rng.integers(-3, 4, (1, n, 1))
    return send, (np.round(payload) if integer else payload)


@pytest.mark.parametrize("kind", sorted(TOPOLOGIES))
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("drop_prob", [0.0, 0.3])
def test_neighbors_reduction_equals_a_python_loop(kind, case, drop_prob):
    reduce, options = CASES[case]
    topo = TOPOLOGIES[kind]()
    rng = np.random.default_rng(sorted(TOPOLOGIES).index(kind) * 100 + sorted(CASES).index(case))
    for dim, integer in ((3, False), (1, True)):  # integers: ties in the sorts
        padded, robust, order = neighbors_pair(topo, dim, reduce, options, drop_prob)
        for step in range(1, 5):
            send, payload = random_messages(rng, topo.num_agents, dim, step, integer)
            u = order.next() if order is not None else None
            ref, ref_charge = padded.transmit(step, send, payload)
            got, charge = robust.transmit(step, send, payload)
            assert isinstance(got, NeighborsAggregate)
            assert np.array_equal(got.count, ref.mask.sum(axis=2))
            for field in ("messages", "floats", "cost", "dropped", "sent"):  # same messages
                assert np.array_equal(getattr(charge, field), getattr(ref_charge, field)), field
            for b in range(len(SEEDS)):
                for i in range(topo.num_agents):
                    slots = [d for d in range(padded.max_degree) if ref.mask[b, i, d]]
                    if u is not None:
                        slots.sort(key=lambda d: u[b, i, d])
                    points = [list(ref.payload[b, i, d]) for d in slots]
                    want, degenerate = reference(reduce, points, **options_of(options))
                    assert bool(got.degenerate[b, i]) == degenerate, (b, i)
                    if want is None:
                        assert np.array_equal(got.value[b, i], np.zeros(dim))
                    else:
                        assert_close(reduce, got.value[b, i], want, points, (kind, step, b, i))


def options_of(options):
    return {k: v for k, v in options.items() if k in ("trim", "group_size")}


# ----------------------------------------------------------------------------- server
class Replay:
    """Stands in for a channel's buffered uniform stream: ``next()`` returns ``value``."""

    value: np.ndarray

    def next(self, *args):
        return self.value


def server_reference_step(ch, send, payload, drop_u, order, options):
    """The server's (value, degenerate) per run from a loop over agents: uploads of the
    participating senders whose drop uniform is >= drop_prob, in ascending id (or ``order``)."""
    out = []
    for b in range(send.shape[0]):
        ids = [j for j in range(ch.num_agents) if send[b, j] and drop_u[b, j] >= ch.drop_prob]
        if order is not None:
            ids.sort(key=lambda j: order[b, j])
        points = [list(payload[b, j]) for j in ids]
        out.append((points, reference(ch.aggregate, points, **options_of(options))))
    return out


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("drop_prob", [0.0, 0.3])
def test_server_reduction_equals_a_python_loop(case, drop_prob):
    reduce, options = CASES[case]
    n, dim = 9, 3
    ch = ServerChannel("s", Topology.from_graph("complete", n), dim, c1=1.0, c2=2.0,
                       aggregate=reduce, drop_prob=drop_prob, **options)  # fmt: skip
    ch.reset(BatchedRNG.for_runs(SEEDS, "network").child("channel/s"))
    drops, groups = Replay(), Replay()
    ch._drops = drops
    if ch._groups is not None:
        ch._groups = groups
    rng = np.random.default_rng(sorted(CASES).index(case))
    for step in range(1, 7):
        send, payload = random_messages(rng, n, dim, step, integer=step % 2 == 0)
        drops.value = rng.random(send.shape)
        groups.value = rng.random(send.shape)
        got, _ = ch.transmit(step, send, payload)
        order = groups.value if ch._groups is not None else None
        refs = server_reference_step(ch, send, payload, drops.value, order, options)
        for b, (points, (want, degenerate)) in enumerate(refs):
            assert int(got.count[b]) == len(points)
            assert bool(got.degenerate[b]) == degenerate
            if want is None:
                assert np.array_equal(got.aggregate[b], np.zeros(dim))
            else:
                assert_close(reduce, got.aggregate[b], want, points, (case, step, b))


@pytest.mark.parametrize("case", sorted(CASES))
def test_server_robust_aggregate_charges_and_draws_like_the_mean(case):
    """Same uploads, broadcast, charges, participation and drops as ``aggregate="mean"``: the
    random grouping draws from its own sub-stream, so no other stream moves."""
    reduce, options = CASES[case]
    n, dim = 8, 2
    topo = Topology.from_graph("ring", n)
    kw = {"c1": 3.0, "c2": 2.0, "drop_prob": 0.3, "participation": 0.6, "charge_broadcast": True}
    mean = ServerChannel("s", topo, dim, **kw)
    robust = ServerChannel("s", topo, dim, aggregate=reduce, **options, **kw)
    for ch in (mean, robust):
        ch.reset(BatchedRNG.for_runs(SEEDS, "network").child("channel/s"))
    rng = np.random.default_rng(0)
    for step in range(1, 8):
        send, payload = random_messages(rng, n, dim, step, integer=False)
        a, ca = mean.transmit(step, send, payload)
        b, cb = robust.transmit(step, send, payload)
        assert np.array_equal(a.count, b.count) and np.array_equal(a.participating, b.participating)
        for field in ("messages", "floats", "cost", "dropped", "sent"):
            assert np.array_equal(getattr(ca, field), getattr(cb, field)), field


def test_neighbors_random_grouping_moves_no_other_stream_and_batches_like_single_runs():
    topo = TOPOLOGIES["random_regular"]()
    kw = {"c1": 1.0, "c2": 2.0, "drop_prob": 0.4, "reduce": "median_of_means", "group_size": 2}
    plain = NeighborsChannel("n", topo, 2, **kw)
    shuffled = NeighborsChannel("n", topo, 2, grouping="random", **kw)
    single = [NeighborsChannel("n", topo, 2, grouping="random", **kw) for _ in SEEDS]
    for ch in (plain, shuffled):
        ch.reset(BatchedRNG.for_runs(SEEDS, "network").child("channel/n"))
    assert plain.silent_step_is_empty is False and shuffled.silent_step_is_empty is False
    for ch, seed in zip(single, SEEDS, strict=True):
        ch.reset(BatchedRNG.for_runs([seed], "network").child("channel/n"))
    rng = np.random.default_rng(1)
    differ = False
    for step in range(1, 10):
        send, payload = random_messages(rng, topo.num_agents, 2, step, integer=False)
        if step == 3:
            send[:] = False  # a silent step still draws
        a, ca = plain.transmit(step, send, payload)
        b, cb = shuffled.transmit(step, send, payload)
        assert np.array_equal(a.count, b.count) and np.array_equal(ca.dropped, cb.dropped)
        differ |= not np.array_equal(a.value, b.value)
        for r, ch in enumerate(single):
            one, _ = ch.transmit(step, send[r : r + 1], payload[r : r + 1])
            assert np.array_equal(one.value[0], b.value[r]) and np.array_equal(
                one.count[0], b.count[r]
            )
    assert differ  # the order does change the groups


# ------------------------------------------------------------------ property tests
@st.composite
def uploads(draw):
    n = draw(st.integers(1, 9))
    dim = draw(st.integers(1, 3))
    ints = draw(st.booleans())
    value = st.integers(-4, 4).map(float) if ints else st.floats(-1e6, 1e6, allow_nan=False)
    payload = np.array(draw(st.lists(st.lists(value, min_size=dim, max_size=dim),
                                     min_size=n, max_size=n)))  # fmt: skip
    send = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    return send, payload


@settings(max_examples=50, deadline=None, derandomize=True)
@given(
    uploads(),
    st.sampled_from(sorted(CASES)),
    st.integers(0, 3),
    st.integers(1, 4),
)
def test_server_reductions_property(upload, case, trim, group_size):
    send, payload = upload
    reduce, options = CASES[case]
    options = dict(options)
    if reduce == "trimmed_mean":
        options["trim"] = trim
    if reduce == "median_of_means":
        options["group_size"] = group_size
        options.pop("grouping", None)
    n, dim = payload.shape
    topo = Topology.from_graph("complete", n)
    ch = ServerChannel("s", topo, dim, c1=1.0, c2=1.0, aggregate=reduce, **options)
    ch.reset(BatchedRNG.for_runs([0], "network").child("channel/s"))
    got, _ = ch.transmit(1, send[None], payload[None])
    points = [list(payload[j]) for j in range(n) if send[j]]
    want, degenerate = reference(reduce, points, **options_of(options))
    assert bool(got.degenerate[0]) == degenerate
    if want is None:
        assert np.array_equal(got.aggregate[0], np.zeros(dim)) and got.count[0] == 0
    else:
        assert_close(reduce, got.aggregate[0], want, points, case)
    if reduce == "geometric_median" and len(points) > 1:
        # no better than the geometric median by a relative 1e-5 (scipy's minimiser)
        from scipy.optimize import minimize

        pts = np.asarray(points)
        cost = lambda z: np.sqrt(((pts - z) ** 2).sum(axis=1)).sum()  # noqa: E731
        best = minimize(cost, pts.mean(axis=0), method="Nelder-Mead",
                        options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 20000})  # fmt: skip
        scale = max(1.0, np.abs(pts).max())
        assert cost(got.aggregate[0]) <= min(best.fun, cost(pts.mean(axis=0))) + 1e-5 * scale


@settings(max_examples=50, deadline=None, derandomize=True)
@given(
    st.sampled_from(["ring", "complete", "random_regular"]),
    st.sampled_from(sorted(CASES)),
    st.integers(0, 2**31 - 1),
)
def test_neighbors_reductions_property(kind, case, seed):
    reduce, options = CASES[case]
    topo = TOPOLOGIES[kind]()
    rng = np.random.default_rng(seed)
    padded, robust, order = neighbors_pair(topo, 2, reduce, options, 0.25)
    send, payload = random_messages(rng, topo.num_agents, 2, 2, integer=bool(seed % 2))
    u = order.next() if order is not None else None
    ref, _ = padded.transmit(1, send, payload)
    got, _ = robust.transmit(1, send, payload)
    for b in range(len(SEEDS)):
        for i in range(topo.num_agents):
            slots = [d for d in range(padded.max_degree) if ref.mask[b, i, d]]
            if u is not None:
                slots.sort(key=lambda d: u[b, i, d])
            points = [list(ref.payload[b, i, d]) for d in slots]
            want, degenerate = reference(reduce, points, **options_of(options))
            assert bool(got.degenerate[b, i]) == degenerate
            if want is None:
                assert np.array_equal(got.value[b, i], [0.0, 0.0])
            else:
                assert_close(reduce, got.value[b, i], want, points, (kind, b, i))


def sum_of_distances(points: np.ndarray, z: np.ndarray) -> float:
    return float(np.sqrt(((points - z) ** 2).sum(axis=1)).sum())


@settings(max_examples=50, deadline=None, derandomize=True)
@given(
    st.integers(2, 8),
    st.integers(2, 3),
    st.booleans(),
    st.integers(0, 2**31 - 1),
)
def test_geometric_median_minimises_the_sum_of_distances(n, dim, ints, seed):
    """Against scipy.optimize.minimize of the sum of distances: no worse by a relative 1e-5
    (integer points put the coordinate-wise median, the start, on a data point often)."""
    from scipy.optimize import minimize

    rng = np.random.default_rng(seed)
    pts = rng.integers(-3, 4, (n, dim)).astype(float) if ints else rng.normal(size=(n, dim))
    ch = ServerChannel("s", Topology.from_graph("complete", n), dim, c1=1.0, c2=1.0,
                       aggregate="geometric_median")  # fmt: skip
    ch.reset(BatchedRNG.for_runs([0], "network").child("channel/s"))
    got, _ = ch.transmit(1, np.ones((1, n), bool), pts[None])
    best = min(
        minimize(lambda z: sum_of_distances(pts, z), start, method="Nelder-Mead",
                 options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 20000}).fun
        for start in (pts.mean(axis=0), np.median(pts, axis=0))
    )  # fmt: skip
    assert sum_of_distances(pts, got.aggregate[0]) <= best * (1 + 1e-5) + 1e-9


def test_geometric_median_leaves_a_data_point_it_starts_on():
    """(0, 0), (1, 0), (0, 1): the coordinate-wise median is the data point (0, 0); the
    geometric median is the Fermat point (t, t), t = (3 - sqrt 3) / 6."""
    ch = ServerChannel("s", Topology.from_graph("complete", 3), 2, c1=1.0, c2=1.0,
                       aggregate="geometric_median")  # fmt: skip
    ch.reset(BatchedRNG.for_runs([0], "network").child("channel/s"))
    pts = np.array([[[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]])
    got, _ = ch.transmit(1, np.ones((1, 3), bool), pts)
    np.testing.assert_allclose(got.aggregate[0], [(3 - math.sqrt(3)) / 6] * 2, rtol=1e-5)


# ------------------------------------------------------------------------ degenerate
def test_trimmed_mean_with_too_few_messages_is_the_median_and_flagged():
    """Ring: two neighbours each, trim 1, so every receiver that heard both is degenerate
    and gets their mean (the median of two); one heard: that value; none: 0, not flagged."""
    topo = Topology.from_graph("ring", 5)
    ch = NeighborsChannel("n", topo, 1, c1=1.0, c2=1.0, reduce="trimmed_mean")
    ch.reset(BatchedRNG.for_runs([0], "network").child("channel/n"))
    send = np.array([[True, False, True, True, False]])
    payload = np.array([[[1.0], [9.0], [4.0], [10.0], [7.0]]])
    got, _ = ch.transmit(1, send, payload)
    assert got.count.tolist() == [[0, 2, 1, 1, 2]]
    assert got.degenerate.tolist() == [[False, True, True, True, True]]
    assert got.value[0, :, 0].tolist() == [0.0, 2.5, 10.0, 4.0, 5.5]

    server = ServerChannel("s", topo, 1, c1=1.0, c2=1.0, aggregate="trimmed_mean", trim=2)
    server.reset(BatchedRNG.for_runs([0, 1], "network").child("channel/s"))
    four = np.array([[True, True, True, True, False], [True] * 5])
    got, _ = server.transmit(1, four, np.concatenate([payload, payload]))
    assert got.degenerate.tolist() == [True, False]
    assert got.aggregate[:, 0].tolist() == [statistics.median([1.0, 9.0, 4.0, 10.0]), 7.0]
    for other in ("median", "median_of_means", "geometric_median"):
        s = ServerChannel("s", topo, 1, c1=1.0, c2=1.0, aggregate=other)
        s.reset(BatchedRNG.for_runs([0, 1], "network").child("channel/s"))
        assert not s.transmit(1, four, np.concatenate([payload, payload]))[0].degenerate.any()


def test_median_of_means_merges_the_remainder_into_the_last_group():
    """7 senders in groups of 3: groups (0, 1, 2) and (3, 4, 5, 6); the median of the two
    means is their mean."""
    topo = Topology.from_graph("complete", 8)
    ch = ServerChannel("s", topo, 1, c1=1.0, c2=1.0, aggregate="median_of_means", group_size=3)
    ch.reset(BatchedRNG.for_runs([0], "network").child("channel/s"))
    send = np.array([[True] * 7 + [False]])
    payload = np.array([[[0.0], [3.0], [6.0], [100.0], [0.0], [0.0], [0.0], [5.0]]])
    got, _ = ch.transmit(1, send, payload)
    assert got.aggregate[0, 0] == (3.0 + 25.0) / 2


# ---------------------------------------------------------------------------- errors
def test_unknown_reduction_names_the_field_and_the_choices():
    topo = Topology.from_graph("ring", 4)
    with pytest.raises(ConfigError, match=r"channels\.n\.reduce: expected one of .*'median'.*"
                       r"'trimmed_mean'.*'median_of_means'.*'geometric_median'"):  # fmt: skip
        NeighborsChannel("n", topo, 2, c1=1.0, c2=1.0, reduce="mode")
    with pytest.raises(ConfigError, match=r"channels\.s\.aggregate: expected one of .*'mean'.*"
                       r"'sum'.*'median'.*'geometric_median'"):  # fmt: skip
        ServerChannel("s", topo, 2, c1=1.0, c2=1.0, aggregate="mode")


@pytest.mark.parametrize("kind", ["neighbors", "server"])
@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"trim": -1, "R": "trimmed_mean"}, r"\.trim: expected an int >= 0, got -1"),
        ({"trim": 1.5, "R": "trimmed_mean"}, r"\.trim: expected an int >= 0"),
        ({"trim": 1, "R": "mean"}, r"\.trim: expected no trim unless \w+='trimmed_mean'"),
        ({"group_size": 0, "R": "median_of_means"}, r"\.group_size: expected an int >= 1, got 0"),
        ({"group_size": 2, "R": "median"}, r"\.group_size: expected no group_size unless"),
        (
            {"grouping": "shuffled", "R": "median_of_means"},
            r"\.grouping: expected one of \['consecutive', 'random'\], got 'shuffled'",
        ),
        ({"grouping": "random", "R": "sum"}, r"\.grouping: expected no grouping unless"),
    ],
)
def test_bad_robust_options_name_the_field_and_the_expected_value(kind, options, match):
    options = dict(options)
    field = "reduce" if kind == "neighbors" else "aggregate"
    options[field] = options.pop("R")
    with pytest.raises(ConfigError, match=rf"channels\.c{match}"):
        fedbandit_env.make(
            "FedBandit/Heterogeneous-v0",
            num_agents=4,
            channels={"c": {"kind": kind, "dim": 2, **options}},
        )


# ------------------------------------------------------------------- PettingZoo view
@pytest.mark.parametrize("kind", ["neighbors", "server"])
@pytest.mark.parametrize("reduce", ["median", "trimmed_mean", "median_of_means"])
def test_parallel_view_observes_the_robust_reduction(kind, reduce):
    field = "reduce" if kind == "neighbors" else "aggregate"
    spec = {"kind": kind, "dim": 2, field: reduce}
    env = fedbandit_env.make("FedBandit/Heterogeneous-v0", num_agents=4, num_arms=3,
                             topology="complete", channels={"c": spec})  # fmt: skip
    env.reset(seed=0)
    payloads = [np.array([1.0, -1.0]), np.array([2.0, 5.0]), np.array([7.0, 0.0]), np.ones(2)]
    actions = {
        a: {"arm": 0, "messages": {"c": {"send": 1, "payload": payloads[i]}}}
        for i, a in enumerate(env.agents)
    }
    obs, *_ = env.step(actions)
    channel = env.unwrapped.engine.channels["c"]
    per_agent = [obs[a]["channels"]["c"] for a in env.agents]
    for a in env.agents:
        assert env.observation_space(a).contains(obs[a])
    keys = {"value", "count"} if kind == "neighbors" else {"aggregate", "count", "participating"}
    if reduce == "trimmed_mean":
        keys |= {"degenerate"}
    assert set(per_agent[0]) == keys
    heard = per_agent[0]["value" if kind == "neighbors" else "aggregate"]
    if kind == "neighbors":  # agent 0 hears agents 1, 2, 3
        want = {"median": [2.0, 1.0], "trimmed_mean": [2.0, 1.0], "median_of_means": [2.0, 1.0]}
        assert np.array_equal(heard, want[reduce]) and int(per_agent[0]["count"]) == 3
    else:  # the server hears all four
        want = {"median": [1.5, 0.5], "trimmed_mean": [1.5, 0.5], "median_of_means": [1.5, 0.5]}
        assert np.array_equal(heard, want[reduce]) and int(per_agent[0]["count"]) == 4
    back = channel_delivery(channel, per_agent)  # the per-agent learner's round trip
    assert back.degenerate.shape == back.count.shape and not back.degenerate.any()
