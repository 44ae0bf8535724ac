"""The backend-neutral interface: dataclasses, validation, registry, cheap imports."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pipeline.generation.base import (
    Generation,
    GenerationBackend,
    SamplingConfig,
    get_backend,
    register_backend,
)


def test_sampling_config_defaults() -> None:
    cfg = SamplingConfig()
    assert (cfg.n, cfg.temperature, cfg.top_p, cfg.top_k, cfg.max_new_tokens, cfg.seed) == (
        20,
        None,
        None,
        None,
        64,
        0,
    )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n": 0}, "n must be >= 1"),
        ({"max_new_tokens": 0}, "max_new_tokens must be >= 1"),
        ({"temperature": -0.5}, "temperature must be >= 0"),
        ({"top_p": 1.5}, "top_p must be in"),
        ({"top_k": -1}, "top_k must be >= 0"),
    ],
)
def test_sampling_config_rejects_bad_values(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SamplingConfig(**kwargs)


def test_generation_logprob_is_sum_of_token_logprobs() -> None:
    g = Generation(text="Paris", token_ids=[5, 7, 2], token_logprobs=[-0.5, -0.25, -0.125])
    assert g.logprob == -0.875
    assert Generation(text="").logprob == 0.0


def test_get_backend_unknown_name_lists_choices() -> None:
    with pytest.raises(ValueError, match=r"unknown generation backend 'nope'.*transformers.*vllm"):
        get_backend("nope")


def test_register_backend_with_a_factory_and_protocol_check() -> None:
    class EchoBackend:
        """A complete, trivial backend: proves the registry passes config through."""

        def __init__(self, suffix: str) -> None:
            self.name = "echo" + suffix

        def sample(self, prompts, cfg):
            return [[Generation(text=p) for _ in range(cfg.n)] for p in prompts]

        def greedy(self, prompts, max_new_tokens):
            return [Generation(text=p) for p in prompts]

        def beam(self, prompts, num_beams, max_new_tokens):
            return [Generation(text=p) for p in prompts]

        def logprob_of_next(self, prompts, token):
            return [0.0 for _ in prompts]

        def render_chat(self, messages):
            return messages[-1]["content"]

    register_backend("echo-test", EchoBackend)
    backend = get_backend("echo-test", suffix="-1")
    assert backend.name == "echo-1"
    assert isinstance(backend, GenerationBackend)
    assert [len(x) for x in backend.sample(["a", "b"], SamplingConfig(n=3))] == [3, 3]


def test_importing_the_generation_layer_does_not_import_torch() -> None:
    code = (
        "import sys\n"
        "import pipeline.generation, pipeline.generation.base, pipeline.generation.hf_backend\n"
        "import pipeline.generation.contrastive, pipeline.generation.smollm2, pipeline.generation.ptrue\n"
        "import pipeline.generation.runner\n"
        "heavy = [m for m in ('torch', 'transformers', 'vllm', 'pandas') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
