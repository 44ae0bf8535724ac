"""Task-aware decoding inside lm-evaluation-harness runs (`lm_eval`, the `lm-eval` extra).

lm-eval's self-consistency tasks sample M responses per document (`repeats: M`) and reduce them
with a filter (`majority_vote`, the Bayes action of the classes space). `task_aware` is that
filter for any task space of this project: the document's M responses are read by the task's
g_T (the question taken from the document) and the Bayes-optimal answer and its Bayes risk are
computed by `pipeline.score` over all documents at once (filter.py). The metrics
(metrics.py) put into lm-eval's own results table and JSON the Bayes answer's quality, its
mean Bayes risk, and the PRR and concordance AUC of the risk against that quality with the
project's bootstrap intervals, numbers equal to `taskaware-score` on the samples file
lm-eval logs.

Ready tasks ship in `TASKS` (this folder's tasks/): pass it to `--include_path`:

    lm_eval --model hf --model_args pretrained=... --tasks taskaware_triviaqa_bundled \\
        --include_path "$(python -c 'import pipeline.harness as h; print(h.TASKS)')" --log_samples

docs/lm_eval.md has the commands and what lm-eval's stderr machinery does and does not allow.
"""

from pathlib import Path

TASKS = Path(__file__).resolve().parent / "tasks"
FILTER_NAME = "task_aware"

__all__ = ["FILTER_NAME", "TASKS"]
