"""Paper presets: ``presets/<name>.yaml`` at the repository top, each a small overlay of
params.yaml keys (in params.yaml's own structure) that sets one paper's design and switches off
the protocols that paper does not use.

A preset becomes the ``dvc exp run -S`` arguments that apply it (:func:`set_param_args`), and
the params file those arguments make of a base params.yaml is written by DVC's own code
(:func:`apply`), so ``syps preset NAME`` and ``syps preset NAME --out FILE`` cannot disagree:
every call applies the arguments with DVC and checks that what DVC wrote is the base with the
overlay merged in, value for value, and that the result loads (unknown keys and wrong types are
errors naming the preset file and the key).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from syps.core.config import ConfigError, read_yaml
from syps.core.params import Protocols, load_params, params_from

PRESETS_DIR = "presets"
PARAMS_FILE = "params.yaml"  # the file `dvc exp run -S key=value` sets a key in
# Text Hydra (which parses DVC's -S values) reads bare as that text: a name or a path. Other
# text is quoted: a word such as `true` or `.5` would be read as another type.
_BARE = re.compile(r"(?!\.\d)[A-Za-z_./][A-Za-z0-9_./-]*")
_NOT_BARE = {"true", "false", "null", "nan", "inf"}
# A run of backslashes before a quote or the string's end must be doubled in a quoted Hydra
# string; anywhere else a backslash is literal.
_TRAILING_BACKSLASHES = re.compile(r"(\\+)(?='|$)")


def preset_names(folder: Path) -> list[str]:
    """The presets in ``folder``: the names of its ``*.yaml`` files."""
    return sorted(p.stem for p in folder.glob("*.yaml"))


def preset_file(folder: Path, name: str) -> Path:
    """``folder/<name>.yaml``; an unknown name is an error listing the presets."""
    path = folder / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(preset_names(folder)) or "none"
        raise ConfigError(f"unknown preset {name!r}; presets in {folder}: {known}")
    return path


def _read(path: Path) -> Any:
    try:
        return read_yaml(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None


def read_overlay(path: Path) -> dict[str, Any]:
    """A preset file's keys: a non-empty mapping whose keys hold no dots (``-S`` paths are
    dotted)."""
    raw = _read(path)
    if not isinstance(raw, dict) or not raw:
        raise ConfigError(f"{path}: a preset is a mapping of params keys, got {raw!r}")
    _check_keys(raw, path, "")
    return raw


def _check_keys(raw: Mapping[Any, Any], path: Path, where: str) -> None:
    for key, value in raw.items():
        at = f"{where}.{key}" if where else str(key)
        if not isinstance(key, str) or not key or "." in key:
            raise ConfigError(f"{path}: {at}: a key must be a non-empty text without dots")
        if isinstance(value, dict):
            _check_keys(value, path, at)


def merge(base: Any, overlay: Any) -> Any:
    """``overlay`` merged onto ``base``: mappings key by key, anything else replaced whole (a
    list too), as DVC's ``-S`` sets a key."""
    if not (isinstance(base, dict) and isinstance(overlay, dict)):
        return overlay
    out = dict(base)
    for key, value in overlay.items():
        out[key] = merge(base.get(key), value)
    return out


def hydra_value(value: Any) -> str:
    """``value`` in the override grammar DVC's ``-S`` parses (Hydra's): bare words, numbers,
    ``null``, ``true``/``false``, single-quoted text, ``[...]`` lists and ``{k:v}`` maps."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        if _BARE.fullmatch(value) and value.lower() not in _NOT_BARE:
            return value
        quoted = _TRAILING_BACKSLASHES.sub(r"\1\1", value).replace("'", "\\'")
        return f"'{quoted}'"
    if isinstance(value, list):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{hydra_value(v)}" for k, v in value.items()) + "}"
    raise ConfigError(f"a preset value must be YAML data, got {type(value).__name__}")


def overrides(base: Mapping[str, Any], overlay: Mapping[str, Any], where: str = "") -> list[str]:
    """The ``key=value`` overrides that set ``overlay`` on ``base``, one per leaf: a mapping
    goes key by key where ``base`` has a mapping too, so the keys it does not name keep their
    values; a key ``base`` lacks is added (``++key=value``; ``-S`` refuses a plain new key)."""
    out: list[str] = []
    for key, value in overlay.items():
        at = f"{where}.{key}" if where else key
        held = base.get(key)
        if isinstance(value, dict) and isinstance(held, dict):
            out += overrides(held, value, at)
        else:
            out.append(f"{'' if key in base else '++'}{at}={hydra_value(value)}")
    return out


def set_param_args(ovs: list[str]) -> list[str]:
    """The ``dvc exp run`` arguments: ``-S`` before each override."""
    return [arg for o in ovs for arg in ("-S", o)]


def apply(base: Path, ovs: list[str], out: Path) -> None:
    """Write ``out``: the params file ``base`` with ``ovs`` applied by DVC's own ``-S`` code
    (comments and layout kept as ``dvc exp run -S`` keeps them)."""
    # heavy: DVC's override code imports hydra and omegaconf; only this command needs them
    from dvc.exceptions import InvalidArgumentError
    from dvc.utils.cli_parse import to_path_overrides
    from dvc.utils.hydra import apply_overrides

    if out.suffix.lower() not in (".yaml", ".yml"):
        raise ConfigError(f"{out}: a params file ends in .yaml or .yml")
    # As `dvc exp run` groups its -S arguments by file: every one must land in params.yaml.
    groups = to_path_overrides(ovs)
    if list(groups) != [PARAMS_FILE]:
        raise ConfigError(f"dvc exp run -S would apply {ovs} to {sorted(groups)}, not params.yaml")
    shutil.copyfile(base, out)
    try:
        apply_overrides(out, groups[PARAMS_FILE])
    except InvalidArgumentError as e:
        raise ConfigError(f"dvc exp run -S refuses {ovs}: {e.__cause__ or e}") from None


def _differences(expected: Any, got: Any, where: str = "") -> list[str]:
    """Key paths where ``got`` differs from ``expected``."""
    if isinstance(expected, dict) and isinstance(got, dict):
        keys = [*expected, *(k for k in got if k not in expected)]
        return [
            d
            for k in keys
            for d in _differences(expected.get(k), got.get(k), f"{where}.{k}" if where else k)
        ]
    return [] if expected == got and type(expected) is type(got) else [where]


def build(preset: Path, base: Path, protocols: Protocols, out: Path | None = None) -> list[str]:
    """Check the preset ``preset`` against the params file ``base`` and return its ``-S``
    arguments; with ``out``, also write the merged params file there.

    Errors name the file at fault: ``base`` when it does not load by itself, ``preset`` when a
    key it sets is not a params key or holds a wrong value.
    """
    if out is not None and not out.parent.is_dir():
        raise ConfigError(f"{out}: no folder {out.parent} to write it in")
    load_params(base, protocols)
    raw = _read(base)
    overlay = read_overlay(preset)
    expected = merge(raw, overlay)
    try:
        params_from(expected, protocols)
    except ConfigError as e:
        raise ConfigError(f"{preset}: {e}") from None
    ovs = overrides(raw, overlay)
    with tempfile.TemporaryDirectory(prefix="syps-preset-") as tmp:
        written = Path(tmp) / (out.name if out is not None else "params.yaml")
        apply(base, ovs, written)
        wrong = _differences(expected, _read(written))
        if wrong:
            # A value DVC would read otherwise than the preset means it: say which, never run it.
            raise ConfigError(f"{preset}: dvc exp run -S would not set {', '.join(wrong)} as given")
        if out is not None:
            shutil.move(written, out)
    return set_param_args(ovs)
