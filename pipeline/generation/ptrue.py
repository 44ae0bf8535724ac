"""P(True) (Kadavath et al. 2022) as lm-polygraph computes it.

The model sees lm-polygraph's P(True) prompt (`pipeline.data.prompts.ptrue_prompt`, copied
from lm-polygraph 0.7.0), rendered with the model's chat template, and we read
log p("True") at the first generated position under the raw model distribution.

Which token: the vocabulary entry for the string "True" WITHOUT a leading space, resolved
through the backend's tokenizer (`single_token_id`). After a chat template the assistant turn
starts on a fresh line, so the answer's first token carries no space: for SmolLM2 that is
id 2787, not " True" (3635). A string that is not exactly one token raises a ValueError.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pipeline.data.prompts import ptrue_prompt
from pipeline.generation.base import GenerationBackend

TRUE_TOKEN = "True"

# generation.ptrue_beam=true: P(True) asked a second time, about the beam decode (a sensitivity
# row of the beam-target tables; the default asks about the greedy decode, lm-polygraph's
# `greedy_texts`). The setting's name, and the generate stage's shard group of its values.
BEAM_SETTING = BEAM_SHARDS = "ptrue_beam"
BEAM, GREEDY = "beam", "greedy"  # the decode strategies it reads


def ptrue_prompts(
    backend: GenerationBackend,
    questions: Sequence[str],
    greedy_answers: Sequence[str],
    samples: Sequence[Sequence[str]] | None = None,
) -> list[str]:
    """Chat-rendered P(True) prompts; with `samples`, lm-polygraph's sampling variant."""
    if len(questions) != len(greedy_answers):
        raise ValueError(f"{len(questions)} questions but {len(greedy_answers)} greedy answers")
    if samples is not None and len(samples) != len(questions):
        raise ValueError(f"{len(questions)} questions but {len(samples)} sample lists")
    rendered = []
    for i, (question, answer) in enumerate(zip(questions, greedy_answers)):
        text = ptrue_prompt(question, answer, None if samples is None else list(samples[i]))
        rendered.append(backend.render_chat([{"role": "user", "content": text}]))
    return rendered


def compute_ptrue(
    backend: GenerationBackend,
    questions: Sequence[str],
    greedy_answers: Sequence[str],
    samples: Sequence[Sequence[str]] | None = None,
) -> list[float]:
    """log p("True") per question (exp of it is P(True), in [0, 1])."""
    if not questions:
        return []
    prompts = ptrue_prompts(backend, questions, greedy_answers, samples)
    return [float(x) for x in backend.logprob_of_next(prompts, TRUE_TOKEN)]


def to_probability(logprob: float) -> float:
    """exp(logprob), clipped into [0, 1] against rounding."""
    return min(1.0, max(0.0, math.exp(logprob)))


def beam_setting_problems(ptrue: bool, strategies: Sequence[str]) -> list[str]:
    """What generation.ptrue_beam=true needs that the generation settings lack."""
    problems = []
    if not ptrue:
        problems.append(
            "generation.ptrue_beam=true needs generation.ptrue=true (the beam "
            "decode's P(True) is a second pass beside the greedy one's)"
        )
    if BEAM not in strategies:
        problems.append(
            f"generation.ptrue_beam=true needs {BEAM} among generation.strategies "
            f"(now {list(strategies)}): it asks P(True) about the {BEAM} decode"
        )
    return problems


def beam_answers(decodes, ptrue, prompt_ids: Sequence[str]) -> tuple[list[str], dict[str, float]]:
    """(the beam decode's text per prompt of `prompt_ids`, {prompt_id: greedy log p(True)} where
    the beam text is the greedy text: the same P(True) prompt, its value taken as is) from the
    `decodes` and `ptrue` rows of those prompts (DataFrames of pipeline.artifacts.schema)."""
    text = {
        s: dict(zip(d["prompt_id"].astype(str), d["text"])) for s, d in decodes.groupby("strategy")
    }
    beam, greedy = text.get(BEAM, {}), text.get(GREEDY, {})
    ids = [str(p) for p in prompt_ids]
    missing = [pid for pid in ids if pid not in beam]
    if missing:
        raise RuntimeError(
            f"no {BEAM} decode of {missing[:3]}: P(True) on the {BEAM} decode needs one per prompt"
        )
    asked = dict(zip(ptrue["prompt_id"].astype(str), ptrue["logprob_true"]))
    known = {
        pid: float(asked[pid])
        for pid in ids
        if pid in asked and pid in greedy and greedy[pid] == beam[pid]
    }
    return [str(beam[pid]) for pid in ids], known
