"""The evaluate stage: quality of every decision against the reference, with every metric the
task declares (pipeline.tasks.METRICS, each with its direction), then how well each uncertainty
estimator predicts the quality of the Bayes and of the beam response (PRR, concordance AUC,
bootstrap intervals).

Metric values are stored as the paper reports them (Table 2): Hamming (normalised by the
reference size), F1, exact-match 0-1 loss ("Exact Match (lower is better)"), cosine distance,
KL(p*||pred), COMET, AlignScore; `higher_is_better` is the metric's own declaration and gives
the sign used for PRR/AUC.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

from omegaconf import DictConfig

from pipeline.stages import plain, stage
from pipeline.store import ArtifactStore

log = logging.getLogger("pipeline")
QUALITY_COLUMNS = ["prompt_id", "method", "metric", "value", "higher_is_better"]


def quality_rows(space, metrics: Sequence[str], dataset_df, decisions_df, latents_df, *,
                 reference: str, settings: Any, cfg: DictConfig | None = None):
    """quality.parquet rows: every latent metric of `metrics` on every decision, then the text
    metrics (their scorers come from `cfg`; a text metric without a checkpoint is skipped and
    logged). `reference` is the task's reference kind: a mapped one compares with the reference
    text's latent (the map stage's `reference` rows)."""
    import pandas as pd

    from pipeline.tasks import METRICS, REFERENCES, reference_of

    mapped = REFERENCES[reference].mapped
    refs = dataset_df.set_index("prompt_id")
    ref_latents = {}
    if mapped and latents_df is not None and len(latents_df):
        for r in latents_df[latents_df["source"] == "reference"].itertuples():
            ref_latents[r.prompt_id] = space.from_json(r.latent) if r.parse_ok else None
    rows: list[dict] = []
    latent_metrics = [(name, METRICS[name]) for name in metrics if METRICS[name].fn is not None]
    for d in decisions_df.itertuples():
        record = refs.loc[d.prompt_id]
        ref = reference_of(record, ref_latents.get(d.prompt_id), mapped=mapped)
        action = space.from_json(d.action)
        for name, metric in latent_metrics:
            value = metric.fn(action, ref, settings)
            if value is not None:
                rows.append({"prompt_id": d.prompt_id, "method": d.method, "metric": name,
                             "value": float(value), "higher_is_better": metric.higher_is_better})

    for name in metrics:
        metric = METRICS[name]
        if metric.scorer is None:
            continue
        scorer = metric.scorer(cfg) if cfg is not None else None
        if scorer is None:
            log.warning("[evaluate] %s skipped: no checkpoint configured (%s)", name,
                        metric.config_key)
            continue
        ok = decisions_df[decisions_df["action"] != "null"]
        ref_rows = refs.loc[ok["prompt_id"]]
        scores = scorer(sources=ref_rows["question"].tolist(), hypotheses=ok["text"].tolist(),
                        references=ref_rows["reference_text"].tolist())
        for (pid, method), value in zip(ok[["prompt_id", "method"]].itertuples(index=False), scores):
            rows.append({"prompt_id": pid, "method": method, "metric": name,
                         "value": float(value), "higher_is_better": metric.higher_is_better})
    return pd.DataFrame(rows, columns=QUALITY_COLUMNS)


def uq_score_rows(quality_df, uncertainty_df, *, targets: Sequence[str], max_rejection: float,
                  ties: str, n_bootstrap: int, ci_alpha: float, seed: int):
    """uq_scores.parquet rows: PRR and concordance AUC with percentile bootstrap intervals."""
    import pandas as pd

    from pipeline.evaluation import bootstrap_ci, concordance_auc, prr

    rows = []
    unc = uncertainty_df.pivot_table(index="prompt_id", columns="estimator", values="value",
                                     aggfunc="first")
    for target in targets:
        q_target = quality_df[quality_df["method"] == target]
        for metric, qm in q_target.groupby("metric", sort=True):
            sign = 1.0 if bool(qm["higher_is_better"].iloc[0]) else -1.0
            quality = qm.set_index("prompt_id")["value"] * sign
            for estimator in unc.columns:
                joined = pd.concat([unc[estimator], quality], axis=1, join="inner").dropna()
                u, q = joined.iloc[:, 0].to_numpy(float), joined.iloc[:, 1].to_numpy(float)
                row = {"estimator": estimator, "target": target, "metric": metric, "n": len(u)}
                if len(u) >= 2:
                    p = bootstrap_ci(lambda a, b: prr(a, b, max_rejection=max_rejection, ties=ties),
                                     u, q, n_boot=n_bootstrap, alpha=ci_alpha, seed=seed)
                    a = bootstrap_ci(concordance_auc, u, q, n_boot=n_bootstrap, alpha=ci_alpha,
                                     seed=seed)
                else:
                    p = a = (math.nan, math.nan, math.nan)
                row.update(prr=p[0], prr_low=p[1], prr_high=p[2], auc=a[0], auc_low=a[1],
                           auc_high=a[2])
                rows.append(row)
    cols = ["estimator", "target", "metric", "prr", "prr_low", "prr_high", "auc", "auc_low",
            "auc_high", "n"]
    return pd.DataFrame(rows, columns=cols)


def evaluate_slice(cfg: DictConfig) -> dict:
    return {"evaluation": plain(cfg.evaluation), "metrics": list(cfg.task.metrics),
            "space": cfg.task.space, "space_options": plain(cfg.task.space_options),
            "reference": cfg.task.reference}


@stage("evaluate", inputs=("dataset", "latents", "decisions", "uncertainty"),
       outputs=("quality", "uq_scores"), config=evaluate_slice)
def evaluate_stage(cfg: DictConfig, store: ArtifactStore, key: str) -> dict[str, Any]:
    from pipeline.stages.decide import task_spaces

    ev = cfg.evaluation
    space, _ = task_spaces(cfg)
    quality = quality_rows(space, list(cfg.task.metrics), store.read("dataset"),
                           store.read("decisions"), store.read("latents"),
                           reference=cfg.task.reference, settings=ev, cfg=cfg)
    scores = uq_score_rows(quality, store.read("uncertainty"), targets=list(ev.targets),
                           max_rejection=ev.max_rejection, ties=ev.ties,
                           n_bootstrap=ev.n_bootstrap, ci_alpha=ev.ci_alpha, seed=ev.seed)
    return {"quality": quality, "uq_scores": scores}
