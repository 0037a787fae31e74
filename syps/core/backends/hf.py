"""Local transformers backend: batched decoding with left padding; prompts that share a token
prefix (the variants of an item, the repetitions of a prompt, the turns of a conversation) share
a batch, and the prefix is prefilled once for all of them.

Generation runs on the calling (main) thread: a busy Python thread beside the generate loop
contends for the GIL and was seen to slow a batch many times over.
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoTokenizer,
    DynamicCache,
    StaticCache,
)

from syps.core.backends.base import (
    FIX_JUDGE,
    GenRequest,
    GenResult,
    Messages,
    OnGenerated,
    OnScored,
    OptionScores,
    SamplingParams,
    check_context,
    device_dtype,
    judge_prompt_name,
    longest_first,
    prompt_seed,
)
from syps.core.backends.hf_resolve import ModelSpecError, ResolvedModel, build_once, resolve
from syps.core.backends.threads import thread_count
from syps.core.config import ModelSpec
from syps.core.io import InputError


def plain_copy_of_gguf(gguf: Path, digest: str, cache_dir: Path) -> Path:
    """Dequantise a GGUF once into a plain checkpoint; later loads take seconds instead of ~20 s.

    A GGUF-loaded model refuses ``save_pretrained``; rebuilding it from its config without the
    quantization config and loading its state dict gives a plain model with identical outputs.
    """
    target = cache_dir / "models" / digest[:16]

    def convert(tmp: Path) -> None:
        print(f"converting {gguf.name} once into {target} ...", file=sys.stderr)
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        quantised = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
        cfg = quantised.config.to_dict()
        cfg.pop("quantization_config", None)
        plain = AutoModelForCausalLM.from_config(AutoConfig.for_model(**cfg))  # type: ignore[no-untyped-call]
        plain.load_state_dict(quantised.state_dict())
        plain.save_pretrained(tmp)
        tok.save_pretrained(tmp)

    return build_once(target, convert)


def parameter_count(spec: ModelSpec, cache_dir: Path) -> float | None:
    """An hf model's parameter count, from its config on the meta device (no weights are read);
    None when the config is not on this machine.

    A hub id is looked up in the local cache only: a figure is no reason to download. The
    embedded GGUF's config is read from the GGUF itself, so counting never converts it.
    """
    try:
        resolved = resolve(spec, cache_dir, local_only=True)
    except ModelSpecError:
        return None
    source = resolved.source
    kwargs: dict[str, Any] = {"local_files_only": True}
    if resolved.gguf:
        source, kwargs["gguf_file"] = str(Path(source).parent), Path(source).name
    elif resolved.hf_revision is not None:
        kwargs["revision"] = resolved.hf_revision
    try:
        config = AutoConfig.from_pretrained(source, **kwargs)
    except OSError:  # transformers' "not found locally"
        return None
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)  # type: ignore[no-untyped-call]
    # parameters() yields a tied weight once: tied input/output embeddings count once.
    return float(sum(p.numel() for p in model.parameters()))


# Rows per prefill forward pass (see HFBackend._prefill).
PREFILL_CHUNK = 16
# Shortest prefix worth sharing: below it the extra forward pass and the cache copies cost
# about what recomputing the prefix would.
MIN_SHARED = 16


def shared_prefixes(seqs: Sequence[list[int]], max_group: int) -> list[tuple[list[int], int]]:
    """Prompts grouped by a common token prefix: ``(indices, prefix length)`` per group.

    Sorting the prompts puts those with long common prefixes next to each other (the order of
    a prefix trie's leaves); a dynamic programme then cuts that order into runs of at most
    ``max_group`` prompts saving the most prefill tokens, ``(members - 1) * prefix``. A greedy
    cut would let a short prefix shared by every prompt (the system turn) swallow the long one
    that the eight variants of an item share. A prefix stops one token short of its shortest
    member, so every member still has a suffix whose last position gives its first logits.
    Groups that save nothing have prefix 0.
    """
    order = sorted(range(len(seqs)), key=lambda i: seqs[i])
    caps = []  # the prefix each adjacent pair could share
    for a, b in zip(order, order[1:], strict=False):
        x, y = seqs[a], seqs[b]
        n = min(len(x), len(y)) - 1
        k = next((j for j in range(n) if x[j] != y[j]), n)
        caps.append(k)
    best = [0] * (len(order) + 1)
    cut = [0] * (len(order) + 1)  # cut[j]: where the last run of best[j] starts
    for j in range(1, len(order) + 1):
        best[j], cut[j] = best[j - 1], j - 1
        shared = 1 << 62
        for start in range(j - 2, max(-1, j - 1 - max_group), -1):
            shared = min(shared, caps[start])
            if shared < MIN_SHARED:
                break
            gain = best[start] + (j - 1 - start) * shared
            if gain > best[j]:
                best[j], cut[j] = gain, start
    groups: list[tuple[list[int], int]] = []
    j = len(order)
    while j > 0:
        start = cut[j]
        members = order[start:j]
        shared = min(caps[start : j - 1], default=0)
        groups.append((members, shared if len(members) > 1 else 0))
        j = start
    return groups[::-1]


def prefix_order(seqs: Sequence[list[int]], max_new: Sequence[int], batch_size: int) -> list[int]:
    """Request indices with each shared-prefix group contiguous, groups longest first.

    Requests of one group then share a batch; equal ``max_new_tokens`` stay together, and the
    longest groups come first so an out-of-memory batch shows up early (as with longest_first).
    """
    out: list[int] = []
    for new in sorted(set(max_new), reverse=True):
        idx = [i for i in range(len(seqs)) if max_new[i] == new]
        groups = shared_prefixes([seqs[i] for i in idx], batch_size)
        groups.sort(key=lambda g: -max(len(seqs[idx[m]]) for m in g[0]))
        out += [idx[m] for members, _ in groups for m in members]
    return out


# transformers sets tokenizer.model_max_length to int(1e30) when the tokenizer names no limit.
_SANE_CONTEXT = 10_000_000
FIX_GENERATE = (
    "Shorten or remove these items in the dataset's CSV, lower generation.max_new_tokens, or use "
    "a model with a longer context."
)


def context_limit(config: Any, tokenizer: Any) -> int | None:
    """The most positions (prompt + generated tokens) the model takes; None when unknown.

    The model config's positional size wins; the tokenizer's ``model_max_length`` is only a
    fallback, since many tokenizers leave it at transformers' "no limit" sentinel.
    """
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        value = getattr(text, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    value = getattr(tokenizer, "model_max_length", None)
    if isinstance(value, int) and 0 < value < _SANE_CONTEXT:
        return value
    return None


def request_name(r: GenRequest) -> tuple[str, str]:
    """``(item, variant)`` from ``where``, else the prompt key. The conversation core's
    ``<protocol>/<dataset>/<item_id> [<cell>] rep <r> turn <t>`` gives ``<dataset>/<item_id>``
    and the cell's values (``P3``; with ``@rep<r>/turn<t>`` past the first rep and turn);
    ``dataset/item_id/variant`` is split at its last ``/``."""
    if not r.where:
        return f"prompt {r.key}", ""
    conv = re.match(r"^[^/ ]+/(\S+) \[(.*)\] rep (\d+) turn (\d+)$", r.where)
    if conv:
        item, cell, rep, turn = conv.groups()
        values = ",".join(kv.partition("=")[2] for kv in cell.split(",") if kv)
        return item, values + ("" if (rep, turn) == ("0", "1") else f"@rep{rep}/turn{turn}")
    item, _, variant = r.where.rpartition("/")
    return (item, variant) if item else (r.where, "")


def _is_oom(e: BaseException) -> bool:
    if isinstance(e, torch.OutOfMemoryError):
        return True
    text = str(e).lower()
    return isinstance(e, RuntimeError) and ("out of memory" in text or "can't allocate" in text)


def _row_generator(seed: int, key: str, device: torch.device) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(prompt_seed(seed, key))
    return g


def _select_rows(cache: StaticCache, idx: torch.Tensor) -> None:
    """Keep only rows ``idx`` of a static cache (it has no batch_select_indices of its own)."""
    for layer in cache.layers:
        layer.keys = layer.keys.index_select(0, idx)  # type: ignore[union-attr]
        layer.values = layer.values.index_select(0, idx)  # type: ignore[union-attr]


class ChatEncoder:
    """Chat prompts to token ids with a tokenizer's chat template."""

    def __init__(self, tokenizer: Any, context: int | None = None):
        self.tok = tokenizer
        # The model's context in tokens (see context_limit); None when unknown.
        self.context = context

    def encode(self, messages: Messages) -> list[int]:
        """Token ids of a chat prompt in which message contents can never become special tokens.

        The chat template is rendered around sentinels; the template's own text is tokenised
        normally, while each message content is tokenised with special tokens split, so a post
        containing ``<|im_end|>`` stays plain text instead of closing the turn.
        """
        sentinels = [f"\x00SYPS{i}\x00" for i in range(len(messages))]
        masked = [
            {"role": m["role"], "content": s} for m, s in zip(messages, sentinels, strict=True)
        ]
        text = self.tok.apply_chat_template(masked, tokenize=False, add_generation_prompt=True)
        ids: list[int] = []
        pos = 0
        for m, s in zip(messages, sentinels, strict=True):
            at = text.index(s, pos)
            ids += self.tok.encode(text[pos:at], add_special_tokens=False)
            ids += self.tok.encode(
                m["content"], add_special_tokens=False, split_special_tokens=True
            )
            pos = at + len(s)
        ids += self.tok.encode(text[pos:], add_special_tokens=False)
        return ids

    def encode_requests(self, model_id: str, requests: Sequence[GenRequest]) -> list[list[int]]:
        """Each request's prompt ids, once every prompt with its new tokens is known to fit the
        context (else an error naming the items, before anything is decoded)."""
        encoded = [self.encode(r.messages) for r in requests]
        check_context(
            model_id,
            self.context,
            [
                (*request_name(r), len(ids), r.max_new_tokens)
                for r, ids in zip(requests, encoded, strict=True)
            ],
            FIX_GENERATE,
        )
        return encoded

    def encode_judge(self, model_id: str, prompts: Sequence[Messages]) -> list[list[int]]:
        """Each judge prompt's ids, once every one is known to fit the context (the answer is
        read at its last position: no new tokens)."""
        encoded = [self.encode(p) for p in prompts]
        check_context(
            model_id,
            self.context,
            [
                (judge_prompt_name(i, p), "", len(e), 0)
                for i, (p, e) in enumerate(zip(prompts, encoded, strict=True))
            ],
            FIX_JUDGE,
        )
        return encoded

    def option_tokens(self, model_id: str, options: Sequence[str]) -> list[int]:
        """Each judge option's first token, which its score is read at; they must differ."""
        first = [self.tok.encode(o, add_special_tokens=False)[0] for o in options]
        if len(set(first)) != len(first):
            raise InputError(f"judge options {list(options)} share a first token for {model_id}")
        return first


class HFBackend:
    """A causal LM from transformers, on CUDA in bf16 with SDPA when present, else CPU in fp32."""

    def __init__(self, model: Any, tokenizer: Any, resolved: ResolvedModel, batch_size: int):
        self.model = model
        self.tok = tokenizer
        self.encoder = ChatEncoder(tokenizer, context_limit(model.config, tokenizer))
        self.model_id = resolved.model_id
        self.revision = resolved.revision
        self.batch_size = batch_size
        self.device = next(model.parameters()).device
        eos = model.generation_config.eos_token_id
        self.eos = set(eos if isinstance(eos, list) else [eos]) if eos is not None else set()
        if tokenizer.eos_token_id is not None:
            self.eos.add(tokenizer.eos_token_id)
        pad = tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else min(self.eos)
        # transformers renamed the cache argument (past_key_values -> cache); accept either.
        params = inspect.signature(model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        # Compute a prefix shared by several prompts of a batch once (see _prefill).
        self.share_prefixes = True

    @staticmethod
    def _source(spec: ModelSpec, cache_dir: Path) -> tuple[ResolvedModel, str]:
        resolved = resolve(spec, cache_dir)
        if resolved.gguf:
            digest = resolved.revision.removeprefix("sha256:")
            return resolved, str(plain_copy_of_gguf(Path(resolved.source), digest, cache_dir))
        return resolved, resolved.source

    @classmethod
    def tokenizer_only(cls, spec: ModelSpec, cache_dir: Path) -> ChatEncoder:
        """The model's chat encoder without its weights."""
        resolved, source = cls._source(spec, cache_dir)
        kwargs = {"revision": resolved.hf_revision} if resolved.hf_revision else {}
        tok = AutoTokenizer.from_pretrained(source, **kwargs)
        config = AutoConfig.from_pretrained(source, **kwargs)
        return ChatEncoder(tok, context_limit(config, tok))

    @classmethod
    def load(cls, spec: ModelSpec, cache_dir: Path, device: str | None = None) -> HFBackend:
        """Load on ``device`` (default: the first GPU if any, else the CPU)."""
        resolved, source = cls._source(spec, cache_dir)
        # Its share of the cores, so parallel workers do not oversubscribe them (see threads).
        torch.set_num_threads(thread_count())
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        cuda = device.startswith("cuda")
        kwargs: dict[str, Any] = {"revision": resolved.hf_revision} if resolved.hf_revision else {}
        tok = AutoTokenizer.from_pretrained(source, **kwargs)
        # The store key's dtype: local_dtype resolves auto by the same rule over the devices.
        model = AutoModelForCausalLM.from_pretrained(
            source,
            dtype=getattr(torch, device_dtype(spec.dtype, device)),
            **({"attn_implementation": "sdpa"} if cuda else {}),
            **kwargs,
        )
        model.to(device).eval()  # type: ignore[arg-type]
        return cls(model, tok, resolved, spec.batch_size)

    def encode(self, messages: Messages) -> list[int]:
        return self.encoder.encode(messages)

    def _pad_left(self, seqs: Sequence[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for i, s in enumerate(seqs):
            ids[i, width - len(s) :] = torch.tensor(s, dtype=torch.long)
            mask[i, width - len(s) :] = 1
        return ids.to(self.device), mask.to(self.device)

    # -- batching ------------------------------------------------------------------------------
    def _run_batches(
        self,
        order: list[int],
        same_group: Callable[[int, int], bool],
        run: Callable[[list[int]], None],
        bar: tqdm,
    ) -> None:
        """Run ``order`` in batches of at most ``batch_size`` (halved on out-of-memory)."""
        start = 0
        while start < len(order):
            batch = [order[start]]
            for i in order[start + 1 : start + self.batch_size]:
                if not same_group(order[start], i):
                    break
                batch.append(i)
            try:
                run(batch)
            except Exception as e:
                if not _is_oom(e) or self.batch_size == 1:
                    raise
                self.batch_size = max(1, self.batch_size // 2)
                if self.device.type == "cuda":
                    torch.cuda.empty_cache()
                print(f"out of memory: batch size now {self.batch_size}", file=sys.stderr)
                continue
            start += len(batch)
            bar.update(len(batch))

    # -- the Backend interface -----------------------------------------------------------------
    def generate(
        self,
        requests: Sequence[GenRequest],
        sampling: SamplingParams,
        on_results: OnGenerated | None = None,
    ) -> list[GenResult]:
        encoded = self.encoder.encode_requests(self.model_id, requests)
        max_new = [r.max_new_tokens for r in requests]
        order = (
            prefix_order(encoded, max_new, self.batch_size)
            if self.share_prefixes
            else longest_first([len(e) for e in encoded], max_new)
        )
        results: dict[int, GenResult] = {}

        def run(batch: list[int]) -> None:
            max_new = requests[batch[0]].max_new_tokens
            keys = [requests[i].key for i in batch]
            done = self._decode([encoded[i] for i in batch], keys, max_new, sampling)
            results.update(zip(batch, done, strict=True))
            if on_results is not None:
                on_results(batch, done)

        def same(a: int, b: int) -> bool:
            return requests[a].max_new_tokens == requests[b].max_new_tokens

        desc = f"generate {self.model_id}"
        with tqdm(total=len(requests), desc=desc, unit="prompt", file=sys.stderr) as bar:
            self._run_batches(order, same, run, bar)
        return [results[i] for i in range(len(requests))]

    @torch.inference_mode()
    def _decode(
        self, seqs: list[list[int]], keys: list[str], max_new: int, sampling: SamplingParams
    ) -> list[GenResult]:
        """Decode one left-padded batch with a preallocated KV cache, dropping finished rows.

        ``generate()`` keeps computing rows that have already stopped until the last one does;
        here finished rows leave the batch (and the cache) once a quarter of it has finished,
        so natural stops save compute. The static cache avoids re-concatenating every layer's
        keys and values at each step. Greedy outputs equal ``generate()``'s: same positions,
        masks and attention.
        """
        cache, logits, mask = self._prefill(seqs, max_new)
        width = mask.shape[1]
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        mask = torch.cat([mask, mask.new_zeros((len(seqs), max_new))], dim=1)
        rows = list(range(len(seqs)))  # original index of each row still in the batch
        gens = (
            [_row_generator(sampling.seed, k, self.device) for k in keys]
            if sampling.temperature > 0
            else None
        )
        tokens: list[list[int]] = [[] for _ in seqs]
        stopped = [False] * len(seqs)
        next_pos = pos[:, -1:] + 1
        for step in range(max_new):
            nxt = self._pick(logits, rows, sampling, gens)
            for row, t in zip(rows, nxt.tolist(), strict=True):
                if not stopped[row]:
                    tokens[row].append(t)
                    stopped[row] = t in self.eos
            keep = [j for j, row in enumerate(rows) if not stopped[row]]
            if step == max_new - 1 or not keep:
                break
            # Compacting copies the whole cache, so do it once a quarter of the rows are done;
            # until then finished rows ride along and their tokens are ignored.
            if len(keep) <= 0.75 * len(rows):
                idx = torch.tensor(keep, device=self.device)
                _select_rows(cache, idx)
                mask, nxt, next_pos = mask[idx], nxt[idx], next_pos[idx]
                rows = [rows[j] for j in keep]
            mask[:, width + step] = 1
            out = self.model(
                input_ids=nxt[:, None],
                attention_mask=mask[:, : width + step + 1],
                position_ids=next_pos,
                cache_position=torch.tensor([width + step], device=self.device),
                **{self._cache_kw: cache},
            )
            logits = out.logits[:, -1, :]
            next_pos = next_pos + 1
        return [
            GenResult(
                text=self.tok.decode(t[:-1] if s else t, skip_special_tokens=True),
                prompt_tokens=len(seq),
                completion_tokens=len(t),
                finish_reason="stop" if s else "length",
            )
            for t, s, seq in zip(tokens, stopped, seqs, strict=True)
        ]

    def _prefill(
        self, seqs: list[list[int]], max_new: int
    ) -> tuple[StaticCache, torch.Tensor, torch.Tensor]:
        """Prefill a batch into one static cache with room for ``max_new`` more positions.

        Returns the cache, each row's last logits and the attention mask over the cache's
        filled columns. A prefix that several prompts share (see shared_prefixes) runs once;
        its keys and values are copied to each member's row, and only the rest of each prompt
        runs over them. The cache is then two blocks: prefixes left-padded to the longest,
        then the rest of each prompt left-padded to the longest rest. The mask hides the
        holes and positions follow the mask, so every row sees exactly its own prompt, as
        when prefilled alone.

        The rest runs in chunks of PREFILL_CHUNK rows: prefill is compute-bound, so one big
        batch gains nothing over small ones but pays for more padding; decoding is
        bandwidth-bound and wants the whole batch.
        """
        groups = (
            shared_prefixes(seqs, len(seqs))
            if self.share_prefixes
            else [([i], 0) for i in range(len(seqs))]
        )
        shared = [(members, n) for members, n in groups if n > 0]
        plen = [0] * len(seqs)
        # Each row's shared prefix, an index into `shared`; len(shared), the all-zero block
        # appended below, for a row that shares none.
        source = [len(shared)] * len(seqs)
        for g, (members, n) in enumerate(shared):
            for i in members:
                plen[i], source[i] = n, g
        p = max(plen)
        rest = [q[n:] for q, n in zip(seqs, plen, strict=True)]
        s = max(len(r) for r in rest)
        mask = torch.zeros((len(seqs), p + s), dtype=torch.long)
        for i, (n, r) in enumerate(zip(plen, rest, strict=True)):
            mask[i, p - n : p] = 1
            mask[i, p + s - len(r) :] = 1
        mask = mask.to(self.device)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)

        prefix = self._prefix_kv(seqs, shared)

        chunks, last = [], []
        for start in range(0, len(seqs), PREFILL_CHUNK):
            rows = range(start, min(start + PREFILL_CHUNK, len(seqs)))
            cache = DynamicCache()
            if prefix:
                idx = torch.tensor([source[i] for i in rows], device=self.device)
                for layer, (k, v) in enumerate(prefix):
                    cache.update(k.index_select(0, idx), v.index_select(0, idx), layer)
            # A chunk runs only as wide as its own longest rest; the columns it skips are
            # padding for all its rows, inserted as zeros when the chunks are merged.
            ids, _ = self._pad_left([rest[i] for i in rows])
            skip = s - ids.shape[1]
            cols = torch.cat([torch.arange(p), torch.arange(p + skip, p + s)]).to(self.device)
            sub = mask[rows.start : rows.stop].index_select(1, cols)
            # logits_to_keep=1: only the last position's logits are needed; projecting every
            # prompt position onto the vocabulary would be ~20% of the prefill's compute.
            out = self.model(
                input_ids=ids,
                attention_mask=sub,
                position_ids=pos[rows.start : rows.stop, p + skip :],
                logits_to_keep=1,
                **{self._cache_kw: cache},
            )
            chunks.append((cache, skip))
            last.append(out.logits[:, -1, :])

        return self._merged(chunks, p, p + s, p + s + max_new), torch.cat(last), mask

    def _prefix_kv(
        self, seqs: list[list[int]], shared: list[tuple[list[int], int]]
    ) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Each layer's keys and values of the shared prefixes (``shared``: members and
        prefix length), prefilled once, with one all-zero row appended; empty if none."""
        prefix: list[tuple[torch.Tensor, torch.Tensor]] = []
        if not shared:
            return prefix
        ids, pmask = self._pad_left([seqs[members[0]][:n] for members, n in shared])
        pcache = DynamicCache()
        self.model(
            input_ids=ids,
            attention_mask=pmask,
            position_ids=(pmask.cumsum(-1) - 1).clamp(min=0),
            logits_to_keep=1,
            **{self._cache_kw: pcache},
        )
        # Row len(shared) is all zeros: the prefix of a row that shares none, never
        # attended to (masked), but it keeps the blocks rectangular.
        for cached in pcache.layers:
            k, v = cached.keys, cached.values  # type: ignore[union-attr]
            assert k is not None and v is not None  # filled by the forward pass above
            prefix.append(
                (
                    torch.cat([k, k.new_zeros(k[:1].shape)]),
                    torch.cat([v, v.new_zeros(v[:1].shape)]),
                )
            )
        return prefix

    def _merged(
        self, chunks: list[tuple[DynamicCache, int]], p: int, width: int, capacity: int
    ) -> StaticCache:
        """The prefilled chunks (each a cache and the padding columns it skipped after the
        ``p`` prefix columns) as one static cache of ``capacity`` positions, the first
        ``width`` of them filled."""

        def widened(t: torch.Tensor | None, skip: int) -> torch.Tensor:
            assert t is not None  # filled by the forward pass above
            gap = t.new_zeros(
                (t.shape[0], t.shape[1], skip, t.shape[3])
            )  # (batch, heads, time, dim)
            return torch.cat([t[:, :, :p], gap, t[:, :, p:]], dim=2)

        merged = StaticCache(config=self.model.config, max_cache_len=capacity)
        where = {"cache_position": torch.arange(width, device=self.device)}
        for layer in range(len(chunks[0][0].layers)):
            keys = torch.cat([widened(c.layers[layer].keys, k) for c, k in chunks])  # type: ignore[union-attr]
            values = torch.cat([widened(c.layers[layer].values, k) for c, k in chunks])  # type: ignore[union-attr]
            merged.update(keys, values, layer, where)
        return merged

    def _pick(
        self,
        logits: torch.Tensor,
        rows: list[int],
        sampling: SamplingParams,
        gens: list[torch.Generator] | None,
    ) -> torch.Tensor:
        if gens is None:
            return logits.argmax(dim=-1)
        probs = torch.softmax(logits.float() / sampling.temperature, dim=-1)
        if sampling.top_p < 1.0:
            sorted_p, order = probs.sort(dim=-1, descending=True)
            # Keep the smallest prefix whose mass reaches top_p (the top token always stays).
            drop = sorted_p.cumsum(-1) - sorted_p >= sampling.top_p
            sorted_p = sorted_p.masked_fill(drop, 0.0)
            probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
        picks = [torch.multinomial(probs[j], 1, generator=gens[row]) for j, row in enumerate(rows)]
        return torch.cat(picks)

    @torch.inference_mode()
    def option_logprobs(
        self,
        prompts: Sequence[Messages],
        options: Sequence[str],
        on_results: OnScored | None = None,
    ) -> OptionScores:
        first = self.encoder.option_tokens(self.model_id, options)
        # One forward pass: the answer is read at the last prompt position, nothing is decoded.
        encoded = self.encoder.encode_judge(self.model_id, prompts)
        out = np.empty((len(prompts), len(options)))
        raw = [""] * len(prompts)
        order = longest_first([len(e) for e in encoded])

        def run(batch: list[int]) -> None:
            ids, mask = self._pad_left([encoded[i] for i in batch])
            # Left padding shifts positions; derive them from the mask as generate() does.
            pos = (mask.cumsum(-1) - 1).clamp(min=0)
            logits = self.model(
                input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=1
            ).logits
            full = torch.log_softmax(logits[:, -1, :].float(), dim=-1)
            logp = full[:, first].cpu().numpy()
            top = self.tok.batch_decode(full.argmax(dim=-1).unsqueeze(-1).cpu())
            out[batch] = logp
            for i, t in zip(batch, top, strict=True):
                raw[i] = t
            if on_results is not None:
                on_results(batch, OptionScores(logp, list(top)))

        desc = f"judge {self.model_id}"
        with tqdm(total=len(prompts), desc=desc, unit="prompt", file=sys.stderr) as bar:
            self._run_batches(order, lambda a, b: True, run, bar)
        return OptionScores(out, raw)
