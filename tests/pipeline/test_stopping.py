"""SIGTERM and SIGINT stop a run cleanly (issue 38): one log line, exit 75 (the code slurm.conf's
RequeueExit=75 requeues), nothing half-written, and a rerun resumes to the artifacts of a run
that was never stopped. The signals are real, sent to a real `python -m pipeline` process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from pipeline.artifacts.store import ArtifactStore
from pipeline.runtime.stopping import (
    REQUEUE_EXIT,
    StopRequested,
    check_stop,
    stop_requested,
    stopping_cleanly,
)

REPO = Path(__file__).resolve().parents[2]
GENERATED = ("dataset", "samples", "decodes")


@pytest.fixture
def default_handlers():
    """Python's default handlers for the test (a pytest-xdist worker ignores SIGINT, and an
    ignored signal stays ignored: a process started under nohup keeps that choice)."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_every_signal_raises_stop_requested_until_the_with_ends(sig, default_handlers):
    with pytest.raises(StopRequested), stopping_cleanly():  # caught in the body: raised at its end
        for _ in range(2):  # a second signal stops too: never a kill mid-write (exit 75 for SLURM)
            with pytest.raises(StopRequested, match=f"stopped by {signal.Signals(sig).name}"):
                os.kill(os.getpid(), sig)
                time.sleep(1)  # the handler runs between bytecodes of the main thread
        with pytest.raises(StopRequested):  # remembered: every safe point raises it again
            check_stop()
        assert stop_requested() is not None
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert stop_requested() is None


class _SignalsWhenCollected:
    """An object whose finaliser receives the signal: Python prints "Exception ignored in
    __del__" and goes on, so the StopRequested raised there never reaches the caller."""

    def __init__(self, sig):
        self.sig = sig

    def __del__(self):
        os.kill(os.getpid(), self.sig)
        time.sleep(0.05)  # the handler runs here, inside the finaliser


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_swallowed_in_a_finaliser_is_not_lost_at_any_of_40_points(
    sig, default_handlers, monkeypatch
):
    """The signal lands in a finaliser at step k of 40 steps of work (each step a safe point
    or not): the stop surfaces at the next safe point (so the finaliser did swallow it: the
    steps after k ran), or at the end of the `with`; never does the body end as if nothing
    happened."""
    reported = []  # what Python would print as "Exception ignored in ... __del__ / Traceback"
    monkeypatch.setattr(sys, "unraisablehook", lambda u: reported.append(u.exc_type))
    for k in range(40):
        done = []
        with pytest.raises(StopRequested, match=signal.Signals(sig).name):
            with stopping_cleanly():
                for step in range(40):
                    if step == k:
                        obj = _SignalsWhenCollected(sig)
                        del obj  # the finaliser runs now, and swallows the exception
                    done.append(step)
                    if step % 7 == 6:
                        check_stop()
        assert reported == []  # kept as the stop request, not printed as a traceback
        safe = next((s for s in range(k, 40) if s % 7 == 6), None)
        assert done == list(range((safe if safe is not None else 39) + 1))
        assert stop_requested() is None


def test_a_handler_someone_else_installed_is_left_alone(default_handlers):
    """submitit installs its own SIGTERM handler (it ignores SIGTERM and requeues on SIGUSR2);
    an ignored SIGINT (nohup, a background job) stays ignored."""

    def theirs(signum, frame):
        pass

    signal.signal(signal.SIGTERM, theirs)
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        with stopping_cleanly():
            assert signal.getsignal(signal.SIGTERM) is theirs
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) is theirs
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _args(model: Path, out: Path, tmp_path: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pipeline",
        f"model.path={model}",
        "model.name=tiny",
        "model.dtype=float32",
        "model.temperature=1.0",
        "dataset=triviaqa_bundled",
        "dataset.limit=6",
        "dataset.max_new_tokens=4",
        "generation.n_samples=2",
        "generation.shard_size=1",
        "generation.strategies=[greedy]",
        "generation.ptrue=false",
        "stage=generate",
        "backend.num_threads=1",
        f"output_root={out}",
        f"cache_dir={tmp_path / 'cache'}",
        "wandb.enabled=false",
        f"hydra.run.dir={tmp_path / 'hydra' / out.name}",
    ]


@pytest.mark.parametrize("sig", [signal.SIGTERM])  # SIGINT takes the same path (above)
def test_a_signal_mid_generate_stops_in_one_line_with_the_requeue_code_and_resumes(
    tiny_chat_model, tmp_path, sig
):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled"}
    clean = subprocess.run(
        _args(tiny_chat_model, tmp_path / "clean", tmp_path),
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert clean.returncode == 0, clean.stderr[-2000:]

    out = tmp_path / "stopped"
    cell = out / "default" / "tiny" / "triviaqa_bundled"
    proc = subprocess.Popen(
        _args(tiny_chat_model, out, tmp_path),
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 300
    while not list(cell.glob("samples.shards/*/shard-00000.json")):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0][-2000:]
        time.sleep(0.02)
    proc.send_signal(sig)
    logs = proc.communicate(timeout=120)[0]
    assert proc.returncode == REQUEUE_EXIT, logs[-2000:]
    assert "Traceback" not in logs, logs[-3000:]
    stopped = [line for line in logs.splitlines() if "stopped cleanly" in line]
    assert len(stopped) == 1 and f"stopped by {signal.Signals(sig).name}" in stopped[0], logs
    assert not (cell / "samples.parquet").exists()  # stopped before the merge
    assert [p for p in cell.rglob("*.tmp")] == []

    resumed = subprocess.run(
        _args(tiny_chat_model, out, tmp_path),
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    want = ArtifactStore(tmp_path / "clean" / "default" / "tiny" / "triviaqa_bundled")
    got = ArtifactStore(cell)
    for name in GENERATED:
        pd.testing.assert_frame_equal(got.read(name), want.read(name))


def test_a_library_failing_in_its_cleanup_after_the_stop_is_still_the_stop(default_handlers):
    """matplotlib's pdf writer, cut by the signal mid-file, raised AttributeError from its own
    `finally`: the run printed that traceback instead of stopping cleanly with exit 75."""
    with pytest.raises(StopRequested, match="SIGTERM") as caught, stopping_cleanly():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)
        finally:
            raise AttributeError("'Stream' object has no attribute 'pos'")
    assert isinstance(caught.value.__cause__, AttributeError)
    with pytest.raises(AttributeError), stopping_cleanly():  # no stop asked: its own error
        raise AttributeError("x")
