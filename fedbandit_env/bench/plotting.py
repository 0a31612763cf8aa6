"""The matplotlib helpers the figures (:mod:`~fedbandit_env.bench.figures`) and the HTML page
(:mod:`~fedbandit_env.bench.html`) share; matplotlib is the optional ``plots`` extra."""

from __future__ import annotations

from fedbandit_env.errors import ConfigError


def pyplot(who: str = "leaderboard --html"):
    """matplotlib's pyplot on the Agg backend, or a clear error naming the command ``who`` and
    the extra."""
    try:
        import matplotlib
    except ImportError:
        raise ConfigError(
            f"{who}: the plots need matplotlib, which is not installed; "
            "pip install 'fedbandit[plots]' (in a checkout: pip install -e '.[plots]')"
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def mpl_text(text: str) -> str:
    """``text`` shown literally by matplotlib: a ``$`` is escaped (two of them would start
    mathtext, which mangles the label or fails to parse), and a leading underscore, which hides
    a legend entry, is preceded by a space."""
    text = " ".join(str(text).split()).replace("$", r"\$")
    return " " + text if text.startswith("_") else text
