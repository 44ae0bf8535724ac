"""The map stage's forked workers (`pipeline.stages.map.map_prompts`): a `parallel_safe` mapper
over many prompts is split over worker processes with the same rows, in the same order, as one
process; any other mapper stays in this process."""

import os

import pytest

from pipeline.latent import get_space
from pipeline.mapping.settings import ExtractionSettings
from pipeline.stages import map as map_module
from pipeline.tasks.contract import MAPPERS, MapContext

COUNTRIES = ["France", "Spain", "Italy", "Germany", "Portugal", "Austria"]


def _work(n: int) -> list[tuple]:
    out = []
    for p in range(n):
        texts = [f"{COUNTRIES[p % 6]} and {COUNTRIES[(p + k) % 6]}" for k in range(5)] + ["no idea"]
        out.append(
            (
                f"p{p}",
                f"Which countries ({p})?",
                [("sample", k) for k in range(6)],
                texts,
                (),
                (4,) if p % 2 else (),
            )
        )  # odd prompts: sample 4 cut by the token limit
    return out


@pytest.fixture
def two_workers(monkeypatch):
    monkeypatch.setattr(map_module, "PARALLEL_MIN_PROMPTS", 8)
    monkeypatch.setattr("pipeline.runtime.devices.cpu_threads", lambda: 2)


def test_rule_reading_in_workers_gives_the_rows_of_one_process(two_workers):
    space = get_space("sets")
    mapper = MAPPERS["sets"].build(ExtractionSettings(), MapContext(space=space))
    assert mapper.parallel_safe
    work = _work(64)
    serial = [map_module.prompt_rows(mapper, space, item) for item in work]
    parallel = map_module.map_prompts(mapper, space, work)
    assert parallel == serial
    assert {rows[5]["latent"] for rows in parallel} == {"[]"}  # "no idea": no answer named
    assert parallel[3][1]["latent"] == '["germany", "portugal"]'  # "Germany and Portugal"
    assert all(row["read"] for rows in parallel for row in rows)  # the paper's rule reads all
    # the practitioner's rule reaches the workers: a cut sample is "no answer" (the empty set)
    rule = map_module.ReadingRule(unreadable="no_answer", truncated="unreadable")
    serial = [map_module.prompt_rows(mapper, space, item, rule) for item in work]
    parallel = map_module.map_prompts(mapper, space, work, rule)
    assert parallel == serial
    assert [rows[4]["read"] for rows in parallel[:4]] == [True, False, True, False]
    assert parallel[1][4]["latent"] == "[]" and parallel[1][4]["parse_ok"]


def _pid_mapper(safe: bool):
    def mapper(question, texts, attached=()):
        return [os.getpid()] * len(texts)

    mapper.parallel_safe = safe
    return mapper


class _PidSpace:
    def to_json(self, latent):
        return str(latent)


def test_only_a_parallel_safe_mapper_leaves_this_process(two_workers):
    work = _work(32)
    here = str(os.getpid())
    forked = {
        r["latent"]
        for rows in map_module.map_prompts(_pid_mapper(True), _PidSpace(), work)
        for r in rows
    }
    assert here not in forked and len(forked) >= 1
    kept = {
        r["latent"]
        for rows in map_module.map_prompts(_pid_mapper(False), _PidSpace(), work)
        for r in rows
    }
    assert kept == {here}
    few = {
        r["latent"]
        for rows in map_module.map_prompts(_pid_mapper(True), _PidSpace(), work[:4])
        for r in rows
    }
    assert few == {here}  # too few prompts to pay for workers
