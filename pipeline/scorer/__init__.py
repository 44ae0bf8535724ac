"""The scorer: task-aware decisions and uncertainty for responses sampled elsewhere.

    readers.py  a user's file or rows (JSONL, parquet, lm-evaluation-harness samples, in memory)
                -> prompts, each bad row counted and skipped with its reason
    run.py      prompts -> the pipeline's artifacts -> its map, decide, uq and evaluate stages ->
                one row per prompt (`score`), and the summaries
    report.py   why each answer was chosen: the audit text and the riskiest-prompts report
    cli.py      the command line (`taskaware-score`, `python -m pipeline.score`)

`pipeline.score(...)` is `pipeline.api.score`, which calls `run.score`.
"""
