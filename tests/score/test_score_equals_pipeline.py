"""The score command must give exactly what the pipeline's own stages give for the same samples:
here the stages run on a store built the normal way (the bundled dataset through
`pipeline.data.load_dataset`, config composed with `dataset=...`), score() runs on a JSONL file
holding the same responses and the dataset's references."""

import json

import numpy as np
import pandas as pd
import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from pipeline.artifacts.schema import ARTIFACTS
from pipeline.artifacts.stage import run_stage
from pipeline.artifacts.store import ArtifactStore
from pipeline.config import register_configs, resolve_cell
from pipeline.data import load_dataset
from pipeline.scorer.run import METHOD_COLUMNS, score, summaries

from .conftest import REPO

WRONG = ["London", "Mount Everest", "1066", "Pacific Ocean", "Jupiter"]


def responses_for(answers: list[list[str]], task: str, rng: np.random.Generator) -> list[str]:
    """Eight plausible responses built from the true answers and some wrong ones."""
    out = []
    for _ in range(8):
        if task == "classes":
            out.append(str(rng.choice(answers[0] if rng.random() < 0.6 else WRONG)))
        else:
            keep = [a[0] for a in answers if rng.random() < 0.7]
            if rng.random() < 0.3:
                keep.append(str(rng.choice(WRONG)))
            out.append(", ".join(keep) if keep else "I don't know")
    return out


def pipeline_run(tmp_path, dataset_name, samples, overrides):
    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose(
            "config",
            overrides=[
                f"dataset={dataset_name}",
                "uq.estimators=[latent_entropy,bayes_risk]",
                *overrides,
            ],
        )
    GlobalHydra.instance().clear()
    store = ArtifactStore(tmp_path / "cell")
    dataset = load_dataset(dataset_name, limit=4)
    empty = {n: pd.DataFrame(columns=list(ARTIFACTS[n])) for n in ("decodes", "ptrue")}
    for name, frame in (("dataset", dataset), ("samples", samples), *empty.items()):
        store.write(
            name,
            frame,
            key="generated",
            extra={"producer": "hand-written (test)", "cell": resolve_cell(cfg).name},
        )
    for name in ("map", "decide", "uq", "evaluate"):
        run_stage(name, resolve_cell(cfg), store)
    return dataset, store


@pytest.mark.parametrize(
    ("dataset_name", "task"), [("maqa_bundled", "sets"), ("triviaqa_bundled", "classes")]
)
def test_score_equals_the_pipeline_stages(tmp_path, overrides, dataset_name, task):
    rng = np.random.default_rng(7)
    dataset = load_dataset(dataset_name, limit=4)
    rows, samples = [], []
    for rec in dataset.itertuples():
        answers = [list(a) for a in rec.answers]
        texts = responses_for(answers, task, rng)
        rows.append(
            {
                "id": rec.prompt_id,
                "question": rec.question,
                "responses": texts,
                "reference": answers,
            }
        )
        samples += [
            {
                "prompt_id": rec.prompt_id,
                "sample_idx": i,
                "text": t,
                "token_logprobs": [],
                "logprob": float("nan"),
            }
            for i, t in enumerate(texts)
        ]
    _, store = pipeline_run(tmp_path, dataset_name, pd.DataFrame(samples), overrides)

    path = tmp_path / "mine.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    df = score(path, task, overrides=overrides, out=tmp_path / "mine.parquet").set_index(
        "prompt_id"
    )
    written = pd.read_parquet(tmp_path / "mine.parquet").set_index("prompt_id")  # JSON actions

    decisions = store.read("decisions")
    for method, col in METHOD_COLUMNS.items():
        d = decisions[decisions["method"] == method].set_index("prompt_id")
        if d.empty:
            continue
        action_col = col if col in ("l_map", "l_sample") else f"{col}_action"
        assert written[action_col].to_dict() == d["action"].to_dict(), method
        assert df[f"{col}_risk"].to_dict() == d["risk"].to_dict(), method
        # classes answer with the class's label; the decision's text is the member's
        text_col = f"{col}_member_text" if f"{col}_member_text" in df else f"{col}_text"
        assert df[text_col].to_dict() == d["text"].to_dict(), method
    unc = store.read("uncertainty")
    le = unc[unc["estimator"] == "latent_entropy"].set_index("prompt_id")["value"]
    assert df["latent_entropy"].to_dict() == le.to_dict()
    quality = store.read("quality")
    for r in quality[quality["method"].isin(METHOD_COLUMNS)].itertuples():
        assert df.loc[r.prompt_id, f"quality_{METHOD_COLUMNS[r.method]}_{r.metric}"] == r.value
    scores = store.read("uq_scores")
    expected = scores[(scores["target"] == "bayes")].sort_values(["metric", "estimator"])
    pd.testing.assert_frame_equal(
        summaries(df)[0].reset_index(drop=True), expected.reset_index(drop=True)
    )
    assert df["bayes_risk"].notna().all() and (df["n_parsed"] == 8).all()
