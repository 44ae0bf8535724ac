"""The uq stage: every estimator of `uq.estimators` (pipeline.uncertainty.estimators: those of
lm-polygraph on statistics built from the cached artifacts, the latent entropy and the Bayes
risk) -> uncertainty.parquet (prompt_id, estimator, value; higher = less confident)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipeline.artifacts.stage import stage
from pipeline.artifacts.store import ArtifactStore
from pipeline.components.parts import cache_slice

if TYPE_CHECKING:
    from pipeline.config import Cell

INPUTS = ("dataset", "samples", "decodes", "ptrue", "latents", "decisions")


def uq_slice(cell: Cell) -> dict:
    # the estimators asked for and their groups' settings, from the settings dataclasses
    return {
        "estimators": list(cell.uq.estimators),
        "groups": {group: cache_slice(s) for group, s in cell.uq.groups.items()},
    }


# v2: SAR's similarity strings shorten a long question instead of losing the text to truncation.
# v3: SAR's relevance per token of the generating model's tokenizer (was per word).
@stage(
    "uq", inputs=INPUTS, outputs=("uncertainty",), config=uq_slice, version=3, parts=("task.space",)
)
def uq_stage(cell: Cell, store: ArtifactStore, key: str) -> dict[str, Any]:
    from pipeline.aux_models import factories as aux_models
    from pipeline.generation.cell import model_tokenizer, served
    from pipeline.uncertainty.estimators import UQContext, artifacts_read, uncertainty_rows

    names = list(cell.uq.estimators)
    # what the asked estimators declare they read, nothing else (lm-polygraph's need the texts)
    artifacts = {name: store.read(name) for name in artifacts_read(names)}
    # a served model's tokenizer is the server's: SAR then weighs words, not tokens (nothing
    # local is loaded or converted for backend=openai)
    context = UQContext(
        cell.device,
        cell.cache_dir,
        tokenizer=None if served(cell) else lambda: model_tokenizer(cell),
        models=aux_models,
    )
    return {"uncertainty": uncertainty_rows(names, artifacts, dict(cell.uq.groups), context)}
