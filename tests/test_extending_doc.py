"""docs/extending.md is executed: every `file:` block is written into a fresh folder and the
`run:` commands run there, with the pipeline as installed (no edit of the package)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "extending.md"
BLOCK = re.compile(r"^(file|run): (\S+)\n```\w*\n(.*?)^```", re.MULTILINE | re.DOTALL)


def doc_blocks() -> tuple[dict[str, str], dict[str, list[str]]]:
    files, runs = {}, {}
    for kind, name, body in BLOCK.findall(DOC.read_text(encoding="utf-8")):
        if kind == "file":
            files[name] = body
        else:
            runs[name] = shlex.split(body.replace("\\\n", " "))
    return files, runs


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("extending")
    files, _ = doc_blocks()
    for name, body in files.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(body, encoding="utf-8")
    return out


def _run(argv: list[str], cwd: Path, *extra: str) -> subprocess.CompletedProcess:
    assert argv[0] == "python"
    env = {**os.environ, "WANDB_MODE": "disabled", "PYTHONPATH": str(cwd)}
    return subprocess.run(
        [sys.executable, *argv[1:], *extra],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_the_doc_has_every_worked_example():
    files, runs = doc_blocks()
    assert set(files) == {
        "my_tasks/clock.py",
        "my_conf/task/clock.yaml",
        "my_data/clock.jsonl",
        "my_conf/dataset/clock.yaml",
        "my_conf/model/my-model.yaml",
        "my_data/clock_samples.jsonl",
    }
    assert set(runs) == {"pipeline", "score"}


def test_scoring_with_the_new_task_gives_the_documented_numbers(workdir):
    _, runs = doc_blocks()
    done = _run(runs["score"], workdir)
    assert done.returncode == 0, done.stderr[-3000:]
    df = pd.read_parquet(workdir / "clock_scores.parquet").set_index("prompt_id")
    assert df.loc[["c1", "c2"], "bayes_text"].tolist() == ["09:00", "23:30"]
    assert df.loc[["c1", "c2"], "bayes_risk"].tolist() == pytest.approx([0.25, 0.3125])
    assert df.loc[["c1", "c2"], "quality_bayes_hours_off"].tolist() == [0.0, 0.0]


def test_the_new_task_runs_every_stage_with_a_model(workdir):
    _, runs = doc_blocks()
    done = _run(
        runs["pipeline"],
        workdir,
        f"output_root={workdir / 'outputs'}",
        f"results_dir={workdir / 'results'}",
        "dataset.limit=2",
        "generation.n_samples=3",
        "generation.strategies=[greedy,beam]",
        "generation.ptrue=false",
        "wandb.enabled=false",
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    cell = workdir / "outputs" / "default" / "my-model" / "clock"
    latents = pd.read_parquet(cell / "latents.parquet")
    assert len(latents) == 2 * (3 + 2)
    unc = pd.read_parquet(cell / "uncertainty.parquet")
    assert set(unc["estimator"]) >= {"no_time_share", "latent_entropy"}
    share = unc[unc["estimator"] == "no_time_share"].set_index("prompt_id")["value"]
    parsed = latents[latents["source"] == "sample"].groupby("prompt_id")["parse_ok"].mean()
    assert share.to_dict() == pytest.approx((1.0 - parsed).to_dict())
    quality = pd.read_parquet(cell / "quality.parquet")
    assert set(quality["metric"]) <= {"hours_off"}
