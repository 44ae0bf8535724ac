"""P(True) on the beam output (generation.ptrue_beam=true, issue 57 item 5): a second P(True)
pass about the beam decode's text, stored beside the greedy one in the ptrue artifact
(`logprob_true_beam`, `p_true_beam`); off (the default and the paper's setting) the generate
key and every artifact are what they were. On the real packaged SmolLM2 where a generation is
needed; the stage's bookkeeping with a recording backend."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from pipeline.artifacts.schema import PTRUE
from pipeline.artifacts.store import ArtifactStore
from pipeline.config import register_configs, resolve_cell
from pipeline.generation.ptrue import (
    beam_answers,
    beam_setting_problems,
    compute_ptrue,
    ptrue_prompts,
)
from pipeline.generation.runner import ptrue_of_answers

ROOT = Path(__file__).resolve().parents[2]
register_configs()

QUESTIONS = ["The capital of France is", "Who painted the Mona Lisa?", "Oceans"]
ANSWERS = ["Paris", "Leonardo da Vinci", "Pacific"]


def _cfg(out: Path, *overrides: str):
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(
            "config", overrides=[f"output_root={out}", "wandb.enabled=false", *overrides]
        )


# --------------------------------------------------------------------------- the pieces


def test_ptrue_of_answers_asks_only_what_is_not_known(tiny_backend, monkeypatch) -> None:
    """Asked answers get compute_ptrue's value; a known value is taken bit for bit, its prompt
    never sent; rows in the ptrue schema, in prompt order."""
    ids = ["a", "b", "c"]
    direct = compute_ptrue(tiny_backend, QUESTIONS, ANSWERS)
    sent = []
    real = tiny_backend.logprob_of_next

    def recording(prompts, token):
        sent.extend(prompts)
        return real(prompts, token)

    monkeypatch.setattr(tiny_backend, "logprob_of_next", recording)
    frame = ptrue_of_answers(tiny_backend, ids, QUESTIONS, ANSWERS, known={"b": -0.123})
    assert list(frame.columns) == list(PTRUE) and frame["prompt_id"].tolist() == ids
    assert frame["logprob_true"].iloc[1] == -0.123
    assert frame["p_true"].iloc[1] == math.exp(-0.123)
    assert frame["logprob_true"].iloc[[0, 2]].tolist() == pytest.approx(
        [direct[0], direct[2]], abs=1e-5
    )
    assert sent == [ptrue_prompts(tiny_backend, [QUESTIONS[i]], [ANSWERS[i]])[0] for i in (0, 2)]
    with pytest.raises(ValueError, match="3 prompt_ids, 2 questions"):
        ptrue_of_answers(tiny_backend, ids, QUESTIONS[:2], ANSWERS)


def test_beam_answers_reuse_the_greedy_value_only_where_the_texts_are_equal() -> None:
    decodes = pd.DataFrame(
        {
            "prompt_id": ["p", "p", "q", "q", "r", "r"],
            "strategy": ["greedy", "beam"] * 3,
            "text": ["Paris", "Paris", "Lyon", "Lyon, France", "Rome", "rome"],
        }
    )
    ptrue = pd.DataFrame({"prompt_id": ["p", "q", "r"], "logprob_true": [-1.0, -2.0, -3.0]})
    answers, known = beam_answers(decodes, ptrue, ["p", "q", "r"])
    assert answers == ["Paris", "Lyon, France", "rome"] and known == {"p": -1.0}
    # without a greedy decode among the strategies every beam answer is asked
    beam_only = decodes[decodes["strategy"] == "beam"]
    assert beam_answers(beam_only, ptrue, ["p", "q", "r"])[1] == {}
    with pytest.raises(RuntimeError, match="no beam decode of"):
        beam_answers(decodes[decodes["strategy"] == "greedy"], ptrue, ["p"])


def test_the_setting_needs_ptrue_and_a_beam_decode() -> None:
    assert beam_setting_problems(True, ["greedy", "beam"]) == []
    assert len(beam_setting_problems(False, ["greedy"])) == 2
    assert "generation.ptrue=true" in beam_setting_problems(False, ["beam"])[0]


def test_a_cell_without_what_the_setting_needs_fails_before_any_generation(tmp_path):
    from pipeline.artifacts.stage import run_stage
    from pipeline.runtime.errors import ConfigError

    cfg = _cfg(
        tmp_path,
        "dataset=triviaqa_bundled",
        "dataset.limit=2",
        "generation.ptrue_beam=true",
        "generation.strategies=[greedy]",
    )
    with pytest.raises(ConfigError, match="needs beam among generation.strategies"):
        run_stage("generate", resolve_cell(cfg), ArtifactStore(tmp_path / "cell"))
    assert not (tmp_path / "cell" / "samples.parquet").exists()


class _Recording:
    """A backend for the stage's P(True) pass: log p(True) = -(length of the answer) / 100, and
    every prompt it was asked about."""

    name = "recording"

    def __init__(self):
        self.asked = []

    def render_chat(self, messages):
        return messages[0]["content"]

    def logprob_of_next(self, prompts, token):
        self.asked += list(prompts)
        return [-len(p.split("Possible answer:")[1].split("\n")[0]) / 100 for p in prompts]


def test_the_stage_pass_asks_about_each_shards_beam_text_once(tmp_path):
    """`_ptrue_beam_pass` over written shards (what a resumed run finds): the shards without
    their ptrue_beam shard are asked, about the beam text, the greedy value reused where the
    texts agree; a shard already done is not asked again; the merge adds the two columns."""
    from pipeline.stages.generate import (
        PTRUE_BEAM,
        Shard,
        _ptrue_beam_pass,
        with_beam_ptrue,
    )

    cfg = _cfg(tmp_path, "dataset=triviaqa_bundled", "generation.ptrue_beam=true")
    store, key = ArtifactStore(tmp_path / "cell"), "k"
    shards = [Shard(0, ["p", "q"], ["P?", "Q?"], ["P?", "Q?"]), Shard(1, ["r"], ["R?"], ["R?"])]
    texts = {"p": ("Paris", "Paris"), "q": ("Lyon", "Lyon, France"), "r": ("Rome", "Roma")}
    for s in shards:
        store.write_shard(
            "decodes",
            key,
            s.index,
            pd.DataFrame(
                [
                    {
                        "prompt_id": pid,
                        "strategy": strategy,
                        "text": texts[pid][i],
                        "token_logprobs": [-1.0],
                        "logprob": -1.0,
                    }
                    for pid in s.prompt_ids
                    for i, strategy in enumerate(("greedy", "beam"))
                ]
            ),
            prompt_ids=s.prompt_ids,
        )
        store.write_shard(
            "ptrue",
            key,
            s.index,
            pd.DataFrame(
                {
                    "prompt_id": s.prompt_ids,
                    "logprob_true": [-0.5] * len(s.prompt_ids),
                    "p_true": [math.exp(-0.5)] * len(s.prompt_ids),
                }
            ),
            prompt_ids=s.prompt_ids,
        )
    store.write_shard(
        PTRUE_BEAM,
        key,
        1,
        pd.DataFrame({"prompt_id": ["r"], "logprob_true": [-0.9], "p_true": [math.exp(-0.9)]}),
        schema="ptrue",
        prompt_ids=["r"],
    )
    backend = _Recording()
    _ptrue_beam_pass(cfg, store, key, shards, backend)
    assert len(backend.asked) == 1 and "Possible answer:Lyon, France" in backend.asked[0]
    merged = with_beam_ptrue(
        pd.concat(
            [store.read_shards("ptrue", key, [(s.index, s.prompt_ids)]) for s in shards],
            ignore_index=True,
        ),
        store.read_shards(
            PTRUE_BEAM, key, [(s.index, s.prompt_ids) for s in shards], schema="ptrue"
        ),
    )
    assert merged["logprob_true_beam"].tolist() == [-0.5, -len("Lyon, France") / 100, -0.9]
    assert merged["p_true_beam"].tolist() == [math.exp(v) for v in merged["logprob_true_beam"]]
    _ptrue_beam_pass(cfg, store, key, shards, backend)  # everything written: nothing asked
    assert len(backend.asked) == 1


def test_the_ptrue_artifact_holds_the_beam_columns_only_when_written_with_them(tmp_path):
    """The ptrue schema's optional columns: a frame without them is written with exactly the
    old columns (an old artifact reads as before), one with them keeps them, typed float."""
    store = ArtifactStore(tmp_path)
    old = pd.DataFrame({"prompt_id": ["p"], "logprob_true": [-1.0], "p_true": [math.exp(-1.0)]})
    store.write("ptrue", old, key="a")
    assert list(store.read("ptrue").columns) == list(PTRUE)
    store.write(
        "ptrue", old.assign(logprob_true_beam=[-2.0], p_true_beam=[math.exp(-2.0)]), key="b"
    )
    assert list(store.read("ptrue").columns) == [*PTRUE, "logprob_true_beam", "p_true_beam"]
    assert store.read("ptrue")["logprob_true_beam"].dtype == "float64"


# --------------------------------------------------------------------------- the real model


def test_the_generate_stage_on_smollm2_asks_ptrue_about_the_beam_output_too(tmp_path):
    """A tiny TriviaQA cell on the packaged SmolLM2 with generation.ptrue_beam=true: the ptrue
    artifact has both P(True) values per prompt; equal where the greedy and beam texts are
    equal, and where they differ the beam one is P(True) asked about the beam text (checked
    against compute_ptrue called directly) and differs from the greedy one."""
    from pipeline.artifacts.stage import run_stage
    from pipeline.generation.cell import generation_backend
    from pipeline.stages.generate import generate_slice

    cfg = _cfg(
        tmp_path,
        "dataset=triviaqa_bundled",
        "dataset.limit=3",
        "generation.n_samples=1",
        "dataset.max_new_tokens=16",
        "generation.strategies=[greedy,beam]",
        "generation.shard_size=2",
        "generation.ptrue_beam=true",
    )
    store = ArtifactStore(tmp_path / "cell")
    assert not run_stage("generate", resolve_cell(cfg), store)["skipped"]
    assert generate_slice(cfg)["generation"]["ptrue_beam"] is True
    ptrue, decodes = store.read("ptrue"), store.read("decodes")
    assert list(ptrue.columns) == [*PTRUE, "logprob_true_beam", "p_true_beam"]
    assert ptrue[["logprob_true", "logprob_true_beam"]].notna().all().all()
    text = {s: dict(zip(d["prompt_id"], d["text"])) for s, d in decodes.groupby("strategy")}
    same = [pid for pid in ptrue["prompt_id"] if text["greedy"][pid] == text["beam"][pid]]
    differ = [pid for pid in ptrue["prompt_id"] if pid not in same]
    assert same and differ, "the three prompts no longer have both cases: pick others"
    by = ptrue.set_index("prompt_id")
    for pid in same:
        assert by.loc[pid, "logprob_true_beam"] == by.loc[pid, "logprob_true"]
    prompts = dict(zip(store.read("dataset")["prompt_id"], cfg_prompts(cfg, store)))
    direct = compute_ptrue(
        generation_backend(resolve_cell(cfg)),
        [prompts[pid] for pid in differ],
        [text["beam"][pid] for pid in differ],
    )
    for pid, lp in zip(differ, direct):
        assert by.loc[pid, "logprob_true_beam"] == pytest.approx(lp, abs=0.05)
        assert by.loc[pid, "logprob_true_beam"] != by.loc[pid, "logprob_true"]
    assert not list((tmp_path / "cell").glob("*.shards/*/*"))  # merged, shards removed


def cfg_prompts(cfg, store):
    """The cell's chat-rendered prompts (what P(True) asks about, generation.ptrue_asks=prompt)."""
    from pipeline.generation.cell import render_prompts

    return render_prompts(resolve_cell(cfg), store.read("dataset"))


# --------------------------------------------------------------------------- backend=vllm


def _vllm_env_missing() -> bool:
    from pipeline.generation.vllm_worker import default_vllm_python

    return not default_vllm_python().exists()


@pytest.mark.slow
@pytest.mark.skipif(_vllm_env_missing(), reason="vLLM env missing: run `make vllm-env`")
def test_under_vllm_a_second_vllm_pass_asks_about_the_beam_output(tmp_path):
    """backend=vllm with beam search through transformers (the paper's setting): once the beam
    decodes are written, a second vLLM pass asks P(True) about them; the values are vLLM's
    log p("True") for the beam text (checked against transformers on the same float32 model),
    the greedy value where the texts agree."""
    import subprocess
    import sys

    from pipeline.artifacts.stage import run_stage
    from pipeline.generation.cell import render_prompts
    from pipeline.generation.hf_backend import TransformersBackend

    model = tmp_path / "tiny-llama"
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "make_tiny_model.py"), str(model)],
        check=True,
        capture_output=True,
    )
    cfg = _cfg(
        tmp_path,
        "backend=vllm",
        f"model.path={model}",
        "model.name=tiny",
        "model.dtype=float32",
        "dataset=triviaqa_bundled",
        "dataset.limit=3",
        "dataset.max_new_tokens=8",
        "generation.n_samples=2",
        "generation.shard_size=2",
        "backend.enforce_eager=true",
        "backend.max_model_len=512",
        "backend.kv_cache_memory_bytes=134217728",
        "generation.strategies=[greedy,beam]",
        "generation.ptrue_beam=true",
    )
    store = ArtifactStore(tmp_path / "cell")
    assert not run_stage("generate", resolve_cell(cfg), store)["skipped"]
    ptrue, decodes = store.read("ptrue"), store.read("decodes")
    assert list(ptrue.columns) == [*PTRUE, "logprob_true_beam", "p_true_beam"]
    text = {s: dict(zip(d["prompt_id"], d["text"])) for s, d in decodes.groupby("strategy")}
    prompts = render_prompts(resolve_cell(cfg), store.read("dataset"))
    hf = compute_ptrue(
        TransformersBackend(model, dtype="float32"),
        prompts,
        [text["beam"][pid] for pid in ptrue["prompt_id"]],
    )
    for row, expected in zip(ptrue.itertuples(), hf):
        if text["greedy"][row.prompt_id] == text["beam"][row.prompt_id]:
            assert row.logprob_true_beam == row.logprob_true
        assert row.logprob_true_beam == pytest.approx(expected, abs=1e-3)
    assert run_stage("generate", resolve_cell(cfg), store)["skipped"]  # same key: nothing rerun
