"""Pieces the task mappers (pipeline/tasks/) share: the LLM client, the local extractor
backend, how labels are merged across a prompt's responses, and the offline answer readers."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from pipeline.generation.cell import make_backend
from pipeline.mapping import extract_answers
from pipeline.mapping.labels import LabelMerger
from pipeline.mapping.llm_client import LLMClient
from pipeline.text import canonical_label


def build_llm_client(cfg: DictConfig):
    """The OpenAI-compatible client of task.extractor (cached on disk under cache_dir/llm)."""
    ex = cfg.task.extractor
    return LLMClient(model=ex.model, base_url=ex.base_url, api_key_env=ex.api_key_env,
                     cache_dir=Path(cfg.cache_dir) / "llm", max_workers=ex.max_concurrency,
                     max_retries=ex.max_retries)


def local_backend(cfg: DictConfig):
    """The generation model itself as an extractor (task.extractor.kind=local)."""
    return make_backend(cfg)


def label_clusterer(cfg: DictConfig):
    """How labels are merged across a prompt's responses: NLI in the paper configuration;
    offline, a deterministic label rule (pipeline/mapping/labels.py explains why not MiniLM)."""
    if cfg.task.equivalence.backend == "nli":
        from pipeline.aux_models import build_equivalence

        return build_equivalence(cfg)

    return LabelMerger()


def label_merge(cfg: DictConfig):
    """The `cluster(question, labels)` used to merge labels, or None (task.extractor.merge_labels)."""
    return label_clusterer(cfg).cluster if cfg.task.extractor.merge_labels else None


def core_answer(text: str, question: str) -> str:
    """The answer a response gives, in canonical form ("The capital is Windhoek." -> "windhoek");
    the whole canonical response when no answer can be extracted (e.g. a refusal)."""
    answers = extract_answers(text, question)
    return " / ".join(sorted(answers)) if answers else canonical_label(text)


_CLAUSE_STARTS = frozenset("with which who whose that where when while in at on for from by as "
                           "approximately about around because since although".split())


def answers_as_distribution(text: str, question: str) -> dict[str, float] | None:
    """Fallback simplex g_T: the answers a response states, with equal belief (None if none)."""
    # "Sydney, with a population of ..." : a clause after the answer is not another answer
    answers = sorted(a for a in extract_answers(text, question)
                     if a.split()[0] not in _CLAUSE_STARTS)
    return {a: 1.0 / len(answers) for a in answers} if answers else None
