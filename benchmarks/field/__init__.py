"""Sanity experiments of the field agents (shared/specs/field-coverage.md), one module per agent.

Each ``sanity_<agent>.py`` exposes ``run(full: bool = False) -> list[Claim]``: the spec's sanity
experiment at a small scale (under a minute) or, with ``full``, at the spec's scale, with every
verdict computed by a check function of :mod:`fedbandit_env.bench.claims`. Claims the spec took
from memory ([mem]) carry ``provenance="mem"`` and render as unverified.
``benchmarks/reproduce_field.py`` (``fedbandit reproduce field``) runs every module found here.
"""
