"""stage=plan and the missing-input check: what a sweep would launch, and nothing started when an
input is missing (named with the step that fetches it)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from pipeline.config import register_configs, resolve_cell
from pipeline.driver.assets import MissingAssetsError, cell_assets, check_assets

ROOT = Path(__file__).resolve().parents[2]
register_configs()


@pytest.fixture()
def compose_cfg(tmp_path, monkeypatch):
    monkeypatch.setenv("TASK_AWARE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        yield lambda *o: compose("config", overrides=list(o))
    GlobalHydra.instance().clear()


def _missing(cfg) -> dict[str, str]:
    return {a.what: a.how for a in cell_assets(resolve_cell(cfg)) if not a.available}


def test_paper_cnn_dm_names_every_missing_input_and_its_fetch_step(compose_cfg):
    cfg = compose_cfg(
        "experiment=paper", "model=qwen3-4b", "dataset=cnn_dm", "backend.python=/nonexistent/python"
    )
    missing = _missing(cfg)
    assert missing["AlignScore checkpoint"] == "make paper-assets"
    assert missing["AlignScore base model"].startswith("make paper-assets")
    assert missing["weights of qwen3-4b"].startswith("make paper-assets MODELS=1")
    assert missing["NLI model"].startswith("make paper-assets MODELS=1")
    assert missing["vLLM environment"] == "make vllm-env"
    assert "export OPENAI_API_KEY" in missing["API key for gpt-4.1-mini"]
    with pytest.raises(MissingAssetsError) as err:
        check_assets(resolve_cell(cfg), ["evaluate"])
    text = str(err.value)
    assert "qwen3-4b/cnn_dm cannot run" in text and "AlignScore checkpoint" in text
    assert "weights of qwen3-4b" not in text  # only the stages that will run are checked
    check_assets(resolve_cell(cfg), [])  # nothing to run: nothing needed


def test_maqa_default_source_is_the_fetched_json(compose_cfg, tmp_path):
    cfg = compose_cfg("experiment=paper", "dataset=maqa")
    assert cfg.dataset.overrides.path == str(tmp_path / "cache" / "data" / "maqa" / "MAQA.json")
    assert _missing(cfg)["data of maqa"] == "make paper-assets"
    (tmp_path / "cache" / "data" / "maqa").mkdir(parents=True)
    (tmp_path / "cache" / "data" / "maqa" / "MAQA.json").write_text("[]")
    assert "data of maqa" not in _missing(cfg)


def test_default_experiment_needs_nothing_it_does_not_ship(compose_cfg):
    for dataset in (
        "triviaqa_bundled",
        "maqa_bundled",
        "maqa_star_bundled",
        "wmt19_fien_bundled",
        "cnn_dm_bundled",
    ):
        assert _missing(compose_cfg(f"dataset={dataset}")) == {}


def test_a_run_with_a_missing_input_stops_before_any_work(tmp_path):
    out = tmp_path / "out"
    env = {
        **os.environ,
        "TASK_AWARE_CACHE": str(tmp_path / "cache"),
        "HF_HUB_OFFLINE": "1",
        "WANDB_MODE": "disabled",
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline",
            "dataset=cnn_dm_bundled",
            f"output_root={out}",
            "metrics.alignscore.ckpt=/nowhere/AlignScore-large.ckpt",
            "wandb.enabled=false",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2
    output = done.stdout + done.stderr
    assert (
        "AlignScore checkpoint: /nowhere/AlignScore-large.ckpt (needed by evaluate) -> "
        "make paper-assets" in output
    )
    assert "Traceback" not in output
    assert not list(out.rglob("*.parquet"))  # no stage started, no artifact written


def test_plan_of_the_paper_sweep(tmp_path):
    """The paper sweep's plan: 25 cells, each with its GPUs and tensor parallel size."""
    env = {
        **os.environ,
        "TASK_AWARE_CACHE": str(tmp_path / "cache"),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "WANDB_MODE": "disabled",
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline",
            "experiment=paper",
            "stage=plan",
            f"output_root={tmp_path / 'out'}",
            "dataset.limit=1000",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ") and "/" in line]
    assert len(rows) == 25
    cells = {r.split("|")[1].strip(): [c.strip() for c in r.split("|")[2:10]] for r in rows}
    assert cells["qwen2.5-72b-instruct/maqa"][:2] == ["4", "4"]
    assert cells["qwen3-30b-a3b/triviaqa"][:2] == ["2", "2"]
    assert cells["gemma-3-4b-it/wmt19_fien"][:2] == ["1", "1"]
    # upper bounds before any sample exists: M(M-1) (+ decodes for the classes clustering)
    assert cells["qwen3-4b/triviaqa"][4] == "<= 552/prompt"
    assert cells["qwen3-4b/maqa"][5] == "<= 24/prompt"
    assert "make paper-assets" in cells["qwen3-4b/maqa"][7]  # MAQA JSON missing
    assert "25 cell(s), 45 GPUs booked in total" in done.stdout
    # hours per cell from the H100 estimates: a 72B model's cell takes longer than a 4B one's
    # (offline the prompts are unknown: the hours are for dataset.limit=1000 prompts)
    hours = {c: float(v[6]) for c, v in cells.items()}
    # the same counts; generation (1000 prompts x 31 rows x 24 tokens) scales with the parameters
    extra = 1000 * 31 * 24 * (72.7 - 4.0) / 60_000 / 3600
    assert hours["qwen2.5-72b-instruct/triviaqa"] - hours["qwen3-4b/triviaqa"] == pytest.approx(
        extra, abs=0.011
    )
    assert "Estimated wall time:" in done.stdout and "H100 (estimate)" in done.stdout
    assert not list((tmp_path / "out").rglob("*.parquet"))  # nothing ran


def test_estimated_hours_are_the_counts_over_the_rates(compose_cfg):
    """estimate_hours by hand: rows x token budget at the model's rate, plus pairs, calls and SAR
    strings at theirs (the pairs and calls already cached are not counted)."""
    from pipeline.driver.plan import RATES, CellPlan, Count, estimate_hours

    cfg = compose_cfg("experiment=paper", "model=qwen3-4b", "dataset=triviaqa")
    plan = CellPlan(
        "qwen3-4b/triviaqa",
        1,
        1,
        prompts=100,
        nli_pairs=Count("5000 (1000 cached)", 4000),
        llm_calls=Count("<= 3/prompt", 3, per_prompt=True),
    )
    rates = RATES["gpu"]
    rows = 20 + 2 + 5 + 4  # M, greedy and ar, 5 beams, contrastive's 4 candidates
    seconds = (
        100 * rows * 24 * 4.0 / rates.generated_tokens_per_s_at_1b
        + 4000 / rates.nli_pairs_per_s
        + 300 / rates.llm_calls_per_s
        + 100 * 20 * 24 / rates.embedded_strings_per_s
    )
    assert estimate_hours(cfg, plan) == pytest.approx(seconds / 3600)
    assert plan.rates == rates.name
    default = compose_cfg("dataset=triviaqa_bundled")  # the CPU default: this machine's rates
    cpu_plan = CellPlan("smollm2-135m/triviaqa_bundled", 0, None, prompts=1)
    assert estimate_hours(default, cpu_plan) > 0 and cpu_plan.rates == RATES["cpu"].name
    assert estimate_hours(default, CellPlan("c", 0, None)) is None  # prompts unknown


def test_plan_counts_exact_pairs_and_cache_hits_once_samples_exist(tmp_path):
    """After generate, the plan counts the unique NLI pairs and LLM-extraction prompts of the
    cell's real samples and how many are already cached."""
    import pandas as pd

    from pipeline.artifacts.store import ArtifactStore
    from pipeline.mapping.equivalence import PairCache

    cache = tmp_path / "cache"
    cell = tmp_path / "out" / "default" / "smollm2-135m" / "triviaqa_bundled"
    HAND = {"producer": "hand-written (test)", "cell": "default/smollm2-135m/triviaqa_bundled"}
    store = ArtifactStore(cell)
    store.write(
        "dataset",
        pd.DataFrame(
            {
                "prompt_id": ["p0", "p1"],
                "dataset": ["triviaqa_bundled"] * 2,
                "question": ["q0", "q1"],
                "answers": [[["a"]], [["b"]]],
                "probabilities": [[], []],
                "reference_text": ["", ""],
            }
        ),
        key="k",
        extra=HAND,
    )
    store.write(
        "samples",
        pd.DataFrame(
            {
                "prompt_id": ["p0"] * 3 + ["p1"] * 3,
                "sample_idx": [0, 1, 2] * 2,
                "text": ["x", "y", "x", "z", "z", "z"],
                "token_logprobs": [[0.0]] * 6,
                "logprob": [0.0] * 6,
            }
        ),
        key="k",
        extra=HAND,
    )
    store.write(
        "decodes",
        pd.DataFrame(
            {
                "prompt_id": ["p0", "p1"],
                "strategy": ["greedy", "greedy"],
                "text": ["w", "z"],
                "token_logprobs": [[0.0]] * 2,
                "logprob": [0.0] * 2,
            }
        ),
        key="k",
        extra=HAND,
    )
    PairCache(cache / "pairs").put_many({PairCache.key("nli-x", "q0", "x", "y"): [1, 0, 0]})
    env = {**os.environ, "TASK_AWARE_CACHE": str(cache), "WANDB_MODE": "disabled"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline",
            "-m",
            "stage=plan",
            "dataset=triviaqa_bundled",
            f"output_root={tmp_path / 'out'}",
            "task.equivalence.backend=nli",
            "task.equivalence.nli_model=nli-x",
            "generation.n_samples=3",
            "generation.strategies=[greedy]",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    row = next(line for line in done.stdout.splitlines() if "triviaqa_bundled |" in line)
    cols = [c.strip() for c in row.split("|")[1:-1]]
    # classes: unique texts of samples + decodes: p0 {x, y, w} -> 6 ordered pairs, p1 {z} -> 0
    assert cols[0] == "smollm2-135m/triviaqa_bundled" and cols[3:6] == ["2", "6", "6 (1 cached)"]


def _fetch_module():
    spec = importlib.util.spec_from_file_location(
        "fetch", ROOT / "scripts" / "fetch_paper_assets.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_fetch_finds_the_maqa_json_in_a_checkout(tmp_path):
    fetch = _fetch_module()
    (tmp_path / "repo" / "data").mkdir(parents=True)
    (tmp_path / "repo" / "package.json").write_text(json.dumps({"name": "x"}))
    (tmp_path / "repo" / "data" / "small.json").write_text(
        json.dumps([{"question": "q", "answers": ["a"]}])
    )
    (tmp_path / "repo" / "data" / "MAQA_full.json").write_text(
        json.dumps({"data": [{"question": f"q{i}", "answers": ["a", "b"]} for i in range(5)]})
    )
    assert fetch.find_maqa_json(tmp_path / "repo").name == "MAQA_full.json"
    with pytest.raises(FileNotFoundError):
        fetch.find_maqa_json(tmp_path / "repo" / "missing")


def _git(*args, cwd):
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def _maqa_repo(tmp_path):
    """A git repository holding a first MAQA.json, committed: (the folder, the JSON text)."""
    repo = tmp_path / "maqa-repo"
    repo.mkdir()
    _git("init", "-q", "-b", "main", cwd=repo)
    first = json.dumps([{"question": f"q{i}", "answers": ["a", "b"]} for i in range(3)])
    (repo / "MAQA.json").write_text(first)
    _git("add", ".", cwd=repo)
    _git("commit", "-q", "-m", "v1", cwd=repo)
    return repo, first


def test_fetch_takes_maqa_at_the_pinned_commit_checks_its_hash_and_records_it(tmp_path):
    """A real git repository with two releases of the JSON: the pin selects the first, a wrong
    hash is refused and leaves no file, the provenance names commit and hash."""
    import hashlib

    fetch = _fetch_module()
    repo, first = _maqa_repo(tmp_path)
    pinned = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True, text=True
    ).stdout.strip()
    (repo / "MAQA.json").write_text(json.dumps([{"question": "q", "answers": ["a"]}] * 5))
    _git("commit", "-q", "-am", "v2", cwd=repo)
    digest = hashlib.sha256(first.encode()).hexdigest()

    target = tmp_path / "cache" / "MAQA.json"
    with pytest.raises(ValueError, match="not the pinned"):
        fetch.fetch_maqa(target, str(repo), pinned, "0" * 64)
    assert not target.exists()
    said = fetch.fetch_maqa(target, str(repo), pinned, digest)
    assert target.read_text() == first and "UNPINNED" not in said
    assert json.loads(Path(f"{target}.source.json").read_text()) == {
        "repository": str(repo),
        "commit": pinned,
        "file": "MAQA.json",
        "sha256": digest,
    }
    assert "UNPINNED" in fetch.fetch_maqa(target, str(repo), None, None)  # the head: v2
    assert json.loads(target.read_text())[0] == {"question": "q", "answers": ["a"]}


def test_a_pinned_maqa_hash_refuses_another_file(tmp_path):
    import hashlib

    from pipeline.data import load_dataset
    from pipeline.data.loaders import DatasetUnavailableError

    data = tmp_path / "MAQA.json"
    data.write_text(json.dumps([{"question": "Which oceans?", "answers": ["Pacific", "Atlantic"]}]))
    good = hashlib.sha256(data.read_bytes()).hexdigest()
    assert len(load_dataset("maqa", path=str(data), sha256=good)) == 1
    with pytest.raises(DatasetUnavailableError, match="not the pinned .*sha256=null"):
        load_dataset("maqa", path=str(data), sha256="f" * 64)


def test_the_first_maqa_fetch_fills_the_pin_every_later_fetch_reads(tmp_path):
    """make paper-assets, unpinned, takes the default branch's head and writes its commit and
    SHA-256 into the dataset config (comments and other lines kept; quoted, a hash stays a
    string); the next fetch takes that commit, though the repository moved on."""
    import hashlib

    from omegaconf import OmegaConf

    fetch = _fetch_module()
    config = tmp_path / "maqa.yaml"
    config.write_text((ROOT / "conf" / "dataset" / "maqa.yaml").read_text())
    assert fetch.maqa_pin(config) == (None, None)  # the checkout's pin: not yet read
    repo, first = _maqa_repo(tmp_path)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True, text=True
    ).stdout.strip()
    digest = hashlib.sha256(first.encode()).hexdigest()

    target = tmp_path / "cache" / "MAQA.json"
    said = fetch.fetch_and_pin_maqa(target, config, str(repo))
    assert f"pinned in {config} (commit, sha256)" in said
    assert fetch.maqa_pin(config) == (head, digest)
    text = config.read_text()
    assert f'  sha256: "{digest}"\n  commit: "{head}"\n' in text and "# The pin:" in text
    assert OmegaConf.load(config).overrides.sha256 == digest

    (repo / "MAQA.json").write_text(json.dumps([{"question": "q", "answers": ["a"]}]))
    _git("commit", "-q", "-am", "v2", cwd=repo)
    said = fetch.fetch_and_pin_maqa(target, config, str(repo))
    assert "UNPINNED" not in said and "pinned in" not in said
    assert target.read_text() == first  # the pinned release, not the head
