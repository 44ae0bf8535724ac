"""Ambiguous QA (MAQA*): answer distributions on the probability simplex, KL(p* || prediction)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import partial
from typing import Any

from pipeline.components.parts import SettingError, one_of
from pipeline.data.prompts import SIMPLEX_EXTRACTION_PROMPTS
from pipeline.data.records import normalise_probabilities
from pipeline.evaluation.matching import answer_names, remap_distribution
from pipeline.mapping.extractor import EXTRACTIONS, Extraction, extraction_prompt
from pipeline.mapping.settings import ExtractionSettings
from pipeline.runtime.errors import ConfigError
from pipeline.tasks.contract import (
    MAPPERS,
    METRICS,
    REFERENCES,
    Mapper,
    Metric,
    Reference,
    ReferenceKind,
)
from pipeline.tasks.simplex.metrics import kl_divergence
from pipeline.tasks.simplex.reading import SimplexMapper, merge_distributions


@dataclass
class SimplexSettings(ExtractionSettings):
    renormalize: bool = False  # renormalise parsed distributions (the paper's prompt: do not)
    # Read a response that states answers but no probabilities as uniform belief over them (off =
    # the paper: such responses are unparseable and dropped). The default experiment turns it on:
    # SmolLM2-135M never writes the answer/probability format.
    answers_fallback: bool = False
    # The LLM extraction prompt's example answer: "restored" (the paper's line cut at "%" in its
    # LaTeX source, completed from the JSON after it) or "verbatim" (as published, cut)
    prompt_example: str = "restored"

    def __post_init__(self) -> None:
        super().__post_init__()
        one_of(self, "prompt_example", tuple(SIMPLEX_EXTRACTION_PROMPTS))


def build_simplex(settings: SimplexSettings, context) -> Any:
    """Simplex g_T: the answer/probability pairs a response states (rule parser or the paper's
    LLM extraction), answers merged across responses with their probabilities summed."""
    from pipeline.clients.llm_client import build_llm_client
    from pipeline.tasks.builders import answers_as_distribution, label_merge

    kind = settings.extractor.kind
    if kind == "local":
        raise ConfigError(
            "task.extractor.kind=local is not available for the simplex task; "
            "use rule (parse the JSON answer) or llm"
        )
    client = build_llm_client(settings.extractor, context.cache_dir) if kind == "llm" else None
    merge = label_merge(settings, context)
    mapper = SimplexMapper(
        method=kind,
        equivalence=merge,
        client=client,
        renormalise=settings.renormalize,
        prompt_example=settings.prompt_example,
    )

    def simplex(question: str, texts: list[str]) -> list[Any]:
        if not settings.answers_fallback:
            return mapper.map_prompt(question, texts)
        dists = mapper.parse([question] * len(texts), texts)
        dists = [
            d if d is not None else answers_as_distribution(t, question)
            for d, t in zip(dists, texts)
        ]
        return merge_distributions(question, dists, merge, settings.renormalize)

    def prefetch(items: list[tuple[str, list[str], list[str]]]) -> None:
        """Every extraction call of the cell through one pool (see the sets mapper)."""
        if client is not None:
            client.complete(
                list(
                    dict.fromkeys(
                        extraction_prompt(
                            "answer_distribution", q, t, example=settings.prompt_example
                        )
                        for q, texts, attached in items
                        for t in (*texts, *attached)
                    )
                )
            )

    simplex.prefetch = prefetch  # type: ignore[attr-defined]
    simplex.call_stats = lambda: client.stats if client else None  # type: ignore[attr-defined]
    return simplex


MAPPERS.add(
    "simplex",
    Mapper(
        build_simplex,
        SimplexSettings,
        extraction="answer_distribution",
        description="the answers a response states with their probabilities",
    ),
)
# with task.extractor.kind=llm: the paper's simplex extraction prompt, one per response
EXTRACTIONS.add(
    "answer_distribution", Extraction(prompt=partial(extraction_prompt, "answer_distribution"))
)


def distribution_from_user(raw: Any) -> dict[str, Any]:
    """{"answer": probability, ...} | [{"answer": ..., "probability": ...}, ...] | that as JSON."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raise ValueError(
                "is a string that is not a JSON object; give the true distribution "
                'as {"answer": probability, ...}'
            ) from None
    if isinstance(raw, (list, tuple)) and all(isinstance(r, dict) and "answer" in r for r in raw):
        raw = {str(r["answer"]): r.get("probability", r.get("p")) for r in raw}
    if not isinstance(raw, dict) or not raw:
        raise ValueError(f'must be a non-empty object {{"answer": probability}}, got {raw!r:.80}')
    probs = []
    for label, p in raw.items():
        if not str(label).strip():
            raise ValueError(
                f"has an empty answer label (probability {p!r}); every answer needs its name"
            )
        try:
            p = float(p)
        except (TypeError, ValueError):
            raise ValueError(f"probability of {label!r} is {p!r}, not a number") from None
        if not math.isfinite(p) or p < 0:
            raise ValueError(
                f"probability of {label!r} is {p}; probabilities must be finite and >= 0"
            )
        probs.append(p)
    if math.fsum(probs) <= 0:
        raise ValueError("probabilities sum to 0; cannot form a distribution")
    probs, _ = normalise_probabilities(probs, None, len(probs), "the distribution")  # as MAQA*'s
    return {
        "answers": [[str(label)] for label in raw],
        "probabilities": probs,
        "reference_text": "",
    }


REFERENCES.add(
    "distribution",
    ReferenceKind(
        check=lambda r: None if r["probabilities"] else "needs probabilities (p*)",
        from_user=distribution_from_user,
        present=lambda r: len(r["probabilities"]) > 0,
        description="answers with their true probabilities p*",
    ),
)


@dataclass
class KLSettings:
    # smoothing of the prediction (pred + eps) / (1 + K eps): a reference answer it misses
    # costs log(p* / eps') nats instead of infinity (about 13.8 at 1e-6)
    eps: float = 1e-6

    def __post_init__(self) -> None:
        if not self.eps > 0:
            raise SettingError(f"eps={self.eps!r}: must be > 0")


def kl(action: Any, ref: Reference, settings: KLSettings) -> float | None:
    """KL(p* || prediction), the prediction's answers renamed to the reference answers they name
    (pipeline.evaluation.matching, the same reading as the set metrics)."""

    if action is None:
        return None
    p_star: dict[str, float] = {}
    for name, p in zip(answer_names(ref.answers), ref.probabilities):
        if name is not None:
            p_star[name] = p_star.get(name, 0.0) + float(p)
    pred = remap_distribution(action, ref.answers, ref.question, ref.judge)
    return kl_divergence(p_star, pred, eps=settings.eps)


METRICS.add("kl", Metric("KL", higher_is_better=False, fn=kl, Config=KLSettings))
