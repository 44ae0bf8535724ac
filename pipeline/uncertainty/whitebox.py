"""White-box scores of scored samples from the sequence log-probs an endpoint returned (numpy only).

The scorer (pipeline.scorer.run) has, per prompt, each parsed sample's latent and its sequence
log-prob log p(s | x) (the sum of the token log-probs the server reported). Two of lm-polygraph's
estimators need nothing else once the classes are the task's own latents:

- `msp`: lm-polygraph's MaximumSequenceProbability, -log p(s | x), of the sample that stands for
  the Bayes answer: among the samples closest to it under d_T (those equal to it, when some are),
  the most probable one. High = the model gave its chosen answer little probability.
- `semantic_entropy`: lm-polygraph's SemanticEntropy (class probabilities "sum", entropy "mean"):
  each class's log-probability is the log-sum-exp of its samples' log-probs, and the estimate is
  minus the mean over samples of their class's log-probability. The classes are the task's
  latents (samples with equal latents are one class) instead of NLI clusters of the texts.

Both equal lm-polygraph 0.7.0's own estimators on the same statistics
(tests/uncertainty/test_whitebox.py computes them with lm-polygraph).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np


def semantic_entropy(logprobs: Sequence[float], classes: Sequence[Hashable]) -> float:
    """-mean_j log sum_{i in class(j)} p(s_i | x): lm-polygraph's SemanticEntropy ("sum" class
    probabilities, "mean" entropy estimation). NaN without samples or with an unknown log-prob."""
    lp = np.asarray(logprobs, dtype=np.float64)
    if lp.size == 0 or not np.all(np.isfinite(lp)):
        return float("nan")
    codes: dict[Hashable, int] = {}
    idx = np.array([codes.setdefault(c, len(codes)) for c in classes], dtype=np.int64)
    class_lp = np.array([np.logaddexp.reduce(lp[idx == k]) for k in range(len(codes))])
    return float(-class_lp[idx].mean())


def msp_of_answer(logprobs: Sequence[float], distances: Sequence[float]) -> float:
    """-max log p(s_i | x) over the samples at the least distance from the answer (lm-polygraph's
    MaximumSequenceProbability of that sample). NaN without samples or log-probs."""
    lp = np.asarray(logprobs, dtype=np.float64)
    d = np.asarray(distances, dtype=np.float64)
    if lp.size == 0 or not np.all(np.isfinite(lp)) or not np.any(np.isfinite(d)):
        return float("nan")
    closest = d <= np.nanmin(d) + 1e-12
    return float(-lp[closest].max())
