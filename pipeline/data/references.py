"""Reference kinds: what a dataset record holds as the truth for a task, and how a user file
writes it. The loaders check every record against its dataset's kind; the kinds themselves are
registered by the task modules (`pipeline/tasks/`), found on first lookup.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pipeline.components.registry import Registry


@dataclass(frozen=True)
class ReferenceKind:
    """What a dataset record holds as the truth for a task, and how a user file writes it.

    `check(record)` -> problem or None (loaders validate every record); `from_user(raw)` ->
    the DATASET columns answers / probabilities / reference_text of a bring-your-own reference
    (raises ValueError with the accepted shapes); `present(record)` -> whether the record has a
    reference at all; `mapped`: the reference text goes through g_T like a response.
    """

    check: Callable[[Mapping[str, Any]], str | None]
    from_user: Callable[[Any], dict[str, Any]]
    present: Callable[[Mapping[str, Any]], bool]
    mapped: bool = False
    description: str = ""


REFERENCES: Registry[ReferenceKind] = Registry(
    "reference kind", discover=("pipeline.tasks.*.task",)
)


def answer_aliases(value: Any) -> list[str]:
    """One answer's aliases from a user's reference: a name or a list of names (strings or
    numbers); an object, or a list nested deeper, is refused (it would be read as its repr).
    Shared by the kinds whose answers have aliases (one answer, a set of answers)."""
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    for v in items:
        if v is not None and (isinstance(v, bool) or not isinstance(v, str | int | float)):
            raise ValueError(
                f"holds {type(v).__name__} {v!r:.60} where an answer's name (or a "
                "list of its aliases) belongs"
            )
    return [str(v).strip() for v in items if v is not None and str(v).strip()]
