"""Settings of the services the task mappers share (and the uq and evaluate stages reuse): the
extraction model and the semantic-equivalence judge. `task.extractor` and `task.equivalence` in
the config; a mapper whose settings dataclass has a field `extractor` or `equivalence` gets them
(pipeline.tasks.mapper_config). Fields declared with `how(...)` do not change what is computed
and stay out of the map stage's cache key.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.components.parts import SettingError, how, one_of, pin

# task.extractor.kind: rule-based (offline), the paper's LLM extraction, the generation model
EXTRACTOR_KINDS = ("rule", "llm", "local")


@dataclass
class EquivalenceConfig:
    backend: str = "embedding"  # embedding | nli
    nli_model: str = "microsoft/deberta-large-mnli"
    # the NLI model's hub revision (branch, tag or commit); null: its latest commit. The commit
    # used is recorded in the manifests either way (docs/revisions.md).
    nli_revision: str | None = pin()
    # The NLI model's precision. auto: bfloat16 on a GPU (float16 on one without bf16), float32 on
    # CPU. Half precision moves a pair's probabilities slightly (within 0.05 on the tests' random
    # DeBERTa); the pair cache keys the precision used, so one precision's scores never serve
    # another. float32 computes the same numbers on any machine.
    nli_dtype: str = "auto"
    strict: bool = True
    threshold: float = (
        0.935  # embedding backend: cosine of "question + answer" (see equivalence.py)
    )
    embedder: str = "minilm"  # packaged all-MiniLM-L6-v2

    def __post_init__(self) -> None:
        from pipeline.runtime.devices import DTYPES

        one_of(self, "nli_dtype", DTYPES)


@dataclass
class ExtractorConfig:
    # rule: rule-based (offline default). llm: the paper's extractor: an OpenAI-compatible chat
    # model with the paper's prompt for sets/simplex, KGGen for graphs. local: the paper's prompt
    # answered by the generation model itself.
    kind: str = "rule"
    model: str = "gpt-4.1-mini"
    base_url: str | None = None  # any OpenAI-compatible server, e.g. a `vllm serve` endpoint
    api_key_env: str = how("OPENAI_API_KEY")
    # requests in flight over all prompts of a cell: sized for hosted APIs (a 429 is waited out
    # as its Retry-After asks); lower it for a small self-hosted server
    max_concurrency: int = how(64)
    max_retries: int = how(5)  # per call, exponential backoff from 1 s (timeouts, 429, 5xx)
    timeout: float = how(60.0)  # seconds per request, its body included (a hung body fails then)
    deadline: float | None = how(None)  # seconds for one batch of calls, retries included
    max_response_bytes: int = how(16 * 2**20)  # a bigger response body is refused
    merge_labels: bool = True  # merge labels across samples (how: the mapper's merge_by)
    # graphs with kind=llm: KGGen runs in its own venv (scripts/setup_kggen_venv.sh) through a
    # worker started with this interpreter; null: $KGGEN_PYTHON, else <repo>/.venv-kggen/bin/python,
    # else kg_gen imported in the map stage's process.
    kggen_python: str | None = how(None)
    kggen_cluster: bool = True  # KGGen's clustering of each prompt's entities and edges (paper)
    # Share of model calls (after retries) allowed to fail before the map stage fails instead of
    # writing latents. 0: any failed call fails the stage, nothing is stored, a rerun retries
    # (answered calls are cached). Above 0, responses whose call failed become unparseable
    # latents, stored with the cell: accept losses only knowingly.
    max_failed_share: float = how(0.0)

    def __post_init__(self) -> None:
        from pipeline.clients.llm_client import check_base_url

        try:  # credentials in a URL would land in the cache, the manifests and W&B
            check_base_url(self.base_url)
        except ValueError as exc:
            raise SettingError(str(exc)) from None


@dataclass
class ExtractionSettings:
    """What an extracting g_T reads: the extractor and the label-merging judge (task.extractor,
    task.equivalence)."""

    extractor: ExtractorConfig = field(default_factory=ExtractorConfig)
    equivalence: EquivalenceConfig = field(default_factory=EquivalenceConfig)
    # How labels (answers, entities, relations) of a prompt's responses become one label space:
    # "equivalence": task.equivalence's judge (DeBERTa-MNLI with backend=nli; offline the label
    # rule); "rule": the label rule (pipeline/mapping/labels.py: canonical form or contained
    # words, "pacific" ~ "pacific ocean"); "canonical": equal canonical forms only (case,
    # articles, punctuation). experiment=paper: sets "rule", graphs "canonical" (docs/fidelity.md).
    merge_by: str = "equivalence"

    def __post_init__(self) -> None:
        one_of(self, "merge_by", MERGE_BY)

    @property
    def judges_labels(self) -> bool:
        """Whether merging labels asks task.equivalence's judge (the NLI model, paper config)."""
        return self.extractor.merge_labels and self.merge_by == "equivalence"


MERGE_BY = ("equivalence", "rule", "canonical")
