"""The F-beta decision's parts beside its space: its risk as a UQ estimator. The decision itself
is declared by the tasks that take it (`decisions: {bayes_fbeta: {space: sets-fbeta}}` in
sets/task.yaml and graphs/task.yaml) or make it their own (this folder's task.yaml)."""

from __future__ import annotations

from pipeline.uncertainty.estimators import ESTIMATORS, Estimator

ESTIMATORS.add(
    "bayes_risk_fbeta",
    Estimator(
        "bayes_risk",
        "the F-beta Bayes risk 1 - E[F_beta] of the GFM action (ours; tasks declaring a "
        "bayes_fbeta decision)",
        task_aware=True,
        decision="bayes_fbeta",
        label="R_Bayes F1 (ours)",
        table_order=8,
        in_paper=False,
    ),
)
