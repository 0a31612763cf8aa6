"""Reference agents of Li & Song, private communication-efficient arm elimination (commeff.md).

``CDPMAB`` (``cdp_mab``, master-worker, round budget R and participation p), ``DDPMAB``
(``ddp_mab``, decentralized, GIS flood) and ``HDPMAB`` (``hdp_mab``, hybrid, SAC + server).
"""

from agents.commeff.base import EliminationTeam, RoundRecord
from agents.commeff.cdp import CDPMAB
from agents.commeff.config import EliminationConfig
from agents.commeff.ddp import DDPMAB
from agents.commeff.hdp import HDPMAB

__all__ = ["CDPMAB", "DDPMAB", "HDPMAB", "EliminationConfig", "EliminationTeam", "RoundRecord"]
