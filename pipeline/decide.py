"""Decide stage logic: per prompt, the Bayes action and risk, l_MAP, l_Sample, self-consistency
and the decoding baselines' latents, each with its empirical risk under the prompt's samples.

Only `pipeline.latent` maths; texts for the text metrics are chosen as the paper's appendix says:
sphere -> the sample closest to the action; graphs -> g_T^-1 (triples joined on full stops). A set
is rendered from its own labels ("Atlantic, Pacific"), written as the samples write them, never
as a sample's text: a sample that maps to the set may say more or other things than the set.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any

import numpy as np

from pipeline.latent import get_space, to_json
from pipeline.latent.codec import from_json
from pipeline.text import canonical_label

SAMPLE_METHODS = ("bayes", "map", "sample_mbr", "self_consistency")
SET_LIKE = ("sets", "sets-fbeta", "graphs")


def surface_form(label: str, texts: list[str]) -> str:
    """How the samples write a canonical label ("john lennon" -> "John Lennon"); the label itself
    when no sample writes it (canonical labels drop articles and punctuation, so both may sit
    between its words: "people s republic" matches "People's Republic")."""
    words = label.split()
    if not words:
        return label
    gap = r"(?:[\W_]+(?:(?:the|a|an)[\W_]+)?)"
    pattern = re.compile(r"(?<![^\W_])" + gap.join(re.escape(w) for w in words) + r"(?![^\W_])", re.IGNORECASE)
    for text in texts:
        m = pattern.search(text[:20_000])
        if m:
            return m.group(0)
    return label


def latent_text(space_name: str, latent: Any, texts: list[str] | None = None) -> str:
    """A readable text for a latent that no sample produced verbatim (sets, graphs, simplex).

    Sets list their labels in sorted order, each in the samples' own spelling when `texts` (the
    prompt's sample texts) write it; graphs are g_T^-1 (`graph_to_text`)."""
    if latent is None:
        return ""
    if space_name == "graphs":
        from pipeline.mapping.graphs import graph_to_text

        return graph_to_text(latent)
    if space_name in ("sets", "sets-fbeta"):
        return ", ".join(surface_form(str(x), texts or []) for x in sorted(map(str, latent)))
    if space_name == "simplex":
        return ", ".join(f"{k}: {v:.3f}" for k, v in sorted(latent.items(), key=lambda kv: -kv[1]))
    return str(latent)


def _risk(space, action, latents) -> float:
    if action is None or not latents:
        return math.nan
    return float(space.risk(action, latents))


def decide_prompt(space_name: str, samples: list[tuple[Any, str]],
                  decodes: dict[str, tuple[Any, str]], *, fbeta: float | None = None,
                  **space_kwargs) -> list[dict]:
    """Rows (method, action, risk, text) for one prompt.

    samples: (latent or None when unparseable, text) per sample; decodes: strategy -> same.
    """
    space = get_space(space_name, **space_kwargs)
    valid = [(lat, txt) for lat, txt in samples if lat is not None]
    latents = [lat for lat, _ in valid]
    keys = [space.key(space.canonical(lat)) for lat in latents]
    rows: list[dict] = []
    if space_name == "sphere" and latents:  # unit sample embeddings, for "closest sample" texts
        emb = np.asarray([np.asarray(lat, dtype=float) for lat in latents])
        emb /= np.linalg.norm(emb, axis=1, keepdims=True)

    sample_texts = [txt for _, txt in valid]

    def text_of(action) -> str:
        """Sets and graphs: the action rendered from its labels / triples; others: the first
        sample whose latent is the action, else a rendering of the action."""
        if action is None:
            return ""
        if space_name in SET_LIKE:  # g_T^-1 for every method, so AlignScore compares like with like
            return latent_text(space_name, action, sample_texts)
        if space_name == "sphere":  # closest sample in d_T (paper appendix)
            return valid[int(np.argmax(emb @ np.asarray(action, dtype=float)))][1]
        k = space.key(space.canonical(action))
        for key, (_, txt) in zip(keys, valid):
            if key == k:
                return txt
        return latent_text(space_name, action)

    def add(method: str, action, risk: float, text: str | None = None) -> None:
        rows.append({"method": method, "action": to_json(space_name, action), "risk": risk,
                     "text": text_of(action) if text is None else text})

    if latents:
        bayes = space.bayes(latents)
        add("bayes", bayes.action, float(bayes.risk))
        if fbeta is not None and space_name in SET_LIKE:
            fspace = get_space("sets-fbeta", beta=fbeta)
            fb = fspace.bayes([frozenset(lat) for lat in latents])
            add("bayes_fbeta", fb.action, float(fb.risk), latent_text(space_name, fb.action, sample_texts))
        mapped = space.map(latents)
        add("map", mapped, _risk(space, mapped, latents))
        mbr = space.sample_mbr(latents)
        add("sample_mbr", mbr.action, float(mbr.risk))
        # Self-consistency (Wang et al. 2023): majority vote over normalised raw answers.
        votes = Counter(canonical_label(txt) for _, txt in valid)
        top = max(votes.values())
        winner = next(i for i, (_, txt) in enumerate(valid) if votes[canonical_label(txt)] == top)
        add("self_consistency", latents[winner], _risk(space, latents[winner], latents),
            valid[winner][1])
    else:
        methods = SAMPLE_METHODS + (("bayes_fbeta",) if fbeta is not None and space_name in SET_LIKE
                                    else ())
        for method in methods:
            add(method, None, math.nan, "")
    for strategy, (latent, text) in decodes.items():
        if space_name == "graphs" or latent is None:
            text = latent_text(space_name, latent)
        add(strategy, latent, _risk(space, latent, latents), text)
    return rows


def decide_all(space_name: str, latents_df, samples_df, decodes_df, *, fbeta: float | None,
               **space_kwargs):
    """decisions.parquet rows for every prompt of a cell."""
    import pandas as pd

    texts = {(r.prompt_id, "sample", int(r.sample_idx)): r.text for r in samples_df.itertuples()}
    texts.update({(r.prompt_id, r.strategy, -1): r.text for r in decodes_df.itertuples()})
    out = []
    for prompt_id, group in latents_df.groupby("prompt_id", sort=False):
        samples, decodes = [], {}
        for r in group.sort_values("sample_idx").itertuples():
            latent = from_json(space_name, r.latent) if r.parse_ok else None
            text = texts.get((prompt_id, r.source, int(r.sample_idx)), "")
            if r.source == "sample":
                samples.append((latent, text))
            elif r.source != "reference":
                decodes[r.source] = (latent, text)
        for row in decide_prompt(space_name, samples, decodes, fbeta=fbeta, **space_kwargs):
            out.append({"prompt_id": prompt_id, **row})
    return pd.DataFrame(out, columns=["prompt_id", "method", "action", "risk", "text"])
