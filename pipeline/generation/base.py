"""Backend-neutral generation interface (docs/design.md s1, s5).

Every backend (transformers on CPU, vLLM on GPU) implements `GenerationBackend`; the runner
and the stages only talk to this protocol, so a backend can be swapped by config.

Conventions shared by all backends:
- prompts handed to a backend are already chat-rendered strings (see `render_chat`);
- `Generation.token_logprobs` are log-probs under the RAW model distribution (log_softmax of
  the unprocessed logits: temperature 1, no top-k/top-p truncation), one per generated token,
  the EOS token included when it was generated, nothing after EOS;
- `Generation.text` is decoded without special tokens and stripped.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pipeline.components.registry import Registry


@dataclass
class SamplingConfig:
    """Ancestral sampling settings. `None` means: use the model's own generation config."""

    n: int = 20  # samples per prompt (M)
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    max_new_tokens: int = 64
    # None: no seed (an endpoint's server draws as it likes; reruns are reproducible through the
    # request cache). In-process backends need one.
    seed: int | None = 0
    # which draw this is, where no seed tells two draws of one prompt apart (the samples, `ar`):
    # part of an endpoint request's cache key, never sent
    stream: str = "samples"
    # more request fields an endpoint passes on as given (`taskaware serve`: stop,
    # response_format, presence/frequency_penalty, logit_bias); in-process backends refuse them
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(
                f"SamplingConfig.n must be >= 1 (got {self.n}); it is the number of samples per prompt"
            )
        if self.max_new_tokens < 1:
            raise ValueError(
                f"SamplingConfig.max_new_tokens must be >= 1 (got {self.max_new_tokens})"
            )
        if self.temperature is not None and not self.temperature >= 0:
            raise ValueError(f"SamplingConfig.temperature must be >= 0 (got {self.temperature})")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise ValueError(f"SamplingConfig.top_p must be in (0, 1] (got {self.top_p})")
        if self.top_k is not None and self.top_k < 0:
            raise ValueError(
                f"SamplingConfig.top_k must be >= 0 (got {self.top_k}); 0 disables top-k"
            )


@dataclass
class Generation:
    """One generated continuation with its per-token raw-model log-probs."""

    text: str
    token_ids: list[int] = field(default_factory=list)
    token_logprobs: list[float] = field(default_factory=list)
    # "stop" (an end token or a stop string), "length" (cut by the token limit: not an answer,
    # reading.truncated), another reason a server gives, or None when unknown
    finish_reason: str | None = None
    # an endpoint's `usage` of the request this sample came from, on its first sample only (so
    # summing over samples sums the requests); None in process or from an older cache
    usage: dict[str, int] | None = None

    @property
    def logprob(self) -> float:
        """Sequence log-probability: the sum of the per-token log-probs."""
        return float(sum(self.token_logprobs))


def eos_finish(token_ids: Sequence[int], eos_ids: Collection[int]) -> str:
    """The finish reason of an in-process decode: "stop" when it ends in an end token, else
    "length" (the loop stops only at an end token or at the token limit)."""
    return "stop" if token_ids and int(token_ids[-1]) in eos_ids else "length"


@runtime_checkable
class GenerationBackend(Protocol):
    """What every generation backend provides. All prompts are chat-rendered strings."""

    name: str

    def sample(self, prompts: list[str], sampling: SamplingConfig) -> list[list[Generation]]:
        """`sampling.n` ancestral samples per prompt, in prompt order."""
        ...

    def greedy(self, prompts: list[str], max_new_tokens: int) -> list[Generation]:
        """One greedy decode per prompt."""
        ...

    def beam(self, prompts: list[str], num_beams: int, max_new_tokens: int) -> list[Generation]:
        """The best beam per prompt; token_logprobs are the raw per-token log-probs of that beam."""
        ...

    def logprob_of_next(self, prompts: list[str], token: str) -> list[float]:
        """log p(token | prompt) for the next position; `token` must be a single vocabulary token."""
        ...

    def render_chat(self, messages: list[dict[str, str]]) -> str:
        """Apply the model's chat template with the generation prompt appended."""
        ...


# name -> "module:attribute"; modules are imported lazily so the registry costs nothing.
BACKENDS: Registry[str | Callable[..., GenerationBackend]] = Registry("generation backend")
BACKENDS.add("transformers", "pipeline.generation.hf_backend:TransformersBackend")
BACKENDS.add("vllm", "pipeline.generation.vllm_backend:VllmBackend")
BACKENDS.add("openai", "pipeline.generation.openai_backend:OpenAIBackend")


def register_backend(name: str, target: str | Callable[..., GenerationBackend]) -> None:
    """Register a backend factory (a callable or a "module:attribute" string) under `name`."""
    BACKENDS.add(name, target, replace=True)


def get_backend(name: str, **settings: Any) -> GenerationBackend:
    """Build the backend registered under `name` with keyword settings `settings`."""
    target = BACKENDS[name]
    if isinstance(target, str):
        module_name, attr = target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ImportError(
                f"generation backend {name!r} needs {module_name} and its dependencies, which failed to import: {exc}"
            ) from exc
        factory = getattr(module, attr)
    else:
        factory = target
    return factory(**settings)


# Decoding strategies vLLM cannot run (contrastive search), and beam search unless
# generation.beam_backend=vllm: run through transformers after the vLLM pass.
TRANSFORMERS_ONLY = ("contrastive",)


def split_strategies(strategies, beam_backend: str) -> tuple[list[str], list[str]]:
    """(strategies of the vLLM pass, strategies of the transformers pass) under backend=vllm."""
    strategies = list(dict.fromkeys(strategies))
    hf = {*TRANSFORMERS_ONLY, *(("beam",) if beam_backend == "transformers" else ())}
    return [s for s in strategies if s not in hf], [s for s in strategies if s in hf]
