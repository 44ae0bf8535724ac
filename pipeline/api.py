"""The practitioner's API, re-exported at the package root (heavy imports happen inside):

    import pipeline
    df = pipeline.score(records, task="sets")                 # responses you already sampled
    df = pipeline.generate_and_score(prompts, task="sets", model="my-model",
                                     base_url="http://localhost:8000/v1")
    pipeline.report(df, "report/")                             # riskiest prompts + two figures
"""

from __future__ import annotations

from typing import Any


def score(data: Any, task: str = "sets", **options: Any):
    """Task-aware Bayes answers and uncertainty for sampled responses: one row per prompt.

    `data`: a path (JSONL, parquet, lm-evaluation-harness samples file), a pandas DataFrame, a
    list of dicts (`responses`, optional `question`, `reference`, `logprobs`, `id`) or a list of
    lists of response strings. `task`: a task config (classes, sets, sets_fbeta, graphs, sphere,
    simplex, reals or your own). `options`: those of `pipeline.scoring.score` (mapper, out,
    overrides, work_dir, strict, ...). Returns the per-prompt DataFrame (docs/score.md); the
    summaries are in `.attrs`.
    """
    from pipeline.scoring import score as score_data

    return score_data(data, task, **options)


def report(df: Any, directory: Any, n: int = 10) -> dict:
    """Write why the answers were chosen and how far to trust them into `directory`:
    `riskiest.md` (the `n` riskiest prompts: question, Bayes answer and confidence, the latent
    distribution, how responses were read) and, with references, `risk_coverage.png` and
    `calibration.png` (pipeline.explain). Returns name -> path."""
    from pipeline.explain import write_report

    return write_report(df, directory, n=n)
