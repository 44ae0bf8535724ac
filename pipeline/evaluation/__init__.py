"""Evaluation: how well uncertainty ranks quality (DESIGN s4), and what the tasks' quality
metrics share: label matching (`matching`), the text metrics (`text_metrics`). Each task's own
metric maths is in its folder (pipeline/tasks/<task>/metrics.py).

numpy / scipy only at import. Conventions: uncertainty higher = less confident; quality higher =
better (pass ``-loss`` for distances).

    from pipeline.evaluation import prr, concordance_auc, bootstrap_ci
    prr(uncertainty, quality, max_rejection=0.5, ties="average")   # normalised PRR
    concordance_auc(uncertainty, quality)                           # P(q_i > q_j | u_i < u_j)
    bootstrap_ci(prr, uncertainty, quality, n_boot=1000)            # (point, low, high)

Text metrics (COMET, AlignScore) are in ``pipeline.evaluation.text_metrics``.
"""

from pipeline.evaluation.bootstrap import BootstrapCI, bootstrap_ci, bootstrap_cis
from pipeline.evaluation.matching import Alignment, Match, align_labels, match_label, names_match
from pipeline.evaluation.uq_metrics import (
    ConcordanceCounts,
    PRRComponents,
    concordance_auc,
    concordance_counts,
    count_ascending_pairs,
    prr,
    prr_components,
)

__all__ = [
    "BootstrapCI",
    "ConcordanceCounts",
    "PRRComponents",
    "Alignment",
    "Match",
    "align_labels",
    "bootstrap_ci",
    "bootstrap_cis",
    "concordance_auc",
    "concordance_counts",
    "count_ascending_pairs",
    "match_label",
    "names_match",
    "prr",
    "prr_components",
]
