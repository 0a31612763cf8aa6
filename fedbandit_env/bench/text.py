"""Text helpers of the bench's tables (a low module: the leaderboard, the robust matrices and
the executors import it, and it imports none of them): an environment key's title and literal
Markdown and LaTeX escapes.
"""

from __future__ import annotations

import json
import re


def env_title(env_key: str) -> str:
    """``env_id (k=v, ...)`` of an environment key (its channels left out)."""
    env = json.loads(env_key)
    kwargs = ", ".join(f"{k}={v}" for k, v in env["env_kwargs"].items() if k != "channels")
    return f"{env['env_id']} ({kwargs})"


_MARKDOWN_SPECIAL = re.compile(r"([\\`*\[\]<>#+!|$&~])")
_LONE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
}
_LATEX_RE = re.compile("|".join(re.escape(c) for c in _LATEX_SPECIAL))


def escape_markdown(text: str) -> str:
    """``text`` as literal Markdown inline text (a table cell or a heading): one line, and every
    character Markdown, GitHub's tables or its math would interpret (``| $ * ` < & [ ...``)
    backslash-escaped; an underscore inside a word (``dp_dec_ucb``) is left as it is."""
    text = _MARKDOWN_SPECIAL.sub(r"\\\1", " ".join(str(text).split()))
    return _LONE_UNDERSCORE.sub(r"\\_", text)


def escape_latex(text: str) -> str:
    """``text`` as literal LaTeX text (one line, every special character escaped)."""
    return _LATEX_RE.sub(lambda m: _LATEX_SPECIAL[m.group()], " ".join(str(text).split()))
