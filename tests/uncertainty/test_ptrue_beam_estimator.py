"""The uq estimator ptrue_beam ("P(True) (beam output)"): lm-polygraph's PTrue on the ptrue
artifact's logprob_true_beam (generation.ptrue_beam=true). It comes with ptrue wherever that
column exists and never otherwise; asked for by name without the column, it says what to set."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from pipeline.uncertainty.estimators import (
    ESTIMATORS,
    PolygraphSettings,
    UQContext,
    uncertainty_rows,
)
from pipeline.uncertainty.polygraph import compute_uncertainty

IDS = ["p", "q", "r"]


def _artifacts(beam: bool) -> dict[str, pd.DataFrame]:
    ptrue = pd.DataFrame(
        {"prompt_id": IDS, "logprob_true": [-0.1, -0.2, -0.3], "p_true": np.exp([-0.1, -0.2, -0.3])}
    )
    if beam:
        ptrue = ptrue.assign(
            logprob_true_beam=[-0.1, -1.5, -2.5], p_true_beam=np.exp([-0.1, -1.5, -2.5])
        )
    return {
        "dataset": pd.DataFrame({"prompt_id": IDS, "question": ["a?", "b?", "c?"]}),
        "samples": pd.DataFrame(
            {
                "prompt_id": [pid for pid in IDS for _ in range(2)],
                "sample_idx": [0, 1] * 3,
                "text": ["x", "y"] * 3,
                "token_logprobs": [[-1.0]] * 6,
                "logprob": [-1.0] * 6,
            }
        ),
        "decodes": pd.DataFrame(
            {
                "prompt_id": IDS,
                "strategy": "beam",
                "text": ["x", "y", "z"],
                "token_logprobs": [[-0.5]] * 3,
                "logprob": [-0.5] * 3,
            }
        ),
        "ptrue": ptrue,
    }


class _NoModels:
    """P(True) and MSP read no auxiliary model: none is built here."""

    def build_embedder(self, name, device=None):
        return None

    def cross_encoder(self, model, device, revision=None):
        return None

    def equivalence_judge(self, eq, device, cache_dir):
        return None


def _rows(names, beam):
    rows = uncertainty_rows(
        names,
        _artifacts(beam),
        {"lm_polygraph": PolygraphSettings()},
        UQContext(models=_NoModels()),
    )
    return {(r.estimator, r.prompt_id): r.value for r in rows.itertuples()}


def test_it_is_ptrue_on_the_beam_column_beside_the_greedy_one():
    got = _rows(["msp", "ptrue"], beam=True)
    assert [got[("ptrue", pid)] for pid in IDS] == pytest.approx([0.1, 0.2, 0.3])
    assert [got[("ptrue_beam", pid)] for pid in IDS] == pytest.approx([0.1, 1.5, 2.5])
    assert [got[("msp", pid)] for pid in IDS] == pytest.approx([0.5] * 3)
    # lm-polygraph's own PTrue on the same numbers
    import lm_polygraph.estimators as lpe

    assert list(lpe.PTrue()({"p_true": np.array([-0.1, -1.5, -2.5])})) == pytest.approx(
        [got[("ptrue_beam", pid)] for pid in IDS]
    )


def test_it_appears_only_where_the_column_exists():
    assert {e for e, _ in _rows(["msp", "ptrue"], beam=False)} == {"msp", "ptrue"}
    assert {e for e, _ in _rows(["msp"], beam=True)} == {"msp"}  # only beside ptrue
    a = _artifacts(beam=False)
    with pytest.raises(ValueError, match="generation.ptrue_beam=true"):
        compute_uncertainty(
            a["samples"], a["decodes"], a["ptrue"], a["dataset"], None, None, ["ptrue_beam"]
        )


def test_the_other_estimators_values_and_order_are_those_without_it():
    a = _artifacts(beam=True)
    alone = compute_uncertainty(
        a["samples"], a["decodes"], a["ptrue"], a["dataset"], None, None, ["msp", "ptrue"]
    )
    both = compute_uncertainty(
        a["samples"],
        a["decodes"],
        a["ptrue"],
        a["dataset"],
        None,
        None,
        ["msp", "ptrue_beam", "ptrue"],
    )
    assert list(dict.fromkeys(both["estimator"])) == ["msp", "ptrue_beam", "ptrue"]
    pd.testing.assert_frame_equal(
        both[both["estimator"] != "ptrue_beam"].reset_index(drop=True), alone
    )
    assert both.attrs["skipped"]["ptrue_beam_prompts_without_inputs"] == 0
    nan = a["ptrue"].assign(logprob_true_beam=[-0.1, math.nan, -2.5])
    one_less = compute_uncertainty(
        a["samples"], a["decodes"], nan, a["dataset"], None, None, ["ptrue_beam"]
    )
    assert one_less["prompt_id"].tolist() == ["p", "r"]
    assert one_less.attrs["skipped"]["ptrue_beam_prompts_without_inputs"] == 1


def test_it_is_an_extra_sensitivity_row_of_the_beam_target():
    spec = ESTIMATORS["ptrue_beam"]
    assert (spec.label, spec.in_paper, spec.target, spec.group) == (
        "P(True) (beam output)",
        False,
        "beam",
        "lm_polygraph",
    )
    assert "sensitivity" in spec.note and "greedy" in spec.note
