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


def samples_ablation(
    latents: pd.DataFrame,
    dataset: pd.DataFrame,
    quality: pd.DataFrame,
    space_name: str | None,
    ms=(1, 2, 5, 10, 15, 20),
    repeats: int = 10,
    seed: int = 0,
    max_rejection: float = 0.5,
    metric: str = "hamming",
) -> pd.DataFrame:
    """One row per (model, M), each mean with its standard deviation over `repeats` random
    subsets of M of the stored samples of every prompt:

    - `hamming`: mean `metric` (a loss) of l_Bayes of the subset; `hamming_beam`: mean `metric`
      of the beam response over the same prompts (does not depend on M);
    - `prr_bayes`: PRR of R(l_Bayes) (the subset's Bayes risk) against the quality of l_Bayes;
    - `prr_beam`: PRR of R(l_Beam) (the risk of the beam latent under the subset) against the
      quality of the beam response (the quality artifact's beam row); prompts whose beam
      response has no latent or no quality are left out.

    `space_name`: the space of the cells' decisions (their decide manifests)."""

    if space_name is None:
        return pd.DataFrame(columns=COLUMNS)
    space = get_space(space_name)
    loss = METRICS[metric].fn
    rng = np.random.default_rng(seed)
    rows = []
    if latents.empty or dataset.empty:  # no MAQA cell (or no latents): an empty table, not a crash
        return pd.DataFrame(columns=COLUMNS)
    for model, lat in latents.groupby("model"):
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
        per_prompt = {}
        for pid, g in lat[(lat["source"] == "sample") & lat["parse_ok"]].groupby("prompt_id"):
            if pid in ds.index:
                per_prompt[pid] = [space.from_json(s) for s in g["latent"]]
        pids = sorted(per_prompt)
        truths = {pid: Reference(answers=[list(a) for a in ds.loc[pid, "answers"]]) for pid in pids}
        max_m = max((len(v) for v in per_prompt.values()), default=0)
        bq = beam_q[~beam_q.index.duplicated()].reindex(pids).to_numpy(float)
        for m in ms:
            if m > max_m or not pids:
                continue
            ham, prr_b, prr_beam = [], [], []
            for _ in range(repeats):
                subsets = []
                for pid in pids:
                    sets = per_prompt[pid]
                    pick = rng.choice(len(sets), size=min(m, len(sets)), replace=False)
                    subsets.append([sets[i] for i in pick])
                batch = space.batch(subsets)  # every prompt's subset decided at once
                actions, risks = batch.bayes()
                losses = np.array(
                    [loss(action, truths[pid], None) for action, pid in zip(actions, pids)],
                    dtype=float,
                )
                beam_risks = batch.risk([beam_latent.get(pid) for pid in pids])
                ham.append(losses.mean())
                prr_b.append(prr(risks, -losses, max_rejection=max_rejection))
                ok = ~np.isnan(bq) & ~np.isnan(beam_risks)
                prr_beam.append(
                    prr(beam_risks[ok], -bq[ok], max_rejection=max_rejection)
                    if ok.sum() >= 2
                    else np.nan
                )
            rows.append(
                {
                    "model": model,
                    "m": m,
                    "hamming": np.mean(ham),
                    "hamming_sd": np.std(ham),
                    "hamming_beam": _nan_stats(bq)[0],
                    "prr_bayes": _nan_stats(prr_b)[0],
                    "prr_bayes_sd": _nan_stats(prr_b)[1],
                    "prr_beam": _nan_stats(prr_beam)[0],
                    "prr_beam_sd": _nan_stats(prr_beam)[1],
                }
            )
    return pd.DataFrame(rows, columns=COLUMNS)


def _nan_stats(values) -> tuple[float, float]:
    """(mean, sd) ignoring NaN; (NaN, NaN) when every value is NaN, without a warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(np.nanmean(values)), float(np.nanstd(values))
