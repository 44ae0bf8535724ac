"""A large input is scored in parts (`part_prompts`), on forked workers, each part its own store:
the rows, the summaries and the files written equal those of one store; a rerun reads every
part from its stage cache."""

import json
import random

import pandas as pd
import pytest

from pipeline.scorer.run import score

COUNTRIES = ["France", "Spain", "Italy", "Germany", "Portugal", "Austria", "Belgium", "Poland"]


@pytest.fixture
def many_prompts(tmp_path):
    rng = random.Random(0)
    path = tmp_path / "many.jsonl"
    with path.open("w") as fh:
        for i in range(70):
            truth = rng.sample(COUNTRIES, rng.randint(2, 4))
            responses = []
            for _ in range(6):
                named = [c for c in truth if rng.random() < 0.8] + (
                    [rng.choice(COUNTRIES)] if rng.random() < 0.3 else [])
                responses.append(", ".join(named) if named else "I don't know")
            row = {"id": f"q{i:03d}", "question": f"Which countries ({i})?",
                   "responses": responses, "logprobs": [-rng.random() * 5 for _ in responses]}
            if i % 7:  # some prompts without a reference
                row["reference"] = truth
            fh.write(json.dumps(row) + "\n")
    return path


def test_parts_give_the_rows_and_summaries_of_one_store(tmp_path, many_prompts, overrides,
                                                        monkeypatch):
    monkeypatch.setattr("pipeline.devices.cpu_threads", lambda: 2)
    whole = score(many_prompts, "sets", out=tmp_path / "whole.parquet", overrides=overrides)
    parts = score(many_prompts, "sets", out=tmp_path / "parts.parquet", overrides=overrides,
                  part_prompts=25)
    pd.testing.assert_frame_equal(whole, parts)
    for key in ("summary", "quality_summary", "reading_warnings", "n_rows"):
        assert whole.attrs[key] == parts.attrs[key], key
    assert whole.attrs["summary"] is not None and len(whole) == 70
    for suffix in ("parquet", "summary.csv", "quality.csv"):
        assert (tmp_path / f"whole.{suffix}").read_bytes() == \
            (tmp_path / f"parts.{suffix}").read_bytes(), suffix
    stores = sorted(p.name for p in (tmp_path / "parts.work").glob("*/part-*"))
    assert stores == ["part-00000", "part-00001", "part-00002"]


def test_a_rerun_reads_every_part_from_the_stage_cache(tmp_path, many_prompts, overrides):
    out = tmp_path / "o.parquet"
    first = score(many_prompts, "sets", out=out, overrides=overrides, part_prompts=30)
    latents = sorted((tmp_path / "o.work").glob("*/part-*/latents.parquet"))
    assert len(latents) == 3
    stamps = [p.stat().st_mtime_ns for p in latents]
    again = score(many_prompts, "sets", out=out, overrides=overrides, part_prompts=30)
    assert [p.stat().st_mtime_ns for p in latents] == stamps  # no part mapped again
    pd.testing.assert_frame_equal(first, again)


def test_the_intervals_over_all_parts_are_kept_and_read_again(tmp_path, many_prompts, overrides):
    out = tmp_path / "o.parquet"
    first = score(many_prompts, "sets", out=out, overrides=overrides, part_prompts=30)
    kept = next((tmp_path / "o.work").glob("*/uq_scores.parquet"))
    stamp = kept.stat().st_mtime_ns
    again = score(many_prompts, "sets", out=out, overrides=overrides, part_prompts=30)
    assert kept.stat().st_mtime_ns == stamp and first.attrs["summary"] == again.attrs["summary"]
    other = score(many_prompts, "sets", out=out, part_prompts=30,
                  overrides=[*overrides, "evaluation.ci_alpha=0.1"])
    assert kept.stat().st_mtime_ns != stamp  # other settings: computed again
    assert other.attrs["summary"] != first.attrs["summary"]
