"""Summarisation (CNN/DM): knowledge graphs of (head, relation, tail) triples."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.mapping.extractor import EXTRACTIONS, Extraction
from pipeline.mapping.settings import ExtractionSettings
from pipeline.tasks.contract import MAPPERS, REFERENCES, Mapper, ReferenceKind
from pipeline.tasks.graphs.reading import GraphExtractor


def build_graphs(settings: ExtractionSettings, context) -> Any:
    """Graph g_T: KGGen with its own clustering (extractor.kind=llm, the paper), the generation
    model (local) or the rule-based triple reader (offline)."""
    from pipeline.tasks.builders import label_merge, local_backend

    ex = settings.extractor
    method = {"rule": "rule", "llm": "kggen", "local": "local"}[ex.kind]
    extractor = GraphExtractor(
        method=method,
        model=ex.model,
        api_base=ex.base_url,
        api_key_env=ex.api_key_env,
        kggen_python=ex.kggen_python,
        kggen_cluster=ex.kggen_cluster,
        cache_dir=str(Path(context.cache_dir) / "kggen"),
        max_concurrency=ex.max_concurrency,
        equivalence=label_merge(settings, context),
        backend=local_backend(context) if method == "local" else None,
    )

    def graphs(question: str, texts: list[str], attached: list[str] = ()) -> list[Any]:
        return extractor.map_prompt(texts, context=question, attached=attached)

    graphs.prefetch = extractor.prefetch  # type: ignore[attr-defined]
    graphs.close = extractor.close  # type: ignore[attr-defined]  # stops KGGen's worker
    graphs.call_stats = lambda: extractor.kggen.stats if extractor.kggen else None  # type: ignore[attr-defined]
    return graphs


MAPPERS.add(
    "graphs",
    Mapper(
        build_graphs,
        ExtractionSettings,
        extraction="kggen",
        description="the relations a text states, as a set of triples",
    ),
)


def kggen_python(extractor: Any) -> str:
    """The interpreter KGGen runs under: task.extractor.kggen_python, else $KGGEN_PYTHON or the
    checkout's .venv-kggen (`kggen.default_kggen_python`)."""
    from pipeline.tasks.graphs.kggen import default_kggen_python

    return extractor.kggen_python or str(default_kggen_python())


# with task.extractor.kind=llm: KGGen writes its own prompts (entities, then relations, per
# response; then its clustering), in its own environment
EXTRACTIONS.add(
    "kggen",
    Extraction(calls=2, label="KGGen", environment=kggen_python, environment_fix="make kggen-env"),
)


def text_from_user(raw: Any) -> dict[str, Any]:
    """A reference text | a list of texts (the first non-empty one is used)."""
    if isinstance(raw, (list, tuple)):
        raw = next((r for r in raw if isinstance(r, str) and r.strip()), "")
    return {"answers": [], "probabilities": [], "reference_text": str(raw).strip()}


REFERENCES.add(
    "text",
    ReferenceKind(
        check=lambda r: None if r["reference_text"].strip() else "needs a reference_text",
        from_user=text_from_user,
        present=lambda r: bool(r["reference_text"].strip()),
        mapped=True,
        description="a reference text, mapped by the task's g_T like a response",
    ),
)
