"""`pip install .` gives a package that runs from any directory (issue 24, "installs like a
library"): the wheel carries the Hydra configs (conf/ -> pipeline/conf), the paper's numbers
(results/paper -> pipeline/paper) and the bundled data (setup.py), and an installed wheel's
entry points find them with no checkout around (pipeline/runtime/resources.py).

The wheel is built from a copy of the working tree (git's tracked and untracked, not ignored
files: what a clone with the work in progress holds), so the build leaves nothing in the
checkout (about 2 s). The install test (about 12 s) puts it in a fresh venv without the checkout on its path; the
dependencies come from the running environment through a .pth file (no download).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PIP_ENV = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}


def _run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kwargs)
    assert done.returncode == 0, f"{cmd} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done


def _tree_files() -> list[str]:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs a git checkout (the wheel is built from git's list of files)")
    out = _run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO)
    return [f for f in out.stdout.split("\0") if f and (REPO / f).is_file()]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel of the working tree, built without isolation (no index needed)."""
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"
    for rel in _tree_files():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, src / rel)
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "-w",
            str(base / "dist"),
            str(src),
        ],
        env=PIP_ENV,
    )
    (built,) = (base / "dist").glob("*.whl")
    return built


def test_the_wheel_carries_configs_paper_numbers_and_bundled_data(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    tracked = _tree_files()
    expected = {f"pipeline/{rel}" for rel in tracked if rel.startswith("conf/")}
    expected |= {
        f"pipeline/paper/{rel.removeprefix('results/paper/')}"
        for rel in tracked
        if rel.startswith("results/paper/")
    }
    expected |= {rel for rel in tracked if rel.startswith("pipeline/data/bundled/")}
    expected |= {
        rel
        for rel in tracked
        if rel.startswith(("pipeline/", "hydra_plugins/")) and rel.endswith(".py")
    }
    expected |= {
        rel for rel in tracked if rel.startswith("pipeline/tasks/") and rel.endswith("/task.yaml")
    }
    assert "pipeline/conf/config.yaml" in expected and "pipeline/tasks/sets/task.yaml" in expected
    assert "pipeline/paper/generation.csv" in expected
    assert sorted(expected - names) == []
    # nothing of the repository beside the package: no tests, scripts, top-level conf/
    assert (
        sorted(
            n
            for n in names
            if n.split("/")[0] not in {"pipeline", "hydra_plugins"} and ".dist-info/" not in n
        )
        == []
    )


def _venv_with(wheel: Path, venv: Path) -> tuple[Path, Path]:
    """A fresh venv with the wheel installed and the running environment's packages lent
    through a .pth file (installed first, then lent: pip sees no other copy of the package):
    (its python, its site-packages)."""
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--no-index",
            "-q",
            str(wheel),
        ],
        env=PIP_ENV,
    )
    site = Path(
        _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
        ).stdout.strip()
    )
    deps = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    (site / "zz_dependencies.pth").write_text("".join(f"{d}\n" for d in deps))
    return python, site


def test_the_installed_wheel_runs_its_entry_points_from_any_directory(wheel, tmp_path):
    venv = tmp_path / "venv"
    python, site = _venv_with(wheel, venv)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(REPO / "examples" / "byo" / "sets.jsonl", elsewhere / "sets.jsonl")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}

    def run(*args: str) -> subprocess.CompletedProcess:
        return _run([str(python), *args], cwd=elsewhere, env=env)

    # the package, its configs and paper numbers are the venv's, not the checkout's
    where = json.loads(
        run(
            "-c",
            "import json, pipeline, pipeline.reporting as r, pipeline.scorer.run"
            " as s; print(json.dumps([pipeline.__file__, str(s.conf_dir()),"
            " str(r.PAPER_DIR)]))",
        ).stdout.splitlines()[-1]
    )
    for path in where:
        assert Path(path).is_relative_to(site), where

    run("-m", "pipeline.score", "sets.jsonl", "--task", "sets", "--out", "scored.parquet")
    import pandas as pd

    scored = pd.read_parquet(elsewhere / "scored.parquet")
    n_rows = sum(1 for line in (elsewhere / "sets.jsonl").read_text().splitlines() if line.strip())
    assert len(scored) == n_rows and scored["bayes_text"].notna().all()
    assert (elsewhere / "scored.summary.csv").is_file()

    out = run(
        "-c",
        "import pipeline; df = pipeline.score([['a', 'a', 'b']], task='classes');"
        " print(df['bayes_text'].iloc[0], len(df))",
    ).stdout
    assert out.split()[-2:] == ["a", "1"], out

    # python -m pipeline, and the console script
    for argv in ([str(python), "-m", "pipeline"], [str(venv / "bin" / "taskaware")]):
        done = _run([*argv, "dataset=triviaqa_bundled", "stage=plan"], cwd=elsewhere, env=env)
        out = done.stdout + done.stderr
        assert "| smollm2-135m/triviaqa_bundled |" in out, out
        assert re.search(r"^1 cell\(s\), 0 GPUs", out, re.MULTILINE), out

    # the console scripts: the Hydra app's pre-Hydra checks, the scorer's command line
    bad = subprocess.run(
        [str(venv / "bin" / "taskaware"), "datset=maqa_bundled"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "did you mean dataset=" in bad.stderr, bad.stderr
    helped = _run([str(venv / "bin" / "taskaware-score"), "--help"], cwd=elsewhere, env=env)
    assert helped.stdout.startswith("usage: taskaware-score"), helped.stdout
    _run(
        [
            str(venv / "bin" / "taskaware-score"),
            "sets.jsonl",
            "--task",
            "sets",
            "-q",
            "--out",
            "again.parquet",
        ],
        cwd=elsewhere,
        env=env,
    )
    assert pd.read_parquet(elsewhere / "again.parquet").equals(scored)


def test_a_package_without_its_configs_says_how_to_fix_it(monkeypatch, tmp_path):
    from pipeline.runtime import resources
    from pipeline.runtime.errors import ConfigError

    places = {**resources._PLACES, "conf": (tmp_path / "pkg", tmp_path / "checkout", "config.yaml")}
    monkeypatch.setattr(resources, "_PLACES", places)
    with pytest.raises(ConfigError, match=r"config.yaml not found .*reinstall") as err:
        resources.conf_dir()
    assert "\n" not in str(err.value)
    assert resources.conf_path() == str(tmp_path / "checkout")  # Hydra then reports it absent
    (tmp_path / "checkout").mkdir()
    (tmp_path / "checkout" / "config.yaml").write_text("{}\n")
    assert resources.conf_dir() == tmp_path / "checkout"


def _foreign_pipeline_wheel(folder: Path) -> tuple[Path, str]:
    """PyPI's `pipeline` 0.1.0 (an unrelated project with a top-level pipeline/ package), from
    the package index; where the index cannot be reached, a wheel of the same files built here
    (stated in the returned label)."""
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "-q",
            "-d",
            str(folder),
            "pipeline==0.1.0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=PIP_ENV,
        check=False,
    )
    found = list(folder.glob("pipeline-0.1.0-*.whl"))
    if done.returncode == 0 and found:
        return found[0], "PyPI's pipeline 0.1.0"
    wheel = folder / "pipeline-0.1.0-py3-none-any.whl"  # the same layout as PyPI's
    info = "pipeline-0.1.0.dist-info"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("pipeline/__init__.py", "")
        z.writestr("pipeline/pipeline.py", "")
        z.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: pipeline\nVersion: 0.1.0\n")
        z.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        z.writestr(f"{info}/top_level.txt", "pipeline\n")
        z.writestr(f"{info}/RECORD", "")
    return wheel, "a stand-in with PyPI's pipeline 0.1.0 files (the index was not reachable)"


def test_doctor_names_a_pipeline_overwritten_by_pypis_or_shadowed_by_the_working_dir(
    wheel, tmp_path
):
    """`pip install pipeline` after this project replaces pipeline/__init__.py without a word
    from pip; a pipeline.py in the working folder shadows the package for `python` there:
    `taskaware doctor` (a console script, itself not shadowed) names each and the fix."""
    venv = tmp_path / "venv"
    python, _ = _venv_with(wheel, venv)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    here = tmp_path / "work"
    here.mkdir()

    def doctor() -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(venv / "bin" / "taskaware"), "doctor"],
            cwd=here,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    clean = doctor()
    assert (
        " ".join(clean.stdout.split()).count(
            "import name ok `import pipeline` is task-aware-pipeline, here and in this folder"
        )
        == 1
    ), clean.stdout + clean.stderr

    foreign, label = _foreign_pipeline_wheel(tmp_path / "foreign")
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--no-index",
            "-q",
            str(foreign),
        ],
        env=PIP_ENV,
    )
    broken = subprocess.run(
        [str(python), "-c", "import pipeline; pipeline.score"],
        cwd=here,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "has no attribute 'score'" in broken.stderr, (label, broken.stderr)  # what users met
    out = doctor()
    assert out.returncode == 1, (label, out.stdout, out.stderr)
    said = " ".join(out.stdout.split())
    assert "import name MISSING" in said and "was overwritten by pipeline 0.1.0" in said, (
        label,
        out.stdout,
    )
    assert (
        "pip uninstall -y pipeline && pip install --force-reinstall --no-deps "
        "task-aware-pipeline" in said
    )

    # the fix it prints, then a pipeline.py in the working folder
    _run(
        [sys.executable, "-m", "pip", "--python", str(python), "uninstall", "-y", "-q", "pipeline"],
        env=PIP_ENV,
    )
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--no-index",
            "--force-reinstall",
            "-q",
            str(wheel),
        ],
        env=PIP_ENV,
    )
    (here / "pipeline.py").write_text("print('my own pipeline script')\n")
    out = doctor()
    said = " ".join(out.stdout.split())
    assert out.returncode == 1 and "was overwritten" not in said, out.stdout
    assert "import name MISSING" in said and "pipeline.py, not this project" in said
    assert "rename" in said
