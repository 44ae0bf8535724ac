"""The decide stage: per prompt, the Bayes action and risk, l_MAP, l_Sample, self-consistency,
the task's extra Bayes decisions (e.g. the F-beta action) and the decoding baselines' latents,
each with its empirical risk under the prompt's samples, and its text.

Only `pipeline.latent` maths. A decision's text is what the task's latent space writes for it
(`LatentSpace.render`): sets and graphs are written from the latent itself (g_T^-1), an
embedding by its closest sample (the paper's appendix), a class by its first sample.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from pipeline.artifacts.stage import plain, stage
from pipeline.artifacts.store import ArtifactStore
from pipeline.components.methods import methods
from pipeline.latent.base import RiskOverflowError
from pipeline.latent.decision_rules import DECISION_RULES

if TYPE_CHECKING:
    from pipeline.config import Cell, Task

log = logging.getLogger("pipeline")

# every task gets these, decided from the samples' latents (pipeline.components.methods, their rules in
# pipeline.latent.decision_rules)
SAMPLE_METHODS = methods("latent")
DECLARED = methods("latent", "task")
COLUMNS = ["prompt_id", "method", "action", "risk", "text"]


def decide_prompt(
    space,
    samples: list[tuple[Any, str]],
    decodes: dict[str, tuple[Any, str]],
    extra: dict[str, Any] | None = None,
) -> list[dict]:
    """Rows (method, action, risk, text) for one prompt (`decide_many` of one prompt)."""
    return decide_many(space, [(samples, decodes)], extra)[0]


def decide_many(
    space,
    prompts: list[tuple[list[tuple[Any, str]], dict[str, tuple[Any, str]]]],
    extra: dict[str, Any] | None = None,
) -> list[list[dict]]:
    """Rows (method, action, risk, text) of every prompt, decided together in the spaces'
    array form (`LatentSpace.batch`).

    space: the task's latent space; prompts: per prompt, (samples: (latent or None when
    unparseable, text) per sample, decodes: strategy -> same); extra: method name -> a latent
    space whose Bayes action is one more decision on the same latents (written as the task's
    space writes it).
    """
    extra = extra or {}
    valid = [[(lat, txt) for lat, txt in samples if lat is not None] for samples, _ in prompts]
    decidable = [p for p, v in enumerate(valid) if v]
    rows: list[list[dict]] = [[] for _ in prompts]

    def add(p: int, method: str, action, risk: float, text: str | None = None) -> None:
        if text is None or space.renders_latent:
            text = space.render(action, valid[p])
        rows[p].append(
            {"method": method, "action": space.to_json(action), "risk": risk, "text": text}
        )

    decided, decode_risks = _decide_decidable(space, valid, decidable, prompts, extra)
    while isinstance(decided, RiskOverflowError):  # refused per prompt: those get no decision
        overflowed = {decidable[r] for r in decided.rows}
        log.warning(
            "[decide] %d prompt(s) get no decision (NaN risk), as unparseable ones: %s",
            len(overflowed),
            decided,
        )
        decidable = [p for p in decidable if p not in overflowed]
        decided, decode_risks = _decide_decidable(space, valid, decidable, prompts, extra)
    for p, method, action, risk, text in decided:
        add(p, method, action, risk, text)
    where = {p: j for j, p in enumerate(decidable)}
    for p, (_, decodes) in enumerate(prompts):
        if p not in where:
            for method in (*SAMPLE_METHODS, *extra):
                add(p, method, None, math.nan, "")
        for strategy, (latent, text) in decodes.items():
            risk = float(decode_risks[strategy][where[p]]) if p in where else math.nan
            add(p, strategy, latent, risk, text if latent is not None else "")
    return rows


def _decide_decidable(space, valid, decidable: list[int], prompts, extra: dict[str, Any]):
    """([(prompt, method, action, risk, text)], {strategy: risks}) of the `decidable` prompts,
    or (the RiskOverflowError of the prompts whose risk exceeds the largest float, {})."""
    decided: list[tuple] = []
    decode_risks: dict[str, np.ndarray] = {}
    if not decidable:
        return decided, decode_risks
    latents = [[lat for lat, _ in valid[p]] for p in decidable]
    texts_of = [[txt for _, txt in valid[p]] for p in decidable]
    try:
        batch = space.batch(latents)
        # in declaration order (pipeline.components.methods): a task's extra decisions where declared, any
        # other extra decision last
        for method in (*DECLARED, *(m for m in extra if m not in DECLARED)):
            if method in SAMPLE_METHODS:
                actions, risks, texts = DECISION_RULES[method](batch, texts_of)
            elif method in extra:
                (actions, risks), texts = extra[method].batch(latents).bayes(), None
            else:
                continue
            decided += [
                (p, method, actions[j], float(risks[j]), None if texts is None else texts[j])
                for j, p in enumerate(decidable)
            ]
        for strategy in dict.fromkeys(s for _, decodes in prompts for s in decodes):
            decode_risks[strategy] = batch.risk(
                [prompts[p][1].get(strategy, (None, ""))[0] for p in decidable]
            )
    except RiskOverflowError as exc:
        return exc, {}
    return decided, decode_risks


def task_spaces(task: Task):
    """(the task's latent space, {extra decision: its latent space})."""
    return task.latent_space(), task.decision_spaces()


def decide_all(space, latents_df, samples_df, decodes_df, extra: dict[str, Any] | None = None):
    """decisions.parquet rows for every prompt of a cell."""
    import pandas as pd

    texts = dict(
        zip(zip(samples_df["prompt_id"], samples_df["sample_idx"].astype(int)), samples_df["text"])
    )
    decode_texts = dict(
        zip(zip(decodes_df["prompt_id"], decodes_df["strategy"]), decodes_df["text"])
    )
    # prompts in order of first appearance, each prompt's rows by sample index
    order = pd.factorize(latents_df["prompt_id"])[0]
    rows = latents_df.assign(_order=order).sort_values(["_order", "sample_idx"], kind="stable")
    prompt_ids: list[str] = []
    prompts: list[tuple[list, dict]] = []
    # a sample counted as "no answer" (parse_ok, not read) has no text: a decision that lands on
    # it is an abstention, not its unreadable text (frames of old caches: read = parse_ok)
    read = rows["read"] if "read" in rows else rows["parse_ok"]
    for prompt_id, source, idx, ok, was_read, payload in zip(
        rows["prompt_id"],
        rows["source"],
        rows["sample_idx"].astype(int),
        rows["parse_ok"],
        read,
        rows["latent"],
    ):
        if not prompt_ids or prompt_ids[-1] != prompt_id:
            prompt_ids.append(prompt_id)
            prompts.append(([], {}))
        if source == "reference":
            continue
        latent = space.from_json(payload) if ok else None
        if source == "sample":
            prompts[-1][0].append((latent, texts.get((prompt_id, idx), "") if was_read else ""))
        else:
            prompts[-1][1][source] = (latent, decode_texts.get((prompt_id, source), ""))
    out = [
        {"prompt_id": prompt_id, **row}
        for prompt_id, prompt_rows in zip(prompt_ids, decide_many(space, prompts, extra))
        for row in prompt_rows
    ]
    return pd.DataFrame(out, columns=COLUMNS)


def decide_slice(cell: Cell) -> dict:
    from pipeline.artifacts.store import (
        with_file_digests,  # a space option naming a file: its content
    )

    return {
        "space": cell.task.space,
        "space_options": with_file_digests(cell.task.space_options),
        "decisions": plain(cell.task.decisions),
    }


# v2: a cluster decision's text is the most frequent text of its members (LatentSpace.render).
# v3: decided a cell at a time in the spaces' array form (risks exact in integer counts).
@stage(
    "decide",
    inputs=("latents", "samples", "decodes"),
    outputs=("decisions",),
    config=decide_slice,
    version=3,
    parts=("task.space",),
)
def decide_stage(cell: Cell, store: ArtifactStore, key: str) -> dict[str, Any]:
    space, extra = task_spaces(cell.task)
    return {
        "decisions": decide_all(
            space, store.read("latents"), store.read("samples"), store.read("decodes"), extra
        )
    }
