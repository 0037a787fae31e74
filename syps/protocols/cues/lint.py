"""Lint the rendered prompts: the variants of an item may differ from P0 only in their cue.

Published sycophancy results have been confounded by templates that varied more than the cue
under test (a target answer named in some templates only, a format instruction that moved with
the objection). This stage reads the exact messages the models will see, so it checks the
prompts themselves, not the code that renders them, and fails the pipeline before any response
is generated.

What the lint expects, per prompt row: a system turn holding the task instruction and one user
turn holding the situation, the cue and the format instruction (the layout syps renders). Texts
from params are compared stripped, as rendering strips them. The checks:

``messages``            the messages parse as ``[system, user]`` turns of text.
``task-instruction``    the system turn is the configured task, byte for byte.
``format-instruction``  the format instruction occurs exactly once, verbatim, at the same place
                        as in P0 (same side of the situation; end, start or middle of the turn).
``situation``           the item's situation occurs exactly once, verbatim.
``cue``                 the variant's configured cue occurs verbatim.
``extra-difference``    with its cue span removed, the user turn equals P0's with P0's cue span
                        removed. The cue span is the cue text plus the whitespace run directly
                        before it *or* directly after it (the separator that attached the cue);
                        nothing else is normalised, so a changed word, a sentence added outside
                        the cue or a moved instruction always differs.
``target-answer``       the text outside the situation and the format instruction (the cue and
                        anything added) names the same target answers as P0's: a cue naming
                        "NTA" or "AGREE" is allowed only if every variant does.
``instruction-copy``    no instruction text (task or format) appears anywhere but its own place,
                        in any variant, P0 included: not in the user turn outside the format's
                        own occurrence (the cue, or text placed before or after the situation),
                        not in the system turn besides the task. Texts are compared as words,
                        ignoring case, whitespace, punctuation and markdown, so a re-cased,
                        re-wrapped or re-quoted copy counts; a copy is any run of
                        ``COPY_WORDS`` consecutive words of an instruction (the whole instruction
                        if it is shorter). Inside the situation only a whole instruction of at
                        least ``SITUATION_COPY_WORDS`` words counts (posts quote short phrases),
                        reported once per item for every variant.
``missing-variant``, ``unknown-variant``, ``duplicate-row``, ``unknown-item``,
``unknown-dataset``     every item has exactly one row per variant of its dataset, and nothing
                        else is in the table.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from syps.protocols.cues.datasets import DATASETS
from syps.protocols.cues.params import DatasetTemplate, TemplateParams

ROLES = ["system", "user"]
# Six consecutive words of an instruction rarely occur in a cue by chance, and a partial copy
# ("say whether you agree with it") is as much a second instruction as a whole one.
COPY_WORDS = 6
SITUATION_COPY_WORDS = 4
_CLIP = 60


@dataclass(frozen=True)
class Violation:
    """One failed check: ``item_id`` is "" for a dataset-level violation, ``variant`` too."""

    dataset: str
    variant: str
    item_id: str
    check: str
    detail: str


@dataclass(frozen=True)
class _Prompt:
    system: str
    user: str


def target_answers(labels: Mapping[str, Mapping[str, int]]) -> dict[str, tuple[str, ...]]:
    """The answers a prompt must not name in one variant only, per dataset.

    These are the verdict words the rule labeler reads (the keys of params ``labels``), so the
    list cannot drift from the answers the responses are scored on, plus each dataset's
    ``spelled_out`` words (see :mod:`syps.protocols.cues.datasets`).
    """
    spelled = {ds: DATASETS[ds].spelled_out if ds in DATASETS else () for ds in labels}
    return {ds: (*words, *spelled[ds]) for ds, words in labels.items()}


def lint_prompts(
    prompts: pd.DataFrame,
    items: pd.DataFrame,
    templates: TemplateParams,
    targets: Mapping[str, Sequence[str]],
) -> list[Violation]:
    """Check every prompt row against its item and its dataset's template.

    ``prompts`` has columns dataset, item_id, variant, messages; ``items`` has dataset, item_id,
    situation; ``targets`` maps a dataset to its target-answer words (matched as whole words,
    ignoring case; a dataset without an entry has none). Violations come sorted by dataset,
    variant, check and item.
    """
    out: list[Violation] = []
    datasets = sorted({str(d) for d in items["dataset"]} | {str(d) for d in prompts["dataset"]})
    for ds in datasets:
        if ds not in templates.datasets:
            known = sorted(templates.datasets)
            out.append(Violation(ds, "", "", "unknown-dataset", f"no template; known: {known}"))
            continue
        out += _lint_dataset(
            ds,
            prompts[prompts["dataset"] == ds],
            items[items["dataset"] == ds],
            templates.datasets[ds],
            tuple(targets.get(ds, ())),
        )
    return sorted(out, key=lambda v: (v.dataset, v.variant, v.check, v.item_id, v.detail))


def _lint_dataset(
    ds: str,
    prompts: pd.DataFrame,
    items: pd.DataFrame,
    tpl: DatasetTemplate,
    targets: tuple[str, ...],
) -> list[Violation]:
    cues = {v: c.strip() for v, c in tpl.variant_cues().items()}
    situations = {str(i): str(s) for i, s in zip(items["item_id"], items["situation"], strict=True)}
    out: list[Violation] = []
    rows: dict[str, dict[str, str]] = {}
    for item, variant, messages in zip(
        prompts["item_id"], prompts["variant"], prompts["messages"], strict=True
    ):
        item, variant = str(item), str(variant)
        if variant not in cues:
            detail = f"not a variant of {ds}; known: {list(cues)}"
            out.append(Violation(ds, variant, item, "unknown-variant", detail))
        elif variant in rows.setdefault(item, {}):
            out.append(Violation(ds, variant, item, "duplicate-row", "the table has it twice"))
        else:
            rows[item][variant] = str(messages)
    for item in sorted(set(rows) - set(situations)):
        out.append(Violation(ds, "", item, "unknown-item", "no such item in the items table"))
    for item, situation in situations.items():
        parsed: dict[str, _Prompt] = {}
        for variant in cues:
            text = rows.get(item, {}).get(variant)
            if text is None:
                out.append(Violation(ds, variant, item, "missing-variant", "no prompt row"))
                continue
            prompt = _parse(text)
            if isinstance(prompt, str):
                out.append(Violation(ds, variant, item, "messages", prompt))
            else:
                parsed[variant] = prompt
        out += [
            Violation(ds, variant, item, check, detail)
            for variant, check, detail in _lint_item(situation, parsed, tpl, cues, targets)
        ]
    return out


def _parse(text: str) -> _Prompt | str:
    """The two turns of a messages cell, or why it is not the expected layout."""
    try:
        msgs = json.loads(text)
    except json.JSONDecodeError as e:
        return f"not valid JSON ({e}): {_clip(text)}"
    if not isinstance(msgs, list) or not all(
        isinstance(m, dict) and isinstance(m.get("content"), str) for m in msgs
    ):
        return f"not a list of messages with text content: {_clip(text)}"
    roles = [m.get("role") for m in msgs]
    if roles != ROLES:
        return f"expected roles {ROLES}, found {roles}"
    return _Prompt(msgs[0]["content"], msgs[1]["content"])


def _lint_item(
    situation: str,
    prompts: dict[str, _Prompt],
    tpl: DatasetTemplate,
    cues: dict[str, str],
    targets: tuple[str, ...],
) -> list[tuple[str, str, str]]:
    """(variant, check, detail) for one item's parsed prompts."""
    task, fmt = tpl.task.strip(), tpl.format.strip()
    parts = [("situation", "situation", situation)]
    parts += [("format-instruction", "format instruction", fmt)] if fmt else []
    out: list[tuple[str, str, str]] = []
    for variant, p in prompts.items():
        if p.system != task:
            diff = _first_difference(task, p.system)
            out.append((variant, "task-instruction", f"system turn vs the task: {diff}"))
        for check, name, text in parts:
            problem = _once(text, p.user)
            if problem:
                out.append((variant, check, f"{name} {problem}"))
    if fmt:
        out += _moved_format(prompts, fmt, situation)
    landmarks = [("the situation", situation), ("the format instruction", fmt)]
    out += _extra_differences(prompts, cues, landmarks)
    if targets:
        out += _target_answers(prompts, situation, fmt, targets)
    out += _instruction_copies(prompts, situation, task, fmt)
    return out


_WORDS = re.compile(r"\w+")
_INSTRUCTIONS = ("task", "format")


def _instruction_copies(
    prompts: dict[str, _Prompt], situation: str, task: str, fmt: str
) -> list[tuple[str, str, str]]:
    """Copies of the task or format instruction anywhere but their own place."""
    texts = {"task": task, "format": fmt}
    out = []
    for variant, p in prompts.items():
        # The own places: one verbatim task in the system turn, one verbatim format in the
        # user turn (a missing or repeated one is reported by its own check). The situation
        # is searched separately, below.
        own_task = _spans(p.system, task)[:1]
        own_fmt = _spans(p.user, fmt) if fmt and p.user.count(fmt) == 1 else []
        sits = _spans(p.user, situation) if situation else []
        turns = [
            ("system", p.system, own_task, [("the task instruction", task)]),
            (
                "user",
                p.user,
                own_fmt + sits,
                [("the situation", situation), ("the format instruction", fmt)],
            ),
        ]
        for turn, text, own, landmarks in turns:
            for name in _INSTRUCTIONS:
                if name == "format" and turn == "user" and not own_fmt and fmt in text:
                    continue  # a repeated format is reported as such by format-instruction
                for start, end, n, total in _copies(texts[name], text, own):
                    where = _where(text, start, landmarks)
                    how = (
                        f"the whole {name} instruction is"
                        if n == total
                        else f"{n} of the {total} words of the {name} instruction are"
                    )
                    detail = f"{how} repeated in the {turn} turn, {where}: {_clip(text[start:end])}"
                    out.append((variant, "instruction-copy", detail))
    for name in _INSTRUCTIONS:
        words = _WORDS.findall(texts[name].casefold())
        if len(words) >= SITUATION_COPY_WORDS and _whole_copy(words, situation):
            detail = (
                f"the whole {name} instruction is inside the situation, so in every variant: "
                f"{_clip(texts[name])}"
            )
            out.append(("", "instruction-copy", detail))
    return out


def _spans(text: str, part: str) -> list[tuple[int, int]]:
    """Every (start, end) of ``part`` in ``text``, left to right, not overlapping."""
    out, at = [], text.find(part)
    while part and at != -1:
        out.append((at, at + len(part)))
        at = text.find(part, at + len(part))
    return out


def _copies(
    instruction: str, text: str, own: Sequence[tuple[int, int]]
) -> list[tuple[int, int, int, int]]:
    """(start, end, words, instruction words) of each copy of ``instruction`` in ``text``
    outside the ``own`` spans.

    Words are compared case-folded, so whitespace, punctuation, quotes and markdown between
    them do not matter. A copy is a maximal run of text words in which every window of
    ``COPY_WORDS`` words (the whole instruction if shorter) is consecutive in the instruction;
    a run never crosses an own span.
    """
    words = _WORDS.findall(instruction.casefold())
    k = min(len(words), COPY_WORDS)
    if k == 0:
        return []
    grams = {tuple(words[i : i + k]) for i in range(len(words) - k + 1)}
    # The text between the own spans, word by word; the own spans (the situation: most of the
    # prompt) are never tokenised.
    segments, at = [], 0
    for a, b in [*sorted(own), (len(text), len(text))]:
        if a >= at:
            segments.append(
                [(m.group().casefold(), m.start(), m.end()) for m in _WORDS.finditer(text, at, a)]
            )
        at = max(at, b)
    out = []
    for seg in segments:
        hits = [
            i for i in range(len(seg) - k + 1) if tuple(w for w, _, _ in seg[i : i + k]) in grams
        ]
        run_start = None
        for j, i in enumerate(hits):
            if run_start is None:
                run_start = i
            if j + 1 == len(hits) or hits[j + 1] != i + 1:
                last = i + k - 1
                n = last - run_start + 1
                out.append((seg[run_start][1], seg[last][2], min(n, len(words)), len(words)))
                run_start = None
    return out


def _whole_copy(words: list[str], text: str) -> bool:
    """Whether ``words`` occur consecutively among the case-folded words of ``text``."""
    hay = " " + " ".join(_WORDS.findall(text.casefold())) + " "
    return " " + " ".join(words) + " " in hay


def _once(needle: str, hay: str) -> str | None:
    """Why ``needle`` does not occur exactly once, verbatim, in ``hay``; None if it does."""
    if not needle:
        return "is empty"
    n = hay.count(needle)
    if n == 1:
        return None
    if n > 1:
        return f"occurs {n} times, expected once: {_clip(needle)}"
    # Longest prefix of needle present in hay; presence is monotone in the prefix length.
    lo, hi = 0, len(needle)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if needle[:mid] in hay:
            lo = mid
        else:
            hi = mid - 1
    if lo == 0:
        return f"missing: {_clip(needle)}"
    at = hay.find(needle[:lo]) + lo
    return (
        f"not verbatim: after {_clip_left(needle[:lo])} the prompt has "
        f"{_clip(hay[at : at + 30])} where it should have {_clip(needle[lo : lo + 30])}"
    )


def _moved_format(
    prompts: dict[str, _Prompt], fmt: str, situation: str
) -> list[tuple[str, str, str]]:
    """Variants whose (single) format instruction sits elsewhere than in P0."""
    p0 = prompts.get("P0")
    if p0 is None or p0.user.count(fmt) != 1:
        return []
    where0 = _place(p0.user, fmt, situation)
    out = []
    for variant, p in prompts.items():
        if p.user.count(fmt) != 1:
            continue  # reported as missing or repeated
        where = _place(p.user, fmt, situation)
        moved = [
            f"{w} (P0: {w0})" for w, w0 in zip(where, where0, strict=True) if w and w0 and w != w0
        ]
        if moved:
            out.append(
                (variant, "format-instruction", "format instruction moved: " + "; ".join(moved))
            )
    return out


def _place(user: str, fmt: str, situation: str) -> tuple[str, str]:
    """Where the (single) format instruction sits: its side of the situation ("" if the
    situation does not occur once) and its place in the turn."""
    f = user.find(fmt)
    side = ""
    if situation and user.count(situation) == 1:
        side = "after the situation" if f > user.find(situation) else "before the situation"
    edge = (
        "at the end of the turn"
        if user.endswith(fmt)
        else "at the start of the turn"
        if user.startswith(fmt)
        else "inside the turn"
    )
    return side, edge


def _extra_differences(
    prompts: dict[str, _Prompt], cues: dict[str, str], landmarks: Sequence[tuple[str, str]]
) -> list[tuple[str, str, str]]:
    """Variants whose user turn, cue span removed, differs from P0's; and cues not found."""
    out = []
    rests = {}
    for variant, p in prompts.items():
        rest = _without_cue(p.user, cues[variant])
        if rest is None:
            detail = f"configured cue not found verbatim: {_clip(cues[variant])}"
            out.append((variant, "cue", detail))
        else:
            rests[variant] = rest
    ref = rests.get("P0")
    for variant, rest in rests.items():
        if ref is not None and not rest & ref:
            diff = _first_difference(*_closest(ref, rest), landmarks)
            out.append((variant, "extra-difference", f"outside the cue vs P0: {diff}"))
    return out


def _target_answers(
    prompts: dict[str, _Prompt], situation: str, fmt: str, targets: tuple[str, ...]
) -> list[tuple[str, str, str]]:
    """Variants that name other target answers than P0 outside the situation and format."""
    named = {v: _named(_outside(p.user, situation, fmt), targets) for v, p in prompts.items()}
    ref = {w for w, _ in named.get("P0", [])}
    p0_names = ", ".join(map(repr, sorted(ref))) or "none"
    out = []
    for variant, found in named.items():
        extra = [f"{w!r} in {ctx}" for w, ctx in found if w not in ref]
        lacking = sorted(ref - {w for w, _ in found})
        parts = [f"names the target answer {' and '.join(extra)}"] if extra else []
        parts += [f"does not name {', '.join(map(repr, lacking))}"] if lacking else []
        if parts:
            out.append((variant, "target-answer", f"{'; '.join(parts)} where P0 names {p0_names}"))
    return out


def _without_cue(user: str, cue: str) -> set[str] | None:
    """The user turn with the cue span removed, for each way of removing it; None if the cue
    is not there.

    The cue span is one occurrence of the cue plus the whitespace run directly before it or
    directly after it: the one separator that attached the cue. Every occurrence is tried, so a
    cue that also occurs inside the situation does not hide the real one.
    """
    if not cue:
        return {user}
    out = set()
    start = user.find(cue)
    while start != -1:
        left, right = user[:start], user[start + len(cue) :]
        out.add(left.rstrip() + right)
        out.add(left + right.lstrip())
        start = user.find(cue, start + 1)
    return out or None


def _closest(expected: set[str], got: set[str]) -> tuple[str, str]:
    """The pair that shares the longest common prefix plus suffix: the one to show a diff of."""

    def shared(a: str, b: str) -> int:
        pre = len(_common_prefix(a, b))
        return pre + len(_common_prefix(a[pre:][::-1], b[pre:][::-1]))

    return max(((a, b) for a in sorted(expected) for b in sorted(got)), key=lambda ab: shared(*ab))


def _common_prefix(a: str, b: str) -> str:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return a[:n]


_TOKEN = re.compile(r"\s+|\w+|[^\w\s]")


def _first_difference(expected: str, got: str, landmarks: Sequence[tuple[str, str]] = ()) -> str:
    """The first word-level difference of ``got`` from ``expected``, and where it is.

    ``landmarks`` are (name, text) parts of ``expected`` such as the situation: a difference
    next to one is placed by its name ("after the situation"), so the same template confound
    reads the same on every item.
    """
    a, b = _TOKEN.findall(expected), _TOKEN.findall(got)
    # Match only between the common prefix and suffix: a confound is usually local, and the
    # matcher is quadratic in the worst case on long posts.
    pre = 0
    while pre < min(len(a), len(b)) and a[pre] == b[pre]:
        pre += 1
    suf = 0
    while suf < min(len(a), len(b)) - pre and a[-1 - suf] == b[-1 - suf]:
        suf += 1
    matcher = difflib.SequenceMatcher(None, a[pre : len(a) - suf], b[pre : len(b) - suf], False)
    ops = [op for op in matcher.get_opcodes() if op[0] != "equal"]
    if not ops:
        return "no difference"
    tag, i1, i2, j1, j2 = ops[0]
    i1, i2, j1, j2 = i1 + pre, i2 + pre, j1 + pre, j2 + pre
    # An insertion or deletion next to equal tokens can be placed several ways ("x. y." + " z."
    # vs "x." + ". z"); slide it as far right as it goes, which keeps sentences whole.
    if tag == "insert":
        while i1 < len(a) and j2 < len(b) and a[i1] == b[j2] == b[j1]:
            i1, i2, j1, j2 = i1 + 1, i2 + 1, j1 + 1, j2 + 1
    elif tag == "delete":
        while i2 < len(a) and j1 < len(b) and a[i1] == a[i2] == b[j1]:
            i1, i2, j1, j2 = i1 + 1, i2 + 1, j1 + 1, j2 + 1
    where = _where(expected, len("".join(a[:i1])), landmarks)
    old, new = _clip("".join(a[i1:i2])), _clip("".join(b[j1:j2]))
    what = {"insert": f"adds {new}", "delete": f"drops {old}"}.get(tag, f"has {new} for {old}")
    more = f" (+{len(ops) - 1} more)" if len(ops) > 1 else ""
    return f"{what} {where}{more}"


def _where(text: str, pos: int, landmarks: Sequence[tuple[str, str]]) -> str:
    """Describe offset ``pos`` of ``text``: inside or after a landmark, else by the text before."""
    spans = []
    for name, part in landmarks:
        if part and text.count(part) == 1:
            start = text.find(part)
            spans.append((start, start + len(part), name))
    for start, end, name in spans:
        if start < pos < end:
            return f"inside {name}, after {_clip_left(text[start:pos])}"
    prev = max((s for s in spans if s[1] <= pos), key=lambda s: s[1], default=None)
    since = text[prev[1] if prev else 0 : pos]
    if prev and not since.strip():
        return f"after {prev[2]}"
    if not text[:pos].strip():
        return "at the start of the turn"
    return f"after {_clip_left(since)}"


def _outside(user: str, situation: str, fmt: str) -> str:
    """The user turn without the situation and the format instruction: the cue and anything
    else a variant added. A newline keeps words on either side of a removed span apart."""
    if situation:
        user = user.replace(situation, "\n", 1)
    return user.replace(fmt, "\n") if fmt else user


def _named(text: str, targets: tuple[str, ...]) -> list[tuple[str, str]]:
    """(target, context) for each target answer named in ``text`` (whole word, any case)."""
    found = []
    for word in targets:
        m = re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text, re.IGNORECASE)
        if m:
            found.append((word, _clip_around(text, m.start(), m.end())))
    return found


def _clip(text: str) -> str:
    return repr(text if len(text) <= _CLIP else text[: _CLIP - 1] + "…")


def _clip_around(text: str, start: int, end: int) -> str:
    """``text`` stripped, or a window of it around ``text[start:end]`` if it is long."""
    lead = len(text) - len(text.lstrip())
    text, start, end = text.strip(), start - lead, end - lead
    if len(text) <= _CLIP:
        return repr(text)
    lo = max(0, min(start - (_CLIP - (end - start)) // 2, len(text) - _CLIP))
    snippet = text[lo : lo + _CLIP]
    return repr(("…" if lo else "") + snippet + ("…" if lo + _CLIP < len(text) else ""))


def _clip_left(text: str) -> str:
    return repr(text if len(text) <= _CLIP else "…" + text[-(_CLIP - 1) :])


def format_report(violations: Sequence[Violation], per_check: int = 5) -> str:
    """A readable report, grouped by dataset.

    A violation repeated on several items with the same detail (a template-level confound) is
    listed once with its item count; at most ``per_check`` distinct details are listed per
    (dataset, variant, check), the rest counted.
    """
    if not violations:
        return "lint: no violations; the variants differ from P0 only in their cue"
    groups: dict[tuple[str, str, str], dict[str, list[str]]] = {}
    for v in violations:
        groups.setdefault((v.dataset, v.variant, v.check), {}).setdefault(v.detail, [])
        groups[v.dataset, v.variant, v.check][v.detail].append(v.item_id)
    distinct = sum(len(details) for details in groups.values())
    lines = [
        f"lint: {len(violations)} violation(s), {distinct} distinct, in "
        f"{', '.join(sorted({v.dataset for v in violations}))}: "
        "the prompts must differ from P0 only in their cue"
    ]
    current = None
    for (ds, variant, check), details in groups.items():
        if ds != current:
            lines.append(f"{ds}:")
            current = ds
        for detail, ids in list(details.items())[:per_check]:
            real = [i for i in ids if i]
            n = len(real)
            where = f" ({n} items)" if n > 1 else f" (item {real[0]})" if real else ""
            lines.append(f"  {variant or '-'} {check}{where}: {detail}")
        rest = sum(len(ids) for ids in list(details.values())[per_check:])
        if rest:
            lines.append(f"  {variant or '-'} {check}: {rest} more, listed in the JSON report")
    return "\n".join(lines)
