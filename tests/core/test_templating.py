"""syps.core.templating: one placeholder check, one renderer, for every protocol."""

from __future__ import annotations

import pytest

from syps.core import config
from syps.core.config import ConfigError
from syps.core.templating import (
    PLACEHOLDER,
    TemplateSpec,
    check_templates,
    substitute,
    template_problem,
)

KEY = "protocols.toy.templates.body"


def spec(
    text: str,
    required: set[str] | None = None,
    allowed: set[str] | None = None,
    once: set[str] | None = None,
    why: dict[str, str] | None = None,
    key: str = KEY,
) -> TemplateSpec:
    req = frozenset(required or set())
    return TemplateSpec(
        key, text, req, frozenset(allowed or set()) | req, frozenset(once or set()), why or {}
    )


def refusal(*specs: TemplateSpec) -> str:
    with pytest.raises(ConfigError) as e:
        check_templates(specs)
    return str(e.value)


def test_there_is_one_placeholder_pattern() -> None:
    # The params layer defines none of its own; a protocol that scans templates itself uses
    # this one.
    from syps.protocols.betting import prompts

    assert not hasattr(config, "PLACEHOLDER")
    assert prompts.PLACEHOLDER is PLACEHOLDER


def test_a_good_template_passes() -> None:
    check_templates([spec("{q}\n\n{opts}", {"q", "opts"}), spec("{q} {q}", {"q"})])
    check_templates([])
    # Only {identifier} is a placeholder: JSON, positional fields and lone braces are text.
    check_templates([spec('Answer as {"answer": "A"} {0} {} {{ }} {q', allowed=set())])


def test_an_unknown_placeholder_is_one_line_naming_the_key_and_the_allowed() -> None:
    msg = refusal(spec("{q} {bogus} {other}", {"q"}, {"q", "opts"}))
    assert msg == f"{KEY}: unknown placeholder {{bogus}}; allowed: {{opts}}, {{q}}"


def test_a_text_sent_as_is_allows_no_placeholder() -> None:
    msg = refusal(spec("Be honest about {question}."))
    assert msg.startswith(f"{KEY}: unknown placeholder {{question}}; allowed: none")
    assert "\n" not in msg


def test_a_missing_placeholder_is_one_line_saying_why() -> None:
    msg = refusal(spec("{q}", {"q", "opts"}, why={"opts": "the options are listed there"}))
    assert (
        msg == f"{KEY}: missing placeholder {{opts}} (it is needed: the options are listed there)"
    )
    # Without a reason the line still names the placeholder and what the template must hold.
    msg = refusal(spec("no fields", {"b", "a"}))
    assert (
        msg
        == f"{KEY}: missing placeholder {{a}} (it is needed: this template must hold {{a}}, {{b}})"
    )


def test_unknown_is_reported_before_missing() -> None:
    assert (
        template_problem(spec("{x}", {"q"})) == f"{KEY}: unknown placeholder {{x}}; allowed: {{q}}"
    )


def test_a_once_placeholder_repeated_is_refused() -> None:
    msg = refusal(spec("{m} and {m}", {"m"}, once={"m"}, why={"m": "the argument"}))
    assert msg == (
        f"{KEY}: placeholder {{m}} appears 2 times; it must appear exactly once "
        "(it is needed: the argument)"
    )
    check_templates([spec("{m}", {"m"}, once={"m"})])


def test_one_line_per_bad_template_and_none_for_good_ones() -> None:
    msg = refusal(
        spec("{a}", {"a"}, key="k.good"),
        spec("{bogus}", {"a"}, key="k.one"),
        spec("", {"a"}, key="k.two"),
    )
    lines = msg.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("k.one: unknown placeholder {bogus}")
    assert lines[1].startswith("k.two: missing placeholder {a}")


def test_a_spec_whose_required_is_not_allowed_is_a_protocol_bug() -> None:
    with pytest.raises(ValueError, match="required"):
        TemplateSpec(KEY, "{a}", frozenset({"a"}), frozenset())
    with pytest.raises(ValueError, match="once"):
        TemplateSpec(KEY, "{a}", frozenset(), frozenset({"a"}), frozenset({"a"}))


def test_substitute_fills_placeholders_only_and_never_rescans_values() -> None:
    out = substitute('{q} {{q}} {0} {"k": 1} {o}', {"q": "Q{o}", "o": "O"})
    assert out == 'Q{o} {Q{o}} {0} {"k": 1} O'
    with pytest.raises(ValueError, match=r"\{o\} has no value"):
        substitute("{o}", {})
