"""Failed outside calls are errors, never cached results: the map stage with the LLM extractor
against a real OpenAI-compatible server on loopback (scripts/openai_stand_in.py) that answers
401 or 5xx on demand."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from pipeline.artifacts.stage import run_stage
from pipeline.artifacts.store import ArtifactStore
from pipeline.clients.llm_client import FatalLLMCallError
from pipeline.config import register_configs, resolve_cell
from pipeline.stages.map import ExtractionCallsFailed

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from openai_stand_in import FakeOpenAIServer  # noqa: E402

register_configs()
QUESTIONS = ["Which oceans border Canada?", "Name the primary colours."]
ANSWERS = [
    ["Atlantic and Pacific", "The Pacific, Atlantic and Arctic", "Pacific"],
    ["Red, yellow and blue", "Red and blue", "Red, yellow, blue"],
]


# not made by the generate stage: the stages read them as another producer's inputs, made for
# the cell `_cfg` composes
HAND = {"producer": "hand-written (test)", "cell": "default/smollm2-135m/maqa_bundled"}


def _cell(root: Path) -> ArtifactStore:
    """A cell whose generate artifacts hold hand-written responses (no model needed)."""
    store = ArtifactStore(root)
    ids = [f"p{i}" for i in range(len(QUESTIONS))]
    store.write(
        "dataset",
        pd.DataFrame(
            {
                "prompt_id": ids,
                "dataset": "maqa_bundled",
                "question": QUESTIONS,
                "answers": [
                    [["Atlantic"], ["Pacific"], ["Arctic"]],
                    [["Red"], ["Yellow"], ["Blue"]],
                ],
                "probabilities": [[], []],
                "reference_text": ["", ""],
            }
        ),
        key="gen",
        extra=HAND,
    )
    rows = [
        {"prompt_id": pid, "sample_idx": j, "text": t, "token_logprobs": [-0.1], "logprob": -0.1}
        for pid, texts in zip(ids, ANSWERS)
        for j, t in enumerate(texts)
    ]
    store.write("samples", pd.DataFrame(rows), key="gen", extra=HAND)
    store.write(
        "decodes",
        pd.DataFrame(
            {
                "prompt_id": ids,
                "strategy": "greedy",
                "text": ["Pacific and Atlantic", "Blue and red"],
                "token_logprobs": [[-0.1]] * 2,
                "logprob": [-0.1] * 2,
            }
        ),
        key="gen",
        extra=HAND,
    )
    return store


def _cfg(server: FakeOpenAIServer, tmp_path: Path, *extra: str):
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(
            "config",
            overrides=[
                "dataset=maqa_bundled",
                "task.extractor.kind=llm",
                f"task.extractor.base_url={server.base_url}",
                "task.extractor.max_retries=1",
                f"cache_dir={tmp_path / 'cache'}",
                *extra,
            ],
        )


def test_a_rejected_key_stops_the_stage_and_a_fixed_one_recomputes(tmp_path):
    store = _cell(tmp_path / "cell")
    with FakeOpenAIServer() as server:
        server.state.faults = [401] * 50
        cfg = _cfg(server, tmp_path)
        with pytest.raises(FatalLLMCallError, match="401"):
            run_stage("map", resolve_cell(cfg), store)
        assert store.manifest("latents") is None  # nothing stored under the normal key
        assert not list((tmp_path / "cache" / "llm").rglob("*.json"))  # nor in the call cache
        server.state.faults = []  # the key is fixed
        result = run_stage("map", resolve_cell(cfg), store)
        assert not result["skipped"]
    latents = store.read("latents")
    assert latents["parse_ok"].all() and len(latents) == 8


def test_transient_failures_beyond_the_allowed_share_fail_the_stage(tmp_path):
    store = _cell(tmp_path / "cell")
    with FakeOpenAIServer() as server:
        # every attempt of the first two requests fails (1 retry each): 2 of 8 calls fail
        server.state.faults = [503, 503, 503, 503]
        cfg = _cfg(server, tmp_path, "task.extractor.max_concurrency=1")
        with pytest.raises(ExtractionCallsFailed, match=r"2 of 8 calls .* failed after retries"):
            run_stage("map", resolve_cell(cfg), store)
        assert store.manifest("latents") is None
        answered = len(list((tmp_path / "cache" / "llm").rglob("*.json")))
        assert answered == 6  # the answered calls are cached: a rerun only retries the rest
        before = server.state.requests
        run_stage("map", resolve_cell(cfg), store)
        assert server.state.requests - before == 2
    assert store.read("latents")["parse_ok"].all()


def test_a_tolerated_share_stores_the_failed_responses_as_unparseable(tmp_path):
    store = _cell(tmp_path / "cell")
    with FakeOpenAIServer() as server:
        server.state.faults = [500, 500]  # the first call fails twice (1 retry)
        cfg = _cfg(
            server,
            tmp_path,
            "task.extractor.max_concurrency=1",
            "task.extractor.max_failed_share=0.2",
        )
        run_stage("map", resolve_cell(cfg), store)
    latents = store.read("latents")
    assert int((~latents["parse_ok"]).sum()) == 1
