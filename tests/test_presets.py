"""Paper presets (presets/<name>.yaml, ``syps preset``): every shipped preset loads on the tests'
params, the printed ``-S`` arguments are exactly the ones worked out by hand, DVC's own ``-S``
code reads them as the preset means them, and bad presets fail with one line naming the file
and the key. The tests' params are tests/fixtures/params.yaml's (conftest), never the
working params.yaml."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest
from conftest import FIXTURE_PARAMS, read_params
from typer.testing import CliRunner

from syps.cli import app
from syps.core.config import ConfigError
from syps.core.params import load_params
from syps.core.presets import build, hydra_value, merge, overrides, preset_names
from syps.protocols import PROTOCOLS
from syps.protocols.discernment.params import DiscernmentParams

REPO = Path(__file__).resolve().parents[1]
PRESETS = REPO / "presets"
runner = CliRunner()
BASE = str(FIXTURE_PARAMS)  # what the command-line tests apply their presets to


def _preset(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("name", preset_names(PRESETS))
def test_each_shipped_preset_loads_on_the_fixture_params(name: str, tmp_path: Path) -> None:
    out = tmp_path / "params.yaml"
    build(PRESETS / f"{name}.yaml", FIXTURE_PARAMS, PROTOCOLS, out)
    p = load_params(out, PROTOCOLS)
    overlay = read_params(PRESETS / f"{name}.yaml")
    # A preset names every protocol's `enabled`: its paper's protocol on, the others off.
    assert set(overlay["protocols"]) == set(PROTOCOLS)
    assert all("enabled" in block for block in overlay["protocols"].values())
    assert sum(pp.enabled for pp in p.protocols.values()) == 1
    assert read_params(out) == merge(read_params(FIXTURE_PARAMS), overlay)


def test_the_shipped_presets_are_the_papers() -> None:
    assert preset_names(PRESETS) == [
        "betting",
        "bigbig",
        "spiral",
        "syceval",
        "syceval-audit",
        "sycon",
        "syps",
    ]


HAND_MADE = """\
protocols:
  discernment:
    generation:
      reps: 20
    k: 2.0
    items: my data/bbsb.json
  betting:
    enabled: false
score:
  bootstrap: 10000
tracking:
  traces: sample
"""


def test_preset_prints_exactly_the_set_param_arguments(tmp_path: Path) -> None:
    _preset(tmp_path / "presets", "bigbig", HAND_MADE)
    presets = str(tmp_path / "presets")
    result = runner.invoke(app, ["preset", "bigbig", "--presets", presets, "--params", BASE])
    assert result.exit_code == 0, result.output
    # By hand, one -S per leaf of the preset, in its order: generation is a mapping in the
    # fixture too, so only its reps is set; the path holds a space, so Hydra needs it quoted;
    # the fixture's tracking has no `traces`, and -S refuses a new key unless it is `++key`.
    expected = [
        "-S", "protocols.discernment.generation.reps=20",
        "-S", "protocols.discernment.k=2.0",
        "-S", "protocols.discernment.items='my data/bbsb.json'",
        "-S", "protocols.betting.enabled=false",
        "-S", "score.bootstrap=10000",
        "-S", "++tracking.traces=sample",
    ]  # fmt: skip
    assert result.stdout.strip() == shlex.join(expected)
    # What `eval "dvc exp run $(syps preset bigbig)"` hands to dvc: the same words.
    assert shlex.split(result.stdout) == expected


def test_out_writes_a_params_file_that_loads_with_comments_kept(tmp_path: Path) -> None:
    base = tmp_path / "base.yaml"
    text = FIXTURE_PARAMS.read_text(encoding="utf-8")
    base.write_text(text.replace("seed: 20251130", "seed: 20251130  # kept"), encoding="utf-8")
    _preset(tmp_path / "presets", "bigbig", HAND_MADE)
    out = tmp_path / "p_bigbig.yaml"
    presets = str(tmp_path / "presets")
    result = runner.invoke(
        app, ["preset", "bigbig", "--presets", presets, "--params", str(base), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    p = load_params(out, PROTOCOLS)
    d = p.protocols["discernment"]
    assert isinstance(d, DiscernmentParams)
    assert (d.generation.reps, d.k, d.items) == (20, 2.0, "my data/bbsb.json")
    assert not p.protocols["betting"].enabled and p.score.bootstrap == 10000
    assert p.tracking.traces == "sample"
    assert "seed: 20251130  # kept" in out.read_text(encoding="utf-8")
    # The keys the preset does not name keep their values.
    held = read_params(base)["protocols"]["discernment"]["generation"]["temperature"]
    assert d.generation.temperature == held


def test_text_dvc_would_misread_bare_is_quoted_and_survives(tmp_path: Path) -> None:
    # A text that reads as a bool, one that reads as a number, quotes, and a trailing
    # backslash: each must reach the params file unchanged through DVC's -S parser.
    preset = _preset(
        tmp_path / "presets",
        "odd",
        "protocols:\n"
        "  discernment:\n"
        "    figure_artefact: 'true'\n"
        "    items: '.5'\n"
        "  pushback:\n"
        "    templates:\n"
        '      format: "Say \'yes\' or \\"no\\" \\\\"\n',
    )
    out = tmp_path / "p.yaml"
    args = build(preset, FIXTURE_PARAMS, PROTOCOLS, out)
    assert args[1] == "protocols.discernment.figure_artefact='true'"
    assert args[3] == "protocols.discernment.items='.5'"
    # Hydra's quoted text: \' is a quote, and a backslash before the closing quote is doubled.
    assert args[5] == "protocols.pushback.templates.format='Say \\'yes\\' or \"no\" \\\\'"
    raw = read_params(out)["protocols"]
    assert raw["discernment"]["figure_artefact"] == "true"
    assert raw["discernment"]["items"] == ".5"
    assert raw["pushback"]["templates"]["format"] == "Say 'yes' or \"no\" \\"


def test_hydra_values_by_hand() -> None:
    assert hydra_value(None) == "null"
    assert hydra_value(True) == "true"
    assert hydra_value(0.01) == "0.01"
    path = "../shared/truthfulqa/TruthfulQA.csv"
    assert hydra_value(path) == path
    assert hydra_value("null") == "'null'"
    assert hydra_value(["OEQ", "AITA-YTA"]) == "[OEQ,AITA-YTA]"
    assert hydra_value([{"source": "csv", "name": "amps"}]) == "[{source:csv,name:amps}]"


def test_overrides_recurse_into_mappings_only_where_the_base_has_one() -> None:
    base = {"a": {"b": 1, "c": None}, "d": 2}
    overlay = {"a": {"b": 3, "c": {"x": 1}, "e": 4}, "f": [1, 2]}
    # a.c is null in the base, so the mapping is set whole; a.e and f are new keys.
    assert overrides(base, overlay) == ["a.b=3", "a.c={x:1}", "++a.e=4", "++f=[1,2]"]


def test_unknown_preset_is_one_line_listing_the_presets(tmp_path: Path) -> None:
    _preset(tmp_path / "presets", "alpha", "score:\n  bootstrap: 10\n")
    _preset(tmp_path / "presets", "beta", "score:\n  bootstrap: 20\n")
    result = runner.invoke(app, ["preset", "gamma", "--presets", str(tmp_path / "presets")])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    where = tmp_path / "presets"
    assert lines == [f"error: unknown preset 'gamma'; presets in {where}: alpha, beta"]


def test_a_key_that_is_not_a_params_key_names_the_preset_file_and_the_key(tmp_path: Path) -> None:
    path = _preset(tmp_path / "presets", "bad", "protocols:\n  discernment:\n    no_such_key: 1\n")
    presets = str(tmp_path / "presets")
    result = runner.invoke(app, ["preset", "bad", "--presets", presets, "--params", BASE])
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"error: {path}: ")
    assert "protocols.discernment: unknown key(s) ['no_such_key']" in line


def test_a_wrong_value_names_the_preset_file(tmp_path: Path) -> None:
    path = _preset(tmp_path / "presets", "bad", "score:\n  bootstrap: many\n")
    with pytest.raises(ConfigError, match=rf"^{path}: score\.bootstrap"):
        build(path, FIXTURE_PARAMS, PROTOCOLS)


def test_a_preset_is_a_mapping_of_keys(tmp_path: Path) -> None:
    path = _preset(tmp_path / "presets", "bad", "- a\n- b\n")
    with pytest.raises(ConfigError, match="a preset is a mapping of params keys"):
        build(path, FIXTURE_PARAMS, PROTOCOLS)


def test_out_must_be_a_yaml_file_in_a_folder_that_exists(tmp_path: Path) -> None:
    path = _preset(tmp_path / "presets", "ok", "score:\n  bootstrap: 10\n")
    with pytest.raises(ConfigError, match=r"ends in \.yaml or \.yml"):
        build(path, FIXTURE_PARAMS, PROTOCOLS, tmp_path / "p.txt")
    with pytest.raises(ConfigError, match="no folder"):
        build(path, FIXTURE_PARAMS, PROTOCOLS, tmp_path / "nowhere" / "p.yaml")


# A stage that reads every params key, so `dvc exp run` accepts any preset and runs in a blink.
TRIVIAL_DVC_YAML = """\
stages:
  s:
    cmd: echo ok > out.txt
    params:
    - seed
    - protocols
    outs:
    - out.txt
"""


@pytest.mark.slow
def test_dvc_exp_run_with_the_printed_arguments_writes_the_out_file(tmp_path: Path) -> None:
    # The one command, `eval "dvc exp run $(syps preset NAME)"`, in a throwaway DVC repository:
    # the params.yaml it leaves is byte for byte the file --out writes, odd texts included.
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "params.yaml").write_bytes(FIXTURE_PARAMS.read_bytes())
    (repo / "dvc.yaml").write_text(TRIVIAL_DVC_YAML, encoding="utf-8")
    odd = "protocols:\n  pushback:\n    templates:\n      format: \"Say 'yes', or no \\\\\"\n"
    preset = _preset(tmp_path / "presets", "odd", HAND_MADE.replace("protocols:\n", odd, 1))
    out = tmp_path / "expected.yaml"
    args = build(preset, repo / "params.yaml", PROTOCOLS, out)
    env = {**os.environ, "DVC_NO_ANALYTICS": "1", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    env.pop("DVC_ROOT", None)
    for cmd in (
        ["git", "init", "-q"],
        ["dvc", "init", "-q"],
        ["git", "add", "-A"],
        ["git", "commit", "-qm", "init"],
        ["dvc", "exp", "run", "-q", *shlex.split(shlex.join(args))],
    ):
        done = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{cmd}: {done.stdout}{done.stderr}"
    assert (repo / "params.yaml").read_bytes() == out.read_bytes()
    assert read_params(out)["protocols"]["pushback"]["templates"]["format"] == "Say 'yes', or no \\"
