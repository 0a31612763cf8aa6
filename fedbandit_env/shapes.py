"""Shape aliases for signatures (JaxMARL style): the array a parameter or a field holds, read
in the signature instead of the docstring.

The letters are the project's throughout (docs/architecture.md): ``B`` runs of a batch, ``N``
agents, ``M`` arms of the multi-armed families (``K`` where a paper says K, and the arms of a
linear decision set), ``d`` the linear dimension, ``D`` the neighbour slots of a padded
delivery, ``dim`` a channel's payload length. The numpy engine works on batches (leading ``B``);
a JAX learner or environment works on one run (no ``B``; the rollout ``vmap``s over runs). A
shared kernel (docs/architecture.md, "Shared kernels") takes any leading batch axes (``...``).

They are plain ``typing.Annotated`` aliases: type checkers see the array type, readers see the
shape, and nothing is checked at run time (the engines' input checks do that, naming the agent,
the field and the expected shape).
"""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np

# numpy engine, a batch of B runs
Runs = Annotated[np.ndarray, "(B,)"]
RunAgents = Annotated[np.ndarray, "(B, N)"]
RunAgentArms = Annotated[np.ndarray, "(B, N, M)"]
RunAgentPayload = Annotated[np.ndarray, "(B, N, dim)"]
RunAgentSlots = Annotated[np.ndarray, "(B, N, D)"]
RunAgentSlotPayload = Annotated[np.ndarray, "(B, N, D, dim)"]
RunAgentContexts = Annotated[np.ndarray, "(B, N, K, d)"]

# JAX engine and learners, one run (numpy or jax.Array: both engines' kernels accept either)
Agents = Annotated[Any, "(N,)"]
AgentArms = Annotated[Any, "(N, M)"]
AgentPayload = Annotated[Any, "(N, dim)"]
AgentContexts = Annotated[Any, "(N, K, d)"]
Scalar = Annotated[Any, "()"]

# shared kernels: any leading batch axes
Batched = Annotated[Any, "(...)"]
BatchedArms = Annotated[Any, "(..., M)"]
BatchedSlots = Annotated[Any, "(..., S)"]
BatchedSlotPayload = Annotated[Any, "(..., S, dim)"]
