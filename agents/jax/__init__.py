"""JAX ports of the reference agents (docs/jax.md): pure ``init``/``act`` functions of one run, each a
reading of its numpy twin in :mod:`agents`."""
