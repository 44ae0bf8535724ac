"""What a task is made of, registered by name: the g_T mappers, the reference kinds and the
quality metrics. A task is one folder (pipeline/tasks/<name>/, see pipeline.tasks) whose config
(task.yaml, composed as `task=<name>`) names its parts:

    space: sets              # pipeline.latent registry: the maths, the JSON form, the text form
    mapper: sets             # MAPPERS: g_T, question + responses -> latents
    reference: answer_set    # REFERENCES: what a dataset record holds as the truth
    prompt: sets             # pipeline.data.prompts.TASK_PROMPTS: the generation prompt
    decisions: {...}         # extra Bayes decisions under other losses (e.g. F-beta)
    metrics: [hamming, f1]   # METRICS: quality of every decision, each with its direction
    options: {...}           # settings several parts share: each part's field of that name
                             # (mapper, metrics) and the space's keyword read them from here

The stages loop over what the task declares and never branch on a task or space name. Each task
folder's task.py registers its parts (found automatically); a plugin task registers its own from
its module and names them in its config. docs/extending.md walks through it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pipeline.components.parts import NoSettings, option_defaults
from pipeline.components.registry import Registry
from pipeline.data.references import REFERENCES, ReferenceKind

__all__ = [
    "MAPPERS",
    "METRICS",
    "REFERENCES",
    "MapContext",
    "Mapper",
    "MapperInstance",
    "Metric",
    "MetricContext",
    "Reference",
    "ReferenceKind",
    "describe_reference",
    "reference_of",
]


class MapperInstance(Protocol):
    """g_T for one cell: every response of a prompt mapped together, so labels are merged
    across responses. A task whose reference kind is `mapped` gets the reference text as
    `attached=[text]`: it is mapped into the responses' label space without changing it (the
    reference must not shape the clusters it is compared with), its latent last. Optional hooks:
    `prefetch(items)` ((question, texts, attached) of every prompt, as the calls will get them:
    all prompts' model calls queued together first, the per-prompt calls then read the cache),
    `call_stats()` (outside calls made and failed), `close()`, and the attribute
    `parallel_safe` (True: a pure function of its arguments computed in this process, e.g. rule
    reading, so the map stage may map prompts in forked worker processes)."""

    def __call__(self, question: str, texts: list[str], attached: list[str] = ...) -> list[Any]: ...


@dataclass(frozen=True)
class MapContext:
    """What a cell gives every mapper besides its settings: where auxiliary models run, where
    outside calls are cached, and the generation model as an extractor (task.extractor.kind=
    local; built on first call). None of it changes what a mapper computes from its settings
    (the generation model is upstream of the map stage's inputs)."""

    device: str = "auto"
    cache_dir: str = "."
    local_backend: Callable[[], Any] | None = None
    # the task's latent space, as the decide stage builds it (Task.latent_space, pipeline.config): a mapper may read it
    # (its canonical form, a taxonomy it was given). The map stage's key holds task.options.
    space: Any = None


@dataclass(frozen=True)
class Mapper:
    """A registered g_T: `build(settings, context)` makes the cell's mapper from an instance of
    `Config` (its typed settings: `mappers.<name>` in the config, and `task.extractor` /
    `task.equivalence` for fields of those names) and the cell's MapContext. The mapper sees
    nothing else of the config, so its settings are its whole cache slice (`cache_slice`)."""

    build: Callable[[Any, MapContext], MapperInstance]
    Config: type = NoSettings
    description: str = ""
    # What it asks outside models, for `stage=plan` and the missing-input check: the paper's
    # extraction prompt per response with task.extractor.kind=llm ("set", "simplex"), KGGen
    # ("kggen"), or nothing; and whether it clusters whole responses with task.equivalence.
    extraction: str | None = None
    clusters_responses: bool = False


def mapper_option_defaults() -> dict[str, dict[str, Any]]:
    """{mapper name: its own settings' defaults}: the `mappers` node of the config."""
    return option_defaults((n, MAPPERS[n].Config) for n in MAPPERS.names())


@dataclass
class Reference:
    """The truth of one prompt, as metrics see it. `latent` is the reference text mapped by
    the task's g_T when the reference kind is `mapped` (graphs, embeddings), else None."""

    answers: list[list[str]] = field(default_factory=list)
    probabilities: list[float] = field(default_factory=list)
    text: str = ""
    latent: Any = None
    mapped: bool = False  # the task compares with `latent` (None: the reference did not parse)
    question: str = ""  # what was asked: some matching rules read it ("who" -> surnames)
    # judge(question, label, aliases) -> bool for labels the matching rules leave unmatched
    # (evaluation.match.judge; pipeline.evaluation.matching), or None
    judge: Callable[[str, str, Sequence[str]], bool] | None = None
    # the task's latent space (Task.latent_space, pipeline.config): a metric computes d_T with it,
    # `ref.space.distance(action, ref.latent)`
    space: Any = None


@dataclass(frozen=True)
class MetricContext:
    """What a cell gives a text metric besides its settings: where its model runs and where
    models are cached. Neither changes a score."""

    device: str = "auto"
    cache_dir: str = "."
    space: Any = None  # the task's latent space (Task.latent_space, pipeline.config)


@dataclass(frozen=True)
class Metric:
    """A quality metric with its direction and its typed settings (`Config`: `metrics.<name>`
    in the config; the evaluate stage's cache slice takes them from the dataclass), declared
    once. A latent metric is `fn(action, reference, settings) -> value or None` (None: not
    defined for this decision; with `reads="text"` it gets the decision's text instead of its
    latent); a text metric is `scorer(settings, context) -> batch scorer or None` called as
    `scorer(sources=, hypotheses=, references=)` on decision texts (None: no checkpoint)."""

    label: str
    higher_is_better: bool
    fn: Callable[[Any, Reference, Any], float | None] | None = None
    # what `fn` scores: the decision's latent ("latent") or the text the method returns ("text",
    # e.g. exact match, which reads the answer out of the text as the benchmark's scorer does)
    reads: str = "latent"
    scorer: Callable[[Any, MetricContext], Callable[..., Sequence[float]] | None] | None = None
    Config: type = NoSettings
    config_key: str | None = None  # what to set to enable a text metric (logged when unset)


def metric_option_defaults() -> dict[str, dict[str, Any]]:
    """{metric name: its settings' defaults}: the `metrics` node of the config."""
    return option_defaults((n, METRICS[n].Config) for n in METRICS.names())


# where the built-in parts are registered: each task folder's task.py, and the text metrics
# several tasks share
TASK_MODULES = ("pipeline.tasks.*.task", "pipeline.tasks.shared_metrics")
MAPPERS: Registry[Mapper] = Registry("mapper", discover=TASK_MODULES)
METRICS: Registry[Metric] = Registry("metric", discover=TASK_MODULES)


def reference_of(
    record: Mapping[str, Any],
    latent: Any = None,
    mapped: bool = False,
    judge: Callable[[str, str, Sequence[str]], bool] | None = None,
    space: Any = None,
) -> Reference:
    """A DATASET row (dict or namedtuple-like) as the metrics' Reference."""
    get = record.get if isinstance(record, Mapping) else (lambda k, d=None: getattr(record, k, d))
    return Reference(
        answers=[list(a) for a in (get("answers") if get("answers") is not None else [])],
        probabilities=[
            float(p) for p in (get("probabilities") if get("probabilities") is not None else [])
        ],
        text=str(get("reference_text") or ""),
        latent=latent,
        mapped=mapped,
        question=str(get("question") or ""),
        judge=judge,
        space=space,
    )


def describe_reference(record: Mapping[str, Any]) -> str:
    """The truth of a DATASET row as one readable line, whatever the task: each answer with its
    aliases ("Pacific / Pacific Ocean; Atlantic"), with its probability where the record has
    them ("Paris (p=0.70)"), then the reference text."""
    ref = reference_of(record)
    answers = []
    for i, aliases in enumerate(ref.answers):
        answer = " / ".join(map(str, aliases))
        if i < len(ref.probabilities):
            answer += f" (p={ref.probabilities[i]:.2f})"
        answers.append(answer)
    return "\n".join(part for part in ("; ".join(answers), ref.text) if part)
