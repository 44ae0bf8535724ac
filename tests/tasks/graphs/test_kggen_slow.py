"""KGGen for real: kg-gen 0.4.0 + DSPy + LiteLLM in .venv-kggen, over HTTP to a loopback server.

Slow: needs the KGGen venv (`bash scripts/setup_kggen_venv.sh`, ~3 min; `make test-slow` builds
it). The model behind the endpoint is the stand-in: scripts/openai_stand_in.py answers
KGGen's DSPy signatures (entities, relations, the clustering loop) from the rule-based
extractor, deterministically, because gpt-4.1-mini cannot run here and the packaged SmolLM2
cannot follow DSPy's output format (measured: 2 texts took 5m41s through `vllm serve` with
structured outputs and every reply failed to parse). Everything on our side of the socket is the
real code: the worker process, kg_gen, DSPy's adapters and retries, LiteLLM's OpenAI client.
"""

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from pipeline.config import resolve_cell
from pipeline.tasks.graphs.kggen import default_kggen_python
from pipeline.tasks.graphs.reading import GraphExtractor, extract_triples

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
from openai_stand_in import FakeOpenAIServer  # noqa: E402

KGGEN_PYTHON = default_kggen_python()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not KGGEN_PYTHON.exists(),
        reason=f"{KGGEN_PYTHON} not found: run `bash scripts/setup_kggen_venv.sh`",
    ),
]

TEXTS = [
    "Marie Curie won the Nobel Prize in 1903. She was born in Warsaw.",
    "Curie won the Nobel Prizes.",
    "UNPARSEABLE text",  # the server's reply to this one parses in no DSPy adapter
]


@pytest.fixture()
def server(monkeypatch, tmp_path):
    monkeypatch.setenv("DSPY_CACHEDIR", str(tmp_path / "dspy"))  # DSPy's own cache: per test
    with FakeOpenAIServer() as srv:
        yield srv


def kggen_extractor(server, cache_dir, **kw):
    return GraphExtractor(
        method="kggen",
        model="gpt-4.1-mini",
        api_base=server.base_url,
        cache_dir=str(cache_dir),
        **kw,
    )


def test_kggen_extracts_clusters_and_counts_failures(server, tmp_path):
    ex = kggen_extractor(server, tmp_path / "kggen")
    try:
        out = ex.map_prompt(TEXTS)
    finally:
        ex.close()
    # KGGen's clustering (the server groups items by the stem of their last word and names a
    # cluster by its shortest member) merged "marie curie" into "curie" and "nobel prizes" into
    # "nobel prize", across the two samples.
    assert out == [
        frozenset({("curie", "born in", "warsaw"), ("curie", "won", "nobel prize")}),
        frozenset({("curie", "won", "nobel prize")}),
        None,
    ]
    assert (ex.n_responses, ex.n_failures) == (3, 1)
    stats = ex.kggen.stats
    assert (stats.texts_sent, stats.parse_failures, stats.api_failures, stats.clusterings_sent) == (
        3,
        1,
        0,
        1,
    )
    assert set(server.state.models) == {"gpt-4.1-mini"}  # LiteLLM's "openai/" prefix stripped
    assert server.state.requests >= 2 * 2 + 3  # entities + relations per text, then clustering
    assert ex.kggen._proc is None  # the worker was stopped


def test_rerun_makes_zero_calls(server, tmp_path, caplog):
    first = kggen_extractor(server, tmp_path / "kggen")
    expected = first.map_prompt(TEXTS)
    first.close()
    calls = server.state.requests
    again = kggen_extractor(server, tmp_path / "kggen")
    assert again.map_prompt(TEXTS) == expected
    assert server.state.requests == calls
    assert again.kggen.stats.texts_sent == 0 and again.kggen.stats.clusterings_sent == 0
    assert again.kggen.stats.cache_hits == 3 and again.n_failures == 1
    assert again.kggen._proc is None  # never started: everything came from the cache
    with caplog.at_level("INFO", logger="pipeline.tasks.graphs.kggen"):
        again.close()
        again.close()
    assert [r.getMessage() for r in caplog.records] == [
        "[kggen] openai/gpt-4.1-mini: 0 texts extracted, 3 from the cache, 1 parse and 0 API failures, 0 clusterings"
    ]


def test_a_swapped_cache_record_is_asked_again_not_served(server, tmp_path):
    first = kggen_extractor(server, tmp_path / "kggen")
    expected = first.map_prompt(TEXTS)
    first.close()
    records = {}
    for f in (tmp_path / "kggen").rglob("*.json"):
        asked = json.loads(f.read_text())["keyed_by"]
        if asked["op"] == "extract":
            records[asked["text"]] = f
    one, two = (records[t] for t in TEXTS[:2])
    one.write_text(two.read_text())  # the first text's record now holds the second's answer
    again = kggen_extractor(server, tmp_path / "kggen")
    assert again.map_prompt(TEXTS) == expected  # the swapped text sent to KGGen again
    assert again.kggen.stats.texts_sent == 1 and again.kggen.stats.cache_hits == 2
    again.close()


def test_api_failures_are_counted_and_not_cached(server, tmp_path):
    server.state.faults = [500] * 40  # more than LiteLLM's and DSPy's retries together
    ex = kggen_extractor(server, tmp_path / "kggen", kggen_cluster=False)
    assert ex.extract(["Paris is the capital of France."]) == [None]
    assert ex.kggen.stats.api_failures == 1 and ex.n_failures == 1
    server.state.faults = []
    assert ex.extract(["Paris is the capital of France."]) == [
        frozenset({("paris", "be", "capital of france")})
    ]
    ex.close()


def test_map_stage_with_kggen_and_rerun_without_calls(server, tmp_path):
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from pipeline.config import register_configs
    from pipeline.stages.map import map_cell

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(
        config_dir=str(Path(__file__).resolve().parents[3] / "conf"), version_base="1.3"
    ):
        cfg = compose(
            "config",
            overrides=[
                "dataset=cnn_dm_bundled",
                f"cache_dir={tmp_path / 'cache'}",
                "task.extractor.kind=llm",
                f"task.extractor.base_url={server.base_url}",
                f"task.extractor.kggen_python={KGGEN_PYTHON}",
            ],
        )
    GlobalHydra.instance().clear()
    dataset = pd.DataFrame(
        {
            "prompt_id": ["p0"],
            "question": ["(article)"],
            "reference_text": ["The storm killed 12 people in Texas."],
        }
    )
    samples = pd.DataFrame({"prompt_id": ["p0"] * 3, "sample_idx": [0, 1, 2], "text": TEXTS})
    decodes = pd.DataFrame({"prompt_id": ["p0"], "strategy": ["greedy"], "text": [TEXTS[0]]})
    latents = map_cell(resolve_cell(cfg), dataset, samples, decodes)
    assert list(latents["source"]) == ["sample"] * 3 + ["greedy", "reference"]
    assert list(latents["parse_ok"]) == [True, True, False, True, True]
    calls = server.state.requests
    assert calls > 0 and list((tmp_path / "cache" / "kggen").rglob("*.json"))
    again = map_cell(resolve_cell(cfg), dataset, samples, decodes)
    pd.testing.assert_frame_equal(latents, again)
    assert server.state.requests == calls  # the rerun was served from the cache


def test_server_stand_in_agrees_with_the_rule_extractor():
    # The stand-in's relations are the rule extractor's: what KGGen returns unclustered is known.
    from openai_stand_in import _dspy_values

    values = _dspy_values(
        "Extract subject-predicate-object triples from the source text.", {"source_text": TEXTS[0]}
    )
    assert {
        (r["subject"], r["predicate"], r["object"]) for r in values["relations"]
    } == extract_triples(TEXTS[0])


def test_rejected_key_stops_the_stage_with_the_providers_error(server, tmp_path):
    from pipeline.tasks.graphs.kggen import KGGenError

    server.state.faults = [401] * 40
    ex = kggen_extractor(server, tmp_path / "kggen")
    with pytest.raises(KGGenError, match="Auth"):
        ex.map_prompt(TEXTS[:1])
    assert ex.kggen._proc is None  # the worker exited and was reaped
    assert not list((tmp_path / "kggen").rglob("*.json"))  # nothing cached


def test_texts_are_extracted_concurrently_up_to_the_bound(server, tmp_path):
    server.state.delay = 0.3  # each request takes a while, so overlapping ones are seen
    texts = [f"{c} hosted the games." for c in ("Paris", "Rome", "Oslo", "Lima", "Cairo", "Tokyo")]
    ex = kggen_extractor(server, tmp_path / "kggen", kggen_cluster=False, max_concurrency=3)
    out = ex.extract(texts)
    ex.close()
    assert all(o is not None for o in out)
    assert 2 <= server.state.peak_in_flight <= 3


def test_malformed_corpus_through_kggen(server, tmp_path):
    # The 125 malformed responses (1 MB strings, undecodable bytes, NaN, wrong types) through the
    # worker, DSPy and HTTP: no crash, every failure counted, the same ones as the rule extractor
    # whose triples the server answers with.
    from test_malformed_corpus import RESPONSES

    ex = kggen_extractor(server, tmp_path / "kggen", kggen_cluster=False, max_concurrency=4)
    out = ex.extract(RESPONSES)
    ex.close()
    rule = [extract_triples(r) for r in RESPONSES]
    assert (ex.n_responses, ex.n_failures) == (
        125,
        121,
    )  # as the rule extractor (test_malformed_corpus)
    # Not encodable as UTF-8: crosses our pipe and cache, then fails in the HTTP client; a counted,
    # cached failure of that text (it would fail again), not a crash.
    requests = server.state.requests
    assert ex.extract(["Paris is the capital of France \ud800."]) == [None]
    assert ex.kggen.stats.parse_failures == 1 and server.state.requests == requests
    assert [o is None for o in out] == [r is None for r in rule]
    assert ex.kggen.stats.api_failures == 0


def test_the_map_stage_queues_kggen_extractions_across_prompts(server, tmp_path, caplog):
    """Six prompts of five distinct texts (3 samples, a decode, the reference), eight in flight:
    only a queue over all prompts gets past five; each text is sent once and the per-prompt
    reads are no cache hits."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from pipeline.config import register_configs
    from pipeline.stages.map import map_cell

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(
        config_dir=str(Path(__file__).resolve().parents[3] / "conf"), version_base="1.3"
    ):
        cfg = compose(
            "config",
            overrides=[
                "dataset=cnn_dm_bundled",
                f"cache_dir={tmp_path / 'cache'}",
                "task.extractor.kind=llm",
                f"task.extractor.base_url={server.base_url}",
                f"task.extractor.kggen_python={KGGEN_PYTHON}",
                "task.extractor.max_concurrency=8",
                "task.extractor.kggen_cluster=false",
            ],
        )
    GlobalHydra.instance().clear()
    cities = ["Paris", "Rome", "Oslo", "Lima", "Cairo", "Tokyo"]
    dataset = pd.DataFrame(
        {
            "prompt_id": [f"p{i}" for i in range(6)],
            "question": ["(article)"] * 6,
            "reference_text": [f"{c} hosted the final." for c in cities],
        }
    )
    samples = pd.DataFrame(
        {
            "prompt_id": [f"p{i}" for i in range(6) for _ in range(3)],
            "sample_idx": [j for _ in range(6) for j in range(3)],
            "text": [f"{c} hosted game {j}." for c in cities for j in range(3)],
        }
    )
    decodes = pd.DataFrame(
        {
            "prompt_id": [f"p{i}" for i in range(6)],
            "strategy": ["greedy"] * 6,
            "text": [f"{c} hosted the games." for c in cities],
        }
    )
    server.state.delay = 0.2
    with caplog.at_level("INFO", logger="pipeline.tasks.graphs.kggen"):
        latents = map_cell(resolve_cell(cfg), dataset, samples, decodes)
    assert latents["parse_ok"].all() and len(latents) == 6 * 5
    assert 5 < server.state.peak_in_flight <= 8
    # every text sent once, by the queue; the per-prompt reads of its answers are no cache hits
    assert [r.getMessage() for r in caplog.records if "[kggen]" in r.getMessage()] == [
        "[kggen] openai/gpt-4.1-mini: 30 texts extracted, 0 from the cache, 0 parse and 0 API "
        "failures, 0 clusterings"
    ]
    calls = server.state.requests
    pd.testing.assert_frame_equal(map_cell(resolve_cell(cfg), dataset, samples, decodes), latents)
    assert server.state.requests == calls  # the rerun was served from the cache


def test_the_map_stage_queues_kggen_clusterings_across_prompts(
    server, tmp_path, caplog, monkeypatch
):
    """Six prompts with references: twelve clusterings (the responses', then the responses' and
    the reference's together), queued across prompts (more than one in flight; the per-prompt
    path clusters one prompt at a time) once the extractions are cached, and the same graphs as
    prompt-by-prompt clustering without the queue."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from pipeline.config import register_configs
    from pipeline.stages.map import map_cell

    register_configs()

    def config(cache, cluster):
        GlobalHydra.instance().clear()
        with initialize_config_dir(
            config_dir=str(Path(__file__).resolve().parents[3] / "conf"), version_base="1.3"
        ):
            cfg = compose(
                "config",
                overrides=[
                    "dataset=cnn_dm_bundled",
                    f"cache_dir={cache}",
                    "task.extractor.kind=llm",
                    f"task.extractor.base_url={server.base_url}",
                    f"task.extractor.kggen_python={KGGEN_PYTHON}",
                    "task.extractor.max_concurrency=8",
                    f"task.extractor.kggen_cluster={cluster}",
                ],
            )
        GlobalHydra.instance().clear()
        return cfg

    people = [
        "Marie Curie",
        "Ada Lovelace",
        "Alan Turing",
        "Emmy Noether",
        "Niels Bohr",
        "Lise Meitner",
    ]
    dataset = pd.DataFrame(
        {
            "prompt_id": [f"p{i}" for i in range(6)],
            "question": ["(article)"] * 6,
            "reference_text": [f"{p} lived in Vienna." for p in people],
        }
    )
    samples = pd.DataFrame(
        {
            "prompt_id": [f"p{i}" for i in range(6) for _ in range(2)],
            "sample_idx": [j for _ in range(6) for j in range(2)],
            "text": [
                t
                for p in people
                for t in (f"{p} won the prize.", f"{p.split()[-1]} won the prizes in Paris.")
            ],
        }
    )
    decodes = samples.iloc[:0].rename(columns={"sample_idx": "strategy"})
    cache = tmp_path / "cache"
    map_cell(
        resolve_cell(config(cache, "false")), dataset, samples, decodes
    )  # the extractions, cached
    server.state.peak_in_flight, server.state.delay = 0, 0.05
    with caplog.at_level("INFO", logger="pipeline.tasks.graphs.kggen"):
        queued = map_cell(resolve_cell(config(cache, "true")), dataset, samples, decodes)
    assert server.state.peak_in_flight > 1
    said = [r.getMessage() for r in caplog.records if "[kggen]" in r.getMessage()]
    assert said == [
        "[kggen] openai/gpt-4.1-mini: 0 texts extracted, 18 from the cache, 0 parse "
        "and 0 API failures, 12 clusterings"
    ]
    # prompt by prompt (no clustering queue), on a fresh cache: the same graphs
    from pipeline.tasks.graphs.kggen import KGGenRunner

    monkeypatch.setattr(KGGenRunner, "prefetch_clusters", lambda self, graphs, context="": None)
    server.state.peak_in_flight = 0
    alone = map_cell(resolve_cell(config(tmp_path / "alone", "true")), dataset, samples, decodes)
    assert server.state.peak_in_flight <= 8
    pd.testing.assert_frame_equal(queued, alone)
