"""Quality and UQ as a function of the number of samples M, by subsampling stored samples
(paper Figs. 4-6, MAQA sets): no new generation, only the latent core and the metrics.

Fig. 4: the loss (Hamming) of l_Bayes, with beam search's loss as the reference line ("even a
small number of samples suffices to outperform beam search"). Fig. 5: "UQ performance of
R(l_Bayes)": PRR of the Bayes risk of l_Bayes against the quality of l_Bayes. Fig. 6: "UQ
performance of R(l_Beam)": PRR of the risk of the *beam* response under the M samples,
R(l_Beam) = (1/M) sum_i d(l_Beam, l^(i)), against the quality of the beam response ("When the
output is fixed, for example, to beam search ...", Appendix A.1).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pipeline.components.methods import BASELINE
from pipeline.evaluation import prr
from pipeline.latent import get_space
from pipeline.tasks.contract import METRICS, Reference

COLUMNS = [
    "model",
    "m",
    "hamming",
    "hamming_sd",
    "hamming_beam",
    "prr_bayes",
    "prr_bayes_sd",
    "prr_beam",
    "prr_beam_sd",
]


@dataclass(frozen=True)
class AblationSettings:
    """How the ablation subsamples and scores: the values of M, the random subsets per M, their
    seed, the PRR's rejection cap and the loss (a metric name). The report sets only the seed
    and the cap (docs/fidelity.md, "Samples ablation")."""

    ms: tuple[int, ...] = (1, 2, 5, 10, 15, 20)
    repeats: int = 10
    seed: int = 0
    max_rejection: float = 0.5
    metric: str = "hamming"


@dataclass(frozen=True)
class _ModelPrompts:
    """One model's prompts as the ablation reads them: those with parsed samples and a dataset
    row, sorted."""

    pids: list
    samples: dict  # prompt id -> the latents of its parsed samples
    truths: dict  # prompt id -> its Reference
    beam_latent: dict  # prompt id -> the beam response's latent (parsed ones only)
    beam_quality: np.ndarray  # the beam response's quality, per pid (NaN where none)

    @property
    def max_m(self) -> int:
        return max((len(v) for v in self.samples.values()), default=0)


def samples_ablation(
    latents: pd.DataFrame,
    dataset: pd.DataFrame,
    quality: pd.DataFrame,
    space_name: str | None,
    settings: AblationSettings = AblationSettings(),
) -> pd.DataFrame:
    """One row per (model, M), each mean with its standard deviation over `settings.repeats`
    random subsets of M of the stored samples of every prompt:

    - `hamming`: mean `settings.metric` (a loss) of l_Bayes of the subset; `hamming_beam`: mean
      `settings.metric` of the beam response over the same prompts (does not depend on M);
    - `prr_bayes`: PRR of R(l_Bayes) (the subset's Bayes risk) against the quality of l_Bayes;
    - `prr_beam`: PRR of R(l_Beam) (the risk of the beam latent under the subset) against the
      quality of the beam response (the quality artifact's beam row); prompts whose beam
      response has no latent or no quality are left out.

    `space_name`: the space of the cells' decisions (their decide manifests)."""

    if space_name is None:
        return pd.DataFrame(columns=COLUMNS)
    space = get_space(space_name)
    loss = METRICS[settings.metric].fn
    rng = np.random.default_rng(settings.seed)  # one stream over every model and M, in order
    rows = []
    if latents.empty or dataset.empty:  # no MAQA cell (or no latents): an empty table, not a crash
        return pd.DataFrame(columns=COLUMNS)
    for model, lat in latents.groupby("model"):
        prompts = _model_prompts(model, lat, dataset, quality, space, settings.metric)
        for m in settings.ms:
            if m > prompts.max_m or not prompts.pids:
                continue
            scores = _subsampled_scores(prompts, m, space, loss, rng, settings)
            rows.append({"model": model, "m": m, **scores})
    return pd.DataFrame(rows, columns=COLUMNS)


def _model_prompts(model, lat: pd.DataFrame, dataset, quality, space, metric: str) -> _ModelPrompts:
    """`model`'s parsed samples, references and beam response (latent and quality)."""
    ds = dataset[dataset["model"] == model].set_index("prompt_id")
    beam_q = quality[
        (quality["model"] == model)
        & (quality["method"] == BASELINE)
        & (quality["metric"] == metric)
    ].set_index("prompt_id")["value"]
    beam_latent = {
        r.prompt_id: space.from_json(r.latent)
        for r in lat[(lat["source"] == BASELINE) & lat["parse_ok"]].itertuples()
    }
    samples = {}
    for pid, g in lat[(lat["source"] == "sample") & lat["parse_ok"]].groupby("prompt_id"):
        if pid in ds.index:
            samples[pid] = [space.from_json(s) for s in g["latent"]]
    pids = sorted(samples)
    truths = {pid: Reference(answers=[list(a) for a in ds.loc[pid, "answers"]]) for pid in pids}
    bq = beam_q[~beam_q.index.duplicated()].reindex(pids).to_numpy(float)
    return _ModelPrompts(pids, samples, truths, beam_latent, bq)


def _subsampled_scores(
    prompts: _ModelPrompts, m: int, space, loss, rng, settings: AblationSettings
) -> dict[str, float]:
    """The row's scores at M = m, over `settings.repeats` draws of a subset per prompt."""
    pids, bq = prompts.pids, prompts.beam_quality
    ham, prr_b, prr_beam = [], [], []
    for _ in range(settings.repeats):
        subsets = []
        for pid in pids:
            sets = prompts.samples[pid]
            pick = rng.choice(len(sets), size=min(m, len(sets)), replace=False)
            subsets.append([sets[i] for i in pick])
        batch = space.batch(subsets)  # every prompt's subset decided at once
        actions, risks = batch.bayes()
        losses = np.array(
            [loss(action, prompts.truths[pid], None) for action, pid in zip(actions, pids)],
            dtype=float,
        )
        beam_risks = batch.risk([prompts.beam_latent.get(pid) for pid in pids])
        ham.append(losses.mean())
        prr_b.append(prr(risks, -losses, max_rejection=settings.max_rejection))
        ok = ~np.isnan(bq) & ~np.isnan(beam_risks)
        prr_beam.append(
            prr(beam_risks[ok], -bq[ok], max_rejection=settings.max_rejection)
            if ok.sum() >= 2
            else np.nan
        )
    return {
        "hamming": np.mean(ham),
        "hamming_sd": np.std(ham),
        "hamming_beam": _nan_stats(bq)[0],
        "prr_bayes": _nan_stats(prr_b)[0],
        "prr_bayes_sd": _nan_stats(prr_b)[1],
        "prr_beam": _nan_stats(prr_beam)[0],
        "prr_beam_sd": _nan_stats(prr_beam)[1],
    }


def _nan_stats(values) -> tuple[float, float]:
    """(mean, sd) ignoring NaN; (NaN, NaN) when every value is NaN, without a warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(np.nanmean(values)), float(np.nanstd(values))
