"""The report survives cells without usable data (e.g. a MAQA cell whose every response was
unparseable): empty tables and "no data" panels, never a crash."""

from __future__ import annotations

import pandas as pd

from pipeline.reporting import figures
from pipeline.reporting.ablation import COLUMNS, samples_ablation


def test_samples_ablation_of_unparseable_latents_is_an_empty_table(tmp_path):
    latents = pd.DataFrame(
        {
            "model": ["m"] * 2,
            "dataset": ["maqa"] * 2,
            "prompt_id": ["p", "p"],
            "source": ["sample", "sample"],
            "sample_idx": [0, 1],
            "latent": ["null", "null"],
            "parse_ok": [False, False],
        }
    )
    dataset = pd.DataFrame(
        {
            "model": ["m"],
            "dataset": ["maqa"],
            "prompt_id": ["p"],
            "question": ["q"],
            "answers": [[["a"]]],
            "probabilities": [[]],
            "reference_text": [""],
        }
    )
    quality = pd.DataFrame(
        columns=["model", "dataset", "prompt_id", "method", "metric", "value", "higher_is_better"]
    )
    table = samples_ablation(latents, dataset, quality, "sets")
    assert table.empty and list(table.columns) == COLUMNS
    assert (
        list(samples_ablation(pd.DataFrame(), pd.DataFrame(), quality, "sets").columns) == COLUMNS
    )
    assert list(samples_ablation(latents, dataset, quality, None).columns) == COLUMNS
    png = figures.fig_samples_ablation(table, tmp_path)
    assert png.exists() and png.stat().st_size > 1000
