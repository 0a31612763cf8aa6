"""Sanity experiments of the field agents (docs/field.md), one module per agent.

Each ``sanity_<agent>.py`` exposes ``run(full: bool = False) -> list[Claim]``: the agent's sanity
experiment (its page in docs/) at a small scale (under a minute) or, with ``full``, at the
paper's scale, with every verdict computed by a check function of
:mod:`fedbandit_env.bench.claims`. Claims recalled from memory ([mem]) carry
``provenance="mem"`` and render as unverified.
:mod:`fedbandit_env.reproductions.field` (``fedbandit reproduce field``) runs every module found
here.
"""
