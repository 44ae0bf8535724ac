"""Quality and UQ as a function of the number of samples M, by subsampling stored samples
(paper Figs. 6-8, MAQA sets): no new generation, only the latent core and the metrics."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pipeline.latent import get_space

COLUMNS = ["model", "m", "hamming", "hamming_sd", "prr_bayes", "prr_bayes_sd", "prr_beam",
           "prr_beam_sd"]


def samples_ablation(latents: pd.DataFrame, dataset: pd.DataFrame, quality: pd.DataFrame,
                     space_name: str | None, ms=(1, 2, 5, 10, 15, 20), repeats: int = 10,
                     seed: int = 0, max_rejection: float = 0.5,
                     metric: str = "hamming") -> pd.DataFrame:
    """One row per (model, M): mean `metric` (a loss) of l_Bayes and PRR of R_Bayes for both
    targets, each with its standard deviation over `repeats` random subsets of the samples.
    `space_name`: the space of the cells' decisions (their decide manifests)."""
    from pipeline.evaluation import prr
    from pipeline.tasks import METRICS, Reference

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
        beam_q = quality[(quality["model"] == model) & (quality["method"] == "beam")
                         & (quality["metric"] == metric)].set_index("prompt_id")["value"]
        per_prompt = {}
        for pid, g in lat[(lat["source"] == "sample") & lat["parse_ok"]].groupby("prompt_id"):
            if pid in ds.index:
                per_prompt[pid] = [space.from_json(s) for s in g["latent"]]
        pids = sorted(per_prompt)
        max_m = max((len(v) for v in per_prompt.values()), default=0)
        for m in ms:
            if m > max_m or not pids:
                continue
            ham, prr_b, prr_beam = [], [], []
            for _ in range(repeats):
                risks, losses = [], []
                for pid in pids:
                    sets = per_prompt[pid]
                    pick = rng.choice(len(sets), size=min(m, len(sets)), replace=False)
                    res = space.bayes([sets[i] for i in pick])
                    truth = Reference(answers=[list(a) for a in ds.loc[pid, "answers"]])
                    losses.append(loss(res.action, truth, None))
                    risks.append(res.risk)
                risks, losses = np.asarray(risks), np.asarray(losses)
                ham.append(losses.mean())
                prr_b.append(prr(risks, -losses, max_rejection=max_rejection))
                bq = beam_q.reindex(pids).to_numpy(float)
                ok = ~np.isnan(bq)
                prr_beam.append(prr(risks[ok], -bq[ok], max_rejection=max_rejection)
                                if ok.sum() >= 2 else np.nan)
            rows.append({"model": model, "m": m,
                         "hamming": np.mean(ham), "hamming_sd": np.std(ham),
                         "prr_bayes": np.nanmean(prr_b), "prr_bayes_sd": np.nanstd(prr_b),
                         "prr_beam": np.nanmean(prr_beam), "prr_beam_sd": np.nanstd(prr_beam)})
    return pd.DataFrame(rows, columns=COLUMNS)
