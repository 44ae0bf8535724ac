"""The core install, as a new user gets it: the built wheel `pip install`ed with its declared
dependencies only (from the package index, no extra, so no torch) into fresh venvs on Python 3.11
and 3.12, used from a directory with no checkout around:
- importing the package and composing a config print nothing (the SLURM launcher plugin stays
  quiet without submitit);
- `pipeline.score` on set answers and on classes (rule-read tasks);
- `pipeline.generate_and_score` through a loopback OpenAI-compatible server (the stand-in of
  scripts/openai_stand_in.py: the install is under test here; vLLM's own server is in the slow
  suite);
- `pipeline.report` (matplotlib is core);
- `taskaware-score --help`, and `taskaware` telling what an in-process run is missing.

The 3.11 venv installs through pip as the README says (about 70 s; the first run downloads
~150 MB), the 3.12 one through uv (about 25 s). An interpreter this machine lacks is skipped,
saying which.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.test_packaging import PIP_ENV, wheel  # noqa: F401  (the module-scoped wheel fixture)

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
from openai_stand_in import FakeOpenAIServer


def interpreter(version: str) -> str | None:
    """A base interpreter of `version` (not a venv's): pyenv's, else one on PATH that runs."""
    candidates = sorted(Path.home().glob(f".pyenv/versions/{version}.*/bin/python{version}"))
    if version == f"{sys.version_info.major}.{sys.version_info.minor}":
        candidates.insert(0, Path(sys._base_executable))
    if (found := shutil.which(f"python{version}")) is not None:
        candidates.append(Path(found))
    for candidate in candidates:
        done = subprocess.run(
            [str(candidate), "-c", "import sys, venv; print(sys.version)"],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode == 0 and done.stdout.startswith(version):
            return str(candidate)
    return None


def _ok(cmd, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False, **kwargs)
    assert done.returncode == 0, f"{cmd} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done


SCRIPT = textwrap.dedent("""
    import json, sys
    import pipeline
    out = {}
    sets = pipeline.score([["Pacific, Atlantic", "Atlantic and Pacific", "the Arctic"],
                           ["Mars", "Mars and Venus", "Venus, Mars"]], task="sets")
    out["sets"] = [sorted(a) for a in sets["bayes_action"]]
    out["sets_risk"] = [round(float(r), 6) for r in sets["bayes_risk"]]
    classes = pipeline.score([["Paris", "Paris", "Lyon"]], task="classes")
    out["classes"] = classes["bayes_text"].tolist()
    served = pipeline.generate_and_score(["Which oceans border the USA?"], task="sets",
                                         n_samples=4, model="served-model",
                                         base_url=sys.argv[1], cache_dir="cache")
    out["served"] = [sorted(a) for a in served["bayes_action"]]
    try:  # no base_url: an in-process model, which the core does not carry
        pipeline.generate_and_score(["Which oceans border the USA?"], task="sets", n_samples=2)
    except Exception as exc:
        out["in_process"] = f"{type(exc).__name__}: {exc}"
    pipeline.report(sets, "report")
    import os
    out["report"] = sorted(os.listdir("report"))
    out["heavy"] = sorted(m for m in ("torch", "transformers", "lm_polygraph", "submitit")
                          if m in sys.modules)
    print(json.dumps(out))
""")


def uv() -> str | None:
    """uv (the dev extra): installs the 3.12 venv in ~25 s where pip takes ~2 min."""
    found = shutil.which("uv") or Path(sys.executable).with_name("uv")
    return str(found) if Path(found).is_file() else None


# 3.11 through pip exactly as the README says; 3.12 through uv (a venv without pip, as uv users
# have), which resolves the same declared dependencies from PyPI.
@pytest.mark.parametrize("version, installer", [("3.11", "pip"), ("3.12", "uv")])
def test_the_core_install_scores_samples_and_serves_without_torch(
    wheel,  # noqa: F811 - the fixture imported above
    tmp_path,
    version,  # noqa: F811
    installer,
):
    python = interpreter(version)
    if python is None:
        pytest.skip(f"no Python {version} interpreter on this machine")
    venv = tmp_path / "venv"
    started = time.perf_counter()
    if installer == "pip":
        _ok([python, "-m", "venv", str(venv)])
        _ok([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)], env=PIP_ENV)
        listed = [str(venv / "bin" / "python"), "-m", "pip", "list", "--format=json"]
    else:
        assert uv() is not None, "uv is in the dev extra: make install"
        _ok([uv(), "venv", "-q", "-p", python, str(venv)])
        _ok([uv(), "pip", "install", "-q", "--python", str(venv / "bin" / "python"), str(wheel)])
        listed = [uv(), "pip", "list", "--format=json", "--python", str(venv / "bin" / "python")]
    print(f"core install on Python {version} ({installer}): {time.perf_counter() - started:.0f} s")
    names = {p["name"].lower() for p in json.loads(_ok(listed).stdout)}
    assert {"task-aware-pipeline", "aiohttp", "matplotlib", "hydra-core"} <= names
    assert not names & {"torch", "transformers", "lm-polygraph", "submitit", "unbabel-comet"}

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(TASK_AWARE_CACHE=str(tmp_path / "task-aware-cache"), MPLBACKEND="Agg")

    def run(*argv: str, ok: bool = True) -> subprocess.CompletedProcess:
        cmd = [str(venv / "bin" / argv[0]), *argv[1:]]
        return (
            _ok(cmd, cwd=elsewhere, env=env)
            if ok
            else subprocess.run(
                cmd,
                check=False,
                cwd=elsewhere,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
        )

    # importing and composing print nothing: no Hydra plugin warning without submitit
    quiet = run(
        "python", "-c", "import pipeline, pipeline.scorer.run as s; s.compose_config('sets')"
    )
    assert quiet.stdout == "" and quiet.stderr == "", quiet.stderr

    def served(request):
        return [{"text": "Pacific and Atlantic"}] * request.get("n", 1)

    with FakeOpenAIServer() as server:
        server.state.sampler = served
        done = run("python", "-c", SCRIPT, server.base_url)
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["sets"] == [["atlantic", "pacific"], ["mars", "venus"]], got
    # Hamming risk sum_y min(p, 1 - p): pacific, atlantic 2/3 and arctic 1/3 -> 1/3 * 3;
    # mars 3/3 and venus 2/3 -> 0 + 1/3
    assert got["sets_risk"] == [1.0, round(1 / 3, 6)], got
    assert got["classes"] == ["Paris"], got
    assert got["served"] == [["atlantic", "pacific"]], got
    assert "riskiest.md" in got["report"], got
    assert got["in_process"].startswith(
        "MissingExtraError: an in-process model (no base_url=) "
        "needs torch, transformers, not installed: pip install "
        "'task-aware-pipeline[local]'"
    ), got
    assert got["heavy"] == [], got  # nothing heavy imported on the core path

    helped = run("taskaware-score", "--help")
    assert helped.stdout.startswith("usage: taskaware-score"), helped.stdout
    # an in-process run names the extra it needs instead of a ModuleNotFoundError traceback
    refused = run("taskaware", "dataset=triviaqa_bundled", "stage=generate", ok=False)
    assert refused.returncode != 0
    assert "Traceback" not in refused.stderr, refused.stderr
    assert "task-aware-pipeline[local]" in refused.stdout + refused.stderr, refused.stderr
    slurm = run("taskaware", "-m", "hydra/launcher=slurm", "stage=plan", ok=False)
    assert slurm.returncode == 2 and slurm.stderr.strip() == (
        "[pipeline] invalid configuration: hydra/launcher=slurm needs submitit, "
        "hydra_plugins.hydra_submitit_launcher, not installed: pip install "
        "'task-aware-pipeline[paper]'"
    ), slurm.stderr
