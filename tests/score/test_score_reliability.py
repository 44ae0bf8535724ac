"""The scorer when the world misbehaves (issue 53): the input file changes while it is read,
`--out` is killed or the disk fills while writing, two scorers share a work folder, a SIGTERM.
Each test fails without its fix; every file is written here."""

import json
import os

import pandas as pd
import pytest

from pipeline.scorer import readers
from pipeline.scorer.readers import InputChunks, ScoreInputError
from pipeline.scorer.run import score


def _rows(n, label="Paris"):
    # 400 kB a row: the reader reads 1 MiB at a time, a change must land past what it holds
    return [
        {
            "id": f"q{i}",
            "question": "Capital of France?",
            "reference": "Paris",
            "responses": [label, label, "Lyon"],
            "note": "x" * 400_000,
        }
        for i in range(n)
    ]


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _changing_while_read(monkeypatch, path, changed: bytes):
    """The file is rewritten with `changed` once the first chunk is out, and restored byte for
    byte (its modification time too) once the reader has read to its end."""
    original, stat = path.read_bytes(), os.stat(path)
    real = readers._jsonl_chunks

    def chunks(*args, **kwargs):
        gen = real(*args, **kwargs)
        yield next(gen)
        path.write_bytes(changed)
        yield from gen
        path.write_bytes(original)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))

    monkeypatch.setattr(readers, "_jsonl_chunks", chunks)


def test_a_file_changed_during_the_read_and_restored_is_refused(tmp_path, monkeypatch):
    path = _write(tmp_path / "in.jsonl", _rows(6))
    changed = _rows(6)
    changed[5]["reference"] = "Lyon"
    _changing_while_read(monkeypatch, path, "".join(json.dumps(r) + "\n" for r in changed).encode())
    reader = InputChunks(path, chunk_rows=2)
    list(reader)
    with pytest.raises(ScoreInputError, match="changed while it was read"):
        reader.finish()


def test_no_stale_part_after_a_refused_read(tmp_path, monkeypatch):
    """The read refused, the rerun on the restored file scores what the file says (row q5's
    reference), not the part read from the changed content."""
    path = _write(tmp_path / "in.jsonl", _rows(6))
    work = tmp_path / "work"
    changed = _rows(6)
    changed[5]["reference"] = "Lyon"
    with monkeypatch.context() as m:
        _changing_while_read(m, path, "".join(json.dumps(r) + "\n" for r in changed).encode())
        with pytest.raises(ScoreInputError, match="changed while it was read"):
            score(path, task="classes", work_dir=work, part_prompts=2)
    again = score(path, task="classes", work_dir=work, part_prompts=2)
    fresh = score(path, task="classes", work_dir=tmp_path / "fresh", part_prompts=2)
    cols = ["prompt_id", "bayes_text", "bayes_risk", "quality_bayes_exact_match_error"]
    pd.testing.assert_frame_equal(again[cols], fresh[cols])
    assert again.set_index("prompt_id").loc["q5", "quality_bayes_exact_match_error"] == 0.0


def _small(path, n=4, label="Paris"):
    rows = [
        {
            "id": f"q{i}",
            "question": "Capital of France?",
            "reference": "Paris",
            "responses": [label, label, "Lyon"],
        }
        for i in range(n)
    ]
    return _write(path, rows)


def test_a_kill_while_out_is_written_leaves_the_previous_output_whole(tmp_path, monkeypatch):
    out = tmp_path / "res.parquet"
    score(_small(tmp_path / "a.jsonl"), task="classes", out=out)
    before = {p.name: p.read_bytes() for p in tmp_path.glob("res*") if p.is_file()}
    real = pd.DataFrame.to_parquet

    def killed_halfway(self, path, *args, **kwargs):
        real(self.head(1), path, *args, **kwargs)  # part of the rows are on disk ...
        raise KeyboardInterrupt("killed while writing --out")  # ... when the process dies

    monkeypatch.setattr(pd.DataFrame, "to_parquet", killed_halfway)
    with pytest.raises(KeyboardInterrupt):
        score(_small(tmp_path / "b.jsonl", n=3, label="Lyon"), task="classes", out=out)
    after = {p.name: p.read_bytes() for p in tmp_path.glob("res*") if p.is_file()}
    assert after == before and len(pd.read_parquet(out)) == 4
    assert list(tmp_path.rglob("*.tmp")) == []


@pytest.fixture
def small_disk(tmp_path):
    """A real 3 MiB tmpfs (root only, as in CI; scripts/chaos.py mounts the same)."""
    import subprocess

    folder = tmp_path / "disk"
    folder.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root): {done.stderr.strip()}")
    yield folder
    subprocess.run(["umount", "-l", str(folder)], check=False)


def test_a_full_disk_at_any_write_of_the_scorer_is_one_line_and_exit_2(
    tmp_path, small_disk, monkeypatch, capsys
):
    """--out and the work folder on a real tmpfs filled to leave 0 B ... 400 kB, so that each
    of the scorer's writes (input artifacts, parts, stages, rows, summaries, lock) is the one
    that fails: one `error:` line naming the full disk, exit 2, no temporary file left; with
    the space back the rerun gives the rows of a run that never failed."""
    import shutil

    from pipeline.scorer import cli, run

    monkeypatch.setattr(run, "PART_PROMPTS", 3)  # parts: their pickles are written too
    data = _small(tmp_path / "in.jsonl", n=7)
    clean = tmp_path / "clean.parquet"
    assert cli.main([str(data), "--task", "classes", "--out", str(clean), "-q"]) == 0
    capsys.readouterr()
    refused = 0
    for leave in (0, 3_000, 12_000, 40_000, 90_000, 150_000, 250_000, 400_000):
        out = small_disk / f"left{leave}" / "res.parquet"
        out.parent.mkdir()
        filler = small_disk / "filler"
        filler.write_bytes(b"\0" * max(0, shutil.disk_usage(small_disk).free - leave))
        rc = cli.main([str(data), "--task", "classes", "--out", str(out), "-q"])
        err = capsys.readouterr().err
        filler.unlink()
        if rc != 0:
            refused += 1
            assert rc == 2, err
            lines = [line for line in err.splitlines() if line.startswith("error:")]
            assert len(lines) == 1 and "no space left" in lines[0], err
            assert "Traceback" not in err
            assert list(out.parent.rglob("*.tmp")) == [], leave
            assert cli.main([str(data), "--task", "classes", "--out", str(out), "-q"]) == 0
            capsys.readouterr()
        pd.testing.assert_frame_equal(pd.read_parquet(out), pd.read_parquet(clean))
        shutil.rmtree(out.parent)
    assert refused >= 4, "too few writes hit the full disk: is the attack reaching them?"


def _scorer(*args):
    import subprocess
    import sys

    return subprocess.Popen(
        [sys.executable, "-m", "pipeline.score", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        start_new_session=True,
    )  # its own group: a group signal stays there


def test_three_scorers_on_one_work_folder_all_succeed_with_the_same_rows(tmp_path):
    """The others wait for the first's lock, then find its artifacts current."""
    data = _small(tmp_path / "in.jsonl", n=300)
    work = tmp_path / "work"
    procs = [
        _scorer(data, "--task", "sets", "--work-dir", work, "--out", tmp_path / f"out{i}.parquet")
        for i in range(3)
    ]
    logs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], logs
    for i in (1, 2):
        pd.testing.assert_frame_equal(
            pd.read_parquet(tmp_path / "out0.parquet"),
            pd.read_parquet(tmp_path / f"out{i}.parquet"),
        )


def test_sigterm_stops_the_scorer_in_one_line_with_exit_75_and_the_rerun_resumes(tmp_path):
    import signal
    import time

    from pipeline.runtime.stopping import REQUEUE_EXIT

    data = _small(tmp_path / "in.jsonl", n=6)
    work, out = tmp_path / "work", tmp_path / "out.parquet"
    proc = _scorer(data, "--task", "classes", "--work-dir", work, "--out", out)
    deadline = time.monotonic() + 120
    while not list(work.rglob("samples.parquet")):  # the input is in the store: map runs next
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0]
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    logs = proc.communicate(timeout=120)[0]
    assert proc.returncode == REQUEUE_EXIT, logs
    assert "Traceback" not in logs
    assert [line for line in logs.splitlines() if "stopped cleanly" in line] == [
        "error: stopped by SIGTERM: stopped cleanly (finished parts are kept; --out is whole: "
        "the previous one or this run's); rerun the same command to resume"
    ]
    assert not out.exists() and list(work.rglob("*.tmp")) == []
    again = _scorer(data, "--task", "classes", "--work-dir", work, "--out", out)
    assert again.wait(timeout=300) == 0
    fresh = tmp_path / "fresh.parquet"
    assert _scorer(data, "--task", "classes", "--out", fresh).wait(timeout=300) == 0
    pd.testing.assert_frame_equal(pd.read_parquet(out), pd.read_parquet(fresh))


def test_a_killed_runs_temporary_files_are_dropped_by_the_next_run(tmp_path):
    """A SIGKILL leaves `.res.parquet.<pid>.tmp` behind (no code runs); the next write of the
    same file removes the leftovers of processes that are gone, not those of live ones."""
    import subprocess
    import sys

    out = tmp_path / "res.parquet"
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    stale = tmp_path / f".res.parquet.{gone}.tmp"
    live = tmp_path / f".res.parquet.{os.getppid()}.tmp"
    stale.write_bytes(b"half a file")
    live.write_bytes(b"another run, still writing")
    score(_small(tmp_path / "a.jsonl"), task="classes", out=out)
    assert not stale.exists() and live.exists() and len(pd.read_parquet(out)) == 4


def test_a_parquet_changed_while_the_library_reads_it_is_scored_from_one_snapshot(
    tmp_path, monkeypatch
):
    """A parquet input (read whole) changed in place while pyarrow reads it, then restored
    with its modification time: the rows scored are those of the bytes the key was made from,
    so the run and a rerun agree with a fresh scoring of the file."""
    rows = _rows(6)
    for r in rows:
        r.pop("note")
    path = tmp_path / "in.parquet"
    pd.DataFrame(rows).to_parquet(path)
    changed = [dict(r) for r in rows]
    changed[5]["reference"] = "Lyon"
    original, stat = path.read_bytes(), os.stat(path)
    real = pd.read_parquet

    def read_while_changed(source, *args, **kwargs):
        pd.DataFrame(changed).to_parquet(path)  # the file changes as the library opens it ...
        try:
            return real(source, *args, **kwargs)
        finally:  # ... and is restored, modification time included
            path.write_bytes(original)
            os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))

    with monkeypatch.context() as m:
        m.setattr(pd, "read_parquet", read_while_changed)
        attacked = score(path, task="classes", work_dir=tmp_path / "w")
    again = score(path, task="classes", work_dir=tmp_path / "w")
    fresh = score(path, task="classes", work_dir=tmp_path / "fresh")
    cols = ["prompt_id", "bayes_text", "quality_bayes_exact_match_error"]
    pd.testing.assert_frame_equal(attacked[cols], fresh[cols])
    pd.testing.assert_frame_equal(again[cols], fresh[cols])


def _parts_file(path, n=4500):
    path.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"q{i}",
                    "reference": "Paris",
                    "responses": ["Paris", "Lyon", "Paris"][: 2 + i % 2],
                }
            )
            + "\n"
            for i in range(n)
        )
    )
    return path


def _wait_for(proc, ready, timeout=120):
    import time

    deadline = time.monotonic() + timeout
    while not ready():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0][-2000:]
        time.sleep(0.02)


def test_a_stopped_scorer_in_parts_exits_75_without_tracebacks_a_second_signal_too(tmp_path):
    """Ctrl-C reaches the whole process group (the workers too) and SLURM's scancel sends
    SIGTERM twice: one line, exit 75, no worker traceback, never a death by the signal."""
    import signal
    import time

    from pipeline.runtime.stopping import REQUEUE_EXIT

    # 10 parts: the run outlasts the signal's way even on an idle machine (3 parts finished first)
    data = _parts_file(tmp_path / "in.jsonl", n=20_000)
    for sig, twice in ((signal.SIGINT, False), (signal.SIGTERM, True)):
        work = tmp_path / f"work-{sig}"
        proc = _scorer(
            data, "--task", "classes", "--work-dir", work, "--out", tmp_path / f"out-{sig}.parquet"
        )
        proc_group = os.getpgid(proc.pid)
        _wait_for(proc, lambda w=work: list(w.rglob("part-00000/prompts.pkl")))
        if not twice:
            os.killpg(proc_group, sig)  # a terminal's Ctrl-C: the workers get it too
        else:
            proc.send_signal(sig)
            time.sleep(0.05)
            if proc.poll() is None:
                proc.send_signal(sig)  # scancel's second
        logs = proc.communicate(timeout=120)[0]
        assert proc.returncode == REQUEUE_EXIT, (sig, logs[-2000:])
        assert "Traceback" not in logs, logs[-3000:]
        assert len([x for x in logs.splitlines() if "stopped cleanly" in x]) == 1, logs[-2000:]


def test_a_killed_scorers_workers_die_with_it(tmp_path):
    """SIGKILL to the scorer left its forked workers running (~170 MB each, the input and the
    store's lock held); they now die with their parent."""
    import signal
    import time

    psutil = pytest.importorskip("psutil")
    data = _parts_file(tmp_path / "in.jsonl")
    proc = _scorer(
        data, "--task", "classes", "--work-dir", tmp_path / "w", "--out", tmp_path / "out.parquet"
    )
    parent = psutil.Process(proc.pid)
    _wait_for(proc, lambda: len(parent.children()) >= 1)
    workers = parent.children()
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    deadline = time.monotonic() + 20
    while any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in workers):
        assert time.monotonic() < deadline, [w.pid for w in workers if w.is_running()]
        time.sleep(0.1)


def test_a_full_disk_while_the_report_is_written_is_one_line_and_no_truncated_figure(
    tmp_path, small_disk, capsys
):
    """--report on a full disk: matplotlib's pdf writer failed with a 2-traceback page (exit 1)
    and left a truncated pdf; the figures are now drawn in memory and written whole."""
    import shutil

    from pipeline.scorer import cli

    data = _small(tmp_path / "in.jsonl", n=30)
    refused = 0
    for leave in (2_000, 20_000, 60_000, 120_000):
        report = small_disk / f"rep{leave}"
        filler = small_disk / "filler"
        filler.write_bytes(b"\0" * max(0, shutil.disk_usage(small_disk).free - leave))
        rc = cli.main([str(data), "--task", "classes", "--report", str(report), "-q"])
        err = capsys.readouterr().err
        filler.unlink()
        assert rc in (0, 2) and "Traceback" not in err, err[-2000:]
        if rc == 2:
            refused += 1
            assert [x for x in err.splitlines() if x.startswith("error:")][0].startswith(
                f"error: --report {report}: writing"
            ), err
            assert "no space left" in err
        for pdf in report.glob("*.pdf"):  # every figure written is whole
            assert pdf.read_bytes().rstrip().endswith(b"%%EOF"), pdf
        assert list(report.glob(".*.tmp")) == []
        shutil.rmtree(report, ignore_errors=True)
    assert refused >= 1
