"""JAX ports of the baselines (docs/jax.md): pure ``init``/``act`` functions of one run, each a
reading of its numpy twin in :mod:`baselines`."""
