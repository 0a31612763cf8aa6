"""The bench: run learners on environments and compare them (docs/bench.md)."""

from fedbandit_env.bench.evaluate import EvalResult, default_checkpoints, evaluate

__all__ = ["EvalResult", "default_checkpoints", "evaluate"]
