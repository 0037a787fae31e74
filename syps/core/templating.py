"""One way to check a template, for every protocol: its placeholders against what fills it.

A protocol declares each text it sends as a :class:`TemplateSpec` (``Protocol.template_specs``):
the params key the text comes from, the text as it will be rendered (a preset's text where the
user left the key null), the ``{name}`` placeholders the renderer cannot do without and those it
can fill. :func:`check_templates` refuses, with one line per bad template naming its key and
the placeholder, a placeholder nothing fills (it would reach the model as is) and a missing one
(the condition it carries would silently vanish from every prompt). The core runs it where each
``protocols.<name>`` block is parsed, so a bad template fails when params are loaded, before
anything is generated.

Only ``{name}`` (a Python identifier in braces) is a placeholder; every other brace (``{0}``,
``{"a": 1}``, ``{{``) is plain text, and :func:`substitute` renders a template the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from syps.core.config import ConfigError

# A ``{name}`` placeholder. Other braces (``{"a": 1}``, ``{0}``, a lone ``{{``) are plain text.
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class TemplateSpec:
    """One template text and its placeholders.

    ``key``: the full params key path the text comes from (``protocols.pushback.templates.
    question``), named even when it is null in params and ``text`` is the preset's text.
    ``required``: the placeholders the text must hold; ``allowed`` (a superset of ``required``):
    those the renderer fills, empty for a text sent as is. ``once``: required placeholders that
    must appear exactly once. ``why``: per required placeholder, why it is needed (shown when it
    is missing).
    """

    key: str
    text: str
    required: frozenset[str]
    allowed: frozenset[str]
    once: frozenset[str] = frozenset()
    why: Mapping[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        # A protocol's mistake, not the user's: fail loudly in the protocol's own tests.
        if not self.required <= self.allowed:
            extra = sorted(self.required - self.allowed)
            raise ValueError(f"TemplateSpec {self.key}: required {extra} not in allowed")
        if not self.once <= self.required:
            extra = sorted(self.once - self.required)
            raise ValueError(f"TemplateSpec {self.key}: once {extra} not in required")


def _braced(names: Iterable[str]) -> str:
    return ", ".join("{" + n + "}" for n in sorted(names))


def template_problem(spec: TemplateSpec) -> str | None:
    """The first thing wrong with ``spec``'s text, as one line naming its key and the
    placeholder; None when the text is fine. Unknown placeholders are reported first (in
    order of appearance), then missing ones (sorted), then a repeated one."""
    found = PLACEHOLDER.findall(spec.text)
    unknown = [n for n in found if n not in spec.allowed]
    if unknown:
        allowed = (
            _braced(spec.allowed)
            if spec.allowed
            else "none (this text is sent as is, nothing is filled in)"
        )
        return f"{spec.key}: unknown placeholder {{{unknown[0]}}}; allowed: {allowed}"
    missing = sorted(spec.required - set(found))
    if missing:
        name = missing[0]
        why = spec.why.get(name) or f"this template must hold {_braced(spec.required)}"
        return f"{spec.key}: missing placeholder {{{name}}} (it is needed: {why})"
    for name in sorted(spec.once):
        n = found.count(name)
        if n != 1:
            why = spec.why.get(name, "")
            return (
                f"{spec.key}: placeholder {{{name}}} appears {n} times; it must appear exactly "
                f"once" + (f" (it is needed: {why})" if why else "")
            )
    return None


def check_templates(specs: Iterable[TemplateSpec]) -> None:
    """Raise ``syps.core.config.ConfigError`` with one line per bad template (see
    :func:`template_problem`); return when every template is fine."""
    problems = [p for p in map(template_problem, specs) if p is not None]
    if problems:
        raise ConfigError("\n".join(problems))


def substitute(text: str, values: Mapping[str, str]) -> str:
    """``text`` with each ``{name}`` placeholder replaced by ``values[name]``, in one pass.

    Only the template is scanned, never the inserted values, so a value holding ``{x}`` is
    inserted as is; any other brace is plain text (no ``{{`` escape, no ``{0}``). A placeholder
    without a value is an error (``check_templates`` has refused it before any rendering).
    """

    def value(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in values:
            raise ValueError(f"placeholder {{{name}}} has no value; given: {sorted(values)}")
        return values[name]

    return PLACEHOLDER.sub(value, text)


def fill(template: str, values: Mapping[str, str], where: str) -> str:
    """``template`` checked against ``values`` (every placeholder known, every value used; the
    error names ``where``, a params key) and filled in one pass (see :func:`substitute`)."""
    names = frozenset(values)
    check_templates([TemplateSpec(where, template, names, names)])
    return substitute(template, values)
