"""Numeric answers (GSM8K final answers, the bundled numeric set): real numbers with the
absolute (median) or squared (mean) loss. The whole task is this module and one config file
(pipeline/tasks/reals/task.yaml): a mapper, a reference kind and two metrics."""

from __future__ import annotations

import math
from typing import Any

from pipeline.mapping.numbers import parse_number
from pipeline.tasks.contract import (
    MAPPERS,
    METRICS,
    REFERENCES,
    Mapper,
    Metric,
    Reference,
    ReferenceKind,
)


def build_reals(settings: Any, context: Any) -> Any:
    """g_T = the number a response gives (pipeline.mapping.numbers.parse_number: digits or words,
    asides such as years and list numbers set back); None when it gives none."""

    def reals(question: str, texts: list[str]) -> list[Any]:
        return [parse_number(t) for t in texts]

    return reals


MAPPERS.add("reals", Mapper(build_reals, description="the number a response gives"))


def reference_number(record_answers: list, text: str = "") -> float | None:
    if text.strip():
        return parse_number(text)
    return parse_number(record_answers[0][0]) if record_answers and record_answers[0] else None


def number_from_user(raw: Any) -> dict[str, Any]:
    """42 | "42" | "about 42 km" | [42] (a list of one)."""
    if isinstance(raw, (list, tuple)):
        if len(raw) > 1:
            raise ValueError(f"is a list of {len(raw)} values; give the one true value")
        raw = raw[0] if raw else None
    value = (
        raw
        if isinstance(raw, (int, float)) and not isinstance(raw, bool)
        else (parse_number(str(raw)) if raw is not None else None)
    )
    if value is None or not math.isfinite(float(value)):
        raise ValueError(
            f"{raw!r:.80} holds no number; give the true value as a number (or a text with one)"
        )
    return {
        "answers": [[repr(float(value))]],
        "probabilities": [],
        "reference_text": repr(float(value)),
    }


REFERENCES.add(
    "number",
    ReferenceKind(
        check=lambda r: (
            None
            if reference_number(r["answers"], r["reference_text"]) is not None
            else "needs a numeric answer"
        ),
        from_user=number_from_user,
        present=lambda r: len(r["answers"]) > 0 or bool(r["reference_text"].strip()),
        description="the true value as a number",
    ),
)


def _error(action: Any, ref: Reference) -> tuple[float, float] | None:
    truth = reference_number(ref.answers, ref.text)
    if action is None or truth is None:
        return None
    return abs(float(action) - truth), truth


def abs_error(action: Any, ref: Reference, settings: Any) -> float | None:
    pair = _error(action, ref)
    return None if pair is None else pair[0]


def rel_error(action: Any, ref: Reference, settings: Any) -> float | None:
    """|action - truth| / |truth|: scale-free, so prompts of different magnitudes share one PRR
    (a zero truth gives 0 when exact, else inf)."""
    pair = _error(action, ref)
    if pair is None:
        return None
    err, truth = pair
    return err / abs(truth) if truth != 0 else (0.0 if err == 0 else math.inf)


METRICS.add("abs_error", Metric("Abs. error", higher_is_better=False, fn=abs_error))
METRICS.add("rel_error", Metric("Rel. error", higher_is_better=False, fn=rel_error))
