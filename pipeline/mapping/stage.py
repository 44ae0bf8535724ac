"""The map stage for one cell: every response (M samples + each decoding baseline, and the
reference text where the reference is itself text) -> its latent under the task's g_T.

Per prompt, all responses are mapped together so labels are merged across them (the same
cluster, the same canonical answer, the same entity): a decode's latent lives in the samples'
label space. Unparseable responses are kept as rows with parse_ok=False and counted.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import DictConfig

from pipeline.errors import PipelineError
from pipeline.aux_models import build_embedder, build_equivalence
from pipeline.latent import to_json
from pipeline.text import canonical_label

log = logging.getLogger("pipeline")

TEXT_REFERENCE_SPACES = ("graphs", "sphere")  # the reference is text mapped with the same g_T


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


def build_llm_client(cfg: DictConfig):
    from pipeline.mapping.llm_client import LLMClient

    ex = cfg.task.extractor
    return LLMClient(model=ex.model, base_url=ex.base_url, api_key_env=ex.api_key_env,
                     cache_dir=Path(cfg.cache_dir) / "llm", max_workers=ex.max_concurrency,
                     max_retries=ex.max_retries)


def _local_backend(cfg: DictConfig):
    from pipeline.generation.stage import make_backend

    return make_backend(cfg)


def core_answer(text: str, question: str) -> str:
    """The answer a response gives, in canonical form ("The capital is Windhoek." -> "windhoek");
    the whole canonical response when no answer can be extracted (e.g. a refusal)."""
    from pipeline.mapping import extract_answers

    answers = extract_answers(text, question)
    return " / ".join(sorted(answers)) if answers else canonical_label(text)


def answers_as_distribution(text: str, question: str) -> dict[str, float] | None:
    """Fallback simplex g_T: the answers a response states, with equal belief (None if none)."""
    from pipeline.mapping import extract_answers

    # "Sydney, with a population of ..." : a clause after the answer is not another answer
    answers = sorted(a for a in extract_answers(text, question)
                     if a.split()[0] not in _CLAUSE_STARTS)
    return {a: 1.0 / len(answers) for a in answers} if answers else None


_CLAUSE_STARTS = frozenset("with which who whose that where when while in at on for from by as "
                           "approximately about around because since although".split())


def label_clusterer(cfg: DictConfig, equivalence):
    """How labels are merged across a prompt's responses: NLI in the paper configuration; offline,
    a deterministic label rule (pipeline/mapping/labels.py explains why not MiniLM)."""
    if cfg.task.equivalence.backend == "nli":
        return equivalence
    from pipeline.mapping.labels import LabelMerger

    return LabelMerger()


def build_mapper(cfg: DictConfig, equivalence):
    """The task's g_T as a callable (question, texts) -> list of latents (None = unparseable)."""
    space, ex = cfg.task.space, cfg.task.extractor
    label_equivalence = label_clusterer(cfg, equivalence)
    merge = label_equivalence.cluster if ex.merge_labels else None
    if space == "classes":
        nli = cfg.task.equivalence.backend == "nli"

        def prefetch(items: list[tuple[str, list[str]]]) -> None:
            if nli and hasattr(label_equivalence, "prefetch"):  # all prompts' pairs, batched
                label_equivalence.prefetch([(q, [t for t in texts if canonical_label(t)])
                                            for q, texts in items])

        def classes(question: str, texts: list[str]) -> list[Any]:
            # NLI (paper): cluster whole responses. Offline: cluster their core answers.
            keys = [canonical_label(t) if nli else core_answer(t, question) for t in texts]
            keep = [i for i, k in enumerate(keys) if k]
            ids = (label_equivalence.cluster(question, [texts[i] if nli else keys[i] for i in keep])
                   if keep else [])
            rep: dict[int, str] = {}
            for i, c in zip(keep, ids):
                rep.setdefault(c, keys[i])  # a class is named by its first member
            out: list[Any] = [None] * len(texts)
            for i, c in zip(keep, ids):
                out[i] = rep[c]
            return out
        classes.prefetch = prefetch  # type: ignore[attr-defined]
        return classes
    if space in ("sets", "sets-fbeta"):
        from pipeline.mapping.sets import SetExtractor

        method = {"rule": "rule", "llm": "llm", "local": "local"}[ex.kind]
        client = build_llm_client(cfg) if method == "llm" else None
        extractor = SetExtractor(method=method, equivalence=merge, client=client,
                                 backend=_local_backend(cfg) if method == "local" else None)

        def sets(question: str, texts: list[str]) -> list[Any]:
            return extractor.map_prompt(question, texts)
        sets.call_stats = lambda: client.stats if client else None  # type: ignore[attr-defined]
        return sets
    if space == "graphs":
        from pipeline.mapping.graphs import GraphExtractor

        method = {"rule": "rule", "llm": "kggen", "local": "local"}[ex.kind]
        extractor = GraphExtractor(method=method, model=ex.model, api_base=ex.base_url,
                                   api_key_env=ex.api_key_env, kggen_python=ex.kggen_python,
                                   kggen_cluster=ex.kggen_cluster, cache_dir=str(Path(cfg.cache_dir) / "kggen"),
                                   max_concurrency=ex.max_concurrency,
                                   equivalence=merge,
                                   backend=_local_backend(cfg) if method == "local" else None)
        def graphs(question: str, texts: list[str]) -> list[Any]:
            return extractor.map_prompt(texts, context=question)
        graphs.close = extractor.close  # type: ignore[attr-defined]  # stops KGGen's worker
        graphs.call_stats = lambda: extractor.kggen.stats if extractor.kggen else None  # type: ignore[attr-defined]
        return graphs
    if space == "sphere":
        embedder = build_embedder(cfg.task.embedder, cfg)

        def sphere(question: str, texts: list[str]) -> list[Any]:
            keep = [i for i, t in enumerate(texts) if t.strip()]
            vectors = embedder.embed([texts[i] for i in keep]) if keep else []
            out: list[Any] = [None] * len(texts)
            for i, v in zip(keep, vectors):
                out[i] = [float(x) for x in v]
            return out
        return sphere
    if space == "simplex":
        from pipeline.mapping.simplex import SimplexMapper

        if ex.kind == "local":
            raise ValueError("task.extractor.kind=local is not available for the simplex task; "
                             "use rule (parse the JSON answer) or llm")
        from pipeline.mapping.simplex import merge_distributions

        client = build_llm_client(cfg) if ex.kind == "llm" else None
        mapper = SimplexMapper(method=ex.kind, equivalence=merge, client=client,
                               renormalise=cfg.task.renormalize)

        def simplex(question: str, texts: list[str]) -> list[Any]:
            if not cfg.task.simplex_answers_fallback:
                return mapper.map_prompt(question, texts)
            dists = mapper.parse([question] * len(texts), texts)
            dists = [d if d is not None else answers_as_distribution(t, question)
                     for d, t in zip(dists, texts)]
            return merge_distributions(question, dists, merge, cfg.task.renormalize)
        simplex.call_stats = lambda: client.stats if client else None  # type: ignore[attr-defined]
        return simplex
    raise ValueError(f"no g_T for task.space={space!r}")


def map_cell(cfg: DictConfig, dataset: pd.DataFrame, samples: pd.DataFrame,
             decodes: pd.DataFrame) -> pd.DataFrame:
    space = cfg.task.space
    codec_space = "sets" if space == "sets-fbeta" else space
    mapper = build_mapper(cfg, build_equivalence(cfg))
    by_prompt_samples = {pid: g.sort_values("sample_idx") for pid, g in samples.groupby("prompt_id")}
    by_prompt_decodes = {pid: g for pid, g in decodes.groupby("prompt_id")}
    if hasattr(mapper, "prefetch"):
        mapper.prefetch([(rec.question, list(by_prompt_samples.get(rec.prompt_id, samples.iloc[:0])["text"])
                          + list(by_prompt_decodes.get(rec.prompt_id, decodes.iloc[:0])["text"]))
                         for rec in dataset.itertuples()])
    rows, failures, total = [], 0, 0
    try:
        for rec in dataset.itertuples():
            s = by_prompt_samples.get(rec.prompt_id, samples.iloc[:0])
            d = by_prompt_decodes.get(rec.prompt_id, decodes.iloc[:0])
            sources = ([("sample", int(i)) for i in s["sample_idx"]]
                       + [(str(k), -1) for k in d["strategy"]])
            texts = list(s["text"]) + list(d["text"])
            if space in TEXT_REFERENCE_SPACES and rec.reference_text:
                sources.append(("reference", -1))
                texts.append(rec.reference_text)
            latents = mapper(rec.question, texts) if texts else []
            for (source, idx), latent in zip(sources, latents):
                ok = latent is not None
                rows.append({"prompt_id": rec.prompt_id, "source": source, "sample_idx": idx,
                             "latent": to_json(codec_space, latent) if ok else "null",
                             "parse_ok": ok})
                total += 1
                failures += not ok
        check_call_failures(cfg, mapper)
    finally:
        getattr(mapper, "close", lambda: None)()
    level = logging.WARNING if total and failures / total > 0.5 else logging.INFO
    log.log(level, "[map] %s: %d of %d responses unparseable (dropped from the latent "
            "distribution)%s", space, failures, total,
            ": most answers did not parse, check the model's outputs" if level > logging.INFO
            else "")
    return pd.DataFrame(rows, columns=["prompt_id", "source", "sample_idx", "latent", "parse_ok"])
