"""UQ estimators declare the artifacts they read; the uq stage hands each group exactly those."""

import pandas as pd
import pytest

from pipeline.uncertainty.estimators import (
    ESTIMATORS,
    GROUPS,
    Estimator,
    artifacts_read,
    register_group,
    uncertainty_rows,
)


def test_each_group_declares_what_it_reads():
    assert artifacts_read(["latent_entropy"]) == ("latents",)
    assert artifacts_read(["bayes_risk", "bayes_risk_fbeta"]) == ("decisions",)
    assert artifacts_read(["bayes_risk", "msp", "latent_entropy"]) == (
        "decisions",
        "dataset",
        "samples",
        "decodes",
        "ptrue",
        "latents",
    )
    assert all(
        set(GROUPS[g].reads) <= {"dataset", "samples", "decodes", "ptrue", "latents", "decisions"}
        for g in GROUPS
    )


def test_a_group_gets_only_its_declared_artifacts():
    seen = {}

    @register_group("test_reads_latents", reads=("latents",))
    def group(names, artifacts, settings, context):
        seen["keys"] = set(artifacts)
        return pd.DataFrame({"prompt_id": ["p"], "estimator": names[0], "value": [1.0]})

    ESTIMATORS.add("test_latent_reader", Estimator("test_reads_latents"))
    try:
        everything = {
            name: pd.DataFrame() for name in ("dataset", "samples", "latents", "decisions")
        }
        rows = uncertainty_rows(["test_latent_reader"], everything)
        assert seen["keys"] == {"latents"}
        assert rows.to_dict("records") == [
            {"prompt_id": "p", "estimator": "test_latent_reader", "value": 1.0}
        ]
    finally:
        GROUPS._entries.pop("test_reads_latents")
        ESTIMATORS._entries.pop("test_latent_reader")


def test_risk_estimators_name_their_decision():
    assert ESTIMATORS["bayes_risk"].decision == "bayes"
    assert ESTIMATORS["bayes_risk_fbeta"].decision == "bayes_fbeta"
    with pytest.raises(Exception, match="unknown UQ estimator"):
        artifacts_read(["no_such_estimator"])
