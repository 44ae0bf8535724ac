"""P(True): lm-polygraph's prompt, chat-rendered, log p("True") at the next position."""

from __future__ import annotations

import math

import pytest

from pipeline.config import resolve_cell
from pipeline.data.prompts import ptrue_prompt
from pipeline.generation.ptrue import TRUE_TOKEN, compute_ptrue, ptrue_prompts, to_probability

QUESTIONS = ["The capital of France is", "Who painted the Mona Lisa?"]
ANSWERS = ["Paris", "Leonardo da Vinci"]


def test_ptrue_prompts_are_the_chat_rendered_polygraph_prompt(tiny_backend) -> None:
    rendered = ptrue_prompts(tiny_backend, QUESTIONS, ANSWERS)
    assert rendered[0] == (
        "<|im_start|>user\n"
        + ptrue_prompt(QUESTIONS[0], ANSWERS[0])
        + "<|im_end|>\n<|im_start|>assistant\n"
    )
    assert "Possible answer:Paris" in rendered[0] and "(A) True" in rendered[0]
    with_samples = ptrue_prompts(
        tiny_backend, QUESTIONS, ANSWERS, [["Paris", "Lyon"], ["Leonardo"]]
    )
    assert "brainstormed: Paris, Lyon" in with_samples[0]


def test_compute_ptrue_equals_a_direct_softmax(tiny_backend) -> None:
    import torch

    got = compute_ptrue(tiny_backend, QUESTIONS, ANSWERS)
    true_id = tiny_backend.tokenizer(TRUE_TOKEN, add_special_tokens=False)["input_ids"]
    assert len(true_id) == 1
    for question, answer, logprob in zip(QUESTIONS, ANSWERS, got):
        text = tiny_backend.tokenizer.apply_chat_template(
            [{"role": "user", "content": ptrue_prompt(question, answer)}],
            tokenize=False,
            add_generation_prompt=True,
        )
        ids = torch.tensor([tiny_backend.tokenizer(text, add_special_tokens=False)["input_ids"]])
        with torch.no_grad():
            probs = torch.softmax(tiny_backend.model(input_ids=ids).logits[0, -1].double(), dim=-1)
        p_true = to_probability(logprob)
        assert 0.0 <= p_true <= 1.0
        assert math.isclose(p_true, float(probs[true_id[0]]), rel_tol=1e-4)


def test_ptrue_length_mismatch_and_empty_input(tiny_backend) -> None:
    with pytest.raises(ValueError, match="2 questions but 1 greedy answers"):
        compute_ptrue(tiny_backend, QUESTIONS, ANSWERS[:1])
    assert compute_ptrue(tiny_backend, [], []) == []


def test_to_probability_clips_rounding() -> None:
    assert to_probability(0.0) == 1.0
    assert to_probability(1e-9) == 1.0
    assert to_probability(-math.inf) == 0.0
    assert to_probability(math.log(0.25)) == pytest.approx(0.25, abs=1e-15)


def test_ptrue_asks_about_the_models_input_text_as_lm_polygraph_unless_told(compose_cfg):
    """lm-polygraph formats its P(True) prompt with `input_texts` (the model's prompt): the
    default, and the paper's "default settings". `generation.ptrue_asks=question` asks about the
    dataset's bare question; the choice is in the generate key (other P(True) values)."""
    from pipeline.data import load_dataset
    from pipeline.generation.cell import render_prompts
    from pipeline.stages.generate import _shards, generate_slice

    cfg = compose_cfg("dataset=triviaqa_bundled", "dataset.limit=3")
    dataset = load_dataset("triviaqa_bundled", limit=3)
    prompts = render_prompts(resolve_cell(cfg), dataset)
    asked = [q for s in _shards(cfg, dataset, prompts) for q in s.questions]
    assert asked == prompts and asked != list(dataset["question"])
    assert all(q in p for q, p in zip(dataset["question"], prompts))  # the prompt holds it

    bare = compose_cfg("dataset=triviaqa_bundled", "generation.ptrue_asks=question")
    assert [q for s in _shards(bare, dataset, prompts) for q in s.questions] == list(
        dataset["question"]
    )
    assert generate_slice(bare) != generate_slice(cfg)
