"""Block streams (``random_streams="block"``, BlockRNG): the privacy audits' fast path. Normal
runs keep one Generator per run (batch-size independent); an environment made with block streams
draws all runs' numbers at once, deterministically for its seeds, each run's numbers independent
of what the other runs consume."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbandit_env.block_streams import BlockMaskedStream, BlockRNG, streams_for
from fedbandit_env.privacy._random import MaskedStream, masked_stream
from fedbandit_env.reset_args import run_seeds
from fedbandit_env.seeding import BatchedRNG, named_child, run_seed_sequence


def test_an_environment_uses_block_streams_only_when_asked():
    import fedbandit_env
    from fedbandit_env.errors import ConfigError

    assert type(streams_for("per_run", [1, 2], "agents")) is BatchedRNG
    assert isinstance(streams_for("block", [1, 2], "agents"), BlockRNG)
    kw = dict(num_runs=2, num_agents=2, num_arms=3, horizon=5)
    plain = fedbandit_env.make_vec("FedBandit/Homogeneous-v0", **kw)
    block = fedbandit_env.make_vec("FedBandit/Homogeneous-v0", random_streams="block", **kw)
    plain.reset(seed=1)
    block.reset(seed=1)
    assert type(plain.agent_rng()) is BatchedRNG and isinstance(block.agent_rng(), BlockRNG)
    again = fedbandit_env.make_vec("FedBandit/Homogeneous-v0", random_streams="block", **kw)
    again.reset(seed=1)
    arms = np.zeros((2, 2), dtype=np.int64)
    for _ in range(5):  # deterministic for the batch's seeds
        assert np.array_equal(block.step(arms)[1], again.step(arms)[1])
    with pytest.raises(ConfigError, match="random_streams"):
        fedbandit_env.make_vec("FedBandit/Homogeneous-v0", random_streams="fast", **kw)


def test_lazy_generators_give_the_per_run_numbers():
    rng = BatchedRNG.for_runs([3, 9], "rewards").child("x")
    eager = [
        np.random.Generator(np.random.PCG64(named_child(run_seed_sequence(s, "rewards"), "x")))
        for s in (3, 9)
    ]
    assert np.array_equal(
        rng.per_run(lambda g: g.random(4)), np.stack([g.random(4) for g in eager])
    )
    alone = BatchedRNG.for_runs([9], "rewards").child("x")
    assert np.array_equal(
        BatchedRNG.for_runs([3, 9], "rewards").child("x").generators[1].random(3),
        alone.generators[0].random(3),
    )


def test_block_rng_is_deterministic_for_its_seeds():
    def draw(seeds):
        rng = BlockRNG.for_batch(seeds, "agents")
        stream = rng.child("privacy").buffered("exponential", (2, 3))
        return np.stack([stream.next() for _ in range(5)])

    a, b = draw([5, 6, 7]), draw([5, 6, 7])
    assert a.shape == (5, 3, 2, 3) and np.array_equal(a, b)
    assert not np.array_equal(a, draw([5, 6, 8]))
    assert not np.array_equal(
        BlockRNG.for_batch([5, 6, 7], "agents").buffered("uniform", (1,)).next(),
        BlockRNG.for_batch([5, 6, 7], "network").buffered("uniform", (1,)).next(),
    )
    with pytest.raises(ValueError, match="single-run view"):
        BlockRNG.for_batch([1], "agents").run(0)
    with pytest.raises(ValueError, match="stream"):
        BlockRNG.for_batch([1], "nope")


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 5),
    st.lists(st.lists(st.booleans(), min_size=5, max_size=5), min_size=1, max_size=12),
    st.sampled_from(["uniform", "normal", "exponential"]),
)
def test_block_stream_run_values_do_not_depend_on_other_runs(chunk, masks, kind):
    """Run b's k-th consumed value is row k of its column, whatever the others consume; a run
    that does not advance sees the value it consumes next."""
    runs = 5
    ref = BlockRNG.for_batch(list(range(runs)), "agents").buffered(kind, (2,))
    ref.chunk = chunk
    rows = np.stack([ref.next() for _ in range(len(masks) + 1)])  # (steps, B, 2)
    stream = BlockRNG.for_batch(list(range(runs)), "agents").buffered(kind, (2,))
    stream.chunk = chunk
    taken = np.zeros(runs, dtype=np.int64)
    for mask in masks:
        advance = np.array(mask)
        out = stream.next(advance)
        for b in range(runs):
            assert np.array_equal(out[b], rows[taken[b], b])
        taken += advance


def test_rows_draw_only_the_runs_asked_for():
    per_run = BatchedRNG.for_runs([1, 2, 3], "agents").child("p")
    got = per_run.rows(np.array([2, 0]), lambda g, size: g.laplace(0.0, 1.0, size=size), (2,))
    fresh = BatchedRNG.for_runs([1, 2, 3], "agents").child("p").generators
    assert np.array_equal(got[0], fresh[2].laplace(0.0, 1.0, size=(2,)))
    assert np.array_equal(got[1], fresh[0].laplace(0.0, 1.0, size=(2,)))
    assert per_run.rows(np.array([], dtype=int), lambda g, s: g.random(s), (2,)).shape == (0, 2)
    # block: one whole-batch draw, a run's row does not depend on which runs are asked for
    one = BlockRNG.for_batch([1, 2, 3], "agents").rows(
        np.array([1]), lambda g, s: g.random(s), (2,)
    )
    all_ = BlockRNG.for_batch([1, 2, 3], "agents").rows(
        np.arange(3), lambda g, s: g.random(s), (2,)
    )
    assert np.array_equal(one[0], all_[1])


def test_masked_stream_follows_the_rng():
    normal = masked_stream(BatchedRNG.for_runs([1, 2], "agents"), (3,))
    block = masked_stream(BlockRNG.for_batch([1, 2], "agents"), (3,))
    assert isinstance(normal, MaskedStream) and isinstance(block, BlockMaskedStream)
    out = block.next(np.array([True, False]))
    assert out.shape == (2, 3) and np.all(out[1] == 0) and np.all(out[0] != 0)


def test_run_seeds_fast_path_validates_like_the_slow_one():
    assert run_seeds([4, 2], 2) == [4, 2]
    with pytest.raises(ValueError, match="expected 3 run seeds, got 2"):
        run_seeds([4, 2], 3)
    with pytest.raises(ValueError, match="non-negative"):
        run_seeds([4, -2], 2)
    with pytest.raises(TypeError):
        run_seeds([True, 2], 2)
