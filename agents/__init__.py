"""Reference agents: the algorithms of the suite's papers as batched team policies."""

from agents.byzres_ucb import ByzResUCB  # Zhu, Koppel, Velasquez & Liu, TMLR (docs/byzres-ucb.md)
from agents.commeff import CDPMAB, DDPMAB, HDPMAB  # Li & Song (seed 004)
from agents.coop_ucb2 import CoopUCB2  # Landgren, Srivastava & Leonard (field coverage)
from agents.dducb import DDUCB  # Martinez-Rubio, Kanade & Rebeschini (field coverage)
from agents.dislinucb import DisLinUCB  # Wang et al. (field coverage)
from agents.dp_decentralized_ucb import DPDecentralizedUCB  # Li, Song & Fragouli (seed 001)
from agents.dp_master_worker_ucb import DPMasterWorkerUCB  # Li, Song & Fragouli (seed 001)
from agents.fed1_ucb import Fed1UCB  # Shi & Shen (field coverage)
from agents.fed2_ucb import Fed2UCB  # Shi & Shen (field coverage)
from agents.fed_lin_ucb import FedLinUCB  # Dubey & Pentland (seed 003)
from agents.fed_lin_ucb_decentralized import FedLinUCBDecentralized  # Dubey & Pentland (seed 003)
from agents.fed_mom_ucb import FedMoMUCB  # Demirel, Yildirim & Tekin (docs/fed-mom-ucb.md)
from agents.gosine import GosInE  # Chawla, Sankararaman, Ganesh & Shakkottai (field coverage)
from agents.gossip_ucb import GossipFedUCB, GossipUCB  # Zhu et al. 2021 (docs/gossip.md)
from agents.ldp_ucb import LDPUCB  # Ren, Zhou, Liu & Shroff (field coverage)
from agents.robust_gosine import RobustGosInE  # Vial, Shakkottai & Srikant 2021

__all__ = [
    "ByzResUCB",
    "CDPMAB",
    "CoopUCB2",
    "DDUCB",
    "DDPMAB",
    "DPDecentralizedUCB",
    "DPMasterWorkerUCB",
    "DisLinUCB",
    "Fed1UCB",
    "Fed2UCB",
    "FedLinUCB",
    "FedLinUCBDecentralized",
    "FedMoMUCB",
    "GosInE",
    "GossipFedUCB",
    "GossipUCB",
    "HDPMAB",
    "LDPUCB",
    "RobustGosInE",
]
