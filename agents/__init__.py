"""Reference agents: the algorithms of the suite's papers as batched team policies."""

# --- commeff (Li & Song, seed 004) ---
from agents.commeff import CDPMAB, DDPMAB, HDPMAB

# --- dp-recsys (Li, Song & Fragouli, seed 001) ---
from agents.dp_decentralized_ucb import DPDecentralizedUCB
from agents.dp_master_worker_ucb import DPMasterWorkerUCB

__all__ = ["CDPMAB", "DDPMAB", "DPDecentralizedUCB", "DPMasterWorkerUCB", "HDPMAB"]
