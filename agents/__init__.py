"""Reference agents: the algorithms of the suite's papers as batched team policies."""

# dp-recsys (issue 6)
from agents.dp_decentralized_ucb import DPDecentralizedUCB  # noqa: F401
from agents.dp_master_worker_ucb import DPMasterWorkerUCB  # noqa: F401
