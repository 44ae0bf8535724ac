"""Row -> DATASET record conversion for each real dataset's format, and record validation.

Pure Python (no `datasets` import): the converters take one row as a plain dict, exactly as
`datasets` yields it, so they are tested on hand-written rows and on local files alike.
A record is a dict with the columns of `pipeline.artifacts.schema.DATASET`, in that order.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pipeline.artifacts.schema import DATASET
from pipeline.data.references import REFERENCES
from pipeline.runtime.errors import PipelineError

COLUMNS: tuple[str, ...] = tuple(DATASET)
PROBABILITY_TOLERANCE = 1e-6


class DatasetFormatError(PipelineError, ValueError):
    """A source row or record does not have the expected format."""


def id_prefix(dataset_name: str) -> str:
    """Prefix of a dataset's prompt ids: "maqa_star_bundled" -> "maqa-star-bundled"."""
    return dataset_name.replace("_", "-")


def make_record(
    prompt_id: str,
    dataset: str,
    question: str,
    answers: list[list[str]] | None = None,
    probabilities: list[float] | None = None,
    reference_text: str = "",
) -> dict[str, Any]:
    """A DATASET record with every column, in schema order."""
    return {
        "prompt_id": prompt_id,
        "dataset": dataset,
        "question": question,
        "answers": answers if answers is not None else [],
        "probabilities": probabilities if probabilities is not None else [],
        "reference_text": reference_text,
    }


def _where(dataset: str, index: int) -> str:
    return f"{dataset} row {index}"


def _source_record(
    dataset: str, index: int, source_id: Any = None, **columns: Any
) -> dict[str, Any]:
    """A record of source row `index`: prompt id from the source's own id, else the row index."""
    return make_record(
        prompt_id=f"{id_prefix(dataset)}-{source_id if source_id else f'{index:05d}'}",
        dataset=dataset,
        **columns,
    )


def _text(value: Any, what: str, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise DatasetFormatError(f"{where}: {what} must be a non-empty string, got {value!r}")
    return value.strip()


def _alias(value: Any) -> str | None:
    """One alias as text; numbers (MAQA's arithmetic answers) become their decimal form."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def dedupe(aliases: Iterable[str]) -> list[str]:
    """Aliases without exact duplicates, first occurrence kept (the first is the canonical one)."""
    seen: set[str] = set()
    out: list[str] = []
    for alias in aliases:
        if alias not in seen:
            seen.add(alias)
            out.append(alias)
    return out


def alias_list(value: Any, where: str) -> list[str]:
    """One correct answer as its alias list: a string/number is one alias, a list is many."""
    items = value if isinstance(value, list | tuple) else [value]
    aliases = dedupe(a for a in (_alias(v) for v in items) if a is not None)
    if not aliases:
        raise DatasetFormatError(f"{where}: answer {value!r} has no non-empty alias")
    return aliases


def alias_lists(value: Any, where: str) -> list[list[str]]:
    """A list of correct answers, each a string, a number or a list of aliases."""
    if not isinstance(value, list | tuple) or len(value) == 0:
        raise DatasetFormatError(f"{where}: answers must be a non-empty list, got {value!r}")
    return [alias_list(v, where) for v in value]


# --- converters, one per real dataset format -------------------------------------------------


def triviaqa_record(row: Mapping[str, Any], dataset: str, index: int) -> dict[str, Any]:
    """TriviaQA (rc.nocontext): answer.value first, then answer.aliases, as one alias list."""
    where = _where(dataset, index)
    answer = row.get("answer")
    if not isinstance(answer, Mapping):
        raise DatasetFormatError(f"{where}: 'answer' must be a struct with value/aliases")
    values = [answer.get("value"), *list(answer.get("aliases") or [])]
    return _source_record(
        dataset,
        index,
        row.get("question_id"),
        question=_text(row.get("question"), "question", where),
        answers=[alias_list(values, where)],
    )


def maqa_record(
    row: Mapping[str, Any],
    dataset: str,
    index: int,
    question_field: str = "question",
    answers_field: str = "answers",
) -> dict[str, Any]:
    """MAQA (official JSON): question + answers (each a string or a list of aliases)."""
    where = _where(dataset, index)
    return _source_record(
        dataset,
        index,
        question=_text(row.get(question_field), question_field, where),
        answers=alias_lists(row.get(answers_field), where),
    )


def normalise_probabilities(
    probabilities: Any, counts: Any, n_answers: int, where: str
) -> tuple[list[float], bool]:
    """MAQA* p*: validated and renormalised to sum to 1 (flag says whether it was rescaled).

    When the probabilities sum to 0 (or are missing), the annotation counts are used instead.
    """
    probs = list(probabilities) if isinstance(probabilities, list | tuple) else []
    source = "probabilities"
    if not probs or not any(isinstance(p, int | float) and p > 0 for p in probs):
        probs, source = (list(counts) if isinstance(counts, list | tuple) else []), "counts"
    if len(probs) != n_answers:
        raise DatasetFormatError(
            f"{where}: {source} has {len(probs)} entries but there are {n_answers} answers"
        )
    values: list[float] = []
    for p in probs:
        if isinstance(p, bool) or not isinstance(p, int | float) or not math.isfinite(p) or p < 0:
            raise DatasetFormatError(f"{where}: {source} must be finite and >= 0, got {probs!r}")
        values.append(float(p))
    total = math.fsum(values)
    if total <= 0:
        raise DatasetFormatError(f"{where}: {source} sum to 0; cannot form a distribution")
    if abs(total - 1.0) <= PROBABILITY_TOLERANCE and source == "probabilities":
        return values, False
    return [v / total for v in values], True


def maqa_star_record(
    row: Mapping[str, Any],
    dataset: str,
    index: int,
    question_field: str = "question",
    answers_field: str = "answers",
) -> tuple[dict[str, Any], bool]:
    """MAQA* (ttomov/maqa_star): alias lists + p*; returns (record, was_renormalised)."""
    where = _where(dataset, index)
    answers = alias_lists(row.get(answers_field), where)
    probabilities, rescaled = normalise_probabilities(
        row.get("probabilities"), row.get("counts"), len(answers), where
    )
    record = _source_record(
        dataset,
        index,
        question=_text(row.get(question_field), question_field, where),
        answers=answers,
        probabilities=probabilities,
    )
    return record, rescaled


def wmt19_record(
    row: Mapping[str, Any],
    dataset: str,
    index: int,
    source_lang: str = "fi",
    target_lang: str = "en",
) -> dict[str, Any]:
    """WMT19: translation[source] -> question, translation[target] -> reference_text."""
    where = _where(dataset, index)
    pair = row.get("translation")
    if not isinstance(pair, Mapping):
        raise DatasetFormatError(f"{where}: 'translation' must be a {{lang: text}} struct")
    return _source_record(
        dataset,
        index,
        question=_text(pair.get(source_lang), f"translation.{source_lang}", where),
        reference_text=_text(pair.get(target_lang), f"translation.{target_lang}", where),
    )


def cnn_dm_record(
    row: Mapping[str, Any],
    dataset: str,
    index: int,
    article_field: str = "article",
    summary_field: str = "highlights",
    id_field: str | None = "id",
) -> dict[str, Any]:
    """CNN/DailyMail: article -> question, highlights -> reference_text (newline-separated)."""
    where = _where(dataset, index)
    return _source_record(
        dataset,
        index,
        row.get(id_field) if id_field else None,
        question=_text(row.get(article_field), article_field, where),
        reference_text=_text(row.get(summary_field), summary_field, where),
    )


# The paper's CNN/DM-based benchmark (Zhang et al. 2023, github.com/Tiiiger/
# benchmark_llm_summarization): `writer_summaries.json`, a JSON list with one object per
# freelance-writer summary. An article summarised by several writers appears once per summary
# (302 summaries of 109 articles, 1 to 4 each), always with the same `article_id` and text.
WRITER_SUMMARY_COLUMNS: tuple[str, ...] = ("article_id", "article", "summary")


def group_writer_summaries(
    rows: Sequence[Mapping[str, Any]], where: str
) -> list[tuple[str, str, list[str]]]:
    """(article_id, article, [writer summaries in file order]) per article, in the order each
    article first appears; `where` (the file) prefixes every error."""
    articles: dict[str, tuple[str, list[str]]] = {}
    for i, row in enumerate(rows):
        at = f"{where}: entry {i}"
        if not isinstance(row, Mapping):
            raise DatasetFormatError(
                f"{at} is {type(row).__name__}, not an object with {list(WRITER_SUMMARY_COLUMNS)}"
            )
        missing = [c for c in WRITER_SUMMARY_COLUMNS if c not in row]
        if missing:
            raise DatasetFormatError(
                f"{at}: missing column(s) {missing}; the benchmark's writer_summaries.json has "
                f"{list(WRITER_SUMMARY_COLUMNS)} in every entry (has {sorted(row)})"
            )
        article_id = _text(
            str(row["article_id"]) if row["article_id"] is not None else None, "article_id", at
        )
        article = _text(row["article"], "article", at)
        summary = _text(row["summary"], "summary", at)
        if article_id in articles:
            if articles[article_id][0] != article:
                raise DatasetFormatError(
                    f"{at}: article_id {article_id!r} appears with two different article texts"
                )
            articles[article_id][1].append(summary)
        else:
            articles[article_id] = (article, [summary])
    return [(aid, art, summaries) for aid, (art, summaries) in articles.items()]


def writer_summary_record(
    article_id: str, article: str, summaries: Sequence[str], dataset: str
) -> dict[str, Any]:
    """One benchmark article: article -> question, its first writer summary -> reference_text.

    The first summary in file order is the reference: the file has no writer ids and no ranking,
    so file order is the only choice that does not depend on anything but the file.
    """
    return _source_record(dataset, 0, article_id, question=article, reference_text=summaries[0])


def gsm8k_record(row: Mapping[str, Any], dataset: str, index: int) -> dict[str, Any]:
    """GSM8K (openai/gsm8k): the final answer is what follows "####" in `answer` (the worked
    solution before it is dropped), thousands separators removed."""
    where = _where(dataset, index)
    answer = _text(row.get("answer"), "answer", where)
    if "####" not in answer:
        raise DatasetFormatError(f"{where}: 'answer' has no '#### <final answer>' line")
    final = answer.rsplit("####", 1)[1].strip().replace(",", "")
    if not final:
        raise DatasetFormatError(f"{where}: empty final answer after '####'")
    return _source_record(
        dataset, index, question=_text(row.get("question"), "question", where), answers=[[final]]
    )


# --- validation -------------------------------------------------------------------------------


def validate_records(records: Sequence[Mapping[str, Any]], reference: str | None = None) -> None:
    """Raise DatasetFormatError unless every record follows `pipeline.artifacts.schema.DATASET`.

    Checks columns, types, non-empty questions and aliases, p* in [0, 1] summing to 1 within
    1e-6 and aligned with `answers`, unique prompt ids; with `reference` (a reference kind of
    pipeline.tasks), also what that kind needs (e.g. exactly one answer, p*, a reference text).
    """
    kind = None
    if reference is not None:
        kind = REFERENCES[reference]
    seen: set[str] = set()
    for i, rec in enumerate(records):
        where = f"record {i} ({rec.get('prompt_id', '?')!r})"
        if list(rec) != list(COLUMNS):
            raise DatasetFormatError(f"{where}: columns {list(rec)} != schema {list(COLUMNS)}")
        for col in ("prompt_id", "dataset", "question"):
            _text(rec[col], col, where)
        if rec["prompt_id"] in seen:
            raise DatasetFormatError(f"{where}: duplicate prompt_id {rec['prompt_id']!r}")
        seen.add(rec["prompt_id"])
        answers, probs, ref = rec["answers"], rec["probabilities"], rec["reference_text"]
        if not isinstance(answers, list) or not all(
            isinstance(a, list) and a and all(isinstance(s, str) and s.strip() for s in a)
            for a in answers
        ):
            raise DatasetFormatError(f"{where}: answers must be non-empty lists of non-empty str")
        if not isinstance(probs, list) or not all(
            isinstance(p, float) and 0.0 <= p <= 1.0 for p in probs
        ):
            raise DatasetFormatError(f"{where}: probabilities must be floats in [0, 1]: {probs}")
        if probs and (
            len(probs) != len(answers) or abs(math.fsum(probs) - 1.0) > PROBABILITY_TOLERANCE
        ):
            raise DatasetFormatError(
                f"{where}: probabilities must align with answers and sum to 1 (got {probs})"
            )
        if not isinstance(ref, str):
            raise DatasetFormatError(f"{where}: reference_text must be a str")
        problem = kind.check(rec) if kind is not None else None
        if problem:
            raise DatasetFormatError(f"{where}: a {reference!r} reference {problem}")
