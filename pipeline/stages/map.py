"""The map stage for one cell: every response (M samples + each decoding baseline, and the
reference text where the task's reference kind is `mapped`) -> its latent under the task's g_T
(the registered mapper `task.mapper`, pipeline/tasks/).

Per prompt, all responses are mapped together so labels are merged across them (the same
cluster, the same canonical answer, the same entity): a decode's latent lives in the samples'
label space. Unparseable responses are kept as rows with parse_ok=False and counted. Outside
calls that failed (after retries) beyond task.extractor.max_failed_share fail the stage: nothing
wrong is stored.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from pipeline.artifacts.stage import stage
from pipeline.artifacts.store import ArtifactStore, with_file_digests
from pipeline.components.parts import cache_slice
from pipeline.generation.cell import make_backend
from pipeline.latent import space_class
from pipeline.runtime.errors import PipelineError
from pipeline.runtime.progress import progress
from pipeline.tasks.contract import MAPPERS, MapContext

if TYPE_CHECKING:
    from pipeline.config import Cell

log = logging.getLogger("pipeline")


class ExtractionCallsFailed(PipelineError, RuntimeError):
    """More of the map stage's model calls failed than task.extractor.max_failed_share allows."""


@dataclass(frozen=True)
class ReadingRule:
    """What a sample that g_T could not read counts as (`reading`, pipeline.config.ReadingConfig;
    the cell's `reading`): `unreadable` discard (the paper) or no_answer (the space's `no_answer`
    latent, an outcome of its own); `truncated` read (the paper) or unreadable (a sample cut by
    the token limit)."""

    unreadable: str = "discard"
    truncated: str = "read"


PAPER_READING = ReadingRule()


def check_call_failures(extractor, mapper) -> None:
    """Fail the stage (so nothing is stored) when outside calls failed beyond the allowed share
    (`extractor`: the task's extractor settings); parse failures of answers that did arrive are
    not call failures and stay counted."""
    stats = getattr(mapper, "call_stats", lambda: None)()
    if stats is None or not stats.requests:
        return
    failed = stats.failures if hasattr(stats, "failures") else stats.api_failures
    share = failed / stats.requests
    if failed and share > float(extractor.max_failed_share):
        raise ExtractionCallsFailed(
            f"{failed} of {stats.requests} calls to {extractor.model} failed after retries "
            f"({share:.0%} > task.extractor.max_failed_share={extractor.max_failed_share}); "
            f"nothing was stored, answered calls are cached: rerun once the endpoint works. "
            f"Last error: {stats.last_error}"
        )


def map_slice(cell: Cell) -> dict:
    """The mapper and its typed settings (the fields declared with `how(...)` left out: how calls
    are made, not what they answer); the space options that decide the stored latents' canonical
    form; whether the reference goes through g_T too."""
    task = cell.task
    canonical = {
        k: task.space_options[k]
        for k in space_class(task.space).canonical_options
        if k in task.space_options
    }
    out = {
        "mapper": task.mapper,
        "settings": cache_slice(task.mapper_settings),
        "canonical_form": with_file_digests(canonical),
        "reference_mapped": task.reference_kind.mapped,
    }
    if (rule := cell.reading) != PAPER_READING:  # the paper's rule keeps its keys
        out["reading"] = {"unreadable": rule.unreadable, "truncated": rule.truncated}
    if task.options:  # the mapper sees the space, which may read any of them
        out["task_options"] = with_file_digests(task.options)
    return out


def map_context(cell: Cell) -> MapContext:
    """The cell's device, cache folder, generation model (for task.extractor.kind=local) and the
    task's space."""
    return MapContext(
        device=str(cell.device),
        cache_dir=str(cell.cache_dir),
        local_backend=lambda: make_backend(cell),
        space=cell.task.latent_space(),
    )


# v2: KGGen through its own venv with KGGen's clustering. v3: rule-based set, triple and
# number extraction rebuilt on labelled corpora (docs/extraction.md). v4: the reference is
# placed into the responses' clusters without shaping them; graphs undirected. v5: labels keep
# what makes a name that name (pipeline.text.normal_forms.canonical_label: "C++", "Vitamin A"), options the
# question lists are answers, a class is named by its most frequent member's answer.
# v6: the local triple prompt asks for "none" when a text states no fact (an empty reply is a
# failed call now, retried and never cached). v8: each row says whether g_T read it (`read`).
@stage(
    "map",
    inputs=("dataset", "samples", "decodes"),
    outputs=("latents",),
    config=map_slice,
    version=8,
    parts=("task.space", "task.mapper", "task.reference"),
)
def map_stage(cell: Cell, store: ArtifactStore, key: str) -> dict[str, Any]:
    return {
        "latents": map_cell(
            cell, store.read("dataset"), store.read("samples"), store.read("decodes")
        )
    }


# Below this many prompts the forked workers cost more than they save (measured: ~0.1 s to start).
PARALLEL_MIN_PROMPTS = 512
_FORKED: tuple[Any, Any] | None = None  # (mapper, space) a forked worker inherits


def map_prompts(mapper, space, work: list[tuple], rule: ReadingRule = PAPER_READING):
    """Each prompt's latent rows, in order: in this process, or, for a `parallel_safe` mapper
    over many prompts, split over forked worker processes (`pipeline.runtime.devices.cpu_threads()`), each
    with the parent's mapper; the rows are the same either way."""
    from pipeline.runtime.devices import forked_pool, forked_workers

    workers = forked_workers(len(work) // (PARALLEL_MIN_PROMPTS // 2))
    if not (
        getattr(mapper, "parallel_safe", False)
        and workers > 1
        and len(work) >= PARALLEL_MIN_PROMPTS
    ):
        return [prompt_rows(mapper, space, item, rule) for item in work]
    global _FORKED
    _FORKED = (mapper, space, rule)
    try:
        step = -(-len(work) // (4 * workers))  # a few chunks per worker: an even finish
        chunks = [work[i : i + step] for i in range(0, len(work), step)]
        with forked_pool(workers) as pool:
            return [rows for chunk in pool.map(_forked_chunk, chunks) for rows in chunk]
    finally:
        _FORKED = None


def _forked_chunk(chunk: list[tuple]) -> list[list[dict]]:
    mapper, space, rule = _FORKED
    return [prompt_rows(mapper, space, item, rule) for item in chunk]


def mapped_positions(item: tuple, rule: ReadingRule) -> list[int]:
    """The positions of a prompt's texts (`prompt_rows`' item) the mapper reads: all but those
    `rule` makes unreadable (cut by the token limit)."""
    texts, truncated = item[3], item[5]
    cut = set(truncated) if rule.truncated == "unreadable" else set()
    return [i for i in range(len(texts)) if i not in cut]


def mapped_texts(item: tuple, rule: ReadingRule) -> list[str]:
    """The texts the mapper reads (what a prefetch must ask for)."""
    return [item[3][i] for i in mapped_positions(item, rule)]


def prompt_rows(mapper, space, item: tuple, rule: ReadingRule = PAPER_READING) -> list[dict]:
    """One prompt's rows of latents.parquet: its samples', decodes' and attached reference's.

    `item`: (prompt id, question, sources, texts, attached reference texts, the positions of
    `sources` cut by the token limit). A sample `rule` makes unreadable (truncated) is not
    mapped, so it names no cluster; every sample not read (`read` False) is the space's
    no-answer latent under `rule.unreadable == "no_answer"` (parse_ok True: it is decided
    over), else null (parse_ok False: dropped, the paper's rule)."""
    prompt_id, question, sources, texts, attached, _ = item
    keep = mapped_positions(item, rule)
    kept = [texts[i] for i in keep]
    if attached:  # the reference is placed into the responses' clusters
        mapped = mapper(question, kept, attached=list(attached))
    else:
        mapped = mapper(question, kept) if kept else []
    latents: list[Any] = [None] * len(texts)
    for i, latent in zip(keep, mapped):
        latents[i] = latent
    if attached:
        sources = [*sources, ("reference", -1)]
        latents.append(mapped[len(kept)] if len(mapped) > len(kept) else None)
    no_answer = space.no_answer() if rule.unreadable == "no_answer" else None
    rows = []
    for (source, idx), latent in zip(sources, latents):
        read = latent is not None
        if not read and source == "sample":
            latent = no_answer
        rows.append(
            {
                "prompt_id": prompt_id,
                "source": source,
                "sample_idx": idx,
                "latent": space.to_json(latent) if latent is not None else "null",
                "parse_ok": latent is not None,
                "read": read,
            }
        )
    return rows


LATENT_COLUMNS = ["prompt_id", "source", "sample_idx", "latent", "parse_ok", "read"]


def truncated_positions(finish_reasons: list[str]) -> tuple[int, ...]:
    """The positions of responses cut by the token limit (finish reason "length")."""
    return tuple(i for i, reason in enumerate(finish_reasons) if reason == "length")


def map_cell(
    cell: Cell, dataset: pd.DataFrame, samples: pd.DataFrame, decodes: pd.DataFrame
) -> pd.DataFrame:
    from pipeline.text.normal_forms import clean_text

    # every mapper reads the text as a reader sees it: "Paris\u200b" is "Paris" (pipeline/text/normal_forms.py)
    dataset = dataset.assign(
        question=dataset["question"].map(clean_text),
        reference_text=dataset["reference_text"].map(clean_text),
    )
    samples = samples.assign(text=samples["text"].map(clean_text))
    decodes = decodes.assign(text=decodes["text"].map(clean_text))
    task = cell.task
    space = task.latent_space()
    rule = cell.reading
    maps_reference = task.reference_kind.mapped
    mapper = MAPPERS[task.mapper].build(task.mapper_settings, map_context(cell))
    per_prompt = _texts_per_prompt(samples, decodes)
    rows: list[dict] = []
    try:  # the mapper is closed (KGGen's worker stopped) however this ends
        work = [_work_item(rec, per_prompt, maps_reference) for rec in dataset.itertuples()]
        cut = sum(len(item[5]) for item in work)
        if hasattr(mapper, "prefetch"):  # every text the loop below maps, references included
            mapper.prefetch([(item[1], mapped_texts(item, rule), list(item[4])) for item in work])
        with progress(len(work), f"[map] {task.mapper}", unit="prompt", lines=False) as bar:
            for prompt_rows in map_prompts(mapper, space, work, rule):
                rows += prompt_rows
                bar.update()
        total = len(rows)
        failures = sum(not row["read"] for row in rows)
        check_call_failures(task.extractor, mapper)
    finally:
        getattr(mapper, "close", lambda: None)()
    _log_unreadable(task.mapper, rule, space, failures, total, cut)
    return pd.DataFrame(rows, columns=LATENT_COLUMNS)


def _texts_per_prompt(
    samples: pd.DataFrame, decodes: pd.DataFrame
) -> dict[str, tuple[list, list, list]]:
    """Each prompt's (sources, texts, finish reasons): samples by sample_idx, then decodes in
    artifact order. Plain lists in one pass (a DataFrame per prompt cost ~0.6 ms each)."""
    per_prompt: dict[str, tuple[list, list, list]] = {}
    ordered = samples.sort_values(["prompt_id", "sample_idx"], kind="stable")
    # samples of a cache written before finish reasons were kept: unknown ("")
    reasons = ordered["finish_reason"] if "finish_reason" in ordered else [""] * len(ordered)
    for pid, idx, text, reason in zip(
        ordered["prompt_id"], ordered["sample_idx"], ordered["text"], reasons
    ):
        sources, texts, finish = per_prompt.setdefault(pid, ([], [], []))
        sources.append(("sample", int(idx)))
        texts.append(text)
        finish.append(reason)
    for pid, strategy, text in zip(decodes["prompt_id"], decodes["strategy"], decodes["text"]):
        sources, texts, finish = per_prompt.setdefault(pid, ([], [], []))
        sources.append((str(strategy), -1))
        texts.append(text)
        finish.append("")
    return per_prompt


def _work_item(rec, per_prompt: dict[str, tuple[list, list, list]], maps_reference: bool) -> tuple:
    """A prompt as map_prompts takes it: (prompt id, question, sources, texts, the reference
    text where the reference is mapped, the positions cut by the token limit)."""
    sources, texts, finish = per_prompt.get(rec.prompt_id, ([], [], []))
    attached = (rec.reference_text,) if maps_reference and rec.reference_text else ()
    return (rec.prompt_id, rec.question, sources, texts, attached, truncated_positions(finish))


def _log_unreadable(mapper: str, rule, space, failures: int, total: int, cut: int) -> None:
    """How many responses did not read, and what became of them: a warning past half."""
    level = logging.WARNING if total and failures / total > 0.5 else logging.INFO
    fate = (
        "counted as 'no answer'"
        if rule.unreadable == "no_answer" and space.no_answer() is not None
        else "dropped from the latent distribution"
    )
    log.log(
        level,
        "[map] %s: %d of %d responses unreadable (%s%s)%s",
        mapper,
        failures,
        total,
        fate,
        f"; {cut} cut by the token limit" if cut else "",
        ": most answers did not parse, check the model's outputs" if level > logging.INFO else "",
    )
