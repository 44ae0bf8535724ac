"""The decide stage: per prompt, the Bayes action and risk, l_MAP, l_Sample, self-consistency,
the task's extra Bayes decisions (e.g. the F-beta action) and the decoding baselines' latents,
each with its empirical risk under the prompt's samples, and its text.

Only `pipeline.latent` maths. A decision's text is what the task's latent space writes for it
(`LatentSpace.render`): sets and graphs are written from the latent itself (g_T^-1), an
embedding by its closest sample (the paper's appendix), a class by its first sample.
"""

from __future__ import annotations

import math
from typing import Any

from omegaconf import DictConfig

from pipeline.latent import get_space
from pipeline.latent.decision_rules import DECISION_RULES, empirical_risk
from pipeline.methods import methods
from pipeline.stage import plain, stage
from pipeline.store import ArtifactStore

# every task gets these, decided from the samples' latents (pipeline.methods, their rules in
# pipeline.latent.decision_rules)
SAMPLE_METHODS = methods("latent")
DECLARED = methods("latent", "task")
COLUMNS = ["prompt_id", "method", "action", "risk", "text"]


def decide_prompt(space, samples: list[tuple[Any, str]], decodes: dict[str, tuple[Any, str]],
                  extra: dict[str, Any] | None = None) -> list[dict]:
    """Rows (method, action, risk, text) for one prompt.

    space: the task's latent space; samples: (latent or None when unparseable, text) per
    sample; decodes: strategy -> same; extra: method name -> a latent space whose Bayes action
    is one more decision on the same latents (written as the task's space writes it).
    """
    extra = extra or {}
    valid = [(lat, txt) for lat, txt in samples if lat is not None]
    latents = [lat for lat, _ in valid]
    rows: list[dict] = []

    def add(method: str, action, risk: float, text: str | None = None) -> None:
        if text is None or space.renders_latent:
            text = space.render(action, valid)
        rows.append({"method": method, "action": space.to_json(action), "risk": risk,
                     "text": text})

    if latents:
        # in declaration order (pipeline.methods): a task's extra decisions where declared, any
        # other extra decision last
        for method in (*DECLARED, *(m for m in extra if m not in DECLARED)):
            if method in SAMPLE_METHODS:
                add(method, *DECISION_RULES[method](space, valid))
            elif method in extra:
                res = extra[method].bayes(latents)
                add(method, res.action, float(res.risk))
    else:
        for method in (*SAMPLE_METHODS, *extra):
            add(method, None, math.nan, "")
    for strategy, (latent, text) in decodes.items():
        add(strategy, latent, empirical_risk(space, latent, latents),
            text if latent is not None else "")
    return rows


def task_spaces(cfg: DictConfig):
    """(the task's latent space, {extra decision: its latent space})."""
    space = get_space(cfg.task.space, **plain(cfg.task.space_options))
    extra = {name: get_space(spec["space"], **spec.get("options", {}))
             for name, spec in (plain(cfg.task.decisions) or {}).items()}
    return space, extra


def decide_all(space, latents_df, samples_df, decodes_df, extra: dict[str, Any] | None = None):
    """decisions.parquet rows for every prompt of a cell."""
    import pandas as pd

    texts = {(r.prompt_id, "sample", int(r.sample_idx)): r.text for r in samples_df.itertuples()}
    texts.update({(r.prompt_id, r.strategy, -1): r.text for r in decodes_df.itertuples()})
    out = []
    for prompt_id, group in latents_df.groupby("prompt_id", sort=False):
        samples, decodes = [], {}
        for r in group.sort_values("sample_idx").itertuples():
            latent = space.from_json(r.latent) if r.parse_ok else None
            text = texts.get((prompt_id, r.source, int(r.sample_idx)), "")
            if r.source == "sample":
                samples.append((latent, text))
            elif r.source != "reference":
                decodes[r.source] = (latent, text)
        for row in decide_prompt(space, samples, decodes, extra):
            out.append({"prompt_id": prompt_id, **row})
    return pd.DataFrame(out, columns=COLUMNS)


def decide_slice(cfg: DictConfig) -> dict:
    return {"space": cfg.task.space, "space_options": plain(cfg.task.space_options),
            "decisions": plain(cfg.task.decisions)}


# v2: a cluster decision's text is the most frequent text of its members (LatentSpace.render).
@stage("decide", inputs=("latents", "samples", "decodes"), outputs=("decisions",),
       config=decide_slice, version=2)
def decide_stage(cfg: DictConfig, store: ArtifactStore, key: str) -> dict[str, Any]:
    space, extra = task_spaces(cfg)
    return {"decisions": decide_all(space, store.read("latents"), store.read("samples"),
                                    store.read("decodes"), extra)}
