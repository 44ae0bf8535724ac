"""The practitioner's path end to end, offline: the packaged SmolLM2 samples 20 answers to each of
the first N bundled MAQA questions, the answers are scored as sets and the report is written.

    .venv/bin/python examples/api/generate_and_score_maqa.py 40 report_maqa/

(40 prompts: about 4.5 minutes on 2 CPU cores; docs/img/risk_coverage_maqa_bundled.png is its
figure.) With a served model, pass model= and base_url= to generate_and_score instead.
"""

import sys
import time

import pipeline
from pipeline.data import load_dataset

n, out = int(sys.argv[1]), sys.argv[2]
ds = load_dataset("maqa_bundled", limit=n, seed=0, reference="answer_set")
t = time.time()
df = pipeline.generate_and_score(
    ds["question"].tolist(),
    task="sets",
    n_samples=20,
    references=[list(a) for a in ds["answers"]],
    ids=ds["prompt_id"].tolist(),
    max_new_tokens=48,
)
print(f"generate_and_score: {len(df)} prompts in {time.time() - t:.1f} s")
print(pipeline.report(df, out))
uq, quality = pipeline.scorer.run.summaries(df)
print(uq.to_string())
print(quality.to_string())
print(df[["prompt_id", "bayes_text", "bayes_risk", "confidence"]].head(8).to_string())
