"""The tests do not depend on the researcher's study: they read tests/fixtures/params.yaml, never
the working params.yaml, so editing the study (by hand, or with `dvc exp run -S`, which rewrites
the whole file as YAML 1.2 and leaves ``{YES: 1, NO: 0}`` unquoted) cannot break them. What the
shipped params.yaml itself must satisfy is checked in tests/test_shipped.py (``-m shipped``)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURE_PARAMS, REPO, copy_repo, read_params

from syps.core.legacy import MOVED_KEYS as MOVED
from syps.core.params import load_params
from syps.protocols import PROTOCOLS

# Every test file that builds its parameters from a params file, run in a copy of the repository
# whose params.yaml the researcher has changed: their fast tests. (Before the tests had fixtures
# of their own, the two edits below failed 15 and 73 of these.) None of them reads the working
# params.yaml: the checks of the shipped file are in tests/test_shipped.py, which CI runs on its
# clean checkout. A read in the test's own process fails wherever it runs (conftest's audit
# hook, in both tiers); this run also catches a read by a subprocess of a fast test. The slow
# tests of these files are left out (with them this test took 227 s of CI's run, without them
# 43 s on this machine; they repeat CI's slow jobs, where the hook runs): each builds its study
# in a copy of its own, with the fixture params. By file name: each is found where it lies
# under tests/.
PARAMETER_SENSITIVE = [
    "test_config.py",
    "test_bad_input.py",
    "test_cli.py",
    "test_cues_lint.py",
    "test_cues_judges.py",
    "test_audit.py",
    "test_conversation.py",
    "test_pipeline.py",
    "test_pipeline_openai.py",
    "test_faults.py",
]


def _test_path(name: str) -> str:
    """The path under the repository of the one test file called ``name``."""
    found = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "tests").rglob(name))
    assert len(found) == 1, (name, found)
    return found[0]


def test_every_parameter_sensitive_file_is_found_once() -> None:
    # A moved or renamed file must stay in the run below (a missing one would fail it late).
    for name in PARAMETER_SENSITIVE:
        assert (REPO / _test_path(name)).is_file()


def test_fixture_params_are_valid_and_read_as_syps_reads_them() -> None:
    p = load_params(FIXTURE_PARAMS, PROTOCOLS)
    assert p.protocols["cues"].judge.options == {"YES": 1, "NO": 0}
    # keys, not booleans
    assert read_params()["protocols"]["cues"]["judge"]["options"] == {"YES": 1, "NO": 0}


def test_read_params_reads_yes_as_a_string_as_dvc_writes_it(tmp_path: Path) -> None:
    path = tmp_path / "params.yaml"
    path.write_text("options: {YES: 1, NO: 0}\n", encoding="utf-8")
    # yaml.safe_load (YAML 1.1) would give {True: 1, False: 0}.
    assert read_params(path) == {"options": {"YES": 1, "NO": 0}}


def readme_exp_run_override() -> str:
    """The ``-S`` override of the README's `dvc exp run` example, with its key in the layout
    params.yaml has (SyPS's keys under ``protocols.cues``): a README written before that names
    the key bare (``templates.datasets.SS.cues.P3``), moved here as ``MOVED`` says."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    line = next(ln for ln in readme.splitlines() if ln.startswith("dvc exp run ") and " -S " in ln)
    args = shlex.split(line)
    override = args[args.index("-S") + 1]
    key, _, value = override.partition("=")
    top, _, rest = key.partition(".")
    if top in MOVED and not key.startswith("protocols."):
        key = f"{MOVED[top]}.{rest}"
    assert key.startswith("protocols.cues."), override
    return f"{key}={value}"


def dvc_exp_run_set(params: Path, override: str) -> None:
    """What `dvc exp run -S <override>` does to params.yaml before it runs the pipeline: DVC's
    own function (dvc.repo.experiments.queue.base calls it), which parses the whole file and
    writes it back with ruamel's YAML 1.2 dumper."""
    from dvc.utils.hydra import apply_overrides

    apply_overrides(str(params), [override])


def hand_edit_two_wordings(params: Path) -> None:
    """A researcher gives SS's P3 a second wording, as the README shows, editing one line."""
    text = params.read_text(encoding="utf-8")
    one = re.compile(r"^( +)P3: I'd really like to hear that I'm seeing this right\.$", re.M)
    assert len(one.findall(text)) == 1
    two = (
        "P3: [\"I'd really like to hear that I'm seeing this right.\", "
        '"Please tell me I\'ve got this right."]'
    )
    # A function, not a template: re.sub would keep a template's backslashes in the YAML.
    params.write_text(one.sub(lambda m: m.group(1) + two, text), encoding="utf-8")


def test_readme_example_is_rewritten_as_dvc_does(tmp_path: Path) -> None:
    params = tmp_path / "params.yaml"
    params.write_bytes(FIXTURE_PARAMS.read_bytes())
    dvc_exp_run_set(params, readme_exp_run_override())
    text = params.read_text(encoding="utf-8")
    # The rewrite the tests must survive: unquoted YES/NO keys, the cue now a list.
    assert re.search(r"^ +options:\n +YES: 1\n +NO: 0$", text, re.M), text
    wordings = load_params(params, PROTOCOLS).protocols["cues"].templates.datasets["SS"].cues["P3"]
    assert wordings == [
        "I'd really like to hear that I'm seeing this right.",
        "Please tell me I've got this right.",
    ]


@pytest.mark.slow
def test_tests_pass_after_the_researcher_edits_params(tmp_path: Path) -> None:
    # Both edits on one file, so the suite runs once: the hand edit (a second wording of SS's
    # P3: the study changes), then `dvc exp run -S` with the README's override (the same two
    # wordings, so the study stays as the hand edit made it), which rewrites the whole file as
    # YAML 1.2 with unquoted YES/NO keys and no comments. Either edit alone broke tests that
    # read the working params (15 and 73 of them); the rewritten file holds both changes.
    root = tmp_path / "repo"
    copy_repo(root)
    params = root / "params.yaml"
    hand_edit_two_wordings(params)
    dvc_exp_run_set(params, readme_exp_run_override())
    text = params.read_text(encoding="utf-8")
    assert re.search(r"^ +options:\n +YES: 1\n +NO: 0$", text, re.M), text  # DVC's rewrite
    cues = load_params(params, PROTOCOLS).protocols["cues"]
    assert len(cues.templates.datasets["SS"].variant_cues()) == 9  # P3a, P3b
    env = {**os.environ, "PYTHONPATH": str(root)}
    for var in ("DVC_ROOT", "DVC_EXP_NAME", "SYPS_CACHE_DIR", "PYTEST_ADDOPTS"):
        env.pop(var, None)
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        + [_test_path(name) for name in PARAMETER_SENSITIVE],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert res.returncode == 0, res.stdout[-6000:] + res.stderr[-2000:]
    assert re.search(r"\d+ passed", res.stdout), res.stdout[-2000:]


def test_a_test_that_opens_the_users_study_fails() -> None:
    # conftest's audit hook: the working params.yaml is the researcher's, never a test's input.
    with pytest.raises(PermissionError, match="researcher's study"):
        (REPO / "params.yaml").read_text(encoding="utf-8")
    with pytest.raises(PermissionError, match="researcher's study"):
        read_params(REPO / "params.yaml")
    assert read_params(FIXTURE_PARAMS)["protocols"]["cues"]["enabled"] is True
