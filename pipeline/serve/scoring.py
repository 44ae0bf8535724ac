"""The scoring of one served request, in memory and without pandas: the same per-prompt
functions `pipeline.score` runs (read the row, map, decide, the latent entropy, the row's
readings), without its artifact store, its Hydra compose and its frames per call.

`pipeline.score` costs ~1 s per call (Hydra compose, a temporary ArtifactStore, the stage
runner's cache checks); here the task's config and latent spaces are built once per task
(`TaskScorer`), and a request runs the map stage's `prompt_rows`, the decide stage's
`decide_many`, `latent_entropy` and the scorer's `prompt_readings` on plain lists (~1-2 ms
CPU for 20 rule-mapped responses; ~18 ms through pandas frames before 2026-11-28). The row
equals `pipeline.score`'s on the same responses (tests/serve/test_serve_scoring.py).
"""

from __future__ import annotations

import json
import math
import threading
from typing import Any

from pipeline.latent.base import LatentSpace
from pipeline.scorer.readers import FieldNames, read_input
from pipeline.scorer.run import UQ_ESTIMATORS, compose_cell, reference_columns

PROMPT_ID = "0"


class TaskScorer:
    """One task's config and latent spaces, built once; `score(question, responses, logprobs)`
    gives the scored row as `pipeline.score` gives it (a dict of Python objects) and each
    sample's latent row (how it was read). Thread-safe: every call builds its own mapper; the
    spaces are read only."""

    def __init__(self, task: str, mapper: str = "rule", overrides: tuple[str, ...] = ()) -> None:
        from pipeline.stages.map import map_context

        self.task = task
        self.mapper = mapper
        # in-memory input: the dataset name pipeline.score gives it ("byo-data"); the cell's
        # spaces and the mapper's context built once
        self.cell = compose_cell(task, mapper, overrides, dataset_name="byo-data")
        self.space, self.extra = self.cell.task.latent_space(), self.cell.task.decision_spaces()
        self.map_context = map_context(self.cell)
        self.reading = self.cell.reading
        # `score` computes these two itself (the Bayes risk is the decision's): a scorer
        # config with other estimators would need the uq stage
        if sorted(self.cell.uq.estimators) != sorted(UQ_ESTIMATORS):
            raise ValueError(
                f"serve scores with {sorted(UQ_ESTIMATORS)}, the config asks for "
                f"{list(self.cell.uq.estimators)}"
            )

    def score(
        self,
        question: str,
        responses: list[str],
        logprobs: list[float] | None = None,
        finish_reasons: list[str | None] | None = None,
    ):
        """(the scored row as `pipeline.score` gives it, as a dict of Python objects; each
        sample's latent row) for one prompt, without pandas: the map stage's `prompt_rows`, the
        decide stage's `decide_many`, the latent entropy, and the scorer's per-prompt readings
        (`prompt_readings`, `abstention`, the counts). Equal to `pipeline.score`'s row
        (tests/serve/test_serve_scoring.py)."""
        from pipeline.scorer.run import abstention
        from pipeline.stages.decide import decide_many
        from pipeline.uncertainty.latent_entropy import latent_entropy

        prompt = self._read(question, responses, logprobs, finish_reasons)
        texts = list(prompt.responses)
        reasons = list(prompt.finish_reasons or [""] * len(texts))
        latents = self._map(prompt.question, texts, reasons)
        space = self.space
        samples = [
            (space.from_json(r["latent"]) if r["parse_ok"] else None, text if r["read"] else "")
            for r, text in zip(latents, texts)
        ]
        decided = {d["method"]: d for d in decide_many(space, [(samples, {})], self.extra)[0]}
        out: dict[str, Any] = {"prompt_id": prompt.prompt_id, "question": prompt.question}
        out.update(_counts(texts, reasons, latents))
        out.update(self._decisions(decided))
        parsed = [r["latent"] for r in latents if r["parse_ok"]]
        out["latent_entropy"] = latent_entropy(parsed) if parsed else math.nan
        out["has_reference"] = False
        bayes = decided.get("bayes", {}).get("action")
        out.update(self._readings(latents, bayes, texts, logprobs))
        self._answer_text(out, texts)
        out["abstention"] = abstention(
            space, bayes or "null", len(texts), out["n_parsed"], out["n_truncated"]
        )
        return out, latents

    def _read(self, question, responses, logprobs, finish_reasons):
        """The request as the scorer reads its input (one prompt, checked as it checks it)."""
        row: dict[str, Any] = {"id": PROMPT_ID, "question": question, "responses": responses}
        if logprobs is not None:
            row["logprobs"] = logprobs
        if finish_reasons is not None:
            row["finish_reasons"] = finish_reasons
        return read_input(
            [row],
            "auto",
            FieldNames(),
            strict=True,
            validate=lambda p: reference_columns(
                self.cell.task.reference, p.reference, p.prompt_id
            ),
        ).prompts[0]

    def _map(self, question: str, texts: list[str], reasons: list) -> list[dict]:
        """Each sample's latent row, as the map stage writes it (a mapper built for this call)."""
        from pipeline.stages.map import (
            check_call_failures,
            mapped_texts,
            prompt_rows,
            truncated_positions,
        )
        from pipeline.tasks.contract import MAPPERS
        from pipeline.text.normal_forms import clean_text

        clean = clean_text(question)
        cleaned = [clean_text(t) for t in texts]
        item = (
            PROMPT_ID,
            clean,
            [("sample", i) for i in range(len(texts))],
            cleaned,
            (),
            truncated_positions(reasons),
        )
        task_ = self.cell.task
        mapper = MAPPERS[task_.mapper].build(task_.mapper_settings, self.map_context)
        try:
            if hasattr(mapper, "prefetch"):
                mapper.prefetch([(clean, mapped_texts(item, self.reading), [])])
            latents = prompt_rows(mapper, self.space, item, self.reading)
            check_call_failures(task_.extractor, mapper)
        finally:
            getattr(mapper, "close", lambda: None)()
        return latents

    def _decisions(self, decided: dict[str, dict]) -> dict[str, Any]:
        """Each declared decision's action, text and risk, in the scorer's columns."""
        from pipeline.scorer.run import METHOD_COLUMNS, action_column

        out: dict[str, Any] = {}
        for method, col in METHOD_COLUMNS.items():
            d = decided.get(method)
            if d is None:
                continue  # a decision this task does not declare
            action = None if d["action"] == "null" else self.space.from_json(d["action"])
            out[action_column(method)] = action
            out[f"{col}_text"], out[f"{col}_risk"] = d["text"], float(d["risk"])
        return out

    def _readings(self, latents, bayes, texts: list[str], logprobs) -> dict[str, Any]:
        """The scorer's per-prompt readings: each response's labels, the latent distribution,
        the confidence and the white-box estimators where logprobs came."""
        from pipeline.scorer.run import prompt_readings

        space = self.space
        lps = {
            i: float(logprobs[i]) if logprobs is not None else math.nan for i in range(len(texts))
        }
        group = [(r["latent"], r["parse_ok"], r["sample_idx"], r["read"]) for r in latents]
        readings = prompt_readings(
            space, group, bayes, lps, type(space).labels is not LatentSpace.labels
        )
        value = readings.get("response_labels")  # None where absent
        out: dict[str, Any] = {
            "response_labels": json.loads(value) if isinstance(value, str) else None,
            "latent_distribution": readings.get("latent_distribution"),  # JSON, as score's
            "confidence": float(readings.get("confidence", math.nan)),
        }
        for name in ("whitebox_msp", "whitebox_semantic_entropy"):
            if name in readings:
                out[name] = readings[name]
        return out

    def _answer_text(self, out: dict[str, Any], texts: list[str]) -> None:
        """Where the space writes its answer as text of its own, the Bayes text becomes that
        (the member sample's text kept beside it), in place in `out`."""
        from pipeline.components.methods import OURS
        from pipeline.scorer.run import OURS_COLUMN, action_column

        space = self.space
        text = f"{OURS_COLUMN}_text"
        if type(space).answer_text is not LatentSpace.answer_text and text in out:
            out[f"{OURS_COLUMN}_member_text"] = out[text]
            action = out.get(action_column(OURS))
            answer = None if action is None else space.answer_text(action, texts)
            if answer:
                out[text] = answer


def _counts(texts: list[str], reasons: list, latents: list[dict]) -> dict[str, int]:
    """The row's counts of samples: parsed, truncated, read as no answer, discarded, distinct."""
    from pipeline.scorer.run import text_key

    n_parsed = sum(bool(r["read"]) for r in latents)
    n_no_answer = sum(bool(r["parse_ok"]) and not r["read"] for r in latents)
    return {
        "n_samples": len(texts),
        "n_parsed": n_parsed,
        "n_truncated": sum(reason == "length" for reason in reasons),
        "n_no_answer": n_no_answer,
        "n_discarded": len(texts) - n_parsed - n_no_answer,
        "n_distinct_texts": len(set(map(text_key, texts))),
    }


class Scorers:
    """The TaskScorer of each task, made on first use (Hydra's compose is not thread-safe: one at
    a time, under a lock)."""

    def __init__(self, mapper: str = "rule") -> None:
        self.mapper = mapper
        self._lock = threading.Lock()
        self._made: dict[str, TaskScorer] = {}

    def get(self, task: str) -> TaskScorer:
        found = self._made.get(task)
        if found is not None:
            return found
        with self._lock:
            if task not in self._made:
                self._made[task] = TaskScorer(task, self.mapper)
            return self._made[task]


def _number(value: Any) -> float | None:
    """A float for JSON (NaN / inf: null)."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _distribution(value: Any) -> Any:
    """The row's latent_distribution (JSON text, as `pipeline.score` keeps it) as data."""
    return json.loads(value) if isinstance(value, str) else _plain(value)


def _plain(value: Any) -> Any:
    """A latent as JSON-ready data: sets as sorted lists, numpy as lists, NaN as null."""
    if value is None:
        return None
    if isinstance(value, (frozenset, set)):
        return sorted((_plain(v) for v in value), key=lambda v: json.dumps(v, default=str))
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist"):
        return _plain(value.tolist())
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, (str, int, bool)):
        return value
    return str(value)


def ranked_answers(
    scorer: TaskScorer, row, latents, texts: list[str], k: int
) -> list[dict[str, Any]]:
    """The next `k` best answers after the Bayes answer (OpenAI's `n` > 1): the distinct read
    samples' latents and the other decisions' actions, by their Bayes risk under the samples
    (ties: the more frequent, then first seen), the Bayes action and "no answer" left out;
    fewer when fewer distinct answers exist. Each {text, latent, risk}."""
    if k <= 0:
        return []
    from pipeline.scorer.run import METHOD_COLUMNS, action_column

    space = scorer.space
    decided, samples, read = [], [], []  # decided over; (latent, text) to render; read ones
    for r, text in zip(latents, texts):
        if r["parse_ok"]:
            latent = space.from_json(r["latent"])
            decided.append(latent)
            samples.append((latent, text if r["read"] else ""))
            if r["read"]:
                read.append(latent)
    if not decided:
        return []
    skip = {
        space.key(space.canonical(x))
        for x in (row.get("bayes_action"), space.no_answer())
        if x is not None
    }
    counts: dict[Any, list] = {}  # key -> [count, first index, latent]
    for i, latent in enumerate(read + [row.get(action_column(m)) for m in METHOD_COLUMNS]):
        if latent is None:
            continue
        key = space.key(space.canonical(latent))
        if key not in skip:
            counts.setdefault(key, [0, i, latent])[0] += 1
    risked = [
        (space.risk(latent, decided), -count, first, latent)
        for count, first, latent in counts.values()
    ]
    out = []
    for risk, _, _, latent in sorted(risked, key=lambda c: c[:3])[:k]:
        answer = space.answer_text(latent, [t for _, t in samples if t])
        out.append(
            {
                "text": answer or space.render(latent, samples),
                "latent": _plain(latent),
                "risk": _number(risk),
            }
        )
    return out


def sampler_warning(texts: list[str]) -> str:
    """A warning when the samples are so alike that the confidence reflects the sampler more than
    the model's uncertainty ("" otherwise): every sample the same text, at M >= 5."""
    from pipeline.scorer.run import text_key

    if len(texts) >= 5 and len(set(map(text_key, texts))) == 1:
        return (
            f"all {len(texts)} samples are the same text: the sampling settings (see "
            "`sampling`) may be near-greedy, so the confidence reflects the sampler, not the "
            "model's uncertainty; raise the temperature to measure it"
        )
    return ""


def extension(
    scorer: TaskScorer,
    row,
    latents,
    texts: list[str],
    logprobs: list[float] | None,
    finish_reasons: list[str | None] | None = None,
    sampling: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The `task_aware` field of a served answer (docs/serve.md): the Bayes answer, its risk and
    confidence, the latent distribution, the other decisions, and how each sample was read."""
    samples = _samples(row, latents, texts, logprobs, finish_reasons)
    decisions = _served_decisions(row)
    ours = decisions.get("bayes", {})
    out = {
        "task": scorer.task,
        "mapper": scorer.mapper,
        "n": int(row["n_samples"]),
        "n_parsed": int(row["n_parsed"]),
        "n_truncated": int(row["n_truncated"]),
        "n_no_answer": int(row["n_no_answer"]),
        "n_discarded": int(row["n_discarded"]),
        "answer": row.get("bayes_text", ""),
        "abstention": row.get("abstention", ""),
        "latent": ours.get("latent"),
        "bayes_risk": ours.get("risk"),
        "confidence": _number(row.get("confidence")),
        "latent_entropy": _number(row.get("latent_entropy")),
        "latent_distribution": _distribution(row.get("latent_distribution")),
        "decisions": decisions,
        "samples": samples,
        "sampling": sampling or {},
    }
    if warning := sampler_warning(texts):
        out["warning"] = warning
    for name in ("whitebox_msp", "whitebox_semantic_entropy"):
        if name in row:
            out[name] = _number(row[name])
    return out


def _samples(row, latents, texts: list[str], logprobs, finish_reasons) -> list[dict[str, Any]]:
    """How each sample was read: its text, whether it was read, its latent, and its finish
    reason, labels and logprob where they came."""
    labels = row.get("response_labels")
    samples = []
    for i, (text, latent_row) in enumerate(zip(texts, latents)):
        payload, was_read = latent_row["latent"], latent_row["read"]
        sample: dict[str, Any] = {
            "text": text,
            "parsed": bool(was_read),
            "latent": json.loads(payload) if was_read else None,
        }
        if finish_reasons is not None:
            sample["finish_reason"] = finish_reasons[i]
        if isinstance(labels, list) and i < len(labels):
            sample["labels"] = labels[i]
        if logprobs is not None:
            sample["logprob"] = _number(logprobs[i])
        samples.append(sample)
    return samples


def _served_decisions(row) -> dict[str, dict[str, Any]]:
    """Each decision the row holds (text, latent, risk), by its column name."""
    from pipeline.scorer.run import METHOD_COLUMNS, action_column

    decisions = {}
    for method, col in METHOD_COLUMNS.items():
        if f"{col}_risk" in row:
            decisions[col] = {
                "text": row.get(f"{col}_text", ""),
                "latent": _plain(row.get(action_column(method))),
                "risk": _number(row.get(f"{col}_risk")),
            }
    return decisions


__all__ = ["UQ_ESTIMATORS", "Scorers", "TaskScorer", "extension"]
