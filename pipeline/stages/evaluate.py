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

import functools
import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipeline.artifacts.schema import AUDIT
from pipeline.artifacts.stage import plain, stage
from pipeline.artifacts.store import ArtifactStore, with_file_digests
from pipeline.aux_models.factories import build_judge
from pipeline.components.parts import cache_slice
from pipeline.evaluation import bootstrap_cis, concordance_auc, prr
from pipeline.evaluation.audit import audit_prompt, count_warnings
from pipeline.evaluation.matching import match_label
from pipeline.latent.base import LatentSpace
from pipeline.mapping.judges import judge_settings
from pipeline.tasks.contract import METRICS, REFERENCES, MetricContext, reference_of

if TYPE_CHECKING:
    from pipeline.config import Cell

log = logging.getLogger("pipeline")
QUALITY_COLUMNS = ["prompt_id", "method", "metric", "value", "higher_is_better"]


def _reference_latents(space, latents_df, mapped: bool) -> dict[str, Any]:
    """prompt_id -> the reference text's latent (None: it did not parse) for a mapped reference."""
    out: dict[str, Any] = {}
    if mapped and latents_df is not None and len(latents_df):
        for r in latents_df[latents_df["source"] == "reference"].itertuples():
            out[r.prompt_id] = space.from_json(r.latent) if r.parse_ok else None
    return out


def prepare_judge(judge, space, dataset_df, decisions_df) -> None:
    """Score, in one batch, every (question, label, aliases) the matching rules leave open for
    the decisions' labels, so the metrics then read the judge's verdicts from its cache."""
    if judge is None:
        return
    refs = dataset_df.set_index("prompt_id")
    items = []
    for d in decisions_df.itertuples():
        labels = space.labels(space.from_json(d.action)) or []
        record = refs.loc[d.prompt_id]
        answers = [list(a) for a in record["answers"]]
        for label in labels:
            if match_label(label, answers, record["question"]).answer is None:
                items.extend((record["question"], label, a) for a in answers if len(a))
    judge.prepare(items)


@dataclass(frozen=True)
class QualityScoring:
    """How quality.parquet scores a cell's decisions, built once per cell (evaluate_stage): the
    task's latent space, the metrics it declares, its reference kind, each metric's typed
    settings (`settings[name]`; its dataclass defaults when absent), what the text metrics read
    (`context`: device, cache, space) and the judge that decides the label / answer pairs the
    matching rules leave open (evaluation.match_judge; None: the rules alone)."""

    space: Any
    metrics: Sequence[str]
    reference: str
    settings: Mapping[str, Any] | None = None
    context: MetricContext | None = None
    judge: Any = None


def quality_rows(dataset_df, decisions_df, latents_df, scoring: QualityScoring):
    """quality.parquet rows: every latent metric of `scoring.metrics` on every decision, then the
    text metrics (a text metric without a checkpoint is skipped and logged). A mapped reference
    kind compares with the reference text's latent (the map stage's `reference` rows). A prompt
    whose record holds no truth (the kind's `present`, e.g. a scored file row without a
    reference) is not scored."""
    import pandas as pd

    kind = REFERENCES[scoring.reference]
    settings = {
        name: (scoring.settings or {}).get(name) or METRICS[name].Config()
        for name in scoring.metrics
    }
    dataset_df, records = _with_truth(dataset_df, kind)
    decisions_df = decisions_df[decisions_df["prompt_id"].isin(dataset_df["prompt_id"])]
    rows = _latent_metric_rows(scoring, settings, records, decisions_df, latents_df)
    rows += _text_metric_rows(scoring, settings, records, decisions_df)
    return pd.DataFrame(rows, columns=QUALITY_COLUMNS)


def _with_truth(dataset_df, kind):
    """(the dataset's rows whose record holds a truth, those records by prompt id)."""
    # `present` reads plain lists, as the loaders give it (parquet hands back numpy arrays)
    all_records = dataset_df.to_dict("records")
    keep = [
        kind.present({k: v.tolist() if hasattr(v, "tolist") else v for k, v in r.items()})
        for r in all_records
    ]
    return dataset_df[keep], {r["prompt_id"]: r for r, kept in zip(all_records, keep) if kept}


def _latent_metric_rows(
    scoring: QualityScoring, settings, records, decisions_df, latents_df
) -> list[dict]:
    """The rows of the metrics with a function of their own (of the latent or of the text),
    one decision at a time; the decisions without a latent are counted in the log."""
    space, judge = scoring.space, scoring.judge
    mapped = REFERENCES[scoring.reference].mapped
    ref_latents = _reference_latents(space, latents_df, mapped)
    references: dict[str, Any] = {}  # one Reference per prompt, shared by its decisions
    rows: list[dict] = []
    latent_metrics = [
        (name, METRICS[name]) for name in scoring.metrics if METRICS[name].fn is not None
    ]
    unscored: dict[str, int] = {}
    for pid, method, action_json, text in zip(
        decisions_df["prompt_id"],
        decisions_df["method"],
        decisions_df["action"],
        decisions_df["text"],
    ):
        ref = references.get(pid)
        if ref is None:
            ref = references[pid] = reference_of(
                records[pid], ref_latents.get(pid), mapped=mapped, judge=judge, space=space
            )
        action = space.from_json(action_json)
        if action is None:
            unscored[method] = unscored.get(method, 0) + 1
        for name, metric in latent_metrics:
            if action is None and metric.reads == "latent":
                # "we discard answers that can not properly parsed through any mapping g_T"
                # (appendix): a decision whose output has no latent is not scored (not a full
                # loss), for every latent metric alike, as the text metrics skip it
                continue
            value = metric.fn(text if metric.reads == "text" else action, ref, settings[name])
            if value is not None:
                rows.append(_quality_row(pid, method, name, value, metric))
    if unscored:
        log.info(
            "[evaluate] decisions without a latent, not scored (the paper discards them): %s",
            ", ".join(f"{m} {n}" for m, n in unscored.items()),
        )
    return rows


def _text_metric_rows(scoring: QualityScoring, settings, records, decisions_df) -> list[dict]:
    """The rows of the metrics scored by a model over all the texts at once (COMET, AlignScore):
    every decision with an action, against the reference text."""
    rows: list[dict] = []
    for name in scoring.metrics:
        metric = METRICS[name]
        if metric.scorer is None:
            continue
        scorer = metric.scorer(settings[name], scoring.context or MetricContext())
        if scorer is None:
            log.warning(
                "[evaluate] %s skipped: no checkpoint configured (%s)", name, metric.config_key
            )
            continue
        ok = decisions_df[decisions_df["action"] != "null"]
        ref_rows = [records[pid] for pid in ok["prompt_id"]]
        scores = scorer(
            sources=[r["question"] for r in ref_rows],
            hypotheses=ok["text"].tolist(),
            references=[r["reference_text"] for r in ref_rows],
        )
        for (pid, method), value in zip(
            ok[["prompt_id", "method"]].itertuples(index=False), scores
        ):
            rows.append(_quality_row(pid, method, name, value, metric))
    return rows


def _quality_row(pid, method: str, name: str, value, metric) -> dict[str, Any]:
    return {
        "prompt_id": pid,
        "method": method,
        "metric": name,
        "value": float(value),
        "higher_is_better": metric.higher_is_better,
    }


def interval_job(job: tuple) -> tuple[tuple, tuple]:
    """((PRR, low, high), (AUC, low, high)) of one estimator against one quality: NaN below 2
    prompts. Both intervals from the same resamples (one seed), drawn and counted once."""
    u, q, max_rejection, ties, n_bootstrap, alpha, seed = job
    if len(u) < 2:
        return (math.nan,) * 3, (math.nan,) * 3
    # a partial, not a lambda: bootstrap_cis finds prr's counted (O(n) per replicate) form
    metrics = [functools.partial(prr, max_rejection=max_rejection, ties=ties), concordance_auc]
    if n_bootstrap == 0:
        return tuple((m(u, q), math.nan, math.nan) for m in metrics)
    p, a = bootstrap_cis(metrics, u, q, n_boot=n_bootstrap, alpha=alpha, seed=seed)
    return tuple(p), tuple(a)


@dataclass(frozen=True)
class UQScoring:
    """How uq_scores.parquet scores each estimator (the cell's `evaluation` settings): against
    the quality of which decisions (`targets`), PRR's rejection cap and its rule for tied
    uncertainties, and the percentile bootstrap (replicates, alpha, seed; 0 replicates: no
    intervals)."""

    targets: Sequence[str]
    max_rejection: float
    ties: str
    n_bootstrap: int
    ci_alpha: float
    seed: int

    @classmethod
    def of(cls, evaluation, targets: Sequence[str] | None = None) -> UQScoring:
        """From evaluation settings (the cell's `evaluation`, or a mapping of the same keys);
        `targets` replaces theirs."""
        get = (
            evaluation.get
            if isinstance(evaluation, Mapping)
            else functools.partial(getattr, evaluation)
        )
        return cls(
            targets=list(get("targets") if targets is None else targets),
            max_rejection=get("max_rejection"),
            ties=get("ties"),
            n_bootstrap=get("n_bootstrap"),
            ci_alpha=get("ci_alpha"),
            seed=get("seed"),
        )


UQ_SCORE_COLUMNS = [
    "estimator",
    "target",
    "metric",
    "prr",
    "prr_low",
    "prr_high",
    "auc",
    "auc_low",
    "auc_high",
    "n",
    "n_dropped",
]


def estimator_scores(quality_df, uncertainty_df, scoring: UQScoring, map_fn=map):
    """uq_scores.parquet rows: PRR and concordance AUC with percentile bootstrap intervals. Every
    estimator of a (target, metric) is scored on the same prompts: those with the target's
    quality where every estimator has a value (an estimator with none at all, e.g. P(True) on
    outside generations, gets n = 0 and does not shrink the set); `n_dropped` counts the rest.
    `map_fn` maps `interval_job` over the (estimator, target, metric) jobs: a process pool's map
    spreads the bootstraps over cores (the same numbers: each job is computed alone)."""
    import pandas as pd

    rows, jobs = [], []
    unc = uncertainty_df.pivot_table(
        index="prompt_id", columns="estimator", values="value", aggfunc="first", dropna=False
    )
    intervals = (
        scoring.max_rejection,
        scoring.ties,
        scoring.n_bootstrap,
        scoring.ci_alpha,
        scoring.seed,
    )
    for target in scoring.targets:
        q_target = quality_df[quality_df["method"] == target]
        for metric, qm in q_target.groupby("metric", sort=True):
            sign = 1.0 if bool(qm["higher_is_better"].iloc[0]) else -1.0
            quality = (qm.set_index("prompt_id")["value"] * sign).dropna()
            joined = unc.reindex(quality.index)
            present = [e for e in unc.columns if joined[e].notna().any()]
            common = joined[present].notna().all(axis=1) if present else joined.index.notna()
            q = quality[common].to_numpy(float)
            for estimator in unc.columns:
                u = joined.loc[common, estimator].to_numpy(float) if estimator in present else []
                rows.append(
                    {
                        "estimator": estimator,
                        "target": target,
                        "metric": metric,
                        "n": len(u),
                        "n_dropped": int((~common).sum()),
                    }
                )
                jobs.append((u, q, *intervals))
    for row, (p, a) in zip(rows, map_fn(interval_job, jobs)):
        row.update(prr=p[0], prr_low=p[1], prr_high=p[2], auc=a[0], auc_low=a[1], auc_high=a[2])
    return pd.DataFrame(rows, columns=UQ_SCORE_COLUMNS)


def audit_rows(space, dataset_df, decisions_df, latents_df, *, reference: str, judge=None):
    """audit.parquet rows (pipeline.evaluation.audit): per prompt, the reference's labels, the
    reference answer every label of its responses and decisions names, and the warnings."""
    import pandas as pd

    if type(space).labels is LatentSpace.labels:  # vectors, numbers: no labels to read back
        return pd.DataFrame([], columns=list(AUDIT))
    mapped = REFERENCES[reference].mapped
    ref_latents = _reference_latents(space, latents_df, mapped)
    samples = latents_df[latents_df["source"] == "sample"] if len(latents_df) else latents_df
    labels_of: dict[str, Any] = {}  # a latent's JSON -> its labels: repeated answers read once

    def labels(latent_json: str):
        if latent_json not in labels_of:
            labels_of[latent_json] = space.labels(space.from_json(latent_json))
        return labels_of[latent_json]

    # each prompt's samples in the order of the artifact (as groupby keeps them)
    response_labels_of: dict[str, list] = {}
    for pid, latent, ok in zip(samples["prompt_id"], samples["latent"], samples["parse_ok"]):
        response_labels_of.setdefault(pid, []).append(labels(latent) if ok else None)
    actions: dict[str, list] = {}
    for pid, action in zip(decisions_df["prompt_id"], decisions_df["action"]):
        actions.setdefault(pid, []).append(action)
    rows = []
    for rec in dataset_df.itertuples():
        response_labels = [
            None if x is None else list(x) for x in response_labels_of.get(rec.prompt_id, [])
        ]
        extra = [x for a in actions.get(rec.prompt_id, []) for x in (labels(a) or [])]
        ref_latent = ref_latents.get(rec.prompt_id) if mapped else None
        audit = audit_prompt(
            response_labels,
            [list(a) for a in rec.answers],
            rec.question,
            extra_labels=extra,
            judge=judge,
            reference_latent_labels=(space.labels(ref_latent) or []) if mapped else None,
        )
        rows.append(
            {
                "prompt_id": rec.prompt_id,
                "reference_labels": audit.reference_labels,
                "label_matches": json.dumps(
                    audit.label_matches, ensure_ascii=False, sort_keys=True
                ),
                "warnings": audit.warnings,
            }
        )
    return pd.DataFrame(rows, columns=list(AUDIT))


def evaluate_slice(cell: Cell) -> dict:
    task = cell.task
    return {
        "evaluation": plain(cell.evaluation),
        "metrics": {name: cache_slice(s) for name, s in task.metric_settings.items()},
        "space": task.space,
        "space_options": with_file_digests(task.space_options),
        "reference": task.reference,
        "judge": judge_settings(cell),
    }


# v2: labels matched to reference answers by pipeline.evaluation.matching (head nouns, plurals,
# surnames, optional judge); exact match read from each method's own text; the audit artifact.
# v3: prompts without a reference (a scored file's) are not scored; every estimator of a target
# and metric scored on one prompt set (n_dropped).
# v4: a decision without a latent is not scored (the paper discards unparseable answers).
@stage(
    "evaluate",
    inputs=("dataset", "latents", "decisions", "uncertainty"),
    outputs=("quality", "uq_scores", "audit"),
    config=evaluate_slice,
    version=4,
    parts=("task.space", "task.metrics", "task.reference"),
)
def evaluate_stage(cell: Cell, store: ArtifactStore, key: str) -> dict[str, Any]:
    ev, task = cell.evaluation, cell.task
    space = task.latent_space()
    dataset, decisions, latents = (
        store.read("dataset"),
        store.read("decisions"),
        store.read("latents"),
    )
    judge = build_judge(cell)
    prepare_judge(judge, space, dataset, decisions)
    scoring = QualityScoring(
        space,
        list(task.metrics),
        task.reference,
        settings=dict(task.metric_settings),
        context=MetricContext(cell.device, cell.cache_dir, space),
        judge=judge,
    )
    quality = quality_rows(dataset, decisions, latents, scoring)
    scores = estimator_scores(
        quality,
        store.read("uncertainty"),
        UQScoring.of(ev),
    )
    audit = audit_rows(space, dataset, decisions, latents, reference=task.reference, judge=judge)
    counts = {k: v for k, v in count_warnings(audit["warnings"]).items() if v}
    if counts:
        log.warning(
            "[evaluate] reading audit: %s of %d prompts (audit.parquet lists them; "
            "`python -m pipeline.score --audit N` prints them)",
            ", ".join(f"{k} {v}" for k, v in counts.items()),
            len(audit),
        )
    return {"quality": quality, "uq_scores": scores, "audit": audit}
