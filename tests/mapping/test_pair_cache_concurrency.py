"""The shared pair cache under concurrent cells: several processes write and read one sqlite
file at once (as the cells of a local sweep or SLURM array on one cache_dir do). sqlite's
rollback journal serialises the writers (busy timeout 60 s); WAL is not used because it needs
shared memory that network filesystems of clusters do not give. Real processes, real sqlite."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

from pipeline.mapping.equivalence import PairCache

WRITERS, BATCHES, PER_BATCH = 4, 12, 250


def _value(key: str) -> list[float]:
    return [int(key[:6], 16) / 16**6, 0.25, 0.5]


def _work(cache_dir: str, writer: int) -> tuple[int, int]:
    """Write BATCHES transactions of PER_BATCH pairs (half of them shared with the next writer)
    and read back everything written so far after each; returns (written, wrong reads)."""
    cache = PairCache(cache_dir)
    wrong, mine = 0, []
    for b in range(BATCHES):
        keys = [
            PairCache.key("m", "q", f"w{(writer + (i % 2)) % WRITERS}-{b}", f"a{i}")
            for i in range(PER_BATCH)
        ]
        cache.put_many({k: _value(k) for k in keys})
        mine.extend(keys)
        found = cache.get_many(mine)
        wrong += sum(found.get(k) != _value(k) for k in mine)
    return len(mine), wrong


def test_concurrent_cells_share_one_pair_cache_without_loss(tmp_path):
    context = multiprocessing.get_context("spawn")  # fresh interpreters, as separate cells
    with ProcessPoolExecutor(max_workers=WRITERS, mp_context=context) as pool:
        results = list(pool.map(_work, [str(tmp_path)] * WRITERS, range(WRITERS)))
    assert all(wrong == 0 for _, wrong in results), results
    # writer w wrote the even pairs of label w and the odd pairs of label w + 1: every pair once
    expected = {
        PairCache.key("m", "q", f"w{w}-{b}", f"a{i}")
        for w in range(WRITERS)
        for b in range(BATCHES)
        for i in range(PER_BATCH)
    }
    found = PairCache(tmp_path).get_many(sorted(expected))
    assert set(found) == expected
    assert all(found[k] == _value(k) for k in expected)


def _open_and_use(cache_dir: str, writer: int) -> tuple[int, int]:
    """Open a cache written before row digests (each process adds the digest column if no other
    did first), then write and read back pairs of its own: (pairs found, unverified rows)."""
    cache = PairCache(cache_dir)
    mine = {
        PairCache.key("m", "q", f"new-{writer}", f"a{i}"): _value(str(i).zfill(6))
        for i in range(50)
    }
    cache.put_many(mine)
    return len(cache.get_many(list(mine))), cache.unverified


def test_concurrent_cells_upgrade_a_pair_cache_from_before_digests(tmp_path):
    import json
    import sqlite3

    old = {PairCache.key("m", "q", "old", f"a{i}"): [0.5, 0.25, 0.25] for i in range(20)}
    with sqlite3.connect(tmp_path / "equivalence_pairs.sqlite") as con:
        con.execute("CREATE TABLE pairs (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        con.executemany(
            "INSERT INTO pairs VALUES (?, ?)", [(k, json.dumps(v)) for k, v in old.items()]
        )
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=WRITERS, mp_context=context) as pool:
        results = list(pool.map(_open_and_use, [str(tmp_path)] * WRITERS, range(WRITERS)))
    assert results == [(50, 0)] * WRITERS
    cache = PairCache(tmp_path)
    assert cache.get_many(list(old)) == {} and cache.unverified == len(old)  # no digest: misses
