"""The single-answer task's metric maths: TriviaQA's exact match (the `exact_match_error`
metric in task.py scores a decision's text with it)."""

from __future__ import annotations

from collections.abc import Iterable

from pipeline.text.normal_forms import squad_normalize

__all__ = ["exact_match"]


def exact_match(pred_label: object, aliases: str | Iterable[object]) -> bool:
    """TriviaQA's exact match: the prediction equals any alias after the official evaluation's
    normalisation (`pipeline.text.normal_forms.squad_normalize`: case, punctuation, articles, whitespace).

    ``aliases`` is one string or an iterable of strings (bytes and None are accepted as model
    output is). A prediction that normalises to "" (empty, only punctuation or articles)
    never matches.
    """
    pred = squad_normalize(pred_label)
    if not pred:
        return False
    if isinstance(aliases, str | bytes | bytearray):
        aliases = [aliases]
    return any(pred == squad_normalize(alias) for alias in aliases)
