"""Artifact store: contract validation, atomic writes, manifests as commit markers, shards."""

import subprocess
import sys
import textwrap

import pandas as pd
import pytest

from pipeline.artifacts.store import ArtifactError, ArtifactStore, cache_key


def _samples(n=3):
    return pd.DataFrame(
        {
            "prompt_id": [f"p{i}" for i in range(n)],
            "sample_idx": list(range(n)),
            "text": ["a", "b", "c"][:n],
            "token_logprobs": [[-0.5, -0.25], [-1.0], []][:n],
            "logprob": [-0.75, -1.0, 0.0][:n],
        }
    )


def test_roundtrip_and_manifest(tmp_path):
    store = ArtifactStore(tmp_path / "cell")
    store.write(
        "samples", _samples(), key="k1", config={"a": 1}, inputs={"x": "y"}, wall_time_s=1.5
    )
    back = store.read("samples")
    assert back["token_logprobs"].map(list).tolist() == [[-0.5, -0.25], [-1.0], []]
    m = store.manifest("samples")
    assert m["cache_key"] == "k1" and m["rows"] == 3 and m["config"] == {"a": 1}
    assert m["inputs"] == {"x": "y"} and m["wall_time_s"] == 1.5
    assert "pandas" in m["versions"] and m["git_revision"]
    assert store.is_current("samples", "k1") and not store.is_current("samples", "k2")


def test_contract_violations_are_named(tmp_path):
    store = ArtifactStore(tmp_path)
    with pytest.raises(ArtifactError, match=r"missing \['logprob'\]"):
        store.write("samples", _samples().drop(columns="logprob"), key="k")
    with pytest.raises(ArtifactError, match=r"unexpected \['extra'\]"):
        store.write("samples", _samples().assign(extra=1), key="k")
    with pytest.raises(ArtifactError, match="wrong type"):
        store.write("samples", _samples().assign(sample_idx=["x", "y", "z"]), key="k")
    with pytest.raises(ArtifactError, match="unknown artifact"):
        store.write("nope", _samples(), key="k")
    assert not list(tmp_path.iterdir())  # nothing partial left behind


def test_missing_artifact_error_says_what_to_run(tmp_path):
    with pytest.raises(ArtifactError, match="rerun `python -m pipeline stage=map`"):
        ArtifactStore(tmp_path).read("latents")


def test_parquet_without_manifest_is_not_an_artifact(tmp_path):
    """A crash between the parquet rename and the manifest leaves nothing that counts."""
    store = ArtifactStore(tmp_path)
    store.write("samples", _samples(), key="k1")
    store.manifest_path("samples").unlink()
    assert store.key("samples") is None and not store.is_current("samples", "k1")


def test_killed_writer_leaves_no_partial_file(tmp_path):
    """SIGKILL in the middle of a write: the previous artifact survives intact."""
    store = ArtifactStore(tmp_path)
    store.write("samples", _samples(), key="old")
    script = textwrap.dedent(f"""
        import os, signal, pyarrow.parquet as pq
        from pipeline.artifacts.store import ArtifactStore
        import pandas as pd
        def die(*a, **k):
            os.kill(os.getpid(), signal.SIGKILL)
        pq.write_table = die  # killed while the temp file is being written
        df = pd.DataFrame({{"prompt_id": ["z"], "sample_idx": [0], "text": ["t"],
                            "token_logprobs": [[0.0]], "logprob": [0.0]}})
        ArtifactStore({str(tmp_path)!r}).write("samples", df, key="new")
    """)
    proc = subprocess.run([sys.executable, "-c", script])
    assert proc.returncode == -9
    # the manifest was removed before the write began, so the cell is stale, never half-new
    assert store.key("samples") is None
    store.write("samples", _samples(), key="new")
    assert store.read("samples")["prompt_id"].tolist() == ["p0", "p1", "p2"]
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert len(leftovers) <= 1  # the killed process's temp file, never renamed into place


def test_cache_key_depends_on_config_and_inputs():
    a = cache_key({"x": 1, "y": [1, 2]}, {"samples": "k"})
    assert a == cache_key({"y": [1, 2], "x": 1}, {"samples": "k"})  # order-free
    assert a != cache_key({"x": 2, "y": [1, 2]}, {"samples": "k"})
    assert a != cache_key({"x": 1, "y": [1, 2]}, {"samples": "k2"})
    assert a != cache_key(
        {"x": 1, "y": [1, 2]}, {"samples": "k"}, code_version=2
    )  # a stage's code changed


def test_shards(tmp_path):
    store = ArtifactStore(tmp_path)
    store.write_shard("samples", "key", 0, _samples(2))
    ids = ["p0", "p1"]
    assert store.has_shard("samples", "key", 0, ids) and not store.has_shard(
        "samples", "key", 1, ids
    )
    assert not store.has_shard("samples", "other", 0, ids)
    df = store.read_shards("samples", "key", [(0, ids)])
    assert df["prompt_id"].tolist() == ["p0", "p1"]
    store.drop_shards("samples")
    assert not (tmp_path / "samples.shards").exists()


def test_manifest_records_size_and_sha256_of_the_file(tmp_path):
    import hashlib

    store = ArtifactStore(tmp_path)
    store.write("samples", _samples(), key="k1")
    m = store.manifest("samples")
    data = store.path("samples").read_bytes()
    assert m["bytes"] == len(data) and m["sha256"] == hashlib.sha256(data).hexdigest()
    assert m["rows"] == len(_samples())
    assert store.is_current("samples", "k1") and store.damage("samples") is None


def test_a_truncated_artifact_is_not_current_and_its_read_names_the_file(tmp_path):
    store = ArtifactStore(tmp_path)
    store.write("samples", _samples(), key="k1")
    path = store.path("samples")
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    assert not store.is_current("samples", "k1")
    assert "bytes" in store.damage("samples")
    with pytest.raises(ArtifactError) as err:
        store.read("samples")
    assert str(path) in str(err.value) and "stage=generate" in str(err.value)


def test_a_valid_parquet_with_other_rows_is_not_trusted(tmp_path):
    """A file replaced by another valid parquet (here: half the rows) is caught by its hash."""
    import pyarrow.parquet as pq

    from pipeline.artifacts.store import to_table

    store = ArtifactStore(tmp_path)
    store.write("samples", _samples(), key="k1")
    half = _samples().iloc[: len(_samples()) // 2]
    pq.write_table(to_table("samples", half), store.path("samples"))
    assert not store.is_current("samples", "k1")
    assert store.damage("samples").endswith(
        "does not hash to its manifest's sha256"
    ) or "bytes" in store.damage("samples")
    with pytest.raises(ArtifactError, match="cannot be trusted"):
        store.read("samples")


def test_a_manifest_without_hash_is_recomputed(tmp_path):
    import json

    store = ArtifactStore(tmp_path)
    store.write("samples", _samples(), key="k1")
    m = store.manifest("samples")
    del m["sha256"]
    store.manifest_path("samples").write_text(json.dumps(m))
    assert not store.is_current("samples", "k1")


def test_a_damaged_shard_is_removed_and_named(tmp_path):
    store = ArtifactStore(tmp_path)
    store.write_shard("samples", "k", 0, _samples())
    store.shard_path("samples", "k", 0).write_bytes(b"not parquet")
    with pytest.raises(ArtifactError, match="not those its sidecar vouches for.*rerun the stage"):
        store.read_shards("samples", "k", [(0, ["p0", "p1", "p2"])])
    assert not store.has_shard("samples", "k", 0, ["p0", "p1", "p2"])


@pytest.mark.parametrize("attack", ["other_prompts", "swapped", "no_sidecar", "other_key"])
def test_a_shard_counts_only_when_its_sidecar_vouches_for_it(tmp_path, attack, caplog):
    """A shard of another partition (shard_size changed), one overwritten by another shard, one
    whose sidecar never landed (killed in between) or made under another key is not used: it is
    removed with a warning naming it, so that the stage redoes it."""
    store = ArtifactStore(tmp_path)
    store.write_shard("samples", "k", 0, _samples(2))
    store.write_shard("samples", "k", 1, _samples(3).iloc[2:])
    wanted = ["p0", "p1"]
    if attack == "other_prompts":
        wanted = ["p0"]
    elif attack == "swapped":
        store.shard_path("samples", "k", 0).write_bytes(
            store.shard_path("samples", "k", 1).read_bytes()
        )
    elif attack == "no_sidecar":
        store.shard_path("samples", "k", 0).with_suffix(".json").unlink()
    else:
        meta = store.shard_path("samples", "k", 0).with_suffix(".json")
        meta.write_text(meta.read_text().replace('"key": "k"', '"key": "k2"'))
    assert not store.has_shard("samples", "k", 0, wanted)
    assert (
        not store.shard_path("samples", "k", 0).exists()
        and "removed, it will be redone" in caplog.text
    )
    assert store.has_shard("samples", "k", 1, ["p2"])  # the intact one stays


def test_the_cell_lock_makes_a_second_process_wait(tmp_path):
    """Two processes: the second blocks until the first releases the lock (POSIX record locks,
    per process: the real contention needs two)."""
    import time

    code = textwrap.dedent(f"""
        import logging, sys, time
        from pathlib import Path
        from pipeline.artifacts.store import cell_lock
        logging.basicConfig(level=logging.INFO)
        with cell_lock(Path({str(tmp_path)!r})):
            print("in", time.time(), flush=True)
            time.sleep(float(sys.argv[1]))
            print("out", time.time(), flush=True)
    """)
    first = subprocess.Popen([sys.executable, "-c", code, "2"], stdout=subprocess.PIPE, text=True)
    assert first.stdout.readline().startswith("in")
    started = time.time()
    second = subprocess.run(
        [sys.executable, "-c", code, "0"], capture_output=True, text=True, timeout=60
    )
    out_first = float(first.stdout.readline().split()[1])
    first.wait(timeout=60)
    in_second = float(second.stdout.split()[1])
    assert in_second >= out_first > started  # entered only after the first left
    assert "waiting for that run to finish" in second.stderr and "pid" in second.stderr
