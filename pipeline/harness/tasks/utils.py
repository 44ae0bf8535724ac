"""The shipped lm-eval tasks' functions (`!function utils.<name>` in their YAML files): the
bundled data as datasets, the project's generation prompts, the targets, and the metrics of the
`task_aware` filter (pipeline.harness.metrics). Importing this module registers the filter."""

from __future__ import annotations

import json
import string
from typing import Any

import pipeline.harness.filter  # noqa: F401  registers the task_aware filter with lm-eval
from pipeline.harness.metrics import (  # noqa: F401  the aggregations the YAML files name
    auc,
    auc_high,
    auc_low,
    prr,
    prr_high,
    prr_low,
)
from pipeline.harness.metrics import process_results as task_aware_results


def _bundled(name: str, **_: Any):
    import datasets

    from pipeline.data.loaders import BUNDLED_DIR

    path = BUNDLED_DIR / f"{name}.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    docs = [
        {
            "prompt_id": r["prompt_id"],
            "question": r["question"],
            "answers": r["answers"],
            "aliases": r["answers"][0] if r["answers"] else [],
        }
        for r in rows
    ]
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(docs)})


def triviaqa_bundled(**kwargs: Any):
    """pipeline/data/bundled/triviaqa_bundled.jsonl: question, aliases (the answer's)."""
    return _bundled("triviaqa_bundled", **kwargs)


def maqa_bundled(**kwargs: Any):
    """pipeline/data/bundled/maqa_bundled.jsonl: question, answers (a list of alias lists)."""
    return _bundled("maqa_bundled", **kwargs)


def single_answer_prompt(doc: dict) -> str:
    """The project's single-answer prompt (the paper's), filled as written text."""
    from pipeline.data.prompts import task_prompt

    return task_prompt("single_answer", doc["question"], written=True)


def answer_list_prompt(doc: dict) -> str:
    """The project's answer-list prompt (the paper's MAQA prompt), filled as written text."""
    from pipeline.data.prompts import task_prompt

    return task_prompt("answer_list", doc["question"], written=True)


def aliases(doc: dict) -> list[str]:
    return list(doc["aliases"])


def answers(doc: dict) -> list[list[str]]:
    return [list(a) for a in doc["answers"]]


def _normalised(text: str) -> str:  # lm-eval's exact_match with ignore_case, ignore_punctuation
    return str(text).lower().translate(str.maketrans("", "", string.punctuation)).strip()


def single_answer_results(doc: dict, results: list) -> dict[str, Any]:
    """lm-eval's exact match of the filtered answer against any alias (ignore case and
    punctuation, as lm-eval's TriviaQA), plus the task_aware metrics where the filter is ours."""
    prediction = _normalised(results[0])
    out: dict[str, Any] = {
        "exact_match": float(any(prediction == _normalised(a) for a in doc["aliases"]))
    }
    if hasattr(results[0], "bayes_risk"):
        out.update(task_aware_results(doc, results))
    return out


def answer_set_results(doc: dict, results: list) -> dict[str, Any]:
    """The task_aware metrics (sets: the project's F1 and Hamming of the Bayes set; lm-eval
    has no set metric). A filter of lm-eval's own gets none."""
    return task_aware_results(doc, results) if hasattr(results[0], "bayes_risk") else {}
