"""No file runs code unless the user marks it trusted (docs/reliability.md,
"Files are data"): a crafted SB3 model zip that would run code when unpickled is refused on every
public path without ``trust_model=True``; a genuine model still loads with it."""

from __future__ import annotations

import base64
import builtins
import json
import pickle
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("stable_baselines3")

import gymnasium  # noqa: E402
from stable_baselines3 import PPO  # noqa: E402

from baselines.sb3_policy import SB3Policy, load_model  # noqa: E402
from fedbandit_env import ConfigError, make_agent  # noqa: E402
from fedbandit_env.bench import evaluate  # noqa: E402
from fedbandit_env.bench.cli import main  # noqa: E402
from fedbandit_env.bench.executors import run_suite  # noqa: E402
from fedbandit_env.bench.store import ResultsStore  # noqa: E402
from fedbandit_env.bench.suites import Cell, Suite  # noqa: E402
from fedbandit_env.rl import GYM_ID  # noqa: E402
from fedbandit_env.rl.sb3_vec_env import AgentsVecEnv  # noqa: E402

ENV = "FedBandit/Heterogeneous-v0"
KW = {"num_agents": 3, "num_arms": 3, "horizon": 20, "topology": "ring"}
REFUSAL = r"sb3_policy: model_path: loading .* would unpickle it.*trust_model=True"


class _WritesMarker:
    """Unpickling this creates the file at ``path`` (standing in for arbitrary code)."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return (builtins.open, (self.path, "w"))


@pytest.fixture
def crafted(tmp_path):
    """A zip laid out like an SB3 save whose ``data`` holds a pickled payload."""
    marker = tmp_path / "marker"
    payload = base64.b64encode(pickle.dumps(_WritesMarker(marker))).decode()
    data = {"policy_class": {":type:": "<class 'abc.ABCMeta'>", ":serialized:": payload}}
    path = tmp_path / "evil.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("data", json.dumps(data))
    return path, marker


def test_the_crafted_file_does_run_code_when_loaded_as_trusted(crafted):
    """The payload is live: loading it with trust_model=True writes the marker (so the
    refusals below are what keeps it absent)."""
    path, marker = crafted
    with pytest.raises(ConfigError, match="could not load"):
        load_model(path, "PPO", trust_model=True)
    assert marker.exists()


def _paths(path: Path, tmp_path: Path):
    kwargs = {"model_path": str(path)}
    yield "class", lambda: SB3Policy(model_path=path)
    yield "load_model", lambda: load_model(path, "PPO")
    yield "make_agent", lambda: make_agent("sb3_policy", **kwargs)
    yield (
        "evaluate",
        lambda: evaluate(ENV, "sb3_policy", runs=1, env_kwargs=KW, agent_kwargs=kwargs),
    )
    yield (
        "OneLearner-v0 peers",
        lambda: gymnasium.make(GYM_ID, env_id=ENV, peers="sb3_policy", peer_kwargs=kwargs, **KW),
    )
    yield "trust_model='yes'", lambda: SB3Policy(model_path=path, trust_model="yes")


def test_every_python_path_refuses_an_untrusted_model_file(crafted, tmp_path):
    path, marker = crafted
    for name, call in _paths(path, tmp_path):
        match = "trust_model: expected a bool" if "yes" in name else REFUSAL
        with pytest.raises(ConfigError, match=match):
            call()
        assert not marker.exists(), name


def test_a_suite_cell_with_an_untrusted_model_is_refused_and_runs_nothing(crafted, tmp_path):
    path, marker = crafted
    cell = Cell(ENV, "sb3_policy", 20, 2, KW, {"model_path": str(path)})
    notes: list[str] = []
    suite = Suite("trust", (cell,))
    assert suite.available(notes.append) == []
    assert "trust_model" in notes[0] and "unpickle" in notes[0]
    store = ResultsStore(tmp_path / "r.sqlite")
    assert run_suite(suite, store, quiet=True) == 0 and store.count() == 0
    assert not marker.exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["run", ENV, "sb3_policy", "--env-kwargs", json.dumps(KW), "--agent-kwargs", "{kw}"],
        ["audit", "sb3_policy", "--trials", "100", "--kwargs", "{kw}"],
    ],
)
def test_the_cli_refuses_an_untrusted_model_file_in_one_line(crafted, argv, capsys):
    path, marker = crafted
    argv = [a.replace("{kw}", json.dumps({"model_path": str(path)})) for a in argv]
    with pytest.raises(SystemExit) as err:
        main(argv)
    out, errors = capsys.readouterr()
    assert err.value.code == 2 and out == ""
    assert len(errors.strip().splitlines()) == 1 and "trust_model" in errors
    assert not marker.exists()


def test_a_trusted_genuine_model_loads_and_a_model_object_needs_no_flag(tmp_path):
    venv = AgentsVecEnv(ENV, num_copies=1, **KW)
    model = PPO("MlpPolicy", venv, n_steps=20, batch_size=20, seed=0, device="cpu")
    path = tmp_path / "ppo.zip"
    model.save(path)
    kwargs = {"model_path": str(path), "trust_model": True}
    res = evaluate(ENV, "sb3_policy", runs=2, env_kwargs=KW, agent_kwargs=kwargs)
    direct = evaluate(ENV, SB3Policy(model=model), runs=2, env_kwargs=KW)
    assert (res.regret_network == direct.regret_network).all()
    env = gymnasium.make(GYM_ID, env_id=ENV, peers="sb3_policy", peer_kwargs=kwargs, **KW)
    env.reset(seed=0)
    env.close()
