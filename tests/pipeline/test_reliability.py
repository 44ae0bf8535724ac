"""Nothing wrong is cached or trusted: a crash at any write of the generate stage resumes to the
same artifacts, and damaged or replaced artifacts are recomputed, not used."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

import pipeline.artifacts.store as store_module
from pipeline.artifacts.stage import run_stage
from pipeline.artifacts.store import ArtifactStore
from pipeline.config import register_configs, resolve_cell

ROOT = Path(__file__).resolve().parents[2]
register_configs()
GENERATED = ("dataset", "samples", "decodes", "ptrue")


def _cfg(model: Path, out: Path, *extra: str):
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(
            "config",
            overrides=[
                f"model.path={model}",
                "model.name=tiny",
                "model.dtype=float32",
                "model.temperature=1.0",
                "dataset=triviaqa_bundled",
                "dataset.limit=3",
                "dataset.max_new_tokens=4",
                "generation.n_samples=2",
                "generation.shard_size=2",
                "generation.strategies=[greedy,ar]",
                f"output_root={out}",
                "wandb.enabled=false",
                *extra,
            ],
        )


def _frames(store: ArtifactStore) -> dict[str, pd.DataFrame]:
    return {name: store.read(name) for name in GENERATED}


class Crash(Exception):
    pass


_REAL_REPLACE = os.replace


def _shard_prompt_ids(cfg) -> list[list[str]]:
    """The prompt ids of each generation shard of the cell `cfg`."""
    from pipeline.generation.cell import render_prompts
    from pipeline.stages.generate import _shards, load_cell_dataset

    dataset = load_cell_dataset(resolve_cell(cfg))
    return [s.prompt_ids for s in _shards(cfg, dataset, render_prompts(resolve_cell(cfg), dataset))]


def crash_before(n: int, monkeypatch) -> None:
    """From now on the store's n-th file commit (os.replace) raises: a kill at that point."""
    real_replace, done = os.replace, []

    def replace(src, dst):
        if len(done) == n:
            raise Crash(f"killed before writing {Path(dst).name}")
        done.append(dst)
        return real_replace(src, dst)

    monkeypatch.setattr(store_module.os, "replace", replace)


def test_a_crash_at_every_write_of_generate_resumes_to_the_same_artifacts(
    tiny_chat_model, tmp_path, monkeypatch
):
    """Every file the stage writes lands by os.replace (shards, parquet files, manifests); the
    test crashes the stage right before the n-th of them, for every n, reruns it, and compares."""
    cfg = _cfg(tiny_chat_model, tmp_path / "clean")
    clean = ArtifactStore(tmp_path / "clean" / "cell")
    real_replace = os.replace
    commits = []

    def counting(src, dst):
        commits.append(Path(dst).name)
        return real_replace(src, dst)

    monkeypatch.setattr(store_module.os, "replace", counting)
    run_stage("generate", resolve_cell(cfg), clean)
    monkeypatch.setattr(store_module.os, "replace", real_replace)
    reference = _frames(clean)
    # 2 shards x 3 groups x (parquet + sidecar), then 4 artifacts x (parquet + manifest)
    assert len(commits) == 2 * 3 * 2 + 4 * 2

    for n in range(len(commits)):
        store = ArtifactStore(tmp_path / f"crash{n}" / "cell")
        cfg_n = _cfg(tiny_chat_model, tmp_path / f"crash{n}")
        crash_before(n, monkeypatch)
        with pytest.raises(Crash):
            run_stage("generate", resolve_cell(cfg_n), store)
        monkeypatch.setattr(store_module.os, "replace", real_replace)
        result = run_stage("generate", resolve_cell(cfg_n), store)
        assert not result["skipped"], n
        for name, frame in _frames(store).items():
            pd.testing.assert_frame_equal(frame, reference[name], obj=f"{name} after crash {n}")
        assert not list(store.root.glob("*.shards")), n  # resumed, merged, cleaned up
        assert run_stage("generate", resolve_cell(cfg_n), store)["skipped"]


@pytest.mark.parametrize("damage", ["truncate", "half_rows"])
def test_a_damaged_artifact_is_recomputed_not_trusted(tiny_chat_model, tmp_path, damage, caplog):
    import pyarrow.parquet as pq

    from pipeline.artifacts.store import to_table

    cfg = _cfg(tiny_chat_model, tmp_path)
    store = ArtifactStore(tmp_path / "cell")
    run_stage("generate", resolve_cell(cfg), store)
    reference = _frames(store)
    path = store.path("samples")
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    else:  # a valid parquet holding half the rows
        pq.write_table(to_table("samples", reference["samples"].iloc[:3]), path)
    result = run_stage("generate", resolve_cell(cfg), store)
    assert not result["skipped"]
    assert "samples has this run's key but" in caplog.text and "recomputing" in caplog.text
    pd.testing.assert_frame_equal(store.read("samples"), reference["samples"])


def test_a_resume_with_another_batch_size_does_not_reuse_its_shards(
    tiny_chat_model, tmp_path, monkeypatch
):
    """bf16 batches of other shapes round differently (measured on SmolLM2: 91 of 160 samples
    equal between batch sizes 4 and 1), so the batch size is part of the generate key: a job
    killed with one batch size and resumed with another starts that cell's shards afresh,
    while the same settings reproduce the same samples."""
    from pipeline.artifacts.stage import STAGES, stage_key

    store = ArtifactStore(tmp_path / "cell")
    cfg2 = _cfg(tiny_chat_model, tmp_path, "backend.batch_size=2")
    cfg1 = _cfg(tiny_chat_model, tmp_path, "backend.batch_size=1")
    key2, key1 = (stage_key(STAGES["generate"], resolve_cell(c), store)[0] for c in (cfg2, cfg1))
    assert key2 != key1
    real_replace = os.replace
    crash_before(6, monkeypatch)  # the three groups of shard 0 are down (parquet + sidecar)
    with pytest.raises(Crash):
        run_stage("generate", resolve_cell(cfg2), store)
    monkeypatch.setattr(store_module.os, "replace", real_replace)
    ids = _shard_prompt_ids(cfg2)[0]
    assert store.has_shard("ptrue", key2, 0, ids)
    run_stage("generate", resolve_cell(cfg1), store)
    assert store.key("samples") == key1
    assert store.has_shard("ptrue", key2, 0, ids)  # the other batch size's shard was left alone
    fresh = ArtifactStore(tmp_path / "fresh")
    run_stage(
        "generate", resolve_cell(_cfg(tiny_chat_model, tmp_path, "backend.batch_size=1")), fresh
    )
    pd.testing.assert_frame_equal(store.read("samples"), fresh.read("samples"))


def test_a_resume_with_another_shard_size_redoes_the_shards_it_cannot_vouch_for(
    tiny_chat_model, tmp_path, monkeypatch, caplog
):
    """Killed after the shards of shard_size=1 are written, resumed with shard_size=2: every
    prompt is generated exactly once (it had dropped one and cached on it, exit 0), the result
    is the one a clean shard_size=2 run writes."""
    store = ArtifactStore(tmp_path / "cell")
    small = _cfg(tiny_chat_model, tmp_path, "generation.shard_size=1")
    crash_before(3 * 3 * 2, monkeypatch)  # the 3 shards of 1 prompt written, nothing merged
    with pytest.raises(Crash):
        run_stage("generate", resolve_cell(small), store)
    monkeypatch.setattr(store_module.os, "replace", _REAL_REPLACE)
    big = _cfg(tiny_chat_model, tmp_path, "generation.shard_size=2")
    run_stage("generate", resolve_cell(big), store)
    assert "holds other prompts" in caplog.text
    fresh = ArtifactStore(tmp_path / "fresh")
    run_stage(
        "generate", resolve_cell(_cfg(tiny_chat_model, tmp_path, "generation.shard_size=2")), fresh
    )
    for name in GENERATED:
        pd.testing.assert_frame_equal(store.read(name), fresh.read(name), obj=name)
    assert store.read("samples")["prompt_id"].value_counts().tolist() == [2, 2, 2]


@pytest.mark.parametrize("damage", ["truncate", "swap"])
def test_a_damaged_generation_shard_is_redone_on_resume(
    tiny_chat_model, tmp_path, monkeypatch, damage
):
    """A truncated samples shard used to block the cell for good (removed on read, never redone:
    the ptrue shard said "complete"); one overwritten by another shard was merged (one prompt
    with twice the samples, another with none)."""
    cfg = _cfg(tiny_chat_model, tmp_path)
    store = ArtifactStore(tmp_path / "cell")
    crash_before(2 * 3 * 2, monkeypatch)  # both shards written, nothing merged
    with pytest.raises(Crash):
        run_stage("generate", resolve_cell(cfg), store)
    monkeypatch.setattr(store_module.os, "replace", _REAL_REPLACE)
    from pipeline.artifacts.stage import STAGES, stage_key

    key = stage_key(STAGES["generate"], resolve_cell(cfg), store)[0]
    first, second = store.shard_path("samples", key, 0), store.shard_path("samples", key, 1)
    if damage == "truncate":
        first.write_bytes(first.read_bytes()[:100])
    else:
        first.write_bytes(second.read_bytes())
    run_stage("generate", resolve_cell(cfg), store)
    clean = ArtifactStore(tmp_path / "clean")
    run_stage("generate", resolve_cell(_cfg(tiny_chat_model, tmp_path)), clean)
    for name in GENERATED:
        pd.testing.assert_frame_equal(store.read(name), clean.read(name), obj=name)


def test_an_artifact_of_another_cell_or_configuration_is_refused(tiny_chat_model, tmp_path):
    """A latents parquet + manifest pair copied in from the maqa cell used to be read by
    stage=uq and stage=evaluate of the triviaqa cell (exit 0, maqa numbers); task=sphere
    stage=map on the classes cell overwrote its latents from samples made for another prompt."""
    import shutil

    from pipeline.artifacts.stage import CELL_STAGES
    from pipeline.artifacts.store import ArtifactError

    trivia_cfg = _cfg(tiny_chat_model, tmp_path)
    maqa_cfg = _cfg(tiny_chat_model, tmp_path, "dataset=maqa_bundled")
    trivia, maqa = ArtifactStore(tmp_path / "trivia"), ArtifactStore(tmp_path / "maqa")
    for cfg, store in ((trivia_cfg, trivia), (maqa_cfg, maqa)):
        for name in CELL_STAGES:
            run_stage(name, resolve_cell(cfg), store)
    for suffix in (".parquet", ".manifest.json"):
        shutil.copyfile(maqa.root / f"latents{suffix}", trivia.root / f"latents{suffix}")
    for name in ("decide", "uq"):
        with pytest.raises(
            ArtifactError,
            match="input 'latents' .* another cell or by another "
            "program \\(made for cell default/tiny/maqa_bundled "
            "by the pipeline's stage map; this is "
            "default/tiny/triviaqa_bundled, .*run stage=map "
            "first",
        ):
            run_stage(name, resolve_cell(trivia_cfg), trivia)
    assert maqa.manifest("latents")["inputs"]["samples"] == maqa.key("samples")  # upstream keys
    run_stage(
        "map", resolve_cell(trivia_cfg), trivia
    )  # the named fix: the cell's own latents again
    for name in ("decide", "uq", "evaluate"):
        run_stage(name, resolve_cell(trivia_cfg), trivia)

    # the report reads quality and uq_scores without running a stage: it used to put the
    # maqa numbers in the triviaqa row of Table 2 (exit 0)
    from pipeline.reporting.collect import find_cells, quality_means

    experiment = tmp_path / "default"
    for cell, dataset in ((trivia, "triviaqa_bundled"), (maqa, "maqa_bundled")):
        shutil.copytree(cell.root, experiment / "tiny" / dataset)  # where the report looks
    cells = find_cells(tmp_path, "default")
    assert [c.name for c in cells] == ["default/tiny/maqa_bundled", "default/tiny/triviaqa_bundled"]
    assert set(quality_means(cells)["dataset"]) == {"maqa", "triviaqa"}
    shutil.copytree(experiment, tmp_path / "renamed")  # a whole experiment moved: still its cells
    assert len(quality_means(find_cells(tmp_path, "renamed"))) == len(quality_means(cells))
    for suffix in (".parquet", ".manifest.json"):
        shutil.copyfile(
            experiment / "tiny" / "maqa_bundled" / f"quality{suffix}",
            experiment / "tiny" / "triviaqa_bundled" / f"quality{suffix}",
        )
    with pytest.raises(
        ArtifactError,
        match="quality.parquet was made for cell "
        "default/tiny/maqa_bundled, not default/tiny/triviaqa",
    ):
        quality_means(cells)

    # map settings changed (so map must run) under generation settings its samples were not made
    # with: the stale samples are named, not mapped
    more = _cfg(
        tiny_chat_model, tmp_path, "generation.n_samples=3", "task.equivalence.threshold=0.9"
    )
    with pytest.raises(ArtifactError, match="input 'dataset' .*run stage=generate first"):
        run_stage("map", resolve_cell(more), trivia)


def test_a_scorer_work_folder_in_a_pipeline_cell_is_refused_and_the_reverse_recomputed(tmp_path):
    """A scorer work folder (samples made by pipeline.score from someone's file) copied into a
    pipeline cell used to run map -> evaluate -> report with exit 0, the report showing the
    model's "Exact Match" on answers it never gave. Each stage now refuses it in one line
    naming who made it and the stage to run; the report refuses the scorer's quality. The
    reverse (a pipeline cell's artifacts in the scorer's work folder) is recomputed: the scorer
    gives what a clean scoring gives."""
    import shutil

    from pipeline.artifacts.stage import CELL_STAGES
    from pipeline.artifacts.store import ArtifactError
    from pipeline.reporting.collect import find_cells, quality_means
    from pipeline.scorer.run import score

    rows = [
        {
            "id": f"q{i}",
            "question": f"Capital {i}?",
            "responses": ["Paris", "Paris", "Rome"],
            "reference": "Paris",
        }
        for i in range(3)
    ]
    clean = score(rows, task="classes", work_dir=tmp_path / "scored")
    (work,) = [p for p in (tmp_path / "scored").iterdir() if p.is_dir()]
    cfg = _cfg(Path("/nonexistent-model"), tmp_path / "out", "task=classes")
    cell = ArtifactStore(resolve_cell(cfg).root)
    shutil.copytree(work, cell.root)
    for name in CELL_STAGES[1:]:
        with pytest.raises(
            ArtifactError,
            match=(
                f"stage '{name}': input '[a-z_]+' .* was made for another cell or by another "
                "program \\(made for cell score/.* by the scorer \\(pipeline.score\\); this is "
                "default/tiny/triviaqa_bundled, run by the pipeline's stage .*\\): run stage="
            ),
        ):
            run_stage(name, resolve_cell(cfg), cell)
    with pytest.raises(ArtifactError, match="made by the scorer \\(pipeline.score"):
        quality_means(find_cells(tmp_path / "out", "default"))

    # the reverse: the pipeline's artifacts in the scorer's work folder are not read
    for path in cell.root.glob("*.manifest.json"):
        manifest = __import__("json").loads(path.read_text())
        manifest.update(producer="pipeline", cell="default/tiny/triviaqa_bundled")
        path.write_text(__import__("json").dumps(manifest))
    shutil.rmtree(work)
    shutil.copytree(cell.root, work)
    again = score(rows, task="classes", work_dir=tmp_path / "scored")
    pd.testing.assert_frame_equal(again, clean)


def test_two_runs_of_one_cell_at_once_generate_once(tiny_chat_model, tmp_path):
    """Two processes launched on the same cell together: they both generated, then one failed
    with a misleading message; now the second waits for the cell's lock and finds the first
    one's artifacts current (both exit 0, one generation)."""
    import subprocess
    import sys

    overrides = [
        f"model.path={tiny_chat_model}",
        "model.name=tiny",
        "model.dtype=float32",
        "dataset=triviaqa_bundled",
        "dataset.limit=2",
        "dataset.max_new_tokens=4",
        "generation.n_samples=2",
        "generation.strategies=[greedy]",
        "generation.ptrue=false",
        "stage=generate",
        f"output_root={tmp_path}",
        "wandb.enabled=false",
        "hydra.run.dir=" + str(tmp_path / "hydra-${now:%f}"),
    ]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "pipeline", *overrides],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(2)
    ]
    logs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], logs
    assert sum("[generate] done" in log for log in logs) == 1, logs
    assert sum("up to date" in log for log in logs) == 1, logs  # (the second waited on the lock)
