"""The README's examples run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
ENVIRONMENTS = README.parent / "docs" / "environments.md"


@pytest.mark.slow
def test_readme_python_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 2
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)  # noqa: S102
    assert namespace["res"].regret_per_agent.shape[0] == 20
    assert namespace["ledger"]["total"]["messages"] > 0
    assert "ledger" not in namespace["infos"]["agent_0"]  # flat per-agent infos


def test_readme_lists_every_registered_env():
    import fedbandit_env

    text = README.read_text()
    for env_id in fedbandit_env.list_envs():
        assert f"`{env_id}`" in text


def test_environments_page_lists_every_registered_env():
    import fedbandit_env

    text = ENVIRONMENTS.read_text()
    for env_id in fedbandit_env.list_envs():
        assert f"`{env_id}`" in text


def test_kwargs_table_matches_the_registry():
    """Each row of docs/environments.md's kwargs table lists exactly the accepted kwargs of its ids."""
    import fedbandit_env

    text = ENVIRONMENTS.read_text()
    table = text[text.index("<!-- kwargs-table") :].split("\n\n")[0]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    covered = set()
    for row in rows:
        ids_cell, kwargs_cell = row.strip("|").split("|")
        ids = re.findall(r"`([^`]+)`", ids_cell)
        kwargs = set(re.findall(r"`([^`]+)`", kwargs_cell))
        for env_id in ids:
            assert kwargs == set(fedbandit_env.spec(env_id).accepted_kwargs), env_id
        covered.update(ids)
    assert covered == set(fedbandit_env.list_envs())
