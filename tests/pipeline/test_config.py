"""Every config combination composes; typos and unknown names fail before any work."""

import itertools
from pathlib import Path

import pytest
from hydra import compose
from hydra.errors import ConfigCompositionException
from omegaconf.errors import ConfigKeyError, ValidationError

from pipeline.config import register_configs, resolve_cell, validate

CONF = Path(__file__).resolve().parents[2] / "conf"
register_configs()


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def test_groups_have_the_documented_options():
    assert options("model") == [
        "gemma-3-12b-it",
        "gemma-3-4b-it",
        "qwen2.5-72b-instruct",
        "qwen3-30b-a3b",
        "qwen3-4b",
        "smollm2-135m",
    ]
    assert options("dataset") == sorted(
        [
            d + s
            for d in ("triviaqa", "maqa", "maqa_star", "wmt19_fien", "cnn_dm")
            for s in ("", "_bundled")
        ]
        + ["gsm8k", "numeric_bundled"]
    )
    assert options("backend") == ["openai", "transformers", "vllm"]
    assert options("experiment") == ["default", "paper", "score"]
    assert options("hydra/launcher") == ["local", "slurm", "slurm_local"]  # + submitit_local


def test_every_pair_of_options_composes(hydra_ctx):
    """Every pair of options of the experiment, model, dataset and backend groups composes and
    validates together (an all-pairs cover: the groups set disjoint keys, so a problem is between
    two of them; 144 compositions, where the full product is 432 and took ~100 s)."""
    experiments, models = options("experiment"), options("model")
    datasets, backends = options("dataset"), options("backend")
    n_e, n_b = len(experiments), len(backends)
    combos = {
        (experiments[i % n_e], m, d, backends[i // n_e % n_b])
        for i, (m, d) in enumerate(itertools.product(models, datasets))
    }
    combos |= {
        (e, models[i % len(models)], d, b)
        for i, (e, d, b) in enumerate(itertools.product(experiments, datasets, backends))
    }
    pairs = set()
    for experiment, model, dataset, backend in sorted(combos):
        # a served model needs its endpoint and runs no beam or contrastive search
        served = (
            [
                "backend.base_url=http://127.0.0.1:8000/v1",
                "generation.strategies=[greedy,ar]",
                "evaluation.targets=[bayes]",
            ]
            if backend == "openai"
            else []
        )
        cfg = compose(
            "config",
            overrides=[
                f"experiment={experiment}",
                f"model={model}",
                f"dataset={dataset}",
                f"backend={backend}",
                *served,
            ],
        )
        validate(cfg)
        assert cfg.model.name == model and cfg.dataset.name == dataset
        assert cfg.backend.name == backend
        pairs |= set(
            itertools.combinations(
                (("e", experiment), ("m", model), ("d", dataset), ("b", backend)), 2
            )
        )
    every = [
        (x, y)
        for x, y in itertools.combinations(
            [
                [("e", v) for v in experiments],
                [("m", v) for v in models],
                [("d", v) for v in datasets],
                [("b", v) for v in backends],
            ],
            2,
        )
    ]
    assert all(p in pairs for xs, ys in every for p in itertools.product(xs, ys))


@pytest.mark.parametrize("launcher", ["local", "slurm", "submitit_local"])
def test_launchers_compose(hydra_ctx, launcher):
    cfg = compose("config", overrides=[f"hydra/launcher={launcher}"], return_hydra_config=True)
    assert cfg.hydra.launcher._target_.split(".")[-1] in (
        "BasicLauncher",
        "PerCellSlurmLauncher",
        "LocalLauncher",
    )


def test_slurm_launcher_takes_gpus_per_cell_from_the_model(hydra_ctx):
    """One sweep, each cell with its model's GPUs: the launcher reads model.gpus per job."""
    gpus = {}
    for model in options("model"):
        cfg = compose(
            "config", overrides=["hydra/launcher=slurm", f"model={model}"], return_hydra_config=True
        )
        assert dict(cfg.hydra.launcher.per_cell) == {"gpus_per_node": "model.gpus"}
        gpus[model] = cfg.model.gpus
    assert gpus == {
        "gemma-3-12b-it": 1,
        "gemma-3-4b-it": 1,
        "qwen2.5-72b-instruct": 4,
        "qwen3-30b-a3b": 2,
        "qwen3-4b": 1,
        "smollm2-135m": 0,
    }


def test_dataset_selects_its_task(hydra_ctx):
    expected = {
        "triviaqa": "classes",
        "maqa": "sets",
        "maqa_star": "simplex",
        "wmt19_fien": "sphere",
        "cnn_dm": "graphs",
    }
    for dataset, space in expected.items():
        for name in (dataset, dataset + "_bundled"):
            assert compose("config", overrides=[f"dataset={name}"]).task.space == space
    for name in ("gsm8k", "numeric_bundled"):
        assert compose("config", overrides=[f"dataset={name}"]).task.name == "reals"


def test_task_can_be_overridden(hydra_ctx):
    cfg = compose("config", overrides=["dataset=maqa_bundled", "task=sets_fbeta"])
    assert cfg.task.space == "sets-fbeta"


def test_paper_experiment_uses_the_paper_components(hydra_ctx):
    cfg = compose("config", overrides=["experiment=paper", "dataset=maqa"])
    assert cfg.backend.name == "vllm"
    assert cfg.task.equivalence.backend == "nli"
    assert cfg.task.equivalence.nli_model == "microsoft/deberta-large-mnli"
    assert cfg.task.extractor.kind == "llm" and cfg.task.extractor.model == "gpt-4.1-mini"
    assert cfg.metrics.comet.model == "Unbabel/wmt22-comet-da"


def test_typo_in_key_fails(hydra_ctx):
    with pytest.raises((ConfigCompositionException, ConfigKeyError, ValidationError)):
        compose("config", overrides=["generation.n_sampels=5"])


def test_unknown_option_lists_choices(hydra_ctx):
    with pytest.raises(ConfigCompositionException) as err:
        compose("config", overrides=["model=gpt-5"])
    assert "smollm2-135m" in str(err.value) and "qwen3-4b" in str(err.value)
    assert "model_schema" not in str(err.value)  # the structured schemas are not options


def test_wrong_type_fails(hydra_ctx):
    with pytest.raises((ConfigCompositionException, ValidationError)):
        compose("config", overrides=["generation.n_samples=many"])


def test_invalid_enum_fails_before_work(hydra_ctx):
    cfg = compose("config", overrides=["stage=generat"])
    with pytest.raises(ValueError, match="stage='generat': choose one of generate"):
        validate(cfg)


@pytest.mark.parametrize(
    "override, message",
    [
        ("generation.n_samples=-3", "generation.n_samples=-3: must be an integer >= 1"),
        ("dataset.limit=-2", "dataset.limit=-2: must be null (all prompts) or an integer >= 1"),
        ("evaluation.max_rejection=0", "evaluation.max_rejection=0.0: must be in (0, 1]"),
        ("model.top_p=1.5", "model.top_p=1.5: must be null (the model's default) or in (0, 1]"),
        (
            "task.extractor.max_failed_share=2",
            "task.extractor.max_failed_share=2.0: must be a share",
        ),
        (
            "uq.estimators=[msp,lexical_similarity]",
            "uq.estimators has unknown ['lexical_similarity']",
        ),
        # the values the reliability audit found ending in a traceback, or silently accepted
        ("backend.device=quantum", "backend.device='quantum': must be auto, cpu, mps or cuda[:N]"),
        ("device=gpu7", "device='gpu7': must be auto, cpu, mps or cuda[:N]"),
        ("model.dtype=float7", "model.dtype='float7': must be one of bfloat16, float16, float32"),
        ("model.name=../../../x", "model.name='../../../x': must be a plain name"),
        ("dataset.name=a/b", "dataset.name='a/b': must be a plain name"),
        ("+foo=bar", "unknown top-level key(s) ['foo']"),
        ("evaluation.targets=[nobody]", "evaluation.targets has unknown ['nobody']"),
    ],
)
def test_every_value_is_checked_in_config_terms(hydra_ctx, override, message):
    from pipeline.runtime.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        validate(compose("config", overrides=[override]))
    assert message in str(err.value)


def test_all_problems_are_listed_at_once(hydra_ctx):
    from pipeline.runtime.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        validate(compose("config", overrides=["generation.n_samples=0", "dataset.limit=0"]))
    assert "generation.n_samples=0" in str(err.value) and "dataset.limit=0" in str(err.value)


def test_a_bad_value_stops_the_command_line_before_any_model_loads(tmp_path):
    """No traceback, exit status 2, nothing written, no W&B run."""
    import os
    import subprocess
    import sys

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline",
            "generation.n_samples=-3",
            f"output_root={tmp_path}",
            f"wandb.dir={tmp_path}",
        ],
        cwd=CONF.parent,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "WANDB_MODE": "offline"},
    )
    assert done.returncode == 2
    assert "generation.n_samples=-3: must be an integer >= 1" in done.stderr + done.stdout
    assert "Traceback" not in done.stderr + done.stdout
    assert not list(tmp_path.rglob("*.parquet")) and not list(tmp_path.rglob("offline-run-*"))


@pytest.mark.parametrize(
    "override, message",
    [
        ("output_root=/proc/x", "output_root='/proc/x': cannot create it"),
        ("model.path=/nonexistent", "model.path='/nonexistent': no tokenizer could be loaded"),
    ],
)
def test_a_path_that_cannot_serve_stops_the_command_line_in_one_line(tmp_path, override, message):
    import subprocess
    import sys

    args = [f"output_root={tmp_path}", "wandb.enabled=false", "stage=generate", override]
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", *args],
        cwd=CONF.parent,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert message in done.stderr + done.stdout
    assert "Traceback" not in done.stderr + done.stdout


def test_the_validated_dtypes_are_the_backends(hydra_ctx):
    from pipeline.config import MODEL_DTYPES
    from pipeline.generation.hf_backend import DTYPES

    assert list(MODEL_DTYPES) == list(DTYPES)


def test_map_cache_key_ignores_where_kggen_runs_but_not_what_it_runs(hydra_ctx):
    from pipeline.artifacts.stage import STAGES

    def map_slice(*overrides):
        return STAGES["map"].config_slice(
            resolve_cell(compose("config", overrides=["dataset=cnn_dm_bundled", *overrides]))
        )

    base = map_slice()
    assert map_slice("task.extractor.kggen_python=/opt/kggen/bin/python") == base
    assert map_slice("task.extractor.max_concurrency=2") == base
    assert map_slice("task.extractor.model=gpt-4.1") != base
    assert map_slice("task.extractor.kggen_cluster=false") != base


@pytest.mark.parametrize("model", ["qwen3-4b", "qwen3-30b-a3b"])
def test_qwen3_samples_with_its_non_thinking_mode_values(hydra_ctx, model):
    """Qwen3 runs with enable_thinking false, so it samples with the model card's non-thinking
    values (T 0.7, top-p 0.8, top-k 20), not its hub config's thinking-mode ones (0.6/0.95/20)."""
    from pipeline.stages.generate import _sampling

    cfg = compose("config", overrides=["experiment=paper", f"model={model}", "dataset=triviaqa"])
    assert cfg.model.chat_template_kwargs.enable_thinking is False
    sampling = _sampling(cfg)  # what the generate stage samples with
    assert (sampling.temperature, sampling.top_p, sampling.top_k, sampling.n) == (0.7, 0.8, 20, 20)
    gemma = _sampling(compose("config", overrides=["experiment=paper", "model=gemma-3-4b-it"]))
    assert (gemma.temperature, gemma.top_p, gemma.top_k) == (None, None, None)  # its hub config


@pytest.mark.parametrize(
    "dataset,max_new_tokens",
    [("triviaqa", 24), ("maqa", 64), ("maqa_star", 128), ("wmt19_fien", 96), ("cnn_dm", 160)],
)
def test_the_paper_settings_it_leaves_open_are_the_documented_ones(
    hydra_ctx, dataset, max_new_tokens
):
    """docs/fidelity.md rows "Decoding baselines", "Generation length", "Dataset splits and
    sizes", "COMET checkpoint", "KL smoothing": the values it names."""
    from pipeline.config import metric_config

    cfg = compose("config", overrides=["experiment=paper", f"dataset={dataset}"])
    g = cfg.generation
    assert (g.n_samples, g.beam_width, g.contrastive_alpha, g.contrastive_top_k) == (20, 5, 0.6, 4)
    assert cfg.dataset.max_new_tokens == max_new_tokens and cfg.dataset.limit is None
    assert metric_config(cfg, "comet").model == "Unbabel/wmt22-comet-da"
    assert metric_config(cfg, "kl").eps == 1e-6
    # rows "P(True) question", "AlignScore direction and text", "Label merging", "MAQA source"
    assert g.ptrue_asks == "prompt" and metric_config(cfg, "alignscore").claim == "reference"
    assert (
        cfg.mappers.sets.merge_by,
        cfg.mappers.graphs.merge_by,
        cfg.mappers.simplex.merge_by,
    ) == ("rule", "canonical", "equivalence")
    if dataset == "maqa":
        assert cfg.dataset.overrides.sha256 is None  # unpinned until read (docs/fidelity.md)


def test_the_paper_datasets_read_the_documented_splits():
    """docs/fidelity.md "Dataset splits and sizes"."""
    from pipeline.data.catalog import DATASETS

    def where(name):
        d = DATASETS[name].defaults
        return d.get("path"), d.get("config"), d.get("split")

    assert where("triviaqa") == ("mandarjoshi/trivia_qa", "rc.nocontext", "validation")
    assert where("maqa_star") == ("ttomov/maqa_star", None, "train")
    assert where("wmt19_fien") == ("wmt/wmt19", "fi-en", "validation")
