"""The checks of a composed config that Hydra's types cannot make (ranges, enumerations, the
parts' settings, credentials in URLs, revisions): `validate(cfg)` lists every problem in one
ConfigError, in config terms, before any work.
"""

from __future__ import annotations

import math
import re
from dataclasses import fields

from pipeline.components.methods import METHODS, methods
from pipeline.components.registry import load_plugins
from pipeline.config.resolve import group_config, mapper_config, metric_config, option_readers
from pipeline.config.structured import Config
from pipeline.data.prompts import TASK_PROMPTS, is_prompt
from pipeline.generation.base import BACKENDS
from pipeline.latent import available_spaces
from pipeline.mapping.judges import JUDGES
from pipeline.mapping.settings import EXTRACTOR_KINDS
from pipeline.runtime.errors import ConfigError
from pipeline.tasks.contract import MAPPERS, METRICS, REFERENCES

STAGES = ("generate", "map", "decide", "uq", "evaluate", "report", "all", "plan")

# Model weights' number formats (the transformers backend's; vLLM takes the same names).
MODEL_DTYPES = ("bfloat16", "float16", "float32", "float64")
_NAME = r"[A-Za-z0-9][A-Za-z0-9._+-]*"  # one path component, never "..": names become folders
_DEVICE = r"auto|cpu|mps|(cuda|xpu|hpu)(:[0-9]+)?"
# (key, regex the whole value must match, what it must be)
PATTERN_RULES = [
    ("model.name", _NAME, "a plain name (letters, digits, . _ + -): it names the output folder"),
    ("dataset.name", _NAME, "a plain name (letters, digits, . _ + -): it names the output folder"),
    ("experiment", _NAME, "a plain name (letters, digits, . _ + -): it names the output folder"),
    ("model.dtype", "|".join(MODEL_DTYPES), "one of " + ", ".join(MODEL_DTYPES)),
    ("backend.device", _DEVICE, "auto, cpu, mps or cuda[:N] (xpu, hpu)"),
    ("device", _DEVICE, "auto, cpu, mps or cuda[:N] (xpu, hpu)"),
]
# (key, accepts the value, what it must be): every numeric setting, checked before any work.
VALUE_RULES = [
    ("generation.n_samples", lambda v: v >= 1, "an integer >= 1 (samples per prompt)"),
    ("generation.beam_width", lambda v: v >= 1, "an integer >= 1"),
    ("generation.shard_size", lambda v: v >= 1, "an integer >= 1 (prompts per shard)"),
    ("generation.contrastive_alpha", lambda v: 0 <= v <= 1, "in [0, 1]"),
    ("generation.contrastive_top_k", lambda v: v >= 1, "an integer >= 1"),
    ("generation.transformers_batch_size", lambda v: v >= 1, "an integer >= 1"),
    ("dataset.limit", lambda v: v is None or v >= 1, "null (all prompts) or an integer >= 1"),
    ("dataset.max_new_tokens", lambda v: v >= 1, "an integer >= 1"),
    ("model.temperature", lambda v: v is None or v > 0, "null (the model's default) or > 0"),
    ("model.top_p", lambda v: v is None or 0 < v <= 1, "null (the model's default) or in (0, 1]"),
    ("model.top_k", lambda v: v is None or v >= 0, "null (the model's default) or >= 0"),
    ("model.gpus", lambda v: v >= 0, "an integer >= 0"),
    ("model.tensor_parallel_size", lambda v: v is None or v >= 1, "null (= gpus) or >= 1"),
    ("backend.batch_size", lambda v: v >= 1, "an integer >= 1"),
    ("backend.num_threads", lambda v: v is None or v >= 1, "null (the job's CPUs) or >= 1"),
    ("backend.gpu_memory_utilization", lambda v: 0 < v <= 1, "in (0, 1]"),
    ("backend.kv_cache_memory_bytes", lambda v: v is None or v > 0, "null or > 0 bytes"),
    ("backend.max_model_len", lambda v: v is None or v >= 1, "null or an integer >= 1"),
    ("task.equivalence.threshold", lambda v: -1 <= v <= 1, "a cosine similarity in [-1, 1]"),
    ("task.extractor.max_concurrency", lambda v: v >= 1, "an integer >= 1"),
    ("task.extractor.max_retries", lambda v: v >= 0, "an integer >= 0"),
    ("task.extractor.max_failed_share", lambda v: 0 <= v <= 1, "a share in [0, 1]"),
    ("task.extractor.timeout", lambda v: v > 0, "seconds > 0"),
    ("task.extractor.deadline", lambda v: v is None or v > 0, "null or seconds > 0"),
    ("task.extractor.max_response_bytes", lambda v: v >= 1, "an integer >= 1 (bytes)"),
    ("backend.timeout", lambda v: v > 0, "seconds > 0"),
    ("backend.deadline", lambda v: v is None or v > 0, "null or seconds > 0"),
    ("backend.max_response_bytes", lambda v: v >= 1, "an integer >= 1 (bytes)"),
    ("evaluation.max_rejection", lambda v: 0 < v <= 1, "in (0, 1] (0.5 = the paper's 50 %)"),
    ("evaluation.n_bootstrap", lambda v: v >= 0, "an integer >= 0 (0: no intervals)"),
    ("evaluation.ci_alpha", lambda v: 0 < v < 1, "in (0, 1)"),
    ("wandb.max_prompts_logged", lambda v: v is None or v >= 0, "null (every prompt) or >= 0"),
]
# (key, allowed values) of the enumerations.
CHOICES = [
    ("stage", STAGES),
    ("task.equivalence.backend", ("embedding", "nli")),
    ("task.extractor.kind", EXTRACTOR_KINDS),
    ("evaluation.ties", ("average", "polygraph")),
    ("evaluation.match_judge", JUDGES),
    ("generation.beam_backend", ("transformers", "vllm")),
    ("generation.ptrue_asks", ("prompt", "question")),
    ("reading.unreadable", ("discard", "no_answer")),
    ("reading.truncated", ("read", "unreadable")),
]


def registry_choices() -> tuple[list, list]:
    """(key, allowed) pairs read from the registries: what is registered is selectable."""
    from pipeline.uncertainty.estimators import ESTIMATORS

    single = [
        ("task.space", tuple(available_spaces())),
        ("task.mapper", MAPPERS.names()),
        ("task.reference", REFERENCES.names()),
        ("backend.name", BACKENDS.names()),
    ]
    lists = [
        ("task.metrics", METRICS.names()),
        ("uq.estimators", ESTIMATORS.names()),
        ("generation.strategies", methods("decode")),
        ("evaluation.targets", METHODS.names()),
    ]
    return single, lists


def part_setting_problems(cfg) -> list[str]:
    """Every `mappers.<name>` / `metrics.<name>` / `uq.groups.<name>` entry names a registered
    part and composes into its typed settings (the cell's own parts too, so a wrong shared
    setting is reported here)."""
    from omegaconf import OmegaConf

    from pipeline.uncertainty.estimators import ESTIMATORS, GROUPS, groups_of

    problems = []
    for node, registry, settings_of, used in (
        ("mappers", MAPPERS, mapper_config, [cfg.task.mapper]),
        ("metrics", METRICS, metric_config, list(cfg.task.metrics)),
        (
            "uq.groups",
            GROUPS,
            group_config,
            groups_of([e for e in cfg.uq.estimators if e in ESTIMATORS]),
        ),
    ):
        for name in sorted({*(OmegaConf.select(cfg, node) or {}), *used}):
            if name not in registry:
                problems.append(
                    f"{node}.{name}: no {registry.family} {name!r}; registered: "
                    f"{', '.join(registry.names())}"
                )
                continue
            try:
                settings_of(cfg, name)
            except ConfigError as exc:
                problems.append(str(exc))
    return problems


def task_option_problems(cfg) -> list[str]:
    """Every `task.options` key is read by some part of the task (a typo would be ignored)."""
    try:
        readers = option_readers(cfg)
    except ConfigError:  # an unknown space, mapper or metric: reported on its own
        return []
    return [
        f"task.options.{key}: no part of task {cfg.task.name} reads it (its space "
        f"{cfg.task.space}, mapper {cfg.task.mapper}, metrics {', '.join(cfg.task.metrics)}): "
        "check the spelling, or set the part's own setting"
        for key, parts in readers.items()
        if not parts
    ]


def config_problem(cfg) -> tuple[str, list[str]] | None:
    """(the one-line problem, every credential found) for a composed config holding URL
    credentials in a string setting as written (before interpolation: a key read from the
    environment by ${oc.env:...} is not in the saved files), or None."""
    from omegaconf import OmegaConf

    from pipeline.runtime.secrets import settings_problem

    return settings_problem(OmegaConf.to_container(cfg, resolve=False))


def validate(cfg) -> None:
    """Every value Hydra's types cannot check (ranges, enumerations), before any work is done;
    one ConfigError lists all problems in config terms. A value that cannot be resolved (an
    interpolation of a missing environment variable or key) is one ConfigError too."""
    from omegaconf.errors import InterpolationResolutionError, UnsupportedInterpolationType

    try:
        _validate(cfg)
    except (InterpolationResolutionError, UnsupportedInterpolationType) as exc:
        key = getattr(exc, "full_key", None) or "a setting"
        reason = " ".join(str(exc).split("\n")[0].split())
        raise ConfigError(
            f"invalid configuration: {key} cannot be resolved ({reason}); give it "
            "a value, or export the variable it reads"
        ) from None


def _validate(cfg) -> None:
    from omegaconf import OmegaConf

    load_plugins(cfg.get("plugins") or ())
    problems = []
    single, lists = registry_choices()
    for key, allowed in CHOICES + single:
        value = OmegaConf.select(cfg, key)
        if value not in allowed:
            problems.append(f"{key}={value!r}: choose one of {', '.join(allowed)}")

    if not is_prompt(cfg.task.prompt):
        problems.append(
            f"task.prompt={cfg.task.prompt!r}: name one of {', '.join(TASK_PROMPTS)} "
            "or give a template with a {question} slot"
        )
    for name, spec in (OmegaConf.to_container(cfg.task.decisions, resolve=True) or {}).items():
        space = (spec or {}).get("space") if isinstance(spec, dict) else None
        if space not in single[0][1]:
            problems.append(
                f"task.decisions.{name}.space={space!r}: choose one of {', '.join(single[0][1])}"
            )
    problems += part_setting_problems(cfg) + task_option_problems(cfg)
    for key, allowed in lists:
        unknown = [v for v in OmegaConf.select(cfg, key) if v not in allowed]
        if unknown:
            problems.append(f"{key} has unknown {unknown}: choose from {', '.join(allowed)}")
    for key, pattern, what in PATTERN_RULES:
        value = OmegaConf.select(cfg, key)
        if not isinstance(value, str) or not re.fullmatch(pattern, value) or ".." in value:
            problems.append(f"{key}={value!r}: must be {what}")
    unknown_top = sorted(set(cfg.keys()) - {f.name for f in fields(Config)} - {"hydra"})
    if unknown_top:
        problems.append(
            f"unknown top-level key(s) {unknown_top} (added with +?): no part of the "
            "pipeline reads them; remove them or check the spelling"
        )
    for key, ok, what in VALUE_RULES:
        value = OmegaConf.select(cfg, key)
        try:  # nan and inf pass the comparisons (inf > 0) and mean nothing here
            good = ok(value) and not (isinstance(value, float) and not math.isfinite(value))
        except TypeError:
            good = False
        if not good:
            problems.append(f"{key}={value!r}: must be {what}")
    problems += served_backend_problems(cfg) + seed_problems(cfg) + revision_problems(cfg)
    if problems:  # a shared setting (task.equivalence) is read by several parts: said once
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(dict.fromkeys(problems)))


def served_backend_problems(cfg) -> list[str]:
    """backend=openai: an endpoint without credentials in it, and only the decoding strategies
    a chat-completions endpoint can run."""
    from pipeline.clients.llm_client import check_base_url
    from pipeline.generation.openai_backend import CHAT_STRATEGIES, OpenAIBackend

    b = cfg.backend
    if b.name != OpenAIBackend.name:
        return []
    problems = []
    if not b.base_url:
        problems.append(
            "backend=openai needs backend.base_url=http://HOST:PORT/v1 (the "
            "OpenAI-compatible server of the model under test)"
        )
    try:
        check_base_url(b.base_url)
    except ValueError:
        problems.append(
            "backend.base_url holds credentials (user:password@ or a key in its "
            "query): remove them and "
            f"export the key in ${b.api_key_env} (backend.api_key_env)"
        )
    other = [s for s in cfg.generation.strategies if s not in CHAT_STRATEGIES]
    if other:
        problems.append(
            f"generation.strategies has {other}, which a chat-completions endpoint "
            f"cannot run: set generation.strategies=[{','.join(CHAT_STRATEGIES)}] and "
            "evaluation.targets without them"
        )
    missing = [
        t
        for t in cfg.evaluation.targets
        if t in METHODS and METHODS[t].kind == "decode" and t not in CHAT_STRATEGIES
    ]
    if missing:
        problems.append(
            f"evaluation.targets has {missing}, which backend=openai does not decode: "
            "drop them from evaluation.targets"
        )
    if b.max_concurrency < 1:
        problems.append(f"backend.max_concurrency={b.max_concurrency}: must be >= 1")
    return problems


def revision_problems(cfg) -> list[str]:
    """model.revision and dataset.revision only where something is read from the hub."""
    from omegaconf import OmegaConf

    from pipeline.generation.cell import dataset_hub_repo
    from pipeline.runtime.revisions import is_hub_id

    problems = []
    model_rev = OmegaConf.select(cfg, "model.revision")
    if (
        model_rev is not None
        and cfg.backend.name != "openai"
        and not is_hub_id(str(cfg.model.path))
    ):
        problems.append(
            f"model.revision={model_rev!r}: model.path={cfg.model.path!r} is no hub "
            "id (a local folder or a packaged model has no hub revision): set "
            "model.path=<org/name> or model.revision=null"
        )
    data_rev = OmegaConf.select(cfg, "dataset.revision")
    overrides = OmegaConf.to_container(cfg.dataset.overrides, resolve=True) or {}
    other = overrides.get("revision")
    if data_rev is not None and other is not None and str(other) != str(data_rev):
        problems.append(
            f"dataset.revision={data_rev!r} and dataset.overrides.revision={other!r}: "
            "set it once, as dataset.revision"
        )
    if data_rev is not None:
        try:
            repo = dataset_hub_repo(cfg)
        except (ConfigError, KeyError, TypeError, ValueError):  # an unknown dataset: named apart
            repo = ""
        if repo is None:
            problems.append(
                f"dataset.revision={data_rev!r}: dataset {cfg.dataset.name} is not "
                "read from the hub (a bundled set, local files or a released file) "
                "and has no hub revision: set dataset.revision=null"
            )
    return problems


def seed_problems(cfg) -> list[str]:
    """generation.seed=null leaves the seed to an endpoint's server: in-process backends need one."""
    if cfg.generation.seed is None and cfg.backend.name != "openai":
        return [
            f"generation.seed=null leaves the seed to the server, which only backend=openai "
            f"has; backend={cfg.backend.name} needs generation.seed=<int>"
        ]
    return []
