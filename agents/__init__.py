# --- commeff (Li & Song, seed 004) ---
from agents.commeff import CDPMAB, DDPMAB, HDPMAB  # noqa: E402,F401
