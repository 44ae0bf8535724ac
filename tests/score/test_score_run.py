"""`pipeline.score` end to end on the shipped examples, against the pipeline's own stages, and
its handling of unparseable prompts, missing references, parquet input and caching.

The real packaged MiniLM is used where the task needs an embedder (classes clustering, sphere,
label merging for sets/simplex/graphs). Expected values are worked out by hand from the files.
"""

import json
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from pipeline.latent import get_space
from pipeline.scorer.run import score

from .conftest import EXAMPLES, LM_EVAL_FILE, REPO

NO_MERGE = "task.extractor.merge_labels=false"


def entropy(*counts: int) -> float:
    n = sum(counts)
    return -sum(c / n * math.log(c / n) for c in counts)


def test_reals_example_by_hand(tmp_path, overrides):
    df = score(EXAMPLES / "reals.jsonl", "reals", out=tmp_path / "r.parquet", overrides=overrides)
    r3 = df.set_index("prompt_id").loc["r3"]
    # 212 five times and 100 once: lower median 212, l1 risk = 112 / 6
    assert (r3.n_samples, r3.n_parsed) == (6, 6)
    assert r3.bayes_action == 212.0  # Python objects in memory, JSON in the file:
    assert (
        json.loads(
            pd.read_parquet(tmp_path / "r.parquet").set_index("prompt_id").loc["r3", "bayes_action"]
        )
        == 212.0
    )
    assert r3.bayes_risk == pytest.approx(112 / 6, rel=1e-12)
    assert r3.latent_entropy == pytest.approx(entropy(5, 1), rel=1e-12)
    assert r3.quality_bayes_abs_error == 0.0
    r5 = df.set_index("prompt_id").loc["r5"]
    # "I can't recall" fails to parse; 6.02e23, 6.022e23 x3, 6.02214076e23 -> median 6.022e23
    assert (r5.n_samples, r5.n_parsed) == (6, 5)
    assert r5.bayes_action == 6.022e23
    assert r5.quality_bayes_rel_error == pytest.approx(
        abs(6.022e23 - 6.02214076e23) / 6.02214076e23
    )
    summary = pd.read_csv(tmp_path / "r.summary.csv")
    assert set(summary["metric"]) == {"abs_error", "rel_error"}
    assert set(summary["estimator"]) == {"bayes_risk", "latent_entropy"}
    assert (summary["n"] == 5).all()


def test_sets_example_by_hand(overrides):
    df = score(EXAMPLES / "sets.jsonl", "sets", overrides=overrides + [NO_MERGE]).set_index(
        "prompt_id"
    )
    s6 = df.loc["s6"]
    # helium 8/8, neon 7/8, hydrogen 1/8 -> {helium, neon}, risk 0 + 1/8 + 1/8
    assert s6.bayes_action == {"helium", "neon"} and isinstance(s6.bayes_action, frozenset)
    assert s6.bayes_risk == pytest.approx(0.25)
    assert s6.quality_bayes_f1 == 1.0 and s6.quality_bayes_hamming == 0.0
    s5 = df.loc["s5"]  # "I don't know" is a parsed empty set
    assert s5.n_parsed == 8
    assert s5.bayes_action == {"french", "german", "italian"}
    # Romansh in 3 of 8 samples: the Bayes set misses 1 of 4 true labels
    assert s5.quality_bayes_hamming == pytest.approx(0.25)
    assert "bayes_fbeta_action" in df.columns and "quality_l_map_f1" in df.columns


def test_classes_example_with_embedding_clusters(tmp_path, overrides):
    df = score(
        EXAMPLES / "classes.jsonl", "classes", out=tmp_path / "c.jsonl", overrides=overrides
    ).set_index("prompt_id")
    assert df.loc["q3", "bayes_risk"] == 0.0 and df.loc["q3", "bayes_text"] == "Mars"
    assert df.loc["q3", "quality_bayes_exact_match_error"] == 0.0
    # Finland 4 of 8 (Canada 2, Russia 1, Sweden 1): risk 1/2, wrong (the reference is Canada)
    assert df.loc["q7", "bayes_text"] == "Finland"
    assert df.loc["q7", "bayes_risk"] == 0.5
    assert df.loc["q7", "latent_entropy"] == pytest.approx(entropy(4, 2, 1, 1))
    assert df.loc["q7", "quality_bayes_exact_match_error"] == 1.0
    back = pd.read_json(tmp_path / "c.jsonl", lines=True)
    assert len(back) == 8 and back["bayes_risk"].tolist() == df["bayes_risk"].tolist()


@pytest.mark.parametrize("task", ["simplex", "sphere", "graphs"])
def test_other_examples_run(task, overrides, tmp_path):
    # graphs: the embedding merge of entities over whole articles costs ~10 s here; without it
    # the rule extractor alone runs (the merge itself is exercised by sets and simplex)
    extra = [NO_MERGE] if task == "graphs" else []
    df = score(
        EXAMPLES / f"{task}.jsonl", task, overrides=overrides + extra, out=tmp_path / "out.parquet"
    )
    written = pd.read_parquet(tmp_path / "out.parquet")  # JSON columns in the file
    if task == "sphere":  # a vector reads as what it is
        assert written["bayes_action"].str.fullmatch(r"<384-d vector>").all()
    else:
        space = get_space(
            task, **({"directed": False, "relation_labels": True} if task == "graphs" else {})
        )  # pipeline/tasks/graphs/task.yaml
        assert [space.from_json(a) if a != "null" else None for a in written["bayes_action"]] == [
            None if a is None else space.canonical(a) for a in df["bayes_action"]
        ]
    rows = [json.loads(line) for line in (EXAMPLES / f"{task}.jsonl").read_text().splitlines()]
    assert df["prompt_id"].tolist() == [r["id"] for r in rows]
    assert df["n_samples"].tolist() == [len(r["responses"]) for r in rows]
    assert (df["bayes_risk"] >= -1e-12).all() and df["has_reference"].all()
    summary = pd.DataFrame(df.attrs["summary"])
    assert set(summary["estimator"]) == {"bayes_risk", "latent_entropy"}
    if task == "simplex":  # "Pretoria is the administrative capital." is no distribution
        assert df.set_index("prompt_id").loc["p2", "n_parsed"] == 5
        assert set(summary["metric"]) == {"kl"}
    if task == "sphere":  # every translation embeds to its own point: entropy log 5
        assert np.allclose(df["latent_entropy"], math.log(5))
        assert set(summary["metric"]) == {"cosine_distance"}
        assert all(isinstance(a, np.ndarray) and a.shape == (384,) for a in df["bayes_action"])


def test_lm_eval_samples_file(overrides):
    df = score(LM_EVAL_FILE, "classes", overrides=overrides).set_index("prompt_id")
    assert df["n_samples"].tolist() == [5] * 5
    assert df.loc["3", "bayes_text"] == "Portugal" and df.loc["3", "bayes_risk"] == 0.0
    assert df.loc["3", "bayes_member_text"] == " Portugal"  # the sample, as the model wrote it
    assert df.loc["3", "quality_bayes_exact_match_error"] == 0.0
    # Chicago 3 of 5 (Los Angeles, New York): correct, risk 2/5
    assert df.loc["4", "bayes_text"] == "Chicago" and df.loc["4", "bayes_risk"] == pytest.approx(
        0.4
    )
    assert df.loc["4", "quality_bayes_exact_match_error"] == 0.0
    assert df.loc["0", "question"].startswith("Which American-born Sinclair")


def test_cli_subprocess_writes_outputs(tmp_path):
    out = tmp_path / "res.jsonl"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline.score",
            str(EXAMPLES / "reals.jsonl"),
            "--task",
            "reals",
            "--out",
            str(out),
            "evaluation.n_bootstrap=50",
            f"cache_dir={tmp_path / 'cache'}",
        ],
        cwd=REPO,
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    assert "scored 5 prompts, 30 responses, 29 parsed" in res.stdout
    assert "bayes_risk" in res.stdout and "PRR" in res.stdout
    rows = pd.read_json(out, lines=True)
    assert rows["prompt_id"].tolist() == ["r1", "r2", "r3", "r4", "r5"]
    assert (tmp_path / "res.summary.csv").exists() and (tmp_path / "res.quality.csv").exists()
    quality = pd.read_csv(tmp_path / "res.quality.csv")
    bayes_abs = quality[(quality.method == "bayes") & (quality.metric == "abs_error")][
        "mean"
    ].item()
    assert bayes_abs == pytest.approx(rows["quality_bayes_abs_error"].mean())


def test_prompt_without_parseable_response_is_reported_not_fatal(tmp_path, overrides):
    path = tmp_path / "in.jsonl"
    path.write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {"id": "ok", "responses": ["12", "13", "12"], "reference": 12},
                {"id": "none", "responses": ["no idea", "", "?"], "reference": 3},
                {"id": "empty", "responses": [], "reference": 3},
            ]
        )
    )
    # a row with no responses at all is damaged (skipped and counted), not an unparseable prompt
    with pytest.warns(UserWarning) as said:
        df = score(path, "reals", overrides=overrides)
    text = " ".join(str(w.message) for w in said)
    assert "1 prompt(s) with no parseable response" in text and "none" in text
    assert "skipped 1 of 3 input rows" in text and "'responses' is an empty list" in text
    df = df.set_index("prompt_id")
    assert "empty" not in df.index
    assert df.loc["none", "n_samples"] == 3 and df.loc["none", "n_parsed"] == 0
    assert math.isnan(df.loc["none", "bayes_risk"])
    assert df.loc["ok", "bayes_risk"] == pytest.approx(1 / 3)


def test_missing_references_are_left_out_of_quality(tmp_path, overrides):
    rows = [json.loads(line) for line in (EXAMPLES / "reals.jsonl").read_text().splitlines()]
    del rows[0]["reference"]
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    with pytest.warns(UserWarning, match="1 of 5 prompts have no reference"):
        df = score(path, "reals", overrides=overrides)
    assert math.isnan(df.loc[0, "quality_bayes_abs_error"]) and not df.loc[0, "has_reference"]
    assert {r["n"] for r in df.attrs["summary"]} == {4}
    rows = [{k: v for k, v in r.items() if k != "reference"} for r in rows]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    df = score(path, "reals", overrides=overrides)
    assert df.attrs["summary"] is None and not any(c.startswith("quality_") for c in df.columns)


def test_jsonl_and_parquet_give_the_same_rows(tmp_path, overrides):
    rows = [json.loads(line) for line in (EXAMPLES / "sets.jsonl").read_text().splitlines()]
    for r in rows:  # one parquet column type: alias lists everywhere
        r["reference"] = [a if isinstance(a, list) else [a] for a in r["reference"]]
    pd.DataFrame(rows).to_parquet(tmp_path / "sets.parquet")
    (tmp_path / "sets.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    a = score(tmp_path / "sets.jsonl", "sets", overrides=overrides + [NO_MERGE])
    b = score(tmp_path / "sets.parquet", "sets", overrides=overrides + [NO_MERGE])
    pd.testing.assert_frame_equal(a, b)
    assert a.attrs["summary"] == b.attrs["summary"]


def test_rerun_uses_the_stage_cache(tmp_path, overrides):
    out = tmp_path / "o.parquet"
    first = score(EXAMPLES / "sets.jsonl", "sets", out=out, overrides=overrides + [NO_MERGE])
    store = tmp_path / "o.work"
    latents = next(store.glob("*/latents.parquet"))
    stamp = latents.stat().st_mtime_ns
    again = score(EXAMPLES / "sets.jsonl", "sets", out=out, overrides=overrides + [NO_MERGE])
    assert latents.stat().st_mtime_ns == stamp  # map skipped
    pd.testing.assert_frame_equal(first, again)
    changed = score(
        EXAMPLES / "sets.jsonl", "sets-fbeta", out=out, overrides=overrides + [NO_MERGE]
    )
    assert len(list(store.glob("*/latents.parquet"))) == 2  # another task: its own store
    assert changed["bayes_action"].tolist() != [] and "quality_bayes_fbeta_f1" in changed.columns


ISSUE_20_ROWS = [
    {
        "id": "langs",
        "question": "Which programming languages did Microsoft design?",
        "responses": ["C#, F# and TypeScript", "C# and F#", "C++, C# and F#", "C#, F#, TypeScript"],
        "reference": ["C#", "F#", "TypeScript"],
    },
    {
        "id": "oceans",
        "question": "Which oceans border the United States?",
        "responses": ["Atlantic Ocean, Pacific Ocean", "The Atlantic Ocean and the Pacific Ocean"],
        "reference": [["Atlantic"], ["Pacific"], ["Arctic"]],
    },
    {
        "id": "unsc",
        "question": "Which countries are permanent members of the UN Security Council?",
        "responses": [
            "United Kingdom; United States",
            "United Kingdom; United States; France",
            "The United Kingdom and the United States",
        ],
        "reference": "United Kingdom; United States; France; Russia; China",
    },
]


def test_output_says_how_answers_were_read_and_audit_prints_them(tmp_path, overrides):
    """Issue 20: per prompt, each response's labels, the reference's labels and the matched
    pairs in the output; `--audit N` prints the riskiest and most surprising prompts as text."""
    path = tmp_path / "issue20.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in ISSUE_20_ROWS) + "\n")
    df = score(path, "sets", overrides=overrides).set_index("prompt_id")
    langs = df.loc["langs"]
    assert langs.response_labels == [
        ["c#", "f#", "typescript"],
        ["c#", "f#"],
        ["c#", "c++", "f#"],
        ["c#", "f#", "typescript"],
    ]
    assert list(langs.reference_labels) == ["c#", "f#", "typescript"]
    assert json.loads(langs.label_matches)["c++"] == {"answer": None, "rule": "none"}
    assert langs.quality_bayes_f1 == 1.0  # C++ is not C#; the Bayes set is {C#, F#, TypeScript}
    oceans = df.loc["oceans"]
    assert json.loads(oceans.label_matches)["atlantic ocean"] == {"answer": 0, "rule": "head_noun"}
    assert oceans.quality_bayes_f1 == pytest.approx(0.8)  # 2 of 3 oceans, both named right
    unsc = df.loc["unsc"]  # a reference string read by its form: five answers
    assert list(unsc.reference_labels) == [
        "united kingdom",
        "united states",
        "france",
        "russia",
        "china",
    ]
    assert unsc.quality_bayes_hamming == pytest.approx(3 / 5)
    assert df.attrs["reading_warnings"] == {
        "reference_collapsed": 0,
        "stop_word_label": 0,
        "single_letter_label": 0,
        "fragment_label": 0,
        "mostly_empty": 0,
    }
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline.score",
            str(path),
            "--task",
            "sets",
            "--audit",
            "1",
            *overrides,
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr
    assert "The 1 riskiest prompts:" in res.stdout
    assert "matches: c# -> c# (alias); c++ -> none" in res.stdout
    assert "most surprising prompts" in res.stdout
