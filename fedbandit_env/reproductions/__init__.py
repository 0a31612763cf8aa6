"""The paper reproductions: one script per paper, run with ``fedbandit reproduce NAME`` or
``python -m fedbandit_env.reproductions.NAME`` (docs/reproductions.md).

Each script reads top to bottom (parameters, runs, claims, outputs) and shares its plumbing with
the others through :mod:`fedbandit_env.reproductions.harness`: the common options, the data
folder, the output folder, the fan-out through :mod:`fedbandit_env.bench.executors`, the cache
and the claims file. ``dp_recsys`` and ``commeff`` are top-to-bottom scripts that run when
imported; ``fedbandit reproduce`` runs each script as ``python -m``.
"""
