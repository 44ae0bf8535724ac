"""scripts/gpu_check.py as a CPU smoke test: the same checks a GPU node runs (issue 58), on the
tiny random models it builds, with `--device cpu --quick`. Nothing here needs a GPU."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu_check.py"


def _load_script():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path_factory.mktemp("gpu_check") / "gpu_check.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--device", "cpu", "--quick", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.is_file(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, json.loads(out.read_text())


def test_every_check_runs_and_none_fails(smoke):
    proc, report = smoke
    expected = [name for name, _ in _load_script().CHECKS]
    assert [c["name"] for c in report["checks"]] == expected
    failed = {c["name"]: c["reason"] for c in report["checks"] if c["status"] == "fail"}
    assert failed == {}, proc.stdout[-3000:]
    assert proc.returncode == 0, proc.stderr[-3000:]
    for check in report["checks"]:
        assert check["status"] in ("pass", "skip")
        assert check["device"] == "cpu" and check["device_name"]
        assert check["torch"] and check["transformers"]
        if check["status"] == "skip":  # only where a library is really absent
            assert importlib.util.find_spec(check["missing_library"]) is None, check
    # the table is printed
    assert "passed, 0 failed" in proc.stdout


def test_numbers_are_sane(smoke):
    _, report = smoke
    checks = {c["name"]: c for c in report["checks"]}
    rates = {
        f"{name}:{k}": v
        for name, c in checks.items()
        if c["status"] == "pass"
        for k, v in c["numbers"].items()
        if k.endswith("_per_s")
    }
    assert any(k.startswith("generation/") for k in rates)
    assert all(
        isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in rates.values()
    ), rates
    for family in ("llama", "qwen2"):
        for dtype in ("float32", "bfloat16"):
            numbers = checks[f"generation/{family}/{dtype}"]["numbers"]
            assert numbers["model_weights"] == f"cpu/{dtype}"
            assert numbers["own_loop"] is True
            assert numbers["rerun_identical_share"] == 1.0
            for key in ("sample", "greedy", "beam", "contrastive"):
                assert numbers[f"{key}_tokens_per_s"] > 0
    nli = checks["nli_deberta"]["numbers"]
    assert nli["float32_pairs_per_s"] > 0 and nli["bfloat16_pairs_per_s"] > 0
    assert 0 <= nli["half_vs_float32_max_abs"] <= 0.05
    paper = checks["config_paper"]["numbers"]
    assert paper["device"] == "cpu" and paper["nli_dtype_resolved"] == "float32"
    assert paper["nli_judge"] == {"device": "cpu", "dtype": "float32", "batch_size": 16}
    assert report["device"] == "cpu" and report["versions"]["torch"]


def test_a_failing_check_is_recorded_and_the_run_goes_on(tmp_path, monkeypatch):
    """An exception fails its own check (its text is the reason), the others still run, and
    the exit status says a check failed."""
    gpu_check = _load_script()

    def broken(ctx, rec):
        raise RuntimeError("Expected all tensors to be on the same device, cuda:0 and cpu")

    monkeypatch.setattr(
        gpu_check,
        "CHECKS",
        [("broken", broken), *[c for c in gpu_check.CHECKS if c[0] == "environment"]],
    )
    out = tmp_path / "r.json"
    assert gpu_check.main(["--device", "cpu", "--out", str(out)]) == 1
    report = json.loads(out.read_text())
    status = {c["name"]: (c["status"], c["reason"]) for c in report["checks"]}
    assert status["environment"][0] == "pass"
    assert status["broken"][0] == "fail"
    assert status["broken"][1].startswith("DEVICE MISMATCH: RuntimeError: Expected all tensors")
