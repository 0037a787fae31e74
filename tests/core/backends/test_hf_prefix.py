"""Shared-prefix prefill: a prefix computed once gives the tokens each prompt gets alone.

A tiny random Llama (two layers, float64 so that rounding cannot flip a near-tie) over a
word-level vocabulary, built in memory: fast, no weights on disk.
"""

from __future__ import annotations

from typing import Any

import pytest

from syps.core.backends import GenRequest, SamplingParams
from syps.core.backends.hf import MIN_SHARED, prefix_order, shared_prefixes

torch = pytest.importorskip("torch")

WORDS = [f"w{i}" for i in range(40)]


@pytest.fixture(scope="module")
def backend() -> Any:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from syps.core.backends.hf import HFBackend
    from syps.core.backends.hf_resolve import ResolvedModel

    vocab = {w: i for i, w in enumerate(["<unk>", "<s>", "</s>", *WORDS])}
    raw = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=raw, unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )
    tok.chat_template = (
        "{% for m in messages %}<s> {{ m['content'] }} </s> {% endfor %}"
        "{% if add_generation_prompt %}<s>{% endif %}"
    )
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        bos_token_id=1,
        eos_token_id=2,
        initializer_range=0.3,  # peaked logits: samples and argmaxes far from ties
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(torch.float64).eval()
    return HFBackend(model, tok, ResolvedModel("tiny", "r", "tiny"), batch_size=64)


def _ids(backend: Any, requests: list[GenRequest], sampling: SamplingParams) -> list[list[int]]:
    """The new token ids of each request, as the backend decodes them (EOS included)."""
    seen: dict[str, list[int]] = {}
    order: list[list[int]] = []
    decode = backend.tok.decode

    def recording(ids: Any, **kw: Any) -> Any:
        order.append(list(ids))
        return decode(ids, **kw)

    backend.tok.decode = recording
    try:
        results = backend.generate(requests, sampling, lambda idx, res: None)
    finally:
        del backend.tok.decode
    # Each result's text decodes its tokens; match the recorded ids back by text and count.
    for r, req in zip(results, requests, strict=True):
        hits = [
            ids
            for ids in order
            if decode(ids, skip_special_tokens=True) == r.text
            and len(ids) + (r.finish_reason == "stop") == r.completion_tokens
        ]
        assert hits, req.key
        seen[req.key] = hits[0] + ([2] if r.finish_reason == "stop" else [])
    return [seen[r.key] for r in requests]


def _requests() -> list[GenRequest]:
    """Eight variants of two items (shared system turn and situation, cue after), a prompt
    repeated five times, and two prompts sharing nothing but the system turn."""
    system = " ".join(WORDS[:6])
    reqs = []
    for item in range(2):
        situation = " ".join(WORDS[(item * 7 + j) % 40] for j in range(30))
        for cue in range(8):
            user = f"{situation} {' '.join(WORDS[30 + cue : 30 + cue + cue % 3 + 1])}"
            reqs.append(
                GenRequest(
                    f"i{item}c{cue}",
                    [{"role": "system", "content": system}, {"role": "user", "content": user}],
                    10,
                )
            )
    repeated = [{"role": "user", "content": " ".join(WORDS[5:35])}]
    reqs += [GenRequest(f"rep{r}", repeated, 10) for r in range(5)]
    reqs += [
        GenRequest(f"solo{k}", [{"role": "user", "content": " ".join(WORDS[k::3])}], 6)
        for k in range(2)
    ]
    return reqs


def test_groups_follow_the_longest_shared_prefix() -> None:
    sys_turn = list(range(100, 100 + MIN_SHARED))  # shared by all, just long enough alone
    a = sys_turn + list(range(200, 240))  # item A's situation: 40 tokens
    b = sys_turn + list(range(300, 330))  # item B's: 30 tokens
    seqs = [a + [1], b + [1], a + [2, 3], b + [2], a + [4], sys_turn + [5, 6]]
    groups = {tuple(sorted(m)): n for m, n in shared_prefixes(seqs, 8)}
    # Grouping all six by the system turn saves 5 x 16 = 80 tokens; A's three and B's two by
    # their situations save 2 x 56 + 1 x 46 = 158, the last prompt then shares nothing.
    assert groups == {(0, 2, 4): 56, (1, 3): 46, (5,): 0}
    # A group never exceeds max_group: A's three become a pair and a single.
    capped = sorted((sorted(m), n) for m, n in shared_prefixes(seqs, 2))
    assert [n for _, n in capped].count(56) == 1 and ([1, 3], 46) in capped
    # Identical prompts share all but their last token (its logits start the decoding).
    assert shared_prefixes([a, a, a], 8) == [([0, 1, 2], len(a) - 1)]
    # Below MIN_SHARED nothing is shared.
    short = [list(range(MIN_SHARED - 1)) + [7], list(range(MIN_SHARED - 1)) + [8]]
    assert sorted(n for _, n in shared_prefixes(short, 8)) == [0, 0]
    # Order: groups contiguous, larger max_new_tokens first.
    order = prefix_order(seqs, [5, 5, 5, 5, 5, 9], 8)
    assert order[0] == 5 and sorted(order[1:4]) == [0, 2, 4] and sorted(order[4:]) == [1, 3]


@pytest.mark.parametrize(
    "sampling",
    [
        SamplingParams(temperature=0.0, top_p=1.0, seed=0),
        SamplingParams(temperature=1.0, top_p=1.0, seed=3),
        SamplingParams(temperature=0.8, top_p=0.9, seed=4),
    ],
    ids=["greedy", "sampled", "sampled-top-p"],
)
def test_shared_prefix_tokens_equal_each_prompt_alone(backend: Any, sampling: Any) -> None:
    reqs = _requests()
    backend.share_prefixes = False
    try:
        alone = [_ids(backend, [r], sampling)[0] for r in reqs]
    finally:
        backend.share_prefixes = True
    shared = _ids(backend, reqs, sampling)
    assert shared == alone
    # Not a vacuous comparison: the continuations differ across prompts, and sampled
    # repetitions of one prompt differ from one another (each has its own seed).
    assert len({tuple(t) for t in alone}) > 10
    if sampling.temperature > 0:
        assert len({tuple(alone[i]) for i in range(16, 21)}) > 1


def test_the_prefix_runs_once(backend: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The prefill's forward passes see each shared prefix once, then only the rests."""
    reqs = _requests()[16:21]  # one prompt, five times
    n = len(backend.encode(reqs[0].messages))
    widths: list[tuple[int, int]] = []
    forward = backend.model.forward

    def spy(*args: Any, **kw: Any) -> Any:
        widths.append(tuple(kw["input_ids"].shape))
        return forward(*args, **kw)

    monkeypatch.setattr(backend.model, "forward", spy)
    backend.generate(reqs, SamplingParams(1.0, 1.0, 0))
    # One pass over the prefix (all but the last token), one over five one-token rests.
    assert widths[:2] == [(1, n - 1), (5, 1)]
    widths.clear()
    monkeypatch.setattr(backend, "share_prefixes", False)
    backend.generate(reqs, SamplingParams(1.0, 1.0, 0))
    assert widths[0] == (5, n)


def test_a_batch_mixing_shared_and_unshared_prompts(backend: Any) -> None:
    """Two prompts sharing a long prefix and one sharing nothing, in one batch (same
    max_new_tokens): the unshared row takes the all-zero prefix block, and every row decodes as
    when prefilled alone. (Such a batch crashed the prefill: the unshared row's prefix index
    was -1; the sustained-pushback turns of the default run made one.)"""
    long = " ".join(WORDS[:30])
    reqs = [
        GenRequest("a", [{"role": "user", "content": f"{long} w31"}], 6),
        GenRequest("b", [{"role": "user", "content": f"{long} w32 w33"}], 6),
        GenRequest("c", [{"role": "user", "content": " ".join(WORDS[39:20:-2])}], 6),
    ]
    greedy = SamplingParams(temperature=0.0, top_p=1.0, seed=0)
    groups = shared_prefixes([backend.encode(r.messages) for r in reqs], 8)
    assert sorted(n > 0 for _, n in groups) == [False, True]  # one shared group, one row alone
    backend.share_prefixes = False
    try:
        alone = [_ids(backend, [r], greedy)[0] for r in reqs]
    finally:
        backend.share_prefixes = True
    assert _ids(backend, reqs, greedy) == alone
