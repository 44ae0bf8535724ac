"""Sampling through an OpenAI-compatible endpoint: `pipeline.generate_and_score` and the backend
against a real HTTP server on 127.0.0.1 (scripts/openai_stand_in.py with a sampler: the served
model is a known mix of answers, so the Bayes answer, risk and distribution are known exactly).
"""

import json
import math
import sys
from pathlib import Path

import pytest

import pipeline
from pipeline.config import resolve_cell
from pipeline.generation.base import SamplingConfig, get_backend

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from openai_stand_in import FakeOpenAIServer  # noqa: E402

# 20 samples: pacific in 16, atlantic in 14, arctic in 4 -> Bayes set {atlantic, pacific},
# risk 0.2 + 0.3 + 0.2 = 0.7, confidence its expected F1: (10 x 1 + 6 x 2/3 + 4 x 1/2) / 20
MIX = ["Pacific and Atlantic"] * 10 + ["Pacific"] * 6 + ["Atlantic and Arctic"] * 4
TOKEN_LP = -0.25  # every token's log-prob


def sampler(request):
    """Choice j of a request with seed s is MIX[(s + j) % 20]: a server ignoring n and asked
    once per seed returns the same 20 samples."""
    if request.get("max_tokens") == 1:  # P(True)
        return [
            {
                "text": "True",
                "tokens": [("True", math.log(0.7))],
                "top": {"True": math.log(0.7), "False": math.log(0.3)},
            }
        ]
    seed, n = request.get("seed", 0), request.get("n", 1)
    if request.get("temperature") == 0:
        return [{"text": MIX[0], "tokens": [("x", TOKEN_LP)] * 3}]
    return [{"text": MIX[(seed + j) % len(MIX)], "tokens": [("x", TOKEN_LP)] * 3} for j in range(n)]


@pytest.fixture()
def server():
    with FakeOpenAIServer() as srv:
        srv.state.sampler = sampler
        yield srv


def check_oceans(df):
    row = df.iloc[0]
    assert row["bayes_action"] == {"atlantic", "pacific"}
    assert row["bayes_risk"] == pytest.approx(0.7)
    assert row["confidence"] == pytest.approx(0.8)
    assert json.loads(row["latent_distribution"]) == {
        "pacific": 0.8,
        "atlantic": 0.7,
        "arctic": 0.2,
    }
    assert row["n_samples"] == 20 and row["n_parsed"] == 20


def test_generate_and_score_through_a_loopback_endpoint(server, tmp_path):
    df = pipeline.generate_and_score(
        ["Which oceans border the USA?"],
        task="sets",
        model="served-model",
        base_url=server.base_url,
        n_samples=20,
        cache_dir=tmp_path,
        references=[["Pacific", "Atlantic", "Arctic"]],
    )
    check_oceans(df)
    assert df.iloc[0]["quality_bayes_f1"] == pytest.approx(0.8)
    body = server.state.bodies[0]
    assert server.state.requests == 1  # n honoured: one request for 20 samples
    assert body["model"] == "served-model" and body["n"] == 20 and body["logprobs"] is True
    assert "list" in body["messages"][0]["content"].lower()  # the task's prompt template
    assert "Which oceans border the USA?" in body["messages"][0]["content"]
    # the sequence log-probs are the sums of the token log-probs the server reported
    assert df.attrs["generations"][0]["logprobs"] == [3 * TOKEN_LP] * 20
    # white-box scores from them: MSP of a sample equal to the Bayes set, and semantic entropy
    # over the latents ({P, A} 10, {P} 6, {A, Arctic} 4 samples, each of log-prob -0.75)
    assert df["whitebox_msp"].iloc[0] == pytest.approx(0.75)
    assert df["whitebox_semantic_entropy"].iloc[0] == pytest.approx(
        0.75 - (10 * math.log(10) + 6 * math.log(6) + 4 * math.log(4)) / 20
    )

    again = pipeline.generate_and_score(
        ["Which oceans border the USA?"],
        task="sets",
        model="served-model",
        base_url=server.base_url,
        n_samples=20,
        cache_dir=tmp_path,
    )
    assert server.state.requests == 1  # served from the disk cache
    check_oceans(again)


def test_a_server_ignoring_n_gets_one_request_per_missing_sample(server, tmp_path):
    server.state.sampler = lambda request: sampler({**request, "n": 1})
    server.state.delay = 0.1  # requests overlap even on a busy machine (the peak below)
    df = pipeline.generate_and_score(
        ["Which oceans border the USA?"],
        task="sets",
        model="m",
        base_url=server.base_url,
        cache_dir=tmp_path,
        raw_prompts=True,
        max_concurrency=4,
        seed=0,
    )
    check_oceans(df)
    assert server.state.requests == 20
    assert sorted(b["seed"] for b in server.state.bodies) == list(range(20))
    assert server.state.bodies[0]["messages"] == [
        {"role": "user", "content": "Which oceans border the USA?"}
    ]  # raw_prompts
    assert 1 < server.state.peak_in_flight <= 4


def test_unseeded_requests_to_a_server_ignoring_n_are_distinct_draws(server, tmp_path):
    """No seed: the 20 single-choice requests carry no seed and no cache-only field on the wire,
    yet each is its own cache entry (one cached reply would repeat one sample 20 times)."""
    draws = iter(range(100))
    server.state.sampler = lambda request: [
        {"text": MIX[next(draws) % 20], "tokens": [("x", TOKEN_LP)]}
    ]
    df = pipeline.generate_and_score(
        ["Which oceans border the USA?"],
        task="sets",
        model="m",
        base_url=server.base_url,
        cache_dir=tmp_path,
    )
    check_oceans(df)
    assert server.state.requests == 20
    assert all(
        "seed" not in b and not any(k.startswith("_") for k in b) for b in server.state.bodies
    )
    again = pipeline.generate_and_score(
        ["Which oceans border the USA?"],
        task="sets",
        model="m",
        base_url=server.base_url,
        cache_dir=tmp_path,
    )
    assert server.state.requests == 20  # the rerun reads the 20 draws back from the cache
    assert list(again["bayes_text"]) == list(df["bayes_text"])


def test_settings_the_user_did_not_give_are_not_sent(server, tmp_path):
    """An unset temperature/top_p/seed is the server's (vLLM applies the model's own generation
    config); an explicit 0.0 is sent as 0.0, an explicit seed as given."""
    pipeline.generate_and_score(
        ["q"], task="sets", model="m", base_url=server.base_url, cache_dir=tmp_path
    )
    body = server.state.bodies[-1]
    assert not {"temperature", "top_p", "seed", "top_k"} & set(body), body
    sent = len(server.state.bodies)
    pipeline.generate_and_score(
        ["q"],
        task="sets",
        model="m",
        base_url=server.base_url,
        cache_dir=tmp_path,
        temperature=0.0,
        top_p=0.5,
        seed=3,
    )
    body = server.state.bodies[sent]  # the n=20 request (the stand-in answers T=0 with one)
    assert (body["temperature"], body["top_p"], body["seed"]) == (0.0, 0.5, 3)


def test_requests_of_all_prompts_share_one_bounded_pool(server, tmp_path):
    server.state.delay = 0.2
    backend = get_backend(
        "openai", model="m", base_url=server.base_url, cache_dir=str(tmp_path), max_concurrency=8
    )
    prompts = [backend.render_chat([{"role": "user", "content": f"q{i}"}]) for i in range(16)]
    out = backend.sample(prompts, SamplingConfig(n=5, temperature=0.7, max_new_tokens=8))
    assert [len(x) for x in out] == [5] * 16
    assert server.state.requests == 16
    # one request per prompt: more than one in flight means across prompts; never above 8
    assert 4 < server.state.peak_in_flight <= 8
    assert {b["temperature"] for b in server.state.bodies} == {0.7}
    assert backend.logprob_of_next(prompts[:2], "True") == pytest.approx([math.log(0.7)] * 2)
    assert backend.greedy(prompts[:1], 8)[0].text == MIX[0]


def test_beam_search_is_refused_with_the_fix(server, tmp_path):
    backend = get_backend("openai", model="m", base_url=server.base_url, cache_dir=str(tmp_path))
    with pytest.raises(ValueError, match="generation.strategies"):
        backend.beam(["q"], 5, 8)


def test_a_failed_request_is_retried_and_never_cached(server, tmp_path):
    server.state.faults = [503]
    backend = get_backend(
        "openai", model="m", base_url=server.base_url, cache_dir=str(tmp_path), max_concurrency=1
    )
    backend.client.backoff_base = 0.01
    got = backend.sample(["q"], SamplingConfig(n=3, max_new_tokens=8))
    assert [g.text for g in got[0]] == MIX[:3]
    assert server.state.requests == 2  # the 503, then its retry
    assert backend.client.stats.retries == 1


def _cfg(tmp_path, *overrides):
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from pipeline.config import register_configs
    from pipeline.runtime.resources import conf_dir

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        return compose(
            "config",
            overrides=[
                f"output_root={tmp_path / 'outputs'}",
                f"results_dir={tmp_path / 'results'}",
                f"cache_dir={tmp_path / 'cache'}",
                "wandb.enabled=false",
                "backend=openai",
                "dataset=triviaqa_bundled",
                "dataset.limit=3",
                "generation.n_samples=6",
                "generation.shard_size=2",
                *overrides,
            ],
        )


def test_the_generate_stage_samples_from_a_served_model(server, tmp_path):
    from pipeline.artifacts.store import ArtifactStore
    from pipeline.driver.job import run

    cfg = _cfg(
        tmp_path,
        f"backend.base_url={server.base_url}",
        "backend.served_model=served",
        "generation.strategies=[greedy,ar]",
        "evaluation.targets=[bayes]",
        "stage=generate",
    )
    run(cfg)
    store = ArtifactStore(resolve_cell(cfg).root)
    samples, decodes, ptrue = (store.read(n) for n in ("samples", "decodes", "ptrue"))
    assert len(samples) == 3 * 6
    assert set(samples["text"]) <= set(MIX)
    assert samples["logprob"].tolist() == pytest.approx([3 * TOKEN_LP] * 18)
    assert sorted(decodes["strategy"].unique()) == ["ar", "greedy"]
    assert ptrue["p_true"].tolist() == pytest.approx([0.7] * 3)
    sampling = [b for b in server.state.bodies if b.get("n", 1) == 6]
    assert len(sampling) == 3 and {b["model"] for b in sampling} == {"served"}
    # the task's prompt as messages: the server applies its own chat template
    assert all(b["messages"][0]["role"] == "user" for b in sampling)
    requests = server.state.requests
    run(cfg)  # up to date: no request
    assert server.state.requests == requests


def test_a_served_model_needs_nothing_local_and_is_asked_for_by_its_hub_id(server, tmp_path):
    """backend=openai through every stage with model.path pointing nowhere: no weights, no
    conversion, no tokenizer are looked for; the server is asked for the model's hub id (checked
    against its /v1/models first), without a seed under generation.seed=null."""
    from pipeline.artifacts.store import ArtifactStore
    from pipeline.driver.assets import cell_assets
    from pipeline.driver.job import run

    server.state.served_models = ["HuggingFaceTB/SmolLM2-135M-Instruct"]
    cfg = _cfg(
        tmp_path,
        f"backend.base_url={server.base_url}",
        "model.path=/nonexistent/model",
        "generation.strategies=[greedy,ar]",
        "evaluation.targets=[bayes]",
        "generation.seed=null",
        "uq.estimators=[bayes_risk,latent_entropy,sar,ptrue]",
    )
    assert not [a for a in cell_assets(resolve_cell(cfg)) if a.what.startswith("weights")]
    run(cfg)
    store = ArtifactStore(resolve_cell(cfg).root)
    assert len(store.read("samples")) == 18
    unc = store.read("uncertainty")
    assert set(unc["estimator"]) >= {"sar", "ptrue", "latent_entropy"}  # SAR weighs words
    assert unc["value"].notna().all()
    assert set(server.state.models) == {"HuggingFaceTB/SmolLM2-135M-Instruct"}
    assert not any("seed" in b for b in server.state.bodies)
    assert not (tmp_path / "cache" / "models").exists()  # nothing converted


def test_generation_seed_null_is_for_endpoints_only(tmp_path):
    from pipeline.config import validate
    from pipeline.runtime.errors import ConfigError

    with pytest.raises(ConfigError, match="generation.seed=null leaves the seed to the server"):
        validate(_cfg(tmp_path, "backend=transformers", "generation.seed=null"))


@pytest.mark.parametrize(
    "overrides, problem",
    [
        (
            ["backend.base_url=http://127.0.0.1:9/v1"],
            "generation.strategies has ['beam', 'contrastive']",
        ),
        (["generation.strategies=[greedy,ar]"], "needs backend.base_url"),
        (
            ["backend.base_url=http://u:p@127.0.0.1:9/v1", "generation.strategies=[greedy]"],
            "holds credentials",
        ),
    ],
)
def test_a_served_backend_config_that_cannot_work_is_refused(tmp_path, overrides, problem):
    from pipeline.config import validate
    from pipeline.runtime.errors import ConfigError

    with pytest.raises(ConfigError, match=problem.replace("[", r"\[").replace("]", r"\]")):
        validate(_cfg(tmp_path, *overrides))


def test_generate_and_score_in_process_with_the_packaged_model():
    """No base_url: the packaged SmolLM2 samples in this process (real model, tiny budget)."""
    df = pipeline.generate_and_score(
        ["What is the capital of France?", "What is 2 + 2?"],
        task="classes",
        n_samples=3,
        max_new_tokens=6,
        seed=1,
    )
    assert df["n_samples"].tolist() == [3, 3]
    records = df.attrs["generations"]
    assert [len(r["responses"]) for r in records] == [3, 3]
    assert all(lp < 0 for r in records for lp in r["logprobs"])  # token log-probs summed
    assert df["confidence"].between(0, 1).all()
    # 6 tokens cut most answers: each is counted as cut (finish reason "length", not an answer)
    # and the prompt either answers or says why it abstains
    cut = [sum(reason == "length" for reason in r["finish_reasons"]) for r in records]
    assert df["n_truncated"].tolist() == cut and sum(cut) > 0
    assert ((df["bayes_text"] != "") ^ (df["abstention"] != "")).all()
    assert json.loads(df["sampling"].iloc[0]) == {
        "n": 3,
        "temperature": 0.2,
        "top_p": 0.9,
        "top_k": "model default",
        "seed": 1,
        "max_tokens": 6,
    }
