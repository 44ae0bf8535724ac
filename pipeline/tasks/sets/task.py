"""Multi-answer QA (MAQA): answer sets, Hamming and F1 (also the graphs' set metrics)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from pipeline.components.parts import one_of
from pipeline.data.references import answer_aliases
from pipeline.mapping.extractor import EXTRACTIONS, Extraction, extraction_prompt
from pipeline.mapping.settings import ExtractionSettings
from pipeline.tasks.contract import (
    MAPPERS,
    METRICS,
    REFERENCES,
    Mapper,
    Metric,
    Reference,
    ReferenceKind,
)
from pipeline.tasks.sets.metrics import align_to_aliases, f1_score, normalized_hamming
from pipeline.tasks.sets.reading import SetExtractor
from pipeline.text.normal_forms import split_names


def build_sets(settings: ExtractionSettings, context) -> Any:
    """Set g_T: the paper's gpt-4.1-mini extraction (extractor.kind=llm), the generation model
    with the same prompt (local), or the rule reader (offline); labels merged across responses."""
    from pipeline.clients.llm_client import build_llm_client
    from pipeline.tasks.builders import label_merge, local_backend

    kind = settings.extractor.kind
    client = build_llm_client(settings.extractor, context.cache_dir) if kind == "llm" else None
    extractor = SetExtractor(
        method=kind,
        equivalence=label_merge(settings, context),
        client=client,
        backend=local_backend(context) if kind == "local" else None,
    )

    def sets(question: str, texts: list[str]) -> list[Any]:
        return extractor.map_prompt(question, texts)

    def prefetch(items: list[tuple[str, list[str], list[str]]]) -> None:
        """Every extraction call of the cell through one pool (the client's max_concurrency in
        flight across prompts, not within one): the per-prompt calls then read the cache."""
        if client is not None:
            client.complete(
                list(
                    dict.fromkeys(
                        extraction_prompt("answer_set", q, t)
                        for q, texts, attached in items
                        for t in (*texts, *attached)
                    )
                )
            )

    sets.prefetch = prefetch  # type: ignore[attr-defined]
    # rule reading merged by rules or canonical forms: pure CPU work, so the map stage may split
    # the prompts over worker processes (an LLM, a local model or NLI merging may not)
    sets.parallel_safe = kind == "rule" and (  # type: ignore[attr-defined]
        not settings.extractor.merge_labels
        or settings.merge_by in ("canonical", "rule")
        or settings.equivalence.backend != "nli"
    )
    sets.call_stats = lambda: client.stats if client else None  # type: ignore[attr-defined]
    return sets


MAPPERS.add(
    "sets",
    Mapper(
        build_sets,
        ExtractionSettings,
        extraction="answer_set",
        description="the answers a response states, as a set of labels",
    ),
)
# with task.extractor.kind=llm: the paper's set-extraction prompt, one per response
EXTRACTIONS.add("answer_set", Extraction(prompt=partial(extraction_prompt, "answer_set")))


def answer_set_from_user(raw: Any) -> dict[str, Any]:
    """["Pacific", "Atlantic"] (one answer each, taken as they are) | [["USA", "United States"],
    ...] (alias lists) | a string listing names ("Pacific, Atlantic and Arctic", one per line,
    "A; B", numbered or bulleted: `pipeline.text.normal_forms.split_names`; a string with no separator is
    one answer, "Bosnia and Herzegovina" included)."""

    if isinstance(raw, str):
        raw = split_names(raw)
    if not isinstance(raw, (list, tuple)):
        raise ValueError(
            "must be a list of correct answers (each a string or a list of aliases), "
            f"got {type(raw).__name__}"
        )
    return {
        "answers": [a for a in (answer_aliases(r) for r in raw) if a],
        "probabilities": [],
        "reference_text": "",
    }


REFERENCES.add(
    "answer_set",
    ReferenceKind(
        check=lambda r: None if r["answers"] else "needs at least one answer",
        from_user=answer_set_from_user,
        present=lambda r: len(r["answers"]) > 0,
        description="the correct answers, each with its aliases",
    ),
)


def _sets(action: Any, ref: Reference) -> tuple[set, set] | None:
    """(prediction, truth) in one label space: a mapped reference (a graph) as it is; else the
    prediction aligned to the answers' aliases. None when a mapped reference has no latent."""
    if action is None:  # no latent: not scored (the paper discards unparseable answers)
        return None
    if ref.mapped:
        return None if ref.latent is None else (set(action), set(ref.latent))
    pred, keys = align_to_aliases(action, ref.answers, ref.question, ref.judge)
    return set(pred), set(keys)


def hamming(action: Any, ref: Reference, settings: Any) -> float | None:
    pair = _sets(action, ref)
    return None if pair is None else normalized_hamming(*pair)


@dataclass
class F1Settings:
    mean: str = "harmonic"  # of precision and recall; geometric: the paper's wording

    def __post_init__(self) -> None:
        one_of(self, "mean", ("harmonic", "geometric"))


def f1(action: Any, ref: Reference, settings: F1Settings) -> float | None:
    pair = _sets(action, ref)
    return None if pair is None else f1_score(*pair, mean=settings.mean)


METRICS.add("hamming", Metric("Hamming", higher_is_better=False, fn=hamming))
METRICS.add("f1", Metric("F1", higher_is_better=True, fn=f1, Config=F1Settings))
