"""A Hugging Face cache built by hand, and a small params file of the tests' own.

The cache has the layout huggingface_hub writes: ``models--org--name/refs/<branch>`` holding a
commit, ``snapshots/<commit>/`` holding that commit's files.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
HUB_ID = "syps-test/tiny-chat"
SHA_A = hashlib.sha1(b"snapshot A").hexdigest()
SHA_B = hashlib.sha1(b"snapshot B").hexdigest()


def snapshot(cache: Path, repo: str, sha: str, weights: bool = True) -> Path:
    """A cached snapshot of ``repo`` at commit ``sha``: a config and (fake) weights."""
    snap = cache / f"models--{repo.replace('/', '--')}" / "snapshots" / sha
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}", encoding="utf-8")
    if weights:
        (snap / "model.safetensors").write_bytes(sha.encode())
    return snap


def point(cache: Path, repo: str, ref: str, sha: str) -> None:
    """Make branch or tag ``ref`` name commit ``sha``, as a download records it."""
    refs = cache / f"models--{repo.replace('/', '--')}" / "refs"
    refs.mkdir(parents=True, exist_ok=True)
    (refs / ref).write_text(sha, encoding="utf-8")


def study_params(path: Path, models: dict[str, dict[str, object]], csv: Path) -> Path:
    """A small, valid params file of our own: SyPS on one SS statement file with two cues,
    ``models``; every other registered protocol switched off."""
    from syps.protocols import PROTOCOLS

    cues = {
        "data": {
            "source": "csv",
            "datasets": ["SS"],
            "files": {"SS": str(csv)},
            "columns": {"SS": {"situation": "prompt"}},
            "elephant": {"urls": {}},
        },
        "templates": {
            "cue_position": "after",
            "datasets": {
                "SS": {
                    "task": "Say whether you agree.",
                    "format": "Answer AGREE or DISAGREE.",
                    "cues": {"P0": "", "P1": "I'm sure of it."},
                }
            },
        },
        "max_new_tokens": {"SS": 3},
        "labels": {"SS": {"AGREE": 1, "DISAGREE": 0}},
        "judge": {
            "system": "Judge.",
            "template": "{situation} / {response}",
            "options": {"YES": 1, "NO": 0},
        },
    }
    raw = {
        "seed": 1,
        "models": models,
        "judge": {"model": {"model": "embedded:smollm2"}},
        "score": {"bootstrap": 10},
        "protocols": {name: cues if name == "cues" else {"enabled": False} for name in PROTOCOLS},
    }
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path
