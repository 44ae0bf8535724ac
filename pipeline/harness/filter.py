"""The `task_aware` filter of lm-evaluation-harness: each document's sampled responses to the
Bayes-optimal answer of a task space, with its risk and quality kept for the metrics.

In a task YAML, beside lm-eval's own filters:

    filter_list:
      - name: task_aware
        filter:
          - function: task_aware
            task: classes                 # a task config of this project (classes, sets, ...)
            mapper: rule                  # g_T kind (task.extractor.kind)
            question_field: question      # where the document holds the question (dotted)
            reference_field: aliases      # and the reference (optional: quality, PRR, AUC)
            overrides: []                 # Hydra overrides of the scoring (reading.*, ...)
      - name: majority_vote               # lm-eval's, for comparison
        filter:
          - function: majority_vote
          - function: take_first

lm-eval registers filters by name in `lm_eval.api.registry` (`register_filter`); importing this
module registers `task_aware` (the shipped tasks' utils.py does). The filter hands lm-eval, per
document, a list holding one `ScoredAnswer`: the Bayes answer's text (what lm-eval logs as the
filtered response and its own metrics read) carrying the document's Bayes risk, confidence,
quality and position for `pipeline.harness.metrics`.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Iterable, Sequence
from typing import Any, Self

from lm_eval.api.filter import Filter
from lm_eval.api.registry import register_filter

from pipeline.harness import FILTER_NAME

log = logging.getLogger("pipeline")


class ScoredAnswer(str):
    """The Bayes answer's text, with what the metrics read: `position` (the document's place
    in the filtered batch: its prompt id in the scoring, as `doc_id` is in lm-eval's samples
    file), `bayes_risk`, `confidence`, `quality` ({metric: value, higher_is_better}) and
    `abstention` (why the answer is empty, or "")."""

    position: int
    primary: str  # the quality metric the PRR / AUC rank against
    bayes_risk: float
    confidence: float
    quality: dict[str, tuple[float, bool]]
    abstention: str

    def __new__(cls, text: str, **fields: Any) -> Self:
        answer = super().__new__(cls, text)
        for name, value in fields.items():
            setattr(answer, name, value)
        return answer


def field_of(doc: Any, path: str | None) -> Any:
    """doc["a"]["b"] for "a.b" (a list index as a number: "answers.0"); None where absent."""
    if path is None:
        return None
    node = doc
    for part in path.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, (list, tuple)) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


@register_filter(FILTER_NAME)
class TaskAwareFilter(Filter):
    """M responses per document -> [the Bayes answer] (a ScoredAnswer), for a task space."""

    def __init__(
        self,
        task: str = "classes",
        mapper: str = "rule",
        question_field: str = "question",
        reference_field: str | None = None,
        overrides: Sequence[str] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        from pipeline.scorer.run import check_task, compose_cell

        self.task = check_task(task, python=True)
        # the metric the PRR / AUC rank against: the task's first (as its report's headline)
        self.primary = str(compose_cell(self.task, mapper, overrides).task.metrics[0])
        self.mapper, self.overrides = mapper, list(overrides or ())
        self.question_field, self.reference_field = question_field, reference_field

    def apply(self, resps: Iterable[Sequence[str]], docs: Iterable[dict]) -> list[list[str]]:
        import pipeline

        resps, docs = [list(r) for r in resps], list(docs)
        rows = []
        for i, (responses, doc) in enumerate(zip(resps, docs)):
            row = {
                "id": str(i),
                "question": str(field_of(doc, self.question_field) or ""),
                "responses": [str(r) for r in responses],
            }
            reference = field_of(doc, self.reference_field)
            if reference is not None:
                row["reference"] = reference
            rows.append(row)
        with warnings.catch_warnings():  # the scorer's warnings go to the log, once
            warnings.simplefilter("ignore")
            scored = pipeline.score(
                rows, task=self.task, mapper=self.mapper, overrides=self.overrides, lean=True
            )
        by_id = {pid: row for pid, row in zip(scored["prompt_id"], scored.to_dict("records"))}
        metrics = _quality_metrics(scored)
        out = []
        for i in range(len(rows)):
            row = by_id.get(str(i))
            if row is None:  # a document the scorer skipped (no responses)
                out.append(
                    [
                        ScoredAnswer(
                            "",
                            position=i,
                            primary=self.primary,
                            bayes_risk=math.nan,
                            confidence=math.nan,
                            quality={},
                            abstention="abstains: no samples",
                        )
                    ]
                )
                continue
            quality = {
                metric: (float(row[column]), higher)
                for metric, (column, higher) in metrics.items()
                if row.get(column) == row.get(column)
            }
            out.append(
                [
                    ScoredAnswer(
                        str(row.get("bayes_text") or ""),
                        position=i,
                        primary=self.primary,
                        bayes_risk=float(row["bayes_risk"]),
                        confidence=float(row.get("confidence", math.nan)),
                        quality=quality,
                        abstention=str(row.get("abstention", "")),
                    )
                ]
            )
        log.info("[lm-eval] task_aware (%s): %d documents decided", self.task, len(out))
        return out


def _quality_metrics(scored) -> dict[str, tuple[str, bool]]:
    """{metric: (the Bayes answer's quality column, higher_is_better)} of a scored frame."""
    from pipeline.tasks.contract import METRICS

    prefix = "quality_bayes_"
    return {
        c[len(prefix) :]: (c, bool(METRICS[c[len(prefix) :]].higher_is_better))
        for c in scored.columns
        if c.startswith(prefix) and c[len(prefix) :] in METRICS
    }
