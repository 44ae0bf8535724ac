"""A large input is scored in parts (`part_prompts`), on forked workers, each part its own store:
the rows, the summaries and the files written equal those of one store; a rerun reads every
part from its stage cache."""

import json
import random

import pandas as pd
import pyarrow.parquet as pq
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
                    [rng.choice(COUNTRIES)] if rng.random() < 0.3 else []
                )
                responses.append(", ".join(named) if named else "I don't know")
            row = {"id": f"q{i:03d}", "question": f"Which countries ({i})?", "responses": responses}
            if i >= 25:  # the first part (of 25) without log-probs
                row["logprobs"] = [-rng.random() * 5 for _ in responses]
            if i % 7:  # some prompts without a reference
                row["reference"] = truth
            fh.write(json.dumps(row) + "\n")
    return path


def test_parts_give_the_rows_and_summaries_of_one_store(
    tmp_path, many_prompts, overrides, monkeypatch
):
    monkeypatch.setattr("pipeline.runtime.devices.cpu_threads", lambda: 2)
    work = {"whole": tmp_path / "whole.work", "parts": tmp_path / "parts.work"}
    for suffix in ("parquet", "jsonl", "csv"):  # the later formats from the stage caches
        whole = score(
            many_prompts,
            "sets",
            out=tmp_path / f"whole.{suffix}",
            overrides=overrides,
            work_dir=work["whole"],
        )
        parts = score(
            many_prompts,
            "sets",
            out=tmp_path / f"parts.{suffix}",
            overrides=overrides,
            part_prompts=25,
            work_dir=work["parts"],
        )
        pd.testing.assert_frame_equal(whole, parts)
        for key in ("summary", "quality_summary", "reading_warnings", "n_rows"):
            assert whole.attrs[key] == parts.attrs[key], key
        if suffix == "parquet":  # the parts' file is written a part (row group) at a time
            pd.testing.assert_frame_equal(
                pd.read_parquet(tmp_path / "whole.parquet"),
                pd.read_parquet(tmp_path / "parts.parquet"),
            )
            assert pq.ParquetFile(tmp_path / "parts.parquet").metadata.num_row_groups == 3
        else:
            assert (tmp_path / f"whole.{suffix}").read_bytes() == (
                tmp_path / f"parts.{suffix}"
            ).read_bytes(), suffix
    assert whole.attrs["summary"] is not None and len(whole) == 70
    # the first part has no log-probs: its rows lack the white-box columns the others have
    assert whole["whitebox_msp"].isna().sum() == 25 and whole["whitebox_msp"].notna().any()
    for name in ("summary.csv", "quality.csv"):
        assert (tmp_path / f"whole.{name}").read_bytes() == (
            tmp_path / f"parts.{name}"
        ).read_bytes(), name
    stores = sorted(p.name for p in work["parts"].glob("*/part-*"))
    assert stores == ["part-00000", "part-00001", "part-00002"]
    for kept in ("prompts.pkl", "rows.pkl"):  # each part's input and rows in its folder
        assert len(list(work["parts"].glob(f"*/part-*/{kept}"))) == 3, kept


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
    other = score(
        many_prompts,
        "sets",
        out=out,
        part_prompts=30,
        overrides=[*overrides, "evaluation.ci_alpha=0.1"],
    )
    assert kept.stat().st_mtime_ns != stamp  # other settings: computed again
    assert other.attrs["summary"] != first.attrs["summary"]


def test_a_lean_frame_is_the_full_one_without_the_per_sample_objects(
    tmp_path, many_prompts, overrides
):
    """lean=True (the CLI with --out and nothing printed per prompt): the same rows less the
    columns of Python objects, the same files; in parts (one store takes the same lean_frame)."""
    part_prompts = 25
    from pipeline.scorer.run import LEAN_DROPPED, METHOD_COLUMNS, action_column

    full = score(
        many_prompts,
        "sets",
        out=tmp_path / "full.jsonl",
        overrides=overrides,
        part_prompts=part_prompts,
    )
    lean = score(
        many_prompts,
        "sets",
        out=tmp_path / "lean.jsonl",
        overrides=overrides,
        part_prompts=part_prompts,
        lean=True,
    )
    dropped = [*LEAN_DROPPED, *(action_column(m) for m in METHOD_COLUMNS)]
    assert set(full.columns) - set(lean.columns) == {c for c in dropped if c in full}
    assert {"response_labels", "bayes_action", "label_matches"} <= set(full.columns)
    pd.testing.assert_frame_equal(lean, full.drop(columns=[c for c in dropped if c in full]))
    assert lean.attrs["summary"] == full.attrs["summary"]
    assert lean.attrs["reading_warnings"] == full.attrs["reading_warnings"]
    for name in ("jsonl", "summary.csv", "quality.csv"):
        assert (tmp_path / f"full.{name}").read_bytes() == (tmp_path / f"lean.{name}").read_bytes()
