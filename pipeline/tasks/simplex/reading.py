"""Simplex g_T (distributional QA, MAQA*): each response -> {answer: probability}.

Paper appendix: the model states answers with probabilities; they are parsed programmatically
(here `parse_distribution`, or the paper's simplex extraction prompt through an `LLMClient`),
then equivalent answers are clustered across the samples of a prompt and their probabilities
summed. Renormalisation is a configured option (off by default: the paper's extraction prompt
says not to modify the stated probabilities; the SimplexSpace renormalises on input anyway).
Answers are matched to a dataset's reference answers at evaluation
(`pipeline.evaluation.matching.remap_distribution`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.mapping.extractor import ResponseExtractor, extraction_prompt
from pipeline.mapping.labels import EquivalenceFn, representatives
from pipeline.mapping.parsing import parse_distribution
from pipeline.text.normal_forms import canonical_label, to_text

__all__ = ["SimplexMapper", "merge_distributions", "renormalise"]

Distribution = dict[str, float]
METHODS = ("rule", "llm")


def renormalise(dist: Distribution | None) -> Distribution | None:
    """`dist` scaled to sum to 1 (None, empty or zero-total stays/gives None)."""
    if not dist:
        return None
    total = sum(dist.values())
    if not total > 0:
        return None
    return {k: v / total for k, v in dist.items()}


def merge_distributions(
    question: str,
    dists: Sequence[Distribution | None],
    equivalence: EquivalenceFn | None = None,
    renormalise_output: bool = False,
) -> list[Distribution | None]:
    """Merge equivalent answers across the samples of one prompt, summing their probabilities.

    Labels are first put in canonical form (so "Atlantic" and "the atlantic." are one answer),
    then clustered with `equivalence(question, labels)` when given; each cluster is keyed by its
    most frequent canonical label (ties: first seen). Failures (None) stay None.
    """
    canon: list[Distribution | None] = []
    for d in dists:
        if d is None:
            canon.append(None)
            continue
        merged: Distribution = {}
        for label, p in d.items():
            c = canonical_label(label)
            if c:
                merged[c] = merged.get(c, 0.0) + float(p)
        canon.append(merged or None)
    occurrences = [label for d in canon if d is not None for label in d]
    rep = representatives(question, occurrences, equivalence)
    out: list[Distribution | None] = []
    for d in canon:
        if d is None:
            out.append(None)
            continue
        merged = {}
        for label, p in d.items():
            merged[rep[label]] = merged.get(rep[label], 0.0) + p
        out.append(renormalise(merged) if renormalise_output else merged)
    return out


@dataclass
class SimplexMapper(ResponseExtractor):
    """Simplex g_T over many responses, with counts of parse failures (`ResponseExtractor`).

    Args:
        method: "rule" (`parse_distribution` on the response) or "llm" (the paper's simplex
            extraction prompt through `client`, its JSON answer parsed with `parse_distribution`).
        client: an `LLMClient` (method "llm").
        equivalence: optional `(question, labels) -> cluster ids` for merging across samples.
        renormalise: scale each merged distribution to sum to 1.
        prompt_example: the extraction prompt's example answer, "restored" or "verbatim"
            (`pipeline.data.prompts.SIMPLEX_EXTRACTION_PROMPTS`).
    """

    METHODS = METHODS

    renormalise: bool = False
    prompt_example: str = "restored"

    def parse(
        self, questions: Sequence[object], texts: Sequence[object]
    ) -> list[Distribution | None]:
        """One distribution per (question, response) pair, or None for a parse failure."""
        self._check_pairs(questions, texts)
        if self.method == "rule":
            out = [parse_distribution(t) for t in texts]
        else:
            raw = self._complete(
                [
                    extraction_prompt("answer_distribution", q, t, example=self.prompt_example)
                    for q, t in zip(questions, texts)
                ]
            )
            out = [None if r is None else parse_distribution(r) for r in raw]
        return self._counted(out)

    def map_prompt(self, question: object, texts: Sequence[object]) -> list[Distribution | None]:
        """The samples of one prompt: parse, merge equivalent answers, optionally renormalise."""
        q = to_text(question)
        return merge_distributions(
            q, self.parse([q] * len(texts), texts), self.equivalence, self.renormalise
        )
