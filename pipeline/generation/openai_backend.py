"""Sampling from any OpenAI-compatible chat-completions endpoint (`vllm serve`, TGI, SGLang, a
hosted API): the model under test behind a URL.

- A prompt is the chat's message list; `render_chat` writes it as JSON (the backend protocol hands
  backends rendered strings) and the requests send it back as messages: the server applies its
  own chat template.
- Settings the caller leaves unset (temperature, top_p, top_k, seed: None) are not sent: the
  server and the served model's generation config decide them (vLLM applies the model folder's
  `generation_config.json`); 0.0 is sent as 0.0. Without a seed, reruns are reproducible through
  the request cache only.
- Samples: one request per prompt with `n` choices where the server honours `n` (vLLM, OpenAI);
  where it returns fewer, the rest come from single-choice requests with seeds seed+1, seed+2, ...
  (unseeded: told apart in the cache by their index, which is not sent)
  Requests for all prompts of a call go through one bounded pool (`max_concurrency` in flight),
  each retried with backoff (429, 5xx, timeouts) by `pipeline.clients.llm_client.LLMClient`,
  and cached on disk under (endpoint, model, messages, every sampling parameter, seed, n):
  a rerun makes no call; a failed request is never cached. A choice with blank text or a
  log-prob that is NaN, infinite or positive is a failed request too (retried, never cached).
- Limits (backend.*): `timeout` per request, its body included (a server that sends headers and
  hangs fails after it), `deadline` for all requests and retries of a runner chunk,
  `max_response_bytes` per response body (16 MiB: twice n=20 choices of 4096 tokens with
  log-probs; a bigger body is refused, not held in memory or cached). The final failure is an
  `LLMCallError` (a PipelineError: the command line prints its one line and exits 2).
- Token log-probs are requested (`logprobs=True`) and kept as the server reports them (vLLM:
  the raw model's; hosted APIs: their own); a server that gives none leaves them empty and the
  sequence log-prob unknown. Set `logprobs=False` for servers that refuse the parameter.
- Greedy is temperature 0 with no seed (a seed changes nothing at temperature 0). Beam search and contrastive search have no chat-completions form:
  asking for them is an error naming `generation.strategies`.
- P(True): the top-20 log-probs of the first generated token; "True" outside them counts as
  log-prob -inf (its probability is below the 20th, usually < 1e-3).
"""

from __future__ import annotations

import json
import math
from typing import Any

from pipeline.clients.llm_client import DEFAULT_MAX_RESPONSE_BYTES
from pipeline.generation.base import Generation, SamplingConfig

TOP_LOGPROBS = 20  # the most OpenAI's API returns
CHAT_STRATEGIES = ("greedy", "ar")  # the decoding strategies chat completions can run


class UnsupportedStrategyError(ValueError):
    """A decoding strategy a chat-completions endpoint cannot run."""


def messages_of(prompt: str) -> list[dict[str, str]]:
    """The message list `render_chat` wrote; a plain string is one user message."""
    try:
        messages = json.loads(prompt)
    except ValueError:
        messages = None
    if isinstance(messages, list) and all(isinstance(m, dict) and "role" in m for m in messages):
        return messages
    return [{"role": "user", "content": prompt}]


class OpenAIBackend:
    """GenerationBackend over an OpenAI-compatible endpoint (module docstring)."""

    name = "openai"

    # size: keyword arguments that mirror the cell's backend.* settings (get_backend passes them
    # by name, pipeline.generation.cell); the body hands them to an LLMClient
    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        api_key: str | None = None,
        cache_dir: str | None = ".cache/generate-openai",
        max_concurrency: int = 16,
        max_retries: int = 5,
        timeout: float = 600.0,
        logprobs: bool = True,
        batch_size: int = 64,
        deadline: float | None = None,
        requests_per_minute: float | None = None,
        check_model: bool = True,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        settings_prefix: str = "backend.",
        **_: Any,
    ) -> None:
        from pipeline.clients.llm_client import LLMClient

        if max_concurrency < 1:
            raise ValueError(f"backend.max_concurrency must be >= 1 (got {max_concurrency})")
        self.model = model
        self.logprobs = logprobs
        self.max_concurrency = max_concurrency
        self.batch_size = batch_size  # prompts per runner chunk: all of them share the pool
        # no client-wide parameters (the extractor's temperature 0 and 512 tokens): every
        # request here names its own sampling parameters
        self.client = LLMClient(
            model=model,
            base_url=base_url,
            api_key_env=api_key_env,
            api_key=api_key,
            cache_dir=cache_dir,
            max_workers=max_concurrency,
            max_retries=max_retries,
            timeout=timeout,
            deadline=deadline,
            requests_per_minute=requests_per_minute,
            check_model=check_model,
            max_response_bytes=max_response_bytes,
            settings_prefix=settings_prefix,
        )
        self.client.params = {}

    # -- protocol ---------------------------------------------------------------------------
    def render_chat(self, messages: list[dict[str, str]]) -> str:
        return json.dumps(messages, ensure_ascii=False)

    def _params(
        self,
        temperature: float | None,
        max_tokens: int,
        seed: int | None,
        n: int = 1,
        top_p: float | None = None,
        top_k: int | None = None,
        draw: str | None = None,
    ) -> dict[str, Any]:
        """The request's sampling parameters: what is None is not sent (the server decides);
        `draw` tells unseeded draws apart in the cache key (a "_" key: never sent)."""
        params: dict[str, Any] = {"max_tokens": max_tokens, "n": n}
        if temperature is not None:
            params["temperature"] = temperature
        if seed is not None:
            params["seed"] = seed
        elif draw is not None:
            params["_draw"] = draw
        if top_p is not None:
            params["top_p"] = top_p
        if top_k:  # not in OpenAI's API; vLLM and SGLang read it from the request body
            params["extra_body"] = {"top_k": top_k}
        if self.logprobs:
            params["logprobs"] = True
        return params

    def _run(self, jobs: list[tuple[list[dict[str, str]], dict[str, Any]]]) -> list[list[dict]]:
        """Every (messages, params) request through one bounded pool, in order."""
        return self.client.choices_many(jobs)

    @staticmethod
    def _generation(choice: dict[str, Any]) -> Generation:
        reason = choice.get("finish_reason")  # None in a reply cached before it was kept
        usage = choice.get("usage")
        return Generation(
            text=choice["text"].strip(),
            token_ids=[],
            token_logprobs=[float(x) for x in choice.get("logprobs", [])],
            finish_reason=reason if isinstance(reason, str) else None,
            usage=usage if isinstance(usage, dict) else None,
        )

    def sample(self, prompts: list[str], sampling: SamplingConfig) -> list[list[Generation]]:
        messages = [messages_of(p) for p in prompts]
        first = self._run(
            [
                (
                    m,
                    {
                        **sampling.extra,
                        **self._params(
                            sampling.temperature,
                            sampling.max_new_tokens,
                            sampling.seed,
                            sampling.n,
                            sampling.top_p,
                            sampling.top_k,
                            draw=sampling.stream,
                        ),
                    },
                )
                for m in messages
            ]
        )
        out = [[self._generation(c) for c in choices[: sampling.n]] for choices in first]
        # a server that ignores `n`: the missing samples one request each, seeds seed+1, ...
        missing = [(i, j) for i, gens in enumerate(out) for j in range(len(gens), sampling.n)]
        rest = self._run(
            [
                (
                    messages[i],
                    {
                        **sampling.extra,
                        **self._params(
                            sampling.temperature,
                            sampling.max_new_tokens,
                            None if sampling.seed is None else sampling.seed + j,
                            1,
                            sampling.top_p,
                            sampling.top_k,
                            draw=f"{sampling.stream}:{j}",
                        ),
                    },
                )
                for i, j in missing
            ]
        )
        for (i, _), choices in zip(missing, rest):
            out[i].append(self._generation(choices[0]))
        return out

    def greedy(self, prompts: list[str], max_new_tokens: int) -> list[Generation]:
        got = self._run(
            [(messages_of(p), self._params(0.0, max_new_tokens, None)) for p in prompts]
        )
        return [self._generation(choices[0]) for choices in got]

    def beam(self, prompts: list[str], num_beams: int, max_new_tokens: int) -> list[Generation]:
        raise UnsupportedStrategyError(
            "backend=openai cannot run beam search (chat completions have no beam form); drop "
            "it from generation.strategies (e.g. generation.strategies=[greedy,ar])"
        )

    def contrastive(self, prompts: list[str], **_: Any) -> list[Generation]:
        raise UnsupportedStrategyError(
            "backend=openai cannot run contrastive search; drop it from generation.strategies"
        )

    def logprob_of_next(self, prompts: list[str], token: str) -> list[float]:
        params = {**self._params(0.0, 1, None), "logprobs": True, "top_logprobs": TOP_LOGPROBS}
        out = []
        for choices in self._run([(messages_of(p), params) for p in prompts]):
            top = (choices[0].get("top_logprobs") or [{}])[0]
            out.append(float(top.get(token, -math.inf)))
        return out
