"""The LLM judge every protocol shares (``judge.model``, ``judge.min_margin``), through the
response store.

A protocol asks with its own prompt (system text, template, options); the judge scores each
option by its next-token log-probability, and the best wins, UNCLEAR when its lead is below
``judge.min_margin`` or when it is an option the prompt maps to None (the judge's own UNCLEAR,
named in the evidence: ``syps.core.labeling.judge_labels``). A verdict's key covers the
judge's identity, the prompt's template, its options and the exact prompt, so it is computed
once, whichever stage asks; ``min_margin`` is applied to the stored log-probabilities, so
changing it relabels without asking again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from syps.core import labeling as lab
from syps.core.backends import OptionScores, load_backend, model_identity
from syps.core.config import JudgeParams, ModelSpec
from syps.core.io import canonical_json, first_index, sha256_text
from syps.core.messages import messages_json
from syps.core.protocol import JudgeLabel
from syps.core.store import judge_key
from syps.core.stores import ResponseStore
from syps.core.templating import fill


def judge_template_sha256(system: str, template: str, options: Mapping[str, int | None]) -> str:
    """Identity of a judge prompt: what it is asked and which answers it may give, with what
    each means (None: UNCLEAR), so a changed option set is judged again."""
    return sha256_text(
        canonical_json({"system": system, "template": template, "options": dict(options)})
    )


def judge_records(
    store: ResponseStore,
    spec: ModelSpec,
    cache_dir: Path,
    keys: Sequence[str],
    prompts: Sequence[str],
    options: Sequence[str],
    *,
    dry: bool = False,
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The stored judge records of ``keys`` (``prompts`` their messages JSON, row by row) and
    the distinct keys that were missing. Unless ``dry``, the judge model (loaded only then)
    scores each missing prompt once, and each batch is stored as it finishes; every protocol's
    judge comes here."""
    first = first_index(keys)
    records = store.get_many(list(first))
    todo = [k for k in first if k not in records]
    if todo and not dry:
        names = list(options)

        def persist(idx: list[int], scores: OptionScores) -> None:
            store.put_many(
                "judge",
                [
                    (
                        todo[i],
                        {
                            "options": names,
                            "logprobs": [float(x) for x in row],
                            "raw": raw,
                            **scores.usage(j),  # API judges: the tokens it cost
                        },
                    )
                    for j, (i, row, raw) in enumerate(
                        zip(idx, scores.logprobs, scores.raw, strict=True)
                    )
                ],
            )

        backend = load_backend(spec, cache_dir)
        backend.option_logprobs([json.loads(prompts[first[k]]) for k in todo], names, persist)
        records.update(store.get_many(todo))
    return records, todo


def _digest(fields: Mapping[str, str]) -> bytes:
    """128 bits of BLAKE2b over the fields' ``repr`` (unambiguous: each string quoted and
    escaped), the memory of one question asked."""
    return hashlib.blake2b(repr(tuple(fields.items())).encode(), digest_size=16).digest()


class StoreJudge:
    """The shared judge (``judge.model``, ``judge.min_margin``) behind ``base.Judge``.

    Keys are ``syps.core.store.judge_key`` (judge identity, template sha256, exact prompt), so a
    verdict is computed once whichever stage or protocol asks. The
    judge model loads only when some verdict is missing. ``tally`` counts verdicts computed
    now and served by the store.
    """

    def __init__(
        self, judge: JudgeParams, store: ResponseStore, cache_dir: Path, dry: bool = False
    ):
        self.params, self.store, self.cache_dir, self.dry = judge, store, cache_dir, dry
        self._identity: dict[str, str] | None = None
        self.tally = {"judged": 0, "served_from_store": 0}
        # Of those served, the verdicts computed earlier in this run (a prompt asked twice): what
        # the stage's line says apart from the store's answers of earlier runs.
        self.repeats = 0
        self._computed: set[str] = set()
        # The same, per dataset, for the calls that say which dataset each prompt is of.
        self.by_dataset: dict[str, dict[str, int]] = {}
        self.seen: set[str] = set()  # every distinct verdict asked for
        # (system, template, options, digest of the fields) -> (key, label) of every decided
        # verdict asked.
        self._memo: dict[tuple[Any, ...], tuple[str, JudgeLabel]] = {}
        # Planning (``dry``): the verdicts missing from the store, as judge prompts; each is
        # answered UNCLEAR ("NOT JUDGED YET") instead of being asked.
        self.pending: list[list[dict[str, str]]] = []

    @property
    def identity(self) -> dict[str, str]:
        if self._identity is None:
            self._identity = model_identity(self.params.model, self.cache_dir, "judge.model")
        return self._identity

    def __call__(
        self,
        system: str,
        template: str,
        options: Mapping[str, int | None],
        fields: Sequence[Mapping[str, str]],
        where: str,
        datasets: Sequence[str] | None = None,
    ) -> list[JudgeLabel]:
        if not fields:
            return []
        if datasets is not None and len(datasets) != len(fields):
            raise ValueError(f"{len(datasets)} datasets for {len(fields)} fields")
        # A question asked again in this stage (a design that rebuilds its conversations each
        # turn reads every earlier answer again) is answered from memory: its key and label as
        # the store gave them, counted as the store's answer, without filling, hashing and
        # looking it up again. Remembered by a digest of its fields, not the fields themselves,
        # which would keep every judged text of the stage alive (discernment's 189,000
        # comparisons at paper scale).
        head = (system, template, tuple(options.items()))
        asked = [(head, _digest(f)) for f in fields]
        known = [self._memo.get(a) for a in asked]
        todo = [i for i, k in enumerate(known) if k is None]
        fresh = self._ask(
            system,
            template,
            options,
            [fields[i] for i in todo],
            where,
            None if datasets is None else [datasets[i] for i in todo],
        )
        for i, (key, label) in zip(todo, fresh, strict=True):
            known[i] = (key, label)
            if label.labeler:  # a decided verdict; planning's NOT JUDGED YET is asked again
                self._memo[asked[i]] = (key, label)
        asked_now = set(todo)
        for i, k in enumerate(known):
            if i in asked_now or k is None:
                continue
            self.tally["served_from_store"] += 1
            self.repeats += k[0] in self._computed
            if datasets is not None:
                t = self.by_dataset.setdefault(datasets[i], {"judged": 0, "served_from_store": 0})
                t["served_from_store"] += 1
        return [k[1] for k in known if k is not None]

    def _ask(
        self,
        system: str,
        template: str,
        options: Mapping[str, int | None],
        fields: Sequence[Mapping[str, str]],
        where: str,
        datasets: Sequence[str] | None,
    ) -> list[tuple[str, JudgeLabel]]:
        """Each field's key and label, through the store (the judge asked for the missing)."""
        if not fields:
            return []
        names = list(options)
        prompts = [messages_json(system, fill(template, f, where)) for f in fields]
        t_sha = judge_template_sha256(system, template, options)
        keys = [judge_key(self.identity, t_sha, m) for m in prompts]
        records, todo = judge_records(
            self.store, self.params.model, self.cache_dir, keys, prompts, names, dry=self.dry
        )
        self.tally["judged"] += len(todo)
        self.tally["served_from_store"] += len(keys) - len(todo)
        # A verdict computed now counts as judged at its first row; its other rows, and every
        # row of one computed by an earlier call, repeat it.
        computed, firsts = set(todo), set()
        for k in keys:
            if k in computed and k not in firsts:
                firsts.add(k)
            elif k in computed or k in self._computed:
                self.repeats += 1
        self._computed |= computed
        if datasets is not None:
            # A verdict asked twice is computed once: only its first row counts as judged.
            fresh, counted = set(todo), set()
            for k, d in zip(keys, datasets, strict=True):
                t = self.by_dataset.setdefault(d, {"judged": 0, "served_from_store": 0})
                now = k in fresh and k not in counted
                counted.add(k)
                t["judged" if now else "served_from_store"] += 1
        self.seen.update(keys)
        if self.dry:
            first = {k: i for i, k in reversed(list(enumerate(keys)))}
            self.pending += [json.loads(prompts[first[k]]) for k in todo]
        present = [k for k in keys if k in records]  # every key, unless planning
        decided = dict(zip(present, self._decide(records, present, options, t_sha), strict=True))
        nan = float("nan")
        return [
            (k, decided.get(k) or JudgeLabel(nan, "NOT JUDGED YET", "", "", "", t_sha))
            for k in keys
        ]

    def _decide(
        self,
        records: Mapping[str, Mapping[str, Any]],
        keys: Sequence[str],
        options: Mapping[str, int | None],
        t_sha: str,
    ) -> list[JudgeLabel]:
        """Labels from stored option log-probabilities: the best option wins, UNCLEAR when its
        lead is below ``judge.min_margin`` or when the prompt maps it to None."""
        names = list(options)
        logprobs = np.array([records[k]["logprobs"] for k in keys], dtype=float)
        recs = lab.judge_labels(
            logprobs.reshape(len(keys), len(names)), names, options, self.params.min_margin
        )
        ident = self.identity
        labeler = f"judge:{ident['model_id']}@{ident['revision']}"
        sha = sha256_text(
            canonical_json(
                {
                    "template": t_sha,
                    "min_margin": self.params.min_margin,
                    "model": self.params.model.model,
                    "revision": ident["revision"],
                }
            )
        )
        return [
            JudgeLabel(
                value=r.value,
                verdict=r.verdict,
                evidence=f"{r.evidence}; raw: {records[k].get('raw', '')!r}",
                labeler=labeler,
                labeler_sha256=sha,
                template_sha256=t_sha,
            )
            for r, k in zip(recs, keys, strict=True)
        ]
