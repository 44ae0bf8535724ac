"""Every cache record carries the digest of its own content and key, checked on read: a record
edited on disk (still valid JSON), one written before digests, or a pair-cache row changed in
sqlite is a miss, asked again, counted, and logged once per cache. The LLM client against the
loopback stand-in server (scripts/openai_stand_in.py); sqlite for real."""

from __future__ import annotations

import json
import logging
import sqlite3
import sys
from pathlib import Path

import pytest

from pipeline.clients.disk_cache import JsonRecordCache, record_digest, sha256_key
from pipeline.clients.llm_client import LLMClient
from pipeline.mapping.equivalence import PairCache

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from openai_stand_in import FakeOpenAIServer


@pytest.fixture()
def server():
    with FakeOpenAIServer() as srv:
        yield srv


def make_client(server, tmp_path):
    return LLMClient(
        model="rule-server", base_url=server.base_url, cache_dir=tmp_path / "llm", backoff_base=0.01
    )


def record_of(tmp_path, content):
    """The cache file answering the user message `content`, and its JSON."""
    for path in (tmp_path / "llm").rglob("*.json"):
        record = json.loads(path.read_text())
        if record["messages"][0]["content"] == content:
            return path, record
    raise AssertionError(f"no record for {content!r}")


def warnings_of(caplog):
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_an_edited_record_is_a_miss_asked_again_counted_and_logged_once(server, tmp_path, caplog):
    client = make_client(server, tmp_path)
    assert client.complete(["paris", "rome"]) == ["PARIS", "ROME"]
    for content in ("paris", "rome"):  # valid JSON, same request, another answer
        path, record = record_of(tmp_path, content)
        path.write_text(json.dumps({**record, "response": "BERLIN"}))
    fresh = make_client(server, tmp_path)
    with caplog.at_level(logging.WARNING, logger="pipeline"):
        assert fresh.complete(["paris", "rome"]) == ["PARIS", "ROME"]  # not BERLIN
    assert server.state.requests == 4 and fresh.stats.cache_hits == 0
    assert fresh._cache.unverified == 2
    said = warnings_of(caplog)
    assert len(said) == 1, said  # once per cache, not once per record
    assert said[0].startswith(f"cache records in {tmp_path / 'llm'} did not verify")
    assert "read as misses and asked again" in said[0]
    # the answers asked again were written back with their digests: served from then on
    third = make_client(server, tmp_path)
    assert third.complete(["paris", "rome"]) == ["PARIS", "ROME"]
    assert third.stats.cache_hits == 2 and third._cache.unverified == 0
    assert server.state.requests == 4


def test_a_record_without_a_digest_is_a_miss(server, tmp_path):
    """A cache written before digests: its records are asked again (and rewritten)."""
    client = make_client(server, tmp_path)
    client.complete(["paris"])
    path, record = record_of(tmp_path, "paris")
    assert record["digest"] == record_digest(
        path.stem, {k: v for k, v in record.items() if k != "digest"}
    )
    del record["digest"]
    path.write_text(json.dumps(record))
    fresh = make_client(server, tmp_path)
    assert fresh.complete(["paris"]) == ["PARIS"]
    assert (server.state.requests, fresh.stats.cache_hits, fresh._cache.unverified) == (2, 0, 1)
    assert "digest" in json.loads(path.read_text())


def test_a_record_round_trips_with_its_digest_and_any_change_is_a_miss(tmp_path, caplog):
    cache = JsonRecordCache(tmp_path, key_of=lambda r: sha256_key(r["asked"]))

    def put(asked):
        key = sha256_key(asked)
        record = {"asked": asked, "answer": "Paris \ud800 é", "lp": [-0.5, float("-inf")], "n": 3}
        cache.put(key, record)
        return key, record, json.loads(cache.path(key).read_text())

    key, record, stored = put("q")
    got = cache.get(key)
    assert got == record and "digest" not in got and cache.unverified == 0
    assert stored["digest"] == record_digest(key, record) and len(stored["digest"]) == 64
    edits = [
        lambda r: {**r, "answer": "Berlin"},  # the content
        lambda r: {**r, "n": 3.0},  # a type: 3 and 3.0 are not the same record
        lambda r: {**r, "extra": None},  # a field added
        lambda r: {k: v for k, v in r.items() if k != "n"},  # a field removed
        lambda r: {**r, "digest": r["digest"][:-1] + "0"},  # the digest itself
        lambda r: "{damaged",  # not JSON
        lambda r: [r],  # JSON, not a record
    ]
    with caplog.at_level(logging.WARNING, logger="pipeline"):
        for i, edit in enumerate(edits):
            key, _, stored = put(f"q{i}")
            edited = edit(stored)
            cache.path(key).write_text(edited if isinstance(edited, str) else json.dumps(edited))
            assert cache.get(key) is None and cache.get(key) is None  # read twice, counted once
        # a verified record under another key (a swapped file): its digest names its own key
        cache.path(key).write_text(cache.path(sha256_key("q")).read_text())
        cache._pending.discard(key)  # (as if rewritten in between: counted again)
        assert cache.get(key) is None
    assert cache.unverified == len(edits) + 1
    assert len(warnings_of(caplog)) == 1
    assert cache.get(sha256_key("absent")) is None and cache.unverified == len(edits) + 1
    assert cache.get(sha256_key("q")) == record  # the untouched one still verifies
    # a field named "digest" inside the content is content; at the top it is the cache's own
    nested = {"asked": "nested", "answer": {"digest": '"digest": "' + "0" * 64 + '"}'}}
    cache.put(sha256_key("nested"), nested)
    assert cache.get(sha256_key("nested")) == nested
    with pytest.raises(ValueError, match="without a 'digest' field"):
        cache.put(sha256_key("x"), {"asked": "x", "digest": "mine"})
    empty = JsonRecordCache(tmp_path / "plain")  # no key_of: the digest alone
    empty.put("k", {})
    assert empty.get("k") == {} and empty.path("k").read_text().startswith('{"digest": "')


def test_a_key_of_mismatch_with_a_valid_digest_is_a_miss(tmp_path):
    """A record whose digest verifies but whose request is another key's (written by code that
    keyed it wrongly) is still not served."""
    cache = JsonRecordCache(tmp_path, key_of=lambda r: sha256_key(r["asked"]))
    key = sha256_key("q")
    cache.put(key, {"asked": "not q", "answer": "Rome"})
    assert cache.get(key) is None and cache.unverified == 1


def _pairs():
    return {PairCache.key("nli", "q", f"a{i}", "b"): [0.1 * i, 0.5, 0.25] for i in range(6)}


def test_a_pair_cache_row_edited_in_sqlite_is_a_miss_counted_and_logged_once(tmp_path, caplog):
    pairs = _pairs()
    PairCache(tmp_path).put_many(pairs)
    edited, nulled, *_ = list(pairs)
    cache = PairCache(tmp_path)
    with sqlite3.connect(cache.path) as con:
        con.execute("UPDATE pairs SET value = ? WHERE key = ?", ("[0.9, 0.05, 0.05]", edited))
        con.execute("UPDATE pairs SET digest = NULL WHERE key = ?", (nulled,))
    with caplog.at_level(logging.WARNING, logger="pipeline"):
        found = cache.get_many(list(pairs))
        assert cache.get_many([edited]) == {}
    assert found == {k: v for k, v in pairs.items() if k not in (edited, nulled)}
    assert cache.unverified == 3
    said = warnings_of(caplog)
    assert len(said) == 1 and said[0].startswith(
        f"2 pair cache rows in {cache.path} did not verify"
    ), said
    cache.put_many({edited: pairs[edited], nulled: pairs[nulled]})  # scored again
    assert cache.get_many(list(pairs)) == pairs and cache.unverified == 3


def test_a_pair_cache_from_before_digests_opens_and_its_rows_are_misses(tmp_path):
    path = tmp_path / "equivalence_pairs.sqlite"
    pairs = _pairs()
    with sqlite3.connect(path) as con:  # the old schema: no digest column
        con.execute("CREATE TABLE pairs (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        con.executemany(
            "INSERT INTO pairs VALUES (?, ?)", [(k, json.dumps(v)) for k, v in pairs.items()]
        )
    cache = PairCache(tmp_path)
    assert cache.get_many(list(pairs)) == {} and cache.unverified == len(pairs)
    cache.put_many(pairs)
    assert PairCache(tmp_path).get_many(list(pairs)) == pairs


def test_a_verified_row_that_is_no_list_of_numbers_is_a_miss_and_never_shifts_others(tmp_path):
    """Rows are parsed in one call; a row holding "1, 2" (two values where one list belongs)
    with a digest that matches must not shift the values of the rows after it."""
    pairs = _pairs()
    cache = PairCache(tmp_path)
    cache.put_many(pairs)
    odd = {"odd-a": "0.5, 0.25", "odd-b": '{"a": 1}', "odd-c": '["x"]'}
    with sqlite3.connect(cache.path) as con:
        con.executemany(
            "INSERT INTO pairs VALUES (?, ?, ?)",
            [(k, v, PairCache._row_digest(k, v)) for k, v in odd.items()],
        )
    assert cache.get_many(["odd-a", *pairs, "odd-b", "odd-c"]) == pairs
    assert cache.unverified == len(odd)


def test_pair_values_are_stored_as_json_dumps_writes_them_and_read_back_exactly(tmp_path):
    values = {
        "a": [0.1, 0.25, 1.0],
        "b": [5e-324, -0.0, 1e22, 123456789.123],
        "c": [1, 2],
        "d": [float("nan"), float("inf"), -1.5],
    }
    cache = PairCache(tmp_path)
    cache.put_many(values)
    with sqlite3.connect(cache.path) as con:
        stored = dict(con.execute("SELECT key, value FROM pairs"))
    assert stored == {k: json.dumps([float(x) for x in v]) for k, v in values.items()}
    got = cache.get_many(list(values))
    assert {k: repr(v) for k, v in got.items()} == {
        k: repr([float(x) for x in v]) for k, v in values.items()
    }
    assert cache.unverified == 0
