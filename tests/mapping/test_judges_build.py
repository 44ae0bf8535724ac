"""The match judges and the plan's extraction count are built from a composed config (real
LLMClient and embedding judge objects; no call is made, so no endpoint is needed)."""

from __future__ import annotations

from pathlib import Path

from pipeline.aux_models.factories import build_judge
from pipeline.config import resolve_cell
from pipeline.mapping.judges import EquivalenceJudge, LLMJudge


def test_build_judge_builds_each_kind_from_the_config(compose_cfg, tmp_path):
    assert build_judge(resolve_cell(compose_cfg("evaluation.match_judge=none"))) is None
    cfg = compose_cfg(
        "evaluation.match_judge=llm",
        "task.extractor.model=my-judge",
        "task.extractor.base_url=http://127.0.0.1:9/v1",
        f"cache_dir={tmp_path}",
    )
    judge = build_judge(resolve_cell(cfg))
    assert isinstance(judge, LLMJudge)
    assert judge.client.model == "my-judge"
    assert Path(judge.client.cache_dir) == tmp_path / "llm"
    assert isinstance(
        build_judge(
            resolve_cell(compose_cfg("evaluation.match_judge=equivalence", f"cache_dir={tmp_path}"))
        ),
        EquivalenceJudge,
    )


def test_the_plan_counts_extraction_prompts_and_cached_answers(compose_cfg, tmp_path):
    from pipeline.driver.plan import Count, _llm_count

    cfg = compose_cfg(
        "dataset=maqa_bundled",
        "task.extractor.kind=llm",
        f"cache_dir={tmp_path}",
        "task.extractor.base_url=http://127.0.0.1:9/v1",
    )
    texts = {"p0": ("Name two oceans.", ["Pacific and Atlantic", "Arctic"], ["Pacific"])}
    # 3 distinct responses to extract, none answered yet: all 3 left to do
    assert _llm_count(cfg, texts, 1) == Count("3 (0 cached)", 3)
