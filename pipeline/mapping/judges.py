"""Judges for the labels the matching rules leave unmatched (`evaluation.match_judge`).

The rules of `pipeline.evaluation.matching` decide most label / reference-answer pairs (aliases,
generic head nouns, plurals, surnames). The paper names no matching rule for MAQA (its set
extractor is asked to "keep one canonical surface form"), so a judge is optional:

- ``equivalence``: the cell's semantic-equivalence model (`task.equivalence`: DeBERTa-MNLI in the
  paper configuration, the MiniLM similarity offline): the label and an alias are the same answer
  when each entails the other given the question (bidirectional entailment, as the clustering);
- ``llm``: the extraction endpoint (`task.extractor`: model, base_url, key) asked whether the
  label names the reference answer, yes or no; replies are cached on disk like extractions.

A judge is called as ``judge(question, label, aliases) -> bool``; `prepare(items)` scores every
pair of a cell in one batch first (items: (question, label, aliases)).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

from pipeline.text.normal_forms import to_text

log = logging.getLogger("pipeline")

JUDGES = ("none", "equivalence", "llm")

MATCH_PROMPT = """You judge answers to a question.
Question: {question}
Reference answer: {reference}
Candidate answer: {candidate}
Does the candidate answer name the same thing as the reference answer (the same entity, not a
broader, narrower or different one)? Reply with one word: yes or no."""


class EquivalenceJudge:
    """Bidirectional entailment of the label and any alias under an `Equivalence` engine."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def prepare(self, items: Sequence[tuple[str, str, Sequence[str]]]) -> None:
        if hasattr(self.engine, "prefetch"):
            self.engine.prefetch([(q, [label, *aliases]) for q, label, aliases in items])

    def __call__(self, question: str, label: str, aliases: Sequence[str]) -> bool:
        texts = [to_text(label), *map(to_text, aliases)]
        decided = self.engine.decisions(to_text(question), texts)
        return any(bool(decided[0, j] and decided[j, 0]) for j in range(1, len(texts)))


class LLMJudge:
    """An OpenAI-compatible chat model asked "same answer? yes or no" (cached, batched)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._verdicts: dict[str, bool] = {}
        self.n_unreadable = 0

    @staticmethod
    def prompt(question: str, label: str, aliases: Sequence[str]) -> str:
        return MATCH_PROMPT.format(
            question=to_text(question).strip(),
            candidate=to_text(label),
            reference=" / ".join(map(to_text, aliases)),
        )

    def _ask(self, prompts: list[str]) -> None:
        todo = [p for p in dict.fromkeys(prompts) if p not in self._verdicts]
        if not todo:
            return
        for p, reply in zip(todo, self.client.complete(todo)):
            word = re.match(r"\W*(yes|no)\b", to_text(reply), re.IGNORECASE)
            if word is None:
                self.n_unreadable += 1  # no verdict is no match, and counted
            self._verdicts[p] = bool(word) and word.group(1).lower() == "yes"

    def prepare(self, items: Sequence[tuple[str, str, Sequence[str]]]) -> None:
        self._ask([self.prompt(*item) for item in items])

    def __call__(self, question: str, label: str, aliases: Sequence[str]) -> bool:
        p = self.prompt(question, label, aliases)
        self._ask([p])
        return self._verdicts[p]


def judge_settings(cell) -> dict[str, Any] | None:
    """What the verdicts of the cell's `evaluation.match_judge` depend on (the evaluate stage's
    cache key): the equivalence model's settings, the chat model and its endpoint, or None
    without a judge."""
    from pipeline.components.parts import thaw

    kind = cell.evaluation.match_judge
    if kind == "equivalence":
        equivalence = thaw(cell.task.equivalence)
        if equivalence.get("nli_revision") is None:  # null: the key written before the pin
            equivalence.pop("nli_revision", None)
        return {"equivalence": equivalence}
    if kind == "llm":
        return {"model": cell.task.extractor.model, "base_url": cell.task.extractor.base_url}
    return None
