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
from typing import Any

import pandas as pd
from omegaconf import DictConfig

from pipeline.errors import PipelineError
from pipeline.generation.cell import make_backend
from pipeline.latent import space_class
from pipeline.parts import cache_slice, task_options
from pipeline.stage import stage
from pipeline.store import ArtifactStore, with_file_digests
from pipeline.tasks.contract import (
    MAPPERS,
    REFERENCES,
    MapContext,
    mapper_config,
    space_settings,
    task_space,
)

log = logging.getLogger("pipeline")


class ExtractionCallsFailed(PipelineError, RuntimeError):
    """More of the map stage's model calls failed than task.extractor.max_failed_share allows."""


def check_call_failures(cfg: DictConfig, mapper) -> None:
    """Fail the stage (so nothing is stored) when outside calls failed beyond the allowed share;
    parse failures of answers that did arrive are not call failures and stay counted."""
    stats = getattr(mapper, "call_stats", lambda: None)()
    if stats is None or not stats.requests:
        return
    failed = stats.failures if hasattr(stats, "failures") else stats.api_failures
    share = failed / stats.requests
    if failed and share > float(cfg.task.extractor.max_failed_share):
        raise ExtractionCallsFailed(
            f"{failed} of {stats.requests} calls to {cfg.task.extractor.model} failed after retries "
            f"({share:.0%} > task.extractor.max_failed_share={cfg.task.extractor.max_failed_share}); "
            f"nothing was stored, answered calls are cached: rerun once the endpoint works. "
            f"Last error: {stats.last_error}")


def map_slice(cfg: DictConfig) -> dict:
    """The mapper and its typed settings (pipeline.tasks.mapper_config; the fields declared with
    `how(...)` left out: how calls are made, not what they answer); the space options that decide
    the stored latents' canonical form; whether the reference goes through g_T too."""
    space_options = space_settings(cfg)
    canonical = {k: space_options[k] for k in space_class(cfg.task.space).canonical_options
                 if k in space_options}
    out = {"mapper": cfg.task.mapper, "settings": cache_slice(mapper_config(cfg)),
           "canonical_form": with_file_digests(canonical), "reference_mapped": REFERENCES[cfg.task.reference].mapped}
    if options := task_options(cfg):  # the mapper sees the space, which may read any of them
        out["task_options"] = with_file_digests(options)
    return out


def map_context(cfg: DictConfig, space=None) -> MapContext:
    """The cell's device, cache folder, generation model (for task.extractor.kind=local) and the
    task's space (built here unless the caller has it)."""
    return MapContext(device=str(cfg.device), cache_dir=str(cfg.cache_dir),
                      local_backend=lambda: make_backend(cfg),
                      space=task_space(cfg) if space is None else space)


# v2: KGGen through its own venv with KGGen's clustering. v3: rule-based set, triple and
# number extraction rebuilt on labelled corpora (docs/extraction.md). v4: the reference is
# placed into the responses' clusters without shaping them; graphs undirected. v5: labels keep
# what makes a name that name (pipeline.text.canonical_label: "C++", "Vitamin A"), options the
# question lists are answers, a class is named by its most frequent member's answer.
# v6: the local triple prompt asks for "none" when a text states no fact (an empty reply is a
# failed call now, retried and never cached).
@stage("map", inputs=("dataset", "samples", "decodes"), outputs=("latents",), config=map_slice,
       version=7)
def map_stage(cfg: DictConfig, store: ArtifactStore, key: str) -> dict[str, Any]:
    return {"latents": map_cell(cfg, store.read("dataset"), store.read("samples"),
                                store.read("decodes"))}


# Below this many prompts the forked workers cost more than they save (measured: ~0.1 s to start).
PARALLEL_MIN_PROMPTS = 512
_FORKED: tuple[Any, Any] | None = None  # (mapper, space) a forked worker inherits


def map_prompts(mapper, space, work: list[tuple]):
    """Each prompt's latent rows, in order: in this process, or, for a `parallel_safe` mapper
    over many prompts, split over forked worker processes (`pipeline.devices.cpu_threads()`), each
    with the parent's mapper; the rows are the same either way."""
    from pipeline.devices import forked_pool, forked_workers

    workers = forked_workers(len(work) // (PARALLEL_MIN_PROMPTS // 2))
    if not (getattr(mapper, "parallel_safe", False) and workers > 1
            and len(work) >= PARALLEL_MIN_PROMPTS):
        return [prompt_rows(mapper, space, item) for item in work]
    global _FORKED
    _FORKED = (mapper, space)
    try:
        step = -(-len(work) // (4 * workers))  # a few chunks per worker: an even finish
        chunks = [work[i:i + step] for i in range(0, len(work), step)]
        with forked_pool(workers) as pool:
            return [rows for chunk in pool.map(_forked_chunk, chunks) for rows in chunk]
    finally:
        _FORKED = None


def _forked_chunk(chunk: list[tuple]) -> list[list[dict]]:
    mapper, space = _FORKED
    return [prompt_rows(mapper, space, item) for item in chunk]


def prompt_rows(mapper, space, item: tuple) -> list[dict]:
    """One prompt's rows of latents.parquet: its samples', decodes' and attached reference's."""
    prompt_id, question, sources, texts, attached = item
    if attached:  # the reference is placed into the responses' clusters
        latents = mapper(question, texts, attached=list(attached))
        sources = [*sources, ("reference", -1)]
    else:
        latents = mapper(question, texts) if texts else []
    return [{"prompt_id": prompt_id, "source": source, "sample_idx": idx,
             "latent": space.to_json(latent) if latent is not None else "null",
             "parse_ok": latent is not None}
            for (source, idx), latent in zip(sources, latents)]


def map_cell(cfg: DictConfig, dataset: pd.DataFrame, samples: pd.DataFrame,
             decodes: pd.DataFrame) -> pd.DataFrame:
    from pipeline.text import clean_text

    # every mapper reads the text as a reader sees it: "Paris\u200b" is "Paris" (pipeline/text.py)
    dataset = dataset.assign(question=dataset["question"].map(clean_text),
                             reference_text=dataset["reference_text"].map(clean_text))
    samples = samples.assign(text=samples["text"].map(clean_text))
    decodes = decodes.assign(text=decodes["text"].map(clean_text))
    space = task_space(cfg)
    maps_reference = REFERENCES[cfg.task.reference].mapped
    mapper = MAPPERS[cfg.task.mapper].build(mapper_config(cfg), map_context(cfg, space))
    # Each prompt's (sources, texts): samples by sample_idx, then decodes in artifact order.
    # Plain lists in one pass (a DataFrame per prompt cost ~0.6 ms each).
    per_prompt: dict[str, tuple[list, list]] = {}
    ordered = samples.sort_values(["prompt_id", "sample_idx"], kind="stable")
    for pid, idx, text in zip(ordered["prompt_id"], ordered["sample_idx"], ordered["text"]):
        sources, texts = per_prompt.setdefault(pid, ([], []))
        sources.append(("sample", int(idx)))
        texts.append(text)
    for pid, strategy, text in zip(decodes["prompt_id"], decodes["strategy"], decodes["text"]):
        sources, texts = per_prompt.setdefault(pid, ([], []))
        sources.append((str(strategy), -1))
        texts.append(text)
    rows: list[dict] = []
    try:  # the mapper is closed (KGGen's worker stopped) however this ends
        work = []
        for rec in dataset.itertuples():
            sources, texts = per_prompt.get(rec.prompt_id, ([], []))
            attached = (rec.reference_text,) if maps_reference and rec.reference_text else ()
            work.append((rec.prompt_id, rec.question, sources, texts, attached))
        if hasattr(mapper, "prefetch"):  # every text the loop below maps, references included
            mapper.prefetch([(question, list(texts), list(attached))
                             for _, question, _, texts, attached in work])
        for prompt_rows in map_prompts(mapper, space, work):
            rows += prompt_rows
        total = len(rows)
        failures = sum(not row["parse_ok"] for row in rows)
        check_call_failures(cfg, mapper)
    finally:
        getattr(mapper, "close", lambda: None)()
    level = logging.WARNING if total and failures / total > 0.5 else logging.INFO
    log.log(level, "[map] %s: %d of %d responses unparseable (dropped from the latent "
            "distribution)%s", cfg.task.mapper, failures, total,
            ": most answers did not parse, check the model's outputs" if level > logging.INFO
            else "")
    return pd.DataFrame(rows, columns=["prompt_id", "source", "sample_idx", "latent", "parse_ok"])
