"""lm-polygraph adapter: its own estimator classes called on stats built from our artifacts.

Estimators (names as in schema.UNCERTAINTY, higher = less confident):
msp -> MaximumSequenceProbability, semantic_entropy -> SemanticEntropy, kle ->
KernelLanguageEntropy, sar -> SAR, cocoa_msp -> CocoaMSP, ptrue -> PTrue (lm-polygraph 0.7.0,
default settings as the paper). Each estimator declares its stats (``est.stats_dependencies``)
and only those are built (pipeline.uncertainty.stats).

Choices where the paper or lm-polygraph leave it open:
- MSP and CoCoA score the ``target_strategy`` decode ("beam" in the paper, Appendix
  "Uncertainty Estimators"); prompts without that decode get no msp / cocoa_msp row.
- A sample is valid when its token log-probs are a non-empty finite list and its logprob is
  finite; invalid samples are dropped and counted. KLE (like the other matrix stats) needs one N
  per lm-polygraph call, so prompts are GROUPED by their number of valid samples and each group
  is one call (no padding, which would change the kernel). Prompts without valid samples get no
  sample-based rows; prompts without a P(True) row get no ptrue row.
- ``p_true`` is ptrue.logprob_true: lm-polygraph's stat is the log-probability of "True", so
  PTrue = -log p(True).
- ``ptrue_beam`` (asked for by name; only where the ptrue artifact has ``logprob_true_beam``,
  written with generation.ptrue_beam=true) is the same PTrue on P(True) asked about the beam
  decode: a sensitivity row beside ``ptrue`` (which asks about the greedy decode).
Counts of everything dropped are in ``result.attrs["skipped"]`` and logged.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from pipeline.text.normal_forms import to_text
from pipeline.uncertainty.stats import (
    CLASS_LABELS,
    FULL_MATRICES,
    PromptArtifacts,
    build_batch_stats,
    prompt_stats,
    strings_to_embed,
)

log = logging.getLogger(__name__)

# name: (lm-polygraph class, label in the paper's tables, its row there, what it measures)
POLYGRAPH_ESTIMATORS: dict[str, tuple[str, str, int, str]] = {
    "msp": (
        "MaximumSequenceProbability",
        "MSP",
        5,
        "maximum sequence probability of the beam decode",
    ),
    "semantic_entropy": ("SemanticEntropy", "SE", 4, "entropy over NLI clusters of the samples"),
    "kle": ("KernelLanguageEntropy", "KLE", 3, "kernel language entropy"),
    "sar": ("SAR", "SAR", 1, "shifting attention to relevance"),
    "cocoa_msp": ("CocoaMSP", "CoCoA", 2, "CoCoA with MSP, of the beam decode"),
    "ptrue": ("PTrue", "P(True)", 0, "P(True) of the greedy answer"),
}
# what each reads beyond the samples' texts (its stats_dependencies, in words): outside
# generations usually lack it, and the scorer says so where an estimator got no value
EXTRA_INPUTS: dict[str, str] = {
    "msp": "a greedy decode's token log-probs",
    "semantic_entropy": "each sample's log-prob (token log-probs: generate_and_score from a "
    "server that returns them)",
    "kle": "",
    "sar": "each sample's token log-probs",
    "cocoa_msp": "a greedy decode's token log-probs",
    "ptrue": "P(True) of a greedy decode",
}
ESTIMATOR_CLASSES: dict[str, str] = {n: spec[0] for n, spec in POLYGRAPH_ESTIMATORS.items()}
DEFAULT_ESTIMATORS: tuple[str, ...] = tuple(ESTIMATOR_CLASSES)
UNCERTAINTY_COLUMNS = ["prompt_id", "estimator", "value"]
# P(True) asked about the beam decode (generation.ptrue_beam=true): lm-polygraph's PTrue on the
# ptrue artifact's column logprob_true_beam; not among the defaults (it needs that column)
PTRUE_BEAM, PTRUE_BEAM_COLUMN = "ptrue_beam", "logprob_true_beam"
PTRUE_BEAM_SPEC = (
    "PTrue",
    "P(True) (beam output)",
    "P(True) of the beam decode (generation.ptrue_beam; a sensitivity row)",
)

_REQUIRED = {
    "samples": ["prompt_id", "sample_idx", "text", "token_logprobs", "logprob"],
    "decodes": ["prompt_id", "strategy", "text", "token_logprobs"],
    "ptrue": ["prompt_id", "logprob_true"],
    "dataset": ["prompt_id", "question"],
}


def make_estimators(
    names: Sequence[str], estimator_kwargs: Mapping[str, dict] | None = None
) -> dict[str, object]:
    """Instantiate lm-polygraph estimators by our names (kwargs per name override its defaults)."""
    unknown = [n for n in names if n not in ESTIMATOR_CLASSES]
    if unknown:
        raise ValueError(
            f"unknown estimator(s) {unknown}; valid names: {', '.join(ESTIMATOR_CLASSES)}"
        )
    import lm_polygraph.estimators as lpe

    kwargs = dict(estimator_kwargs or {})
    return {n: getattr(lpe, ESTIMATOR_CLASSES[n])(**kwargs.get(n, {})) for n in names}


def _check_columns(df: pd.DataFrame, name: str) -> None:
    if not isinstance(df, pd.DataFrame):
        raise TypeError(
            f"{name} must be a pandas DataFrame (the {name}.parquet artifact), got {type(df).__name__}."
        )
    missing = [c for c in _REQUIRED[name] if c not in df.columns]
    if missing:
        raise ValueError(
            f"{name} is missing column(s) {missing}; it needs {_REQUIRED[name]} (pipeline/artifacts/schema.py)."
        )


def _finite_list(values: object) -> np.ndarray | None:
    if values is None:
        return None
    try:
        arr = np.asarray(list(values), dtype=np.float64)
    except (TypeError, ValueError):
        return None
    if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)):
        return None
    return arr


def collect_prompts(
    samples_df: pd.DataFrame,
    decodes_df: pd.DataFrame,
    ptrue_df: pd.DataFrame | None,
    dataset_df: pd.DataFrame,
    target_strategy: str = "beam",
) -> tuple[list[PromptArtifacts], dict[str, int]]:
    """Per-prompt artifacts in dataset order, plus counts of what was dropped."""
    _check_artifacts(samples_df, decodes_df, ptrue_df, dataset_df)
    skipped = {"invalid_samples": 0, "invalid_target_decodes": 0}
    prompts: dict[str, PromptArtifacts] = {}
    for pid, question in zip(
        dataset_df["prompt_id"].astype(str), dataset_df["question"], strict=True
    ):
        prompts.setdefault(pid, PromptArtifacts(prompt_id=pid, question=to_text(question)))
    _add_samples(prompts, samples_df, skipped)
    _add_target_decodes(prompts, decodes_df, target_strategy, skipped)
    if ptrue_df is not None:
        _add_ptrue(prompts, ptrue_df)
    return list(prompts.values()), skipped


def _check_artifacts(
    samples_df: pd.DataFrame,
    decodes_df: pd.DataFrame,
    ptrue_df: pd.DataFrame | None,
    dataset_df: pd.DataFrame,
) -> None:
    """Each artifact has its columns, and samples and decodes name only the dataset's prompts."""
    for df, name in ((samples_df, "samples"), (decodes_df, "decodes"), (dataset_df, "dataset")):
        _check_columns(df, name)
    if ptrue_df is not None:
        _check_columns(ptrue_df, "ptrue")
    known = set(dataset_df["prompt_id"].astype(str))
    for df, name in ((samples_df, "samples"), (decodes_df, "decodes")):
        unknown = sorted(set(df["prompt_id"].astype(str)) - known)
        if unknown:
            raise ValueError(
                f"{name} has prompt_id(s) not in the dataset artifact, e.g. {unknown[:3]}; "
                "pass the dataset these artifacts were generated from."
            )


def _add_samples(
    prompts: dict[str, PromptArtifacts], samples_df: pd.DataFrame, skipped: dict[str, int]
) -> None:
    """Each prompt's valid samples in sample_idx order; a prompt with no valid sample keeps its
    samples' texts alone (text_only)."""
    ordered = samples_df.sort_values(["prompt_id", "sample_idx"], kind="stable")
    texts_of: dict[str, list[str]] = defaultdict(list)  # every sample's text, valid or not
    for pid, text, tl, lp in zip(
        ordered["prompt_id"].astype(str),
        ordered["text"],
        ordered["token_logprobs"],
        ordered["logprob"],
        strict=True,
    ):
        texts_of[pid].append(to_text(text))
        tokens = _finite_list(tl)
        if tokens is None or lp is None or not math.isfinite(float(lp)):
            skipped["invalid_samples"] += 1
            continue
        p = prompts[pid]
        p.sample_texts.append(to_text(text))
        p.sample_log_probs.append(float(lp))
        p.sample_log_likelihoods.append(tokens)
    for pid, texts in texts_of.items():  # no sample with log-probs: the texts alone
        p = prompts[pid]
        if p.n_samples == 0:
            p.sample_texts, p.text_only = list(texts), True
            skipped["text_only_prompts"] = skipped.get("text_only_prompts", 0) + 1


def _add_target_decodes(
    prompts: dict[str, PromptArtifacts],
    decodes_df: pd.DataFrame,
    target_strategy: str,
    skipped: dict[str, int],
) -> None:
    """Each prompt's `target_strategy` decode (text and token log-probs), where valid."""
    target = decodes_df[decodes_df["strategy"] == target_strategy]
    for pid, text, tl in zip(
        target["prompt_id"].astype(str), target["text"], target["token_logprobs"], strict=True
    ):
        tokens = _finite_list(tl)
        if tokens is None:
            skipped["invalid_target_decodes"] += 1
            continue
        prompts[pid].target_text = to_text(text)
        prompts[pid].target_log_likelihoods = tokens


def _add_ptrue(prompts: dict[str, PromptArtifacts], ptrue_df: pd.DataFrame) -> None:
    """Each prompt's finite log p(True)."""
    for pid, lpt in zip(ptrue_df["prompt_id"].astype(str), ptrue_df["logprob_true"], strict=True):
        if pid in prompts and lpt is not None and math.isfinite(float(lpt)):
            prompts[pid].logprob_true = float(lpt)


LOGPROB_STATS = ("sample_log_probs", "sample_log_likelihoods")


def _eligible(p: PromptArtifacts, deps: Sequence[str]) -> bool:
    if p.text_only and any(d in LOGPROB_STATS for d in deps):
        return False
    if any(d.startswith("greedy_") for d in deps) and p.target_log_likelihoods is None:
        return False
    if "p_true" in deps and p.logprob_true is None:
        return False
    return not (any(d.startswith(("sample_", "semantic_")) for d in deps) and p.n_samples == 0)


@dataclass(frozen=True)
class UncertaintyArtifacts:
    """What the estimators read: the generate stage's artifacts and the dataset
    (schema.SAMPLES, DECODES, PTRUE, DATASET); ptrue is None without ptrue."""

    samples: pd.DataFrame
    decodes: pd.DataFrame
    ptrue: pd.DataFrame | None
    dataset: pd.DataFrame


@dataclass(frozen=True)
class EstimatorSetup:
    """How the estimators run: the judges their stats ask and the settings they share
    (compute_uncertainty's arguments of the same names)."""

    equivalence: object | None
    embedder: object | None
    target_strategy: str = "beam"
    tokenizer: object | None = None
    estimator_kwargs: Mapping[str, dict] | None = None
    nli_with_question: bool = True


# size: a public keyword API (the uq stage's lm_polygraph group and the tests call it by these
# names); it only packs them into UncertaintyArtifacts and EstimatorSetup for the functions below
def compute_uncertainty(
    samples_df: pd.DataFrame,
    decodes_df: pd.DataFrame,
    ptrue_df: pd.DataFrame | None,
    dataset_df: pd.DataFrame,
    equivalence: object | None,
    embedder: object | None,
    estimators: Sequence[str] = DEFAULT_ESTIMATORS,
    target_strategy: str = "beam",
    tokenizer: object | None = None,
    estimator_kwargs: Mapping[str, dict] | None = None,
    nli_with_question: bool = True,
) -> pd.DataFrame:
    """UQ baselines with lm-polygraph's estimators -> DataFrame(prompt_id, estimator, value).

    Args:
        samples_df, decodes_df, ptrue_df, dataset_df: the generate stage's artifacts and the
            dataset (schema.SAMPLES, DECODES, PTRUE, DATASET); ptrue_df may be None without ptrue.
        equivalence: pipeline.mapping.equivalence backend (semantic matrices and classes).
        embedder: SAR's and CoCoA's similarity judge: a cross-encoder (`score_pairs`,
            lm-polygraph's default) or a pipeline.mapping.embed.Embedder (cosine).
        estimators: names from ESTIMATOR_CLASSES.
        target_strategy: decode scored by msp / cocoa_msp ("beam" as the paper).
        tokenizer: optional tokenizer of the generating LLM, for token-level SAR relevance
            (without it, relevance is measured per word; see stats.token_units).
        estimator_kwargs: constructor arguments per estimator name.
        nli_with_question: NLI premises are question + answer (True) or the bare answers as in
            lm-polygraph's semantic matrix (False).
    """
    estimators = list(dict.fromkeys(estimators))
    artifacts = UncertaintyArtifacts(samples_df, decodes_df, ptrue_df, dataset_df)
    setup = EstimatorSetup(
        equivalence, embedder, target_strategy, tokenizer, estimator_kwargs, nli_with_question
    )
    if PTRUE_BEAM in estimators:
        return _with_ptrue_beam(estimators, artifacts, setup)
    return _uncertainty(estimators, artifacts, setup)


def _uncertainty(
    estimators: list[str], artifacts: UncertaintyArtifacts, setup: EstimatorSetup
) -> pd.DataFrame:
    """compute_uncertainty of `estimators` (unique, ptrue_beam not among them)."""
    prompts, skipped = collect_prompts(
        artifacts.samples,
        artifacts.decodes,
        artifacts.ptrue,
        artifacts.dataset,
        setup.target_strategy,
    )
    instances = make_estimators(estimators, setup.estimator_kwargs)
    deps = {name: list(est.stats_dependencies) for name, est in instances.items()}
    all_keys = set().union(*deps.values()) if deps else set()
    stats = _StatsCache(setup)
    stats.prefetch(prompts, all_keys)
    rows: list[tuple[str, str, float]] = []
    for name, est in instances.items():
        eligible = [p for p in prompts if _eligible(p, deps[name])]
        skipped[f"{name}_prompts_without_inputs"] = len(prompts) - len(eligible)
        rows.extend(_estimate(name, est, set(deps[name]), eligible, stats))
    return _uncertainty_frame(rows, prompts, estimators, skipped)


class _StatsCache:
    """Each prompt's lm-polygraph stats, built once however many estimators read them."""

    def __init__(self, setup: EstimatorSetup) -> None:
        self.setup = setup
        self.have: dict[str, dict[str, object]] = defaultdict(dict)

    def prefetch(self, prompts: list[PromptArtifacts], all_keys: set[str]) -> None:
        """The batched passes before the per-prompt stats: embeddings, NLI pairs or classes."""
        embedder, equivalence = self.setup.embedder, self.setup.equivalence
        if embedder is not None and hasattr(embedder, "embed"):
            batch = strings_to_embed(
                [p for p in prompts if p.n_samples], all_keys, self.setup.tokenizer, embedder
            )
            if batch:
                embedder.embed(batch)  # one batched pass; later per-prompt calls hit the cache
        with_samples = [p for p in prompts if p.n_samples]
        premises = [
            (p.question if self.setup.nli_with_question else "", p.sample_texts)
            for p in with_samples
        ]
        if all_keys & FULL_MATRICES and hasattr(equivalence, "prefetch"):
            # KLE reads every pair: each prompt's unique NLI pairs in full batches, before the
            # per-prompt matrices (semantic entropy's classes then come from the same matrices)
            equivalence.prefetch(premises)
        elif "semantic_classes_entail" in all_keys and hasattr(equivalence, "cluster_many"):
            # semantic entropy alone reads classes: each answer against the classes' first members
            # (lm-polygraph's greedy classes, equal to those of the full matrix), batched
            for p, labels in zip(with_samples, equivalence.cluster_many(premises), strict=True):
                self.have[p.prompt_id][CLASS_LABELS] = labels

    def of(self, p: PromptArtifacts, keys: set[str]) -> dict[str, object]:
        """The stats `keys` of prompt `p` (and whatever else was built for it)."""
        have = self.have[p.prompt_id]
        todo = {k for k in keys if k not in have}
        if "semantic_classes_entail" in todo:
            todo = (
                (todo - {"semantic_classes_entail"})
                | {"sample_texts"}
                | (set() if CLASS_LABELS in have else {"semantic_matrix_classes"})
            )
            todo = {k for k in todo if k not in have}
        if todo:
            setup = self.setup
            have.update(
                prompt_stats(
                    p,
                    todo,
                    setup.equivalence,
                    setup.embedder,
                    setup.tokenizer,
                    setup.nli_with_question,
                )
            )
        return have


def _estimate(
    name: str,
    est: object,
    keys: set[str],
    eligible: list[PromptArtifacts],
    stats: _StatsCache,
) -> list[tuple[str, str, float]]:
    """(prompt_id, name, value) of estimator `est` on the `eligible` prompts: one lm-polygraph
    call per number of valid samples (module docstring)."""
    groups: dict[int, list[PromptArtifacts]] = defaultdict(list)
    for p in eligible:
        groups[p.n_samples].append(p)
    rows: list[tuple[str, str, float]] = []
    for group in groups.values():
        per_prompt = [stats.of(p, keys) for p in group]
        values = np.asarray(est(build_batch_stats(per_prompt, keys)), dtype=np.float64).reshape(-1)
        if values.shape[0] != len(group):
            raise RuntimeError(f"{name} returned {values.shape[0]} values for {len(group)} prompts")
        rows.extend((p.prompt_id, name, float(v)) for p, v in zip(group, values, strict=True))
    return rows


def _uncertainty_frame(
    rows: list[tuple[str, str, float]],
    prompts: list[PromptArtifacts],
    estimators: list[str],
    skipped: dict[str, int],
) -> pd.DataFrame:
    """The rows by estimator (in the order asked), then prompt (in dataset order); what was
    dropped in attrs["skipped"], and logged."""
    order = {p.prompt_id: i for i, p in enumerate(prompts)}
    rank = {n: i for i, n in enumerate(estimators)}
    rows.sort(key=lambda r: (rank[r[1]], order[r[0]]))
    result = pd.DataFrame(rows, columns=UNCERTAINTY_COLUMNS).astype(
        {"prompt_id": str, "estimator": str, "value": "float64"}
    )
    result.attrs["skipped"] = dict(skipped)
    if any(skipped.values()):
        log.warning(
            "compute_uncertainty dropped/skipped: %s", {k: v for k, v in skipped.items() if v}
        )
    return result


def has_ptrue_beam(ptrue_df: pd.DataFrame | None) -> bool:
    """Whether a ptrue artifact holds P(True) of the beam decode (generation.ptrue_beam=true)."""
    return ptrue_df is not None and PTRUE_BEAM_COLUMN in ptrue_df.columns


def _with_ptrue_beam(
    estimators: list[str], artifacts: UncertaintyArtifacts, setup: EstimatorSetup
) -> pd.DataFrame:
    """compute_uncertainty of `estimators`, ptrue_beam among them: the others as asked, and
    lm-polygraph's PTrue on logprob_true_beam by the very code path of ptrue, renamed."""
    ptrue_df = artifacts.ptrue
    if not has_ptrue_beam(ptrue_df):
        raise ValueError(
            f"{PTRUE_BEAM} needs P(True) of the beam decode (the ptrue artifact's column "
            f"{PTRUE_BEAM_COLUMN}): run the generate stage with generation.ptrue_beam=true"
        )
    kwargs = dict(setup.estimator_kwargs or {})
    parts, skipped = [], {}
    rest = [e for e in estimators if e != PTRUE_BEAM]
    if rest:
        parts.append(_uncertainty(rest, artifacts, replace(setup, estimator_kwargs=kwargs)))
        skipped.update(parts[-1].attrs.get("skipped", {}))
    beam_ptrue = pd.DataFrame(
        {"prompt_id": ptrue_df["prompt_id"], "logprob_true": ptrue_df[PTRUE_BEAM_COLUMN]}
    )
    # PTrue reads neither judge
    own_setup = replace(
        setup,
        equivalence=None,
        embedder=None,
        estimator_kwargs={"ptrue": kwargs[PTRUE_BEAM]} if PTRUE_BEAM in kwargs else None,
    )
    own = _uncertainty(["ptrue"], replace(artifacts, ptrue=beam_ptrue), own_setup)
    skipped[f"{PTRUE_BEAM}_prompts_without_inputs"] = own.attrs["skipped"].get(
        "ptrue_prompts_without_inputs", 0
    )
    parts.append(own.assign(estimator=PTRUE_BEAM))
    rank = {n: i for i, n in enumerate(estimators)}
    result = pd.concat(parts, ignore_index=True)
    result = (
        result.assign(_rank=result["estimator"].map(rank))
        .sort_values("_rank", kind="stable")
        .drop(columns="_rank")
        .reset_index(drop=True)
    )
    result.attrs["skipped"] = skipped
    return result
