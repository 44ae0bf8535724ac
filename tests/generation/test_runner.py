"""generate_records: schema, identities, strategies, P(True), progress line."""

from __future__ import annotations

import dataclasses
import math
import re

import pytest

from pipeline.artifacts.schema import DECODES, PTRUE, SAMPLES
from pipeline.generation.base import SamplingConfig
from pipeline.generation.runner import AR_SEED_OFFSET, decode_records, generate_records

CFG = SamplingConfig(n=3, max_new_tokens=8, seed=5)
IDS = ["q-0", "q-1", "q-2"]
QUESTIONS = ["The capital of France is", "Who painted the Mona Lisa? Leonardo", "Oceans"]


@pytest.fixture(scope="module")
def frames(tiny_backend, tiny_prompts):
    return generate_records(
        tiny_backend, tiny_prompts, IDS, CFG, questions=QUESTIONS, beam_width=3, progress=False
    )


def test_columns_are_exactly_the_schema(frames) -> None:
    samples, decodes, ptrue = frames
    assert list(samples.columns) == list(SAMPLES)
    assert list(decodes.columns) == list(DECODES)
    assert list(ptrue.columns) == list(PTRUE)
    assert str(samples["sample_idx"].dtype) == "int64"
    assert str(samples["logprob"].dtype) == "float64" and str(ptrue["p_true"].dtype) == "float64"


def test_rows_and_logprob_identity(frames) -> None:
    samples, decodes, ptrue = frames
    assert len(samples) == 9 and len(decodes) == 12 and len(ptrue) == 3
    assert samples.groupby("prompt_id")["sample_idx"].apply(list).to_dict() == {
        i: [0, 1, 2] for i in IDS
    }
    assert sorted(decodes["strategy"].unique()) == ["ar", "beam", "contrastive", "greedy"]
    assert decodes.groupby("prompt_id").size().to_dict() == {i: 4 for i in IDS}
    for frame in (samples, decodes):
        for lps, total in zip(frame["token_logprobs"], frame["logprob"]):
            assert total == sum(lps)  # exact, not approximate
            assert all(isinstance(x, float) for x in lps)


def test_rows_match_the_backend_calls(frames, tiny_backend, tiny_prompts) -> None:
    samples, decodes, ptrue = frames
    direct = tiny_backend.sample(tiny_prompts, CFG)
    assert samples["text"].tolist() == [g.text for gens in direct for g in gens]
    greedy = tiny_backend.greedy(tiny_prompts, CFG.max_new_tokens)
    assert decodes[decodes.strategy == "greedy"]["text"].tolist() == [g.text for g in greedy]
    # `ar` is one ancestral sample with the same config and a seed no sample uses.
    ar = tiny_backend.sample(
        tiny_prompts, dataclasses.replace(CFG, n=1, seed=CFG.seed + AR_SEED_OFFSET)
    )
    ar_rows = decodes[decodes.strategy == "ar"]
    assert ar_rows["text"].tolist() == [g[0].text for g in ar]
    # greedy and ar ride in the sampling call (other rows beside them): the same tokens, their
    # log-probs equal up to float32 rounding of the other batch shape
    for got, want in zip(ar_rows["token_logprobs"], ar):
        assert got == pytest.approx(want[0].token_logprobs, abs=1e-5)
    for got, want in zip(decodes[decodes.strategy == "greedy"]["token_logprobs"], greedy):
        assert got == pytest.approx(want.token_logprobs, abs=1e-5)
    for logprob, p in zip(ptrue["logprob_true"], ptrue["p_true"]):
        assert p == min(1.0, math.exp(logprob)) and 0.0 <= p <= 1.0


def test_progress_bar_and_closing_line(tiny_backend, tiny_prompts, capsys) -> None:
    generate_records(
        tiny_backend,
        tiny_prompts[:1],
        ["only"],
        dataclasses.replace(CFG, n=2),
        strategies=("greedy",),
        ptrue=False,
        progress=True,
    )
    err = capsys.readouterr().err
    assert re.search(r"generated 1 prompts in [0-9.]+ s: [0-9.]+ prompts/s, [0-9.]+ tokens/s", err)


def test_strategy_subset_and_no_ptrue(tiny_backend, tiny_prompts) -> None:
    _, decodes, ptrue = generate_records(
        tiny_backend,
        tiny_prompts[:2],
        IDS[:2],
        CFG,
        strategies=("beam",),
        ptrue=False,
        progress=False,
    )
    assert decodes["strategy"].tolist() == ["beam", "beam"]
    assert ptrue.empty and list(ptrue.columns) == list(PTRUE)


class NoContrastiveBackend:
    """The tiny backend seen through the bare protocol, as vLLM (no contrastive search) is.

    vLLM itself cannot run in this environment (it has its own venv)."""

    def __init__(self, inner) -> None:
        self.inner, self.name, self.batch_size = inner, "no-contrastive", 2

    def sample(self, prompts, cfg):
        return self.inner.sample(prompts, cfg)

    def greedy(self, prompts, max_new_tokens):
        return self.inner.greedy(prompts, max_new_tokens)

    def beam(self, prompts, num_beams, max_new_tokens):
        return self.inner.beam(prompts, num_beams, max_new_tokens)

    def logprob_of_next(self, prompts, token):
        return self.inner.logprob_of_next(prompts, token)

    def render_chat(self, messages):
        return self.inner.render_chat(messages)


def test_backend_without_contrastive_is_an_error_not_a_missing_row(tiny_backend, tiny_prompts):
    with pytest.raises(ValueError, match="has no contrastive search"):
        generate_records(
            NoContrastiveBackend(tiny_backend),
            tiny_prompts[:1],
            ["a"],
            CFG,
            strategies=("contrastive", "ar"),
            progress=False,
        )
    _, decodes, ptrue = generate_records(
        NoContrastiveBackend(tiny_backend),
        tiny_prompts[:1],
        ["a"],
        CFG,
        strategies=("ar",),
        progress=False,
    )
    assert decodes["strategy"].tolist() == ["ar"]
    assert len(ptrue) == 1  # P(True) computed its own greedy answer


def test_decode_records_equal_the_backends_decodes(tiny_backend, tiny_prompts):
    """The pass the generate stage runs after vLLM: per prompt one row per strategy, the same
    tokens and log-probs as the backend's own beam / contrastive search and as the rows
    generate_records writes for them."""
    frame = decode_records(
        tiny_backend,
        tiny_prompts,
        IDS,
        ["beam", "contrastive"],
        max_new_tokens=8,
        beam_width=3,
        alpha=0.6,
        top_k=4,
    )
    beam = tiny_backend.beam(tiny_prompts, 3, 8)
    contrastive = tiny_backend.contrastive(tiny_prompts, max_new_tokens=8, alpha=0.6, top_k=4)
    assert list(frame.columns) == list(DECODES)
    assert frame["prompt_id"].tolist() == [p for p in IDS for _ in range(2)]
    assert frame["strategy"].tolist() == ["beam", "contrastive"] * 3
    expected = [g for pair in zip(beam, contrastive) for g in pair]
    assert frame["text"].tolist() == [g.text for g in expected]
    assert [list(x) for x in frame["token_logprobs"]] == [g.token_logprobs for g in expected]
    _, decodes, _ = generate_records(
        tiny_backend,
        tiny_prompts,
        IDS,
        dataclasses.replace(CFG, max_new_tokens=8),
        strategies=("beam", "contrastive"),
        beam_width=3,
        ptrue=False,
        progress=False,
    )
    assert decodes["text"].tolist() == frame["text"].tolist()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"prompt_ids": ["a"]}, "3 prompts but 1 prompt_ids"),
        ({"prompt_ids": ["a", "a", "b"]}, "must be unique"),
        ({"strategies": ("greedy", "dola")}, "unknown decoding strategies"),
        ({"questions": ["q"]}, "1 questions but 3 prompts"),
    ],
)
def test_bad_arguments(tiny_backend, tiny_prompts, kwargs, message) -> None:
    args = {"prompt_ids": IDS, **kwargs}
    with pytest.raises(ValueError, match=message):
        generate_records(tiny_backend, tiny_prompts, sampling=CFG, progress=False, **args)
