"""Pins of the choices `experiment=paper` makes where the paper is silent or brief (issue 40;
docs/fidelity.md, one row each), and of every value the paper states.

Each test fails when the behaviour it pins changes: the functions the pipeline calls, on small
inputs with exact expected outputs (models faked only where a download would be needed).
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hydra import compose

from pipeline.config import resolve_cell
from pipeline.latent import get_space

# --------------------------------------------------------------------------- 1. self-consistency


def test_self_consistency_votes_on_the_normalised_raw_text_not_on_the_latents():
    """docs/fidelity.md "Self-consistency": a majority vote over `canonical_label` of each
    sample's whole text; ties go to the first sample; the decision is that sample's latent and
    text. Here the latents' majority is Paris (3 of 5) but the texts' is "lyon" (2 of 5, the
    three Paris texts all differ), so self-consistency answers Lyon while l_MAP answers Paris."""
    from pipeline.latent.decision_rules import DECISION_RULES

    space = get_space("classes")
    texts = [["Paris", "It is Paris.", "Paris, France", "Lyon.", "lyon"]]
    latents = [["paris", "paris", "paris", "lyon", "lyon"]]
    batch = space.batch(latents)
    actions, risks, chosen = DECISION_RULES["self_consistency"](batch, texts)
    assert (actions, chosen) == (["lyon"], ["Lyon."])  # the first sample of the winning text
    assert risks[0] == pytest.approx(3 / 5)  # its 0-1 risk under the five samples
    assert DECISION_RULES["map"](batch, texts)[0] == ["paris"]
    # all texts differ (the usual case on WMT19, CNN/DM, MAQA*): the first sample
    actions, _, chosen = DECISION_RULES["self_consistency"](
        space.batch([["lyon", "paris", "paris"]]), [["Lyon is it", "Paris", "It is Paris"]]
    )
    assert (actions, chosen) == (["lyon"], ["Lyon is it"])


# --------------------------------------------------------------------------- 2. AR


class _RecordingBackend:
    """A generation backend without `sample_and_decode` (the vLLM backend's path): records the
    SamplingConfig of every `sample` call; texts say which call made them."""

    name = "recording"
    batch_size = 8

    def __init__(self):
        self.sample_calls = []
        self.ptrue_prompts = []

    def sample(self, prompts, cfg):
        from pipeline.generation.base import Generation

        self.sample_calls.append(cfg)
        return [
            [Generation(f"{cfg.stream}:{cfg.seed}:{j}", [1], [-0.5]) for j in range(cfg.n)]
            for _ in prompts
        ]

    def greedy(self, prompts, max_new_tokens):
        from pipeline.generation.base import Generation

        return [Generation("GREEDY ANSWER", [1], [-0.1]) for _ in prompts]

    def beam(self, prompts, num_beams, max_new_tokens):
        from pipeline.generation.base import Generation

        return [Generation("BEAM ANSWER", [1], [-0.2]) for _ in prompts]

    def render_chat(self, messages):
        return messages[0]["content"]

    def logprob_of_next(self, prompts, token):
        self.ptrue_prompts += list(prompts)
        return [-0.25 for _ in prompts]


def test_ar_is_one_extra_sample_with_a_shifted_seed():
    """docs/fidelity.md "AR": one ancestral sample per prompt drawn with the samples' settings
    but seed + 1_000_003 (a seed no sample uses), stored as a decode, not one of the M samples."""
    from pipeline.generation.base import SamplingConfig
    from pipeline.generation.runner import AR_SEED_OFFSET, generate_records

    assert AR_SEED_OFFSET == 1_000_003
    backend = _RecordingBackend()
    cfg = SamplingConfig(n=3, temperature=0.7, top_p=0.8, top_k=20, max_new_tokens=16, seed=5)
    samples, decodes, _ = generate_records(
        backend, ["q1", "q2"], ["a", "b"], cfg, strategies=["ar"], ptrue=False, progress=False
    )
    assert [(c.n, c.seed, c.stream) for c in backend.sample_calls] == [
        (3, 5, "samples"),
        (1, 1_000_008, "ar"),
    ]
    ar = backend.sample_calls[1]
    assert (ar.temperature, ar.top_p, ar.top_k, ar.max_new_tokens) == (0.7, 0.8, 20, 16)
    assert list(decodes["text"]) == ["ar:1000008:0", "ar:1000008:0"]
    assert len(samples) == 2 * 3 and not samples["text"].str.startswith("ar:").any()


# --------------------------------------------------------------------------- 3. P(True) vs MSP


def test_ptrue_judges_the_greedy_answer_not_the_beam_output():
    """docs/fidelity.md "P(True) answer; MSP / CoCoA target": lm-polygraph's P(True) prompt
    holds the greedy decode (its `greedy_texts`), also when beam search runs in the same call."""
    from pipeline.generation.base import SamplingConfig
    from pipeline.generation.runner import generate_records

    backend = _RecordingBackend()
    _, _, ptrue = generate_records(
        backend,
        ["Capital of France?"],
        ["a"],
        SamplingConfig(n=2),
        strategies=["beam"],
        ptrue=True,
        progress=False,
    )
    [prompt] = backend.ptrue_prompts
    assert "GREEDY ANSWER" in prompt and "BEAM ANSWER" not in prompt
    assert "Capital of France?" in prompt
    assert ptrue["logprob_true"].tolist() == [-0.25]


class _FakeModels:
    """The auxiliary models of the lm_polygraph group: a cross-encoder scoring 1 for equal
    texts and 0 otherwise; no embedder or NLI judge (MSP and CoCoA read none)."""

    class _CrossEncoder:
        @staticmethod
        def score_pairs(pairs):
            return np.array([float(a == b) for a, b in pairs])

    def cross_encoder(self, model, device, revision=None):
        return self._CrossEncoder()

    def build_embedder(self, name, device=None):
        return None

    def equivalence_judge(self, eq, device, cache_dir):
        return None


def test_msp_and_cocoa_read_the_beam_decode():
    """docs/fidelity.md "P(True) answer; MSP / CoCoA target": the uq stage's lm_polygraph group
    scores MSP and CoCoA-MSP on the beam decode (`target_strategy="beam"`), never greedy."""
    from pipeline.uncertainty.estimators import PolygraphSettings, UQContext, uncertainty_rows

    samples = ["Paris", "Paris", "Lyon", "Rome"]
    artifacts = {
        "dataset": pd.DataFrame({"prompt_id": ["p"], "question": ["Capital of France?"]}),
        "samples": pd.DataFrame(
            {
                "prompt_id": ["p"] * 4,
                "sample_idx": range(4),
                "text": samples,
                "token_logprobs": [[-1.0]] * 4,
                "logprob": [-1.0] * 4,
            }
        ),
        "decodes": pd.DataFrame(
            {
                "prompt_id": ["p", "p"],
                "strategy": ["greedy", "beam"],
                "text": ["Lyon", "Paris"],
                "token_logprobs": [[-3.0, -4.0], [-0.5, -1.5]],
            }
        ),
        "ptrue": pd.DataFrame({"prompt_id": ["p"], "logprob_true": [-0.1]}),
    }
    rows = uncertainty_rows(
        ["msp", "cocoa_msp"],
        artifacts,
        {"lm_polygraph": PolygraphSettings(similarity="cross_encoder")},
        UQContext(models=_FakeModels()),
    )
    value = dict(zip(rows["estimator"], rows["value"]))
    assert value["msp"] == pytest.approx(2.0)  # -(-0.5 - 1.5): the beam's, greedy's is 7.0
    # CoCoA-MSP = MSP x mean dissimilarity of the beam text ("Paris") to the samples: 2 x 1/2
    assert value["cocoa_msp"] == pytest.approx(1.0)


def test_the_beam_target_tables_say_ptrue_reads_the_greedy_text(tmp_path):
    """docs/fidelity.md "P(True) answer; MSP / CoCoA target": Tables 5-6 (the report's tables
    whose target is the beam response) say in their notes, in markdown and LaTeX, that P(True)
    is computed on the greedy text (lm-polygraph 0.5.0's default) and MSP / CoCoA on the beam
    output; the Bayes-target tables do not."""
    from pipeline.reporting import PAPER_DIR
    from pipeline.reporting.tables import TABLES, build_tables

    quality = pd.DataFrame(
        columns=["model", "dataset", "method", "metric", "value", "low", "high", "n"]
    )
    scores = pd.DataFrame(
        columns=["model", "dataset", "target", "estimator", "metric", "prr", "auc"]
    )
    build_tables(
        quality,
        scores,
        pd.read_csv(PAPER_DIR / "generation.csv"),
        pd.read_csv(PAPER_DIR / "uq.csv"),
        tmp_path,
    )
    beam = [name for name, (_, _, _, target, _) in TABLES.items() if target == "beam"]
    assert beam == ["uq_prr_beam", "uq_auc_beam"]
    said = (
        "P(True) is computed on the greedy text, as lm-polygraph 0.5.0's default does; MSP "
        "and CoCoA on the beam output (App. B.4)."
    )
    for name in beam:
        for ext in ("md", "tex"):
            assert said in (tmp_path / f"{name}.{ext}").read_text(encoding="utf-8"), (name, ext)
    assert said not in (tmp_path / "uq_prr_bayes.md").read_text(encoding="utf-8")


def test_ptrue_on_the_beam_output_is_off_in_the_paper(hydra_ctx):
    """docs/fidelity.md "P(True) answer; MSP / CoCoA target": `experiment=paper` asks P(True)
    about the greedy text only (lm-polygraph's default): generation.ptrue_beam stays off, set by
    no paper config, and the paper's estimators do not name its sensitivity row."""
    from omegaconf import OmegaConf

    for dataset in PAPER_DATASETS:
        cfg = _paper(f"dataset={dataset}")
        assert cfg.generation.ptrue_beam is False, dataset
        assert "ptrue_beam" not in cfg.uq.estimators, dataset
    assert "ptrue_beam" not in (OmegaConf.load(PAPER_YAML).get("generation") or {})


def test_with_ptrue_on_the_beam_output_tables_5_6_gain_a_marked_sensitivity_row(tmp_path):
    """generation.ptrue_beam=true: Tables 5-6 (beam target) show "P(True) (beam output)" as an
    extra row (marked, never best), after the P(True) row, which stays; their notes say what it
    is. The Bayes-target tables do not show it."""
    from pipeline.reporting import PAPER_DIR
    from pipeline.reporting.tables import EXTRA_MARK, build_tables

    quality = pd.DataFrame(
        columns=["model", "dataset", "method", "metric", "value", "low", "high", "n"]
    )
    scores = pd.DataFrame(
        [
            {
                "model": "qwen3-4b",
                "dataset": "maqa",
                "target": target,
                "estimator": est,
                "metric": "hamming",
                "prr": prr,
                "auc": 0.5,
                "n": 40,
            }
            for target in ("bayes", "beam")
            for est, prr in (("ptrue", 0.1), ("msp", 0.2), ("ptrue_beam", 0.9))
        ]
    )
    build_tables(
        quality,
        scores,
        pd.read_csv(PAPER_DIR / "generation.csv"),
        pd.read_csv(PAPER_DIR / "uq.csv"),
        tmp_path,
    )
    said = "P(True) (beam output): a sensitivity row (generation.ptrue_beam=true)"
    for name in ("uq_prr_beam", "uq_auc_beam"):
        md = (tmp_path / f"{name}.md").read_text(encoding="utf-8")
        ours = [line for line in md.splitlines() if "| qwen3-4b |" in line and "| ours |" in line]
        labels = [line.split(" | ")[1] for line in ours]
        assert labels.index("P(True)") < labels.index("P(True) (beam output)" + EXTRA_MARK)
        beam_row = ours[labels.index("P(True) (beam output)" + EXTRA_MARK)]
        assert "**" not in beam_row  # its 0.9 is the highest PRR, yet never marked best
        assert said in md and said in (tmp_path / f"{name}.tex").read_text(encoding="utf-8")
    for name in ("uq_prr_bayes", "uq_auc_bayes"):
        md = (tmp_path / f"{name}.md").read_text(encoding="utf-8")
        assert "P(True) (beam output)" not in md and "| P(True) |" in md


# --------------------------------------------------------------------------- 4. g_T's NLI input


QUESTION = "what is the capital of france"


def _nli_judge(strict: bool, probs: dict):
    """The real NliEquivalence (pair texts, label matrices, clustering) with the model's forward
    pass replaced by a table {(premise text, hypothesis text): (entail, neutral, contra)};
    pairs not in it are contradictions. Records the texts it was asked about."""
    from transformers import AutoTokenizer

    from pipeline.mapping.embed import packaged_minilm_path
    from pipeline.mapping.equivalence import NliEquivalence

    class TableNli(NliEquivalence):
        def _score_triples(self, triples):
            texts = [self.pair_texts(q, a, b) for q, a, b in triples]
            self.seen += texts
            return np.array([probs.get(t, (0.0, 0.0, 1.0)) for t in texts], dtype=np.float64)

    judge = TableNli(model="unused", strict=strict)
    judge._model = object()  # nothing to load: the forward pass is the table
    judge._use_tokenizer(AutoTokenizer.from_pretrained(str(packaged_minilm_path())))
    judge.seen = []
    return judge


def test_g_t_nli_reads_question_plus_answer_with_entailment_both_ways():
    """docs/fidelity.md "NLI input of g_T": premise and hypothesis are `question + " " +
    answer` (Kuhn et al.); with `strict` (the paper configuration) two answers are one class only
    when each entails the other."""
    q = QUESTION
    probs = {
        (f"{q} paris", f"{q} it is paris"): (0.9, 0.05, 0.05),
        (f"{q} it is paris", f"{q} paris"): (0.8, 0.1, 0.1),
        (f"{q} paris", f"{q} paris city"): (0.9, 0.05, 0.05),  # one way only
        (f"{q} paris city", f"{q} paris"): (0.1, 0.8, 0.1),
    }
    texts = ["paris", "it is paris", "paris city"]
    strict = _nli_judge(True, probs)
    assert strict.cluster(q, texts) == [0, 0, 1]
    assert strict.seen and all(
        p.startswith(f"{q} ") and h.startswith(f"{q} ") for p, h in strict.seen
    )
    assert _nli_judge(False, probs).cluster(q, texts) == [0, 0, 0]  # Kuhn et al.'s non-strict


def test_the_classes_g_t_clusters_whole_responses_under_their_question(monkeypatch, tmp_path):
    """TriviaQA's g_T under NLI hands the judge the question and every whole response (not the
    extracted core answers); the judge is task.equivalence's."""
    import pipeline.aux_models.factories
    from pipeline.mapping.settings import EquivalenceConfig
    from pipeline.tasks.classes.task import ClassesSettings, build_classes

    calls = []

    class Judge:
        def cluster(self, question, texts):
            calls.append((question, list(texts)))
            return [0, 0, 1]

    monkeypatch.setattr(
        pipeline.aux_models.factories,
        "equivalence_judge",
        lambda eq, device, cache_dir: calls.append(eq) or Judge(),
    )
    paper = EquivalenceConfig(backend="nli", nli_model="microsoft/deberta-large-mnli", strict=True)
    classes = build_classes(
        ClassesSettings(equivalence=paper),
        types.SimpleNamespace(device="cpu", cache_dir=str(tmp_path)),
    )
    question = "What is the capital of France?"
    responses = ["Paris.", "The capital is Paris", "Lyon"]
    assert classes(question, responses) == ["paris", "paris", "lyon"]
    assert calls == [paper, (question, responses)]


# --------------------------------------------------------------------------- 5. EmbeddingGemma


def test_embeddinggemma_runs_without_a_task_prompt_at_full_dimension(monkeypatch):
    """docs/fidelity.md "EmbeddingGemma input": the sphere g_T's embedder (aux_models) loads
    `google/embeddinggemma-300m` with no `truncate_dim` and encodes each response as it is: no
    `prompt_name` / `prompt`, unit norm, every dimension the model returns."""
    import sentence_transformers

    from pipeline.aux_models.factories import build_embedder

    seen = {}

    class FakeSentenceTransformer:
        def __init__(self, *args, **kwargs):
            seen["init"] = (args, kwargs)
            self.prompts = {
                "query": "task: search result | query: ",
                "STS": "task: sentence similarity | query: ",
            }

        def encode(self, texts, **kwargs):
            seen["encode"] = (list(texts), kwargs)
            return np.tile(np.arange(1.0, 769.0), (len(texts), 1))

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", FakeSentenceTransformer)
    embedder = build_embedder("embeddinggemma", device="cpu")
    assert embedder.prompt_name is None and embedder.name == "google/embeddinggemma-300m"
    # an lru_cached instance: load afresh here, and leave it as it was for other tests
    monkeypatch.setattr(embedder, "_backend", None)
    monkeypatch.setattr(embedder, "_cache", {})
    vectors = embedder.embed(["Helsinki is the capital of Finland."])
    assert seen["init"] == (("google/embeddinggemma-300m",), {"device": "cpu"})
    texts, kwargs = seen["encode"]
    assert texts == ["Helsinki is the capital of Finland."]
    assert not {"prompt_name", "prompt", "truncate_dim"} & set(kwargs)
    assert kwargs["normalize_embeddings"] is True
    assert vectors.shape == (1, 768)
    assert np.linalg.norm(vectors[0]) == pytest.approx(1.0)


# --------------------------------------------------------------------------- 6. extraction LLMs


def test_the_extraction_llm_runs_at_temperature_0_with_512_tokens(tmp_path):
    """docs/fidelity.md "Extraction LLM and KGGen sampling": the sets/simplex g_T's client
    (gpt-4.1-mini in the paper configuration) sends temperature 0 and max_tokens 512 with every
    request."""
    from pipeline.clients.llm_client import build_llm_client
    from pipeline.mapping.settings import ExtractorConfig

    client = build_llm_client(ExtractorConfig(kind="llm", model="gpt-4.1-mini"), str(tmp_path))
    assert client.model == "gpt-4.1-mini"
    assert client.params == {"temperature": 0.0, "max_tokens": 512}


def test_kggen_runs_at_temperature_0_with_4096_tokens(monkeypatch, tmp_path):
    """docs/fidelity.md "Extraction LLM and KGGen sampling": the graph g_T builds KGGen with
    temperature 0 and max_tokens 4096 (on the task.extractor model, as a LiteLLM string)."""
    from pipeline.tasks.graphs.kggen_worker import make_kggen
    from pipeline.tasks.graphs.reading import GraphExtractor

    built = {}
    fake = types.ModuleType("kg_gen")
    fake.KGGen = lambda **kwargs: built.update(kwargs)
    monkeypatch.setitem(sys.modules, "kg_gen", fake)
    runner = GraphExtractor(method="kggen", model="gpt-4.1-mini", cache_dir=str(tmp_path))._runner()
    make_kggen(runner.settings)
    assert (built["model"], built["temperature"], built["max_tokens"]) == (
        "openai/gpt-4.1-mini",
        0.0,
        4096,
    )


# --------------------------------------------------------------------------- 7. simplex


def test_stated_probabilities_are_kept_by_g_t_and_renormalised_by_the_simplex():
    """docs/fidelity.md "Stated probabilities (MAQA*)": g_T keeps what the response states (the
    extraction prompt: "Do NOT renormalize"; synonyms summed); the simplex space divides each
    latent by its sum before the Bayes action, its risk and every KL."""
    from pipeline.mapping.parsing import parse_distribution
    from pipeline.tasks.simplex.reading import merge_distributions

    stated = parse_distribution(
        '{"items":[{"answer":"Atlantic","p":0.3},{"answer":"Pacific","p":0.2}]}'
    )
    assert stated == {"Atlantic": 0.3, "Pacific": 0.2}  # sums to 0.5: kept
    assert merge_distributions("q", [{"Atlantic": 0.3, "the atlantic.": 0.1}]) == [
        {"atlantic": pytest.approx(0.4)}
    ]  # merged, summed, not renormalised
    space = get_space("simplex")
    assert space.canonical(stated) == {
        "Atlantic": pytest.approx(0.6),
        "Pacific": pytest.approx(0.4),
    }
    action, risk = space.batch([[stated, {"Atlantic": 1.0}]]).bayes()
    assert action[0] == {"Atlantic": pytest.approx(0.8), "Pacific": pytest.approx(0.2)}
    h = -(0.8 * np.log(0.8) + 0.2 * np.log(0.2))  # H(mean) - mean H(l), l renormalised
    assert risk[0] == pytest.approx(h - (-(0.6 * np.log(0.6) + 0.4 * np.log(0.4))) / 2)


def test_the_simplex_g_t_example_is_restored_and_the_cut_one_an_option(
    hydra_ctx, monkeypatch, tmp_path
):
    """docs/fidelity.md "Simplex g_T example": under `experiment=paper` the simplex g_T sends
    gpt-4.1-mini the listing with its example answer completed from the JSON line after it
    ("A: Atlantic (55%), Pacific (45%)"); `mappers.simplex.prompt_example=verbatim` sends the
    listing as published, cut at "%"."""
    import pipeline.clients.llm_client
    from pipeline.config import mapper_config
    from pipeline.data.prompts import SIMPLEX_EXTRACTION_PROMPT
    from pipeline.tasks.contract import MAPPERS

    sent = []

    class Client:
        stats = None

        def complete(self, prompts):
            sent.extend(prompts)
            return ['{"items":[{"answer":"Pacific","p":0.6}]}' for _ in prompts]

    monkeypatch.setattr(pipeline.clients.llm_client, "build_llm_client", lambda *a: Client())
    context = types.SimpleNamespace(device="cpu", cache_dir=str(tmp_path))
    example = "Q: Which oceans border the USA?\nA: Atlantic (55%), Pacific (45%)\nOutput:\n"
    answer = "Pacific (60%), Atlantic (40%)"
    for overrides, want in (
        ([], example),
        (
            ["mappers.simplex.prompt_example=verbatim"],
            "Q: Which oceans border the USA?\nA: Atlantic (55%\nOutput:\n",
        ),
    ):
        cfg = _paper("dataset=maqa_star", "mappers.simplex.merge_by=canonical", *overrides)
        assert cfg.task.extractor.kind == "llm"
        sent.clear()
        g_t = MAPPERS["simplex"].build(mapper_config(cfg, "simplex"), context)
        assert g_t("Which oceans border Canada?", [answer]) == [{"pacific": 0.6}]
        [prompt] = sent
        assert want in prompt
        assert prompt.endswith(
            f"Q: Which oceans border Canada?\nA: {answer}\n\n"
            "Task: Extract answer probability pairs."
        )
    # the option's text is the published listing (compared with the .tex in tests/data)
    assert prompt.replace("Which oceans border Canada?", "{question}").replace(
        answer, "{answer}"
    ) == SIMPLEX_EXTRACTION_PROMPT.replace("{{", "{").replace("}}", "}")


# --------------------------------------------------------------------------- 8. ablation


def test_the_ablation_subsamples_m_in_1_2_5_10_15_20_with_10_repeats(monkeypatch):
    """docs/fidelity.md "Samples ablation (Figs. 4-6)": M in {1, 2, 5, 10, 15, 20}, each with 10
    random subsets of M of the stored samples per prompt, drawn without replacement (at M = 20
    every subset is all 20 samples, so the spread is 0); the report calls it with these
    defaults."""
    import inspect

    from pipeline.reporting import ablation

    defaults = ablation.AblationSettings()
    assert (defaults.ms, defaults.repeats) == ((1, 2, 5, 10, 15, 20), 10)
    calls = []
    real_prr = ablation.prr
    monkeypatch.setattr(ablation, "prr", lambda *a, **k: calls.append(1) or real_prr(*a, **k))
    rng = np.random.default_rng(3)
    labels = ["a", "b", "c", "d"]
    rows = [
        {
            "model": "m",
            "prompt_id": p,
            "source": "sample",
            "sample_idx": i,
            "parse_ok": True,
            "latent": json.dumps(sorted(set(rng.choice(labels, size=2)))),
        }
        for p in ("p1", "p2", "p3")
        for i in range(20)
    ]
    dataset = pd.DataFrame(
        {
            "model": "m",
            "prompt_id": ["p1", "p2", "p3"],
            "answers": [[["a"]], [["b"], ["c"]], [["d"]]],
        }
    )
    quality = pd.DataFrame(columns=["model", "prompt_id", "method", "metric", "value"])
    out = ablation.samples_ablation(pd.DataFrame(rows), dataset, quality, "sets")
    assert out["m"].tolist() == [1, 2, 5, 10, 15, 20]
    assert len(calls) == 6 * 10  # one PRR of R(l_Bayes) per repeat (no beam rows here)
    assert out.set_index("m").loc[20, "hamming_sd"] == 0.0
    assert out.set_index("m").loc[1, "hamming_sd"] > 0.0
    import pipeline.reporting

    report = "".join(inspect.getsource(pipeline.reporting).split())  # however it is wrapped
    call = report[report.index("samples_ablation(per_prompt") :]
    call = call[: call.index("ablation.to_csv")]
    assert "ms=" not in call and "repeats=" not in call


# --------------------------------------------------------------------------- 9. NLI precision


def test_the_paper_nli_judge_runs_in_float32_on_a_gpu_too(hydra_ctx, monkeypatch):
    """docs/fidelity.md "NLI precision": the judge `experiment=paper` builds (g_T's clusters and
    the SE/KLE matrices) runs DeBERTa in float32, lm-polygraph 0.5.0's precision, also where a
    GPU with bfloat16 is visible (where `auto` would pick bfloat16)."""
    import torch

    from pipeline.aux_models import factories as aux_models

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    cfg = compose("config", overrides=["experiment=paper", "dataset=triviaqa"])
    aux_models._nli.cache_clear()
    try:
        judge = aux_models.build_equivalence(resolve_cell(cfg))
        assert (judge.device, judge.dtype) == ("cuda", "float32")
    finally:
        aux_models._nli.cache_clear()


# --------------------------------------------------------------------------- 10. open choices


def _paper(*overrides):
    return compose("config", overrides=["experiment=paper", *overrides])


@pytest.mark.parametrize(
    "model, hub_id", [("qwen3-4b", "Qwen/Qwen3-4B"), ("qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B")]
)
def test_qwen3_is_the_hybrid_checkpoint_unthinking_with_the_cards_sampling(
    hydra_ctx, model, hub_id
):
    """docs/fidelity.md "Qwen3 checkpoints": the hybrid `Qwen/Qwen3-*` checkpoints (not the
    `-Instruct-2507` ones), `enable_thinking: false`, and the card's non-thinking values in the
    generate stage's SamplingConfig (T 0.7, top-p 0.8, top-k 20)."""
    from pipeline.stages.generate import _sampling

    cfg = _paper("dataset=triviaqa", f"model={model}")
    assert cfg.model.path == hub_id
    assert dict(cfg.model.chat_template_kwargs) == {"enable_thinking": False}
    sampling = _sampling(cfg)
    assert (sampling.temperature, sampling.top_p, sampling.top_k) == (0.7, 0.8, 20)


def test_qwen2_5_72b_is_the_instruct_model_with_its_hub_sampling(hydra_ctx):
    """docs/fidelity.md "Qwen-2.5-72B": the paper's "Qwen-2.5-72B" (App. A.4) is run as
    `Qwen/Qwen2.5-72B-Instruct`, sampled with its hub generation config (no values set)."""
    from pipeline.stages.generate import _sampling

    cfg = _paper("dataset=triviaqa", "model=qwen2.5-72b-instruct")
    assert cfg.model.path == "Qwen/Qwen2.5-72B-Instruct"
    assert dict(cfg.model.chat_template_kwargs) == {}
    sampling = _sampling(cfg)
    assert (sampling.temperature, sampling.top_p, sampling.top_k) == (None, None, None)


class _RecordingTokenizer:
    chat_template = "(recorded)"

    def __init__(self):
        self.calls = []

    def apply_chat_template(self, messages, **kwargs):
        self.calls.append((messages, kwargs))
        return "RENDERED"


@pytest.mark.parametrize(
    "model, template_kwargs", [("qwen3-4b", {"enable_thinking": False}), ("gemma-3-4b-it", {})]
)
def test_the_prompt_is_one_user_turn_without_a_system_prompt(
    hydra_ctx, monkeypatch, model, template_kwargs
):
    """docs/fidelity.md "Chat template": the generate stage renders each task prompt as a single
    user turn, no system message, in the model's own chat template with the generation prompt
    (and Qwen3's `enable_thinking: false`)."""
    from pipeline.data.prompts import task_prompt
    from pipeline.generation import cell

    tokenizer = _RecordingTokenizer()
    monkeypatch.setattr(cell, "model_tokenizer", lambda cfg: tokenizer)
    cfg = _paper("dataset=triviaqa", f"model={model}")
    question = "Who wrote Hamlet?"
    dataset = pd.DataFrame({"prompt_id": ["p"], "question": [question]})
    assert cell.render_prompts(resolve_cell(cfg), dataset) == ["RENDERED"]
    [(messages, kwargs)] = tokenizer.calls
    assert messages == [{"role": "user", "content": task_prompt(cfg.task.prompt, question)}]
    assert kwargs == {"tokenize": False, "add_generation_prompt": True, **template_kwargs}


def test_latent_entropy_counts_distinct_latents_on_the_sphere_and_simplex():
    """docs/fidelity.md "Latent entropy on R^d and the simplex": the uq stage's latent_entropy is
    the plug-in entropy of the samples' distinct latents (equal canonical JSON), no density
    estimate: on the sphere M distinct embeddings give log M; on the simplex a distribution
    is one latent whatever its key order, but one stated at half the mass is another."""
    from pipeline.latent.codec import to_json
    from pipeline.uncertainty.estimators import uncertainty_rows

    def entropy(space, latents):
        frame = pd.DataFrame(
            {
                "prompt_id": "p",
                "source": "sample",
                "parse_ok": True,
                "latent": [to_json(space, x) for x in latents],
            }
        )
        return uncertainty_rows(["latent_entropy"], {"latents": frame})["value"].item()

    a, b, near_a = [0.6, 0.8], [0.8, 0.6], [0.6, 0.8000001]
    assert entropy("sphere", [a, a, b, b]) == pytest.approx(np.log(2))
    assert entropy("sphere", [a, near_a, b, b]) == pytest.approx(1.5 * np.log(2))  # 1/4 1/4 1/2
    same = [{"atlantic": 0.6, "pacific": 0.4}, {"pacific": 0.4, "atlantic": 0.6}]
    assert entropy("simplex", same) == 0.0
    halved = {"atlantic": 0.3, "pacific": 0.2}  # the same after the space's renormalisation
    assert entropy("simplex", [*same, halved, halved]) == pytest.approx(np.log(2))


def test_prr_ties_are_averaged_as_set_in_the_paper_configuration(hydra_ctx):
    """docs/fidelity.md "PRR ties": `experiment=paper` sets `evaluation.ties: average` itself (not
    through the schema default), and the PRR the evaluate stage computes with it does not depend
    on the order of tied uncertainties (lm-polygraph's argsort order, `polygraph`, does)."""
    from omegaconf import OmegaConf

    from pipeline.evaluation import prr

    paper_yaml = Path(__file__).resolve().parents[2] / "conf" / "experiment" / "paper.yaml"
    assert OmegaConf.load(paper_yaml).evaluation.ties == "average"
    ev = _paper("dataset=triviaqa").evaluation
    assert ev.ties == "average"
    u = [0.0, 0.0, 1.0, 1.0, 1.0, 1.0]  # a discrete estimator: two tie groups
    q = [1.0, 0.0, 1.0, 0.0, 0.0, 1.0]
    order = [1, 0, 5, 4, 3, 2]
    score = prr(u, q, max_rejection=ev.max_rejection, ties=ev.ties)
    assert score == prr(
        [u[i] for i in order], [q[i] for i in order], max_rejection=ev.max_rejection, ties=ev.ties
    )
    polygraph = {
        prr(u, q, max_rejection=1.0, ties="polygraph"),
        prr([u[i] for i in order], [q[i] for i in order], max_rejection=1.0, ties="polygraph"),
    }
    assert len(polygraph) == 2  # the row order decides lm-polygraph's number


# --------------------------------------------------------------------------- B. paper values

PAPER_DATASETS = ("triviaqa", "maqa", "maqa_star", "wmt19_fien", "cnn_dm")

# {config key: (value under experiment=paper, where the paper says so)}; sections as numbered
# in the .tex (App. B = Implementation Details). "(not stated)": the paper names the component
# but not this value (docs/fidelity.md gives the reason for it).
_POLYGRAPH = 'App. B.4: "lm-polygraph 0.5.0 using the default settings"'
_AS_PROMPTED = 'App. B.1: "cluster the invididual answers using an entailment DeBERTa"'
_PRR = 'App. B.3: "PRR at a maximum rejection threshold of 50%"'
_F1 = 'App. B.3: "compute the geometric mean of precision and recall"'
_DECODERS = 'Sec. 4.2: "beam search, ..., contrastive search, ... (AR), greedy decoding"'
PAPER_VALUES = {
    "generation.n_samples": (20, 'Sec. 4.1: "We draw M=20 samples"; App. B.3, B.4'),
    # unparseable answers are "extremely rare" and discarded; truncation is not mentioned, so a
    # sample is read as it came (docs/fidelity.md; the practitioner's outputs count them)
    "reading.unreadable": ("discard", 'App. "Latent mappings": unparseable answers discarded'),
    "reading.truncated": ("read", "(not stated): every sample read as generated"),
    # self-consistency, l_MAP, l_Sample (and Bayes) come from the samples (decide stage)
    "generation.strategies": (["greedy", "beam", "contrastive", "ar"], _DECODERS),
    "generation.ptrue": (True, "App. A.2 UQ tables: the P(True) rows"),
    # bayes_risk_fbeta is our extra (the F1 loss's risk; Estimator.in_paper False)
    "uq.estimators": (
        [
            "msp",
            "semantic_entropy",
            "kle",
            "sar",
            "cocoa_msp",
            "ptrue",
            "latent_entropy",
            "bayes_risk",
            "bayes_risk_fbeta",
        ],
        "App. A.2: P(True), SAR, COCOA, KLE, SE, MSP, Latent Entropy, R_Bayes",
    ),
    # bayes_fbeta is our extra (the F1-optimal response)
    "evaluation.targets": (
        ["bayes", "beam", "bayes_fbeta"],
        'App. A.2: "the Bayes optimal response", "the beam search response"',
    ),
    "evaluation.max_rejection": (0.5, _PRR),
    "task.equivalence.backend": ("nli", 'App. B.1: "we use DeBERTa as an entailment model"'),
    # the checkpoint is lm-polygraph's default NLI model
    "task.equivalence.nli_model": ("microsoft/deberta-large-mnli", 'App. B.1: "DeBERTa"'),
    "task.equivalence.strict": (True, '(not stated) App. B.1: "Similar to Kuhn et al."'),
    # lm-polygraph 0.5.0 loads its DeBERTa with no dtype: float32
    "task.equivalence.nli_dtype": ("float32", _POLYGRAPH),
    "task.extractor.kind": ("llm", 'App. B.1: "gpt-4.1-mini" (sets, simplex), KGGen (graphs)'),
    "task.extractor.model": ("gpt-4.1-mini", 'App. B.1: "implemented using gpt-4.1-mini"'),
    "mappers.sphere.embedder": ("embeddinggemma", 'App. B.1: "feeding it into an EmbeddingGemma"'),
    "mappers.simplex.merge_by": ("equivalence", _AS_PROMPTED),
    "mappers.simplex.renormalize": (False, 'App. E, simplex g_T prompt: "Do NOT renormalize"'),
    "metrics.f1.mean": ("geometric", _F1),
    # the checkpoint is COMET's default reference-based model
    "metrics.comet.model": ("Unbabel/wmt22-comet-da", '(not stated) Sec. 4.1: "the COMET score"'),
    "uq.groups.lm_polygraph.similarity": ("cross_encoder", _POLYGRAPH),
    "uq.groups.lm_polygraph.cross_encoder": ("cross-encoder/stsb-roberta-large", _POLYGRAPH),
    "uq.groups.lm_polygraph.nli_with_question": (False, _POLYGRAPH),
    "uq.groups.lm_polygraph.kwargs": ({}, _POLYGRAPH),
    "backend.name": ("vllm", "(not stated) GPU serving of the paper's five LLMs"),
}

# per dataset: (task, its latent space, the metrics of Table 2's columns)
PAPER_TASKS = {
    "triviaqa": ("classes", "classes", ["exact_match_error"]),  # "[K]", "Exact Match"
    "maqa": ("sets", "sets", ["hamming", "f1"]),  # "{0,1}^K", "Hamming", "F1"
    "maqa_star": ("simplex", "simplex", ["kl"]),  # "Delta^{K-1}", "KL"
    "wmt19_fien": ("sphere", "sphere", ["cosine_distance", "comet"]),  # "R^d", "COMET", "Cosine"
    "cnn_dm": ("graphs", "graphs", ["hamming", "f1", "alignscore"]),  # "G", "Align Score"
}


def _at(cfg, dotted: str):
    from omegaconf import OmegaConf

    node = OmegaConf.select(cfg, dotted, throw_on_missing=True)
    return OmegaConf.to_container(node) if OmegaConf.is_config(node) else node


@pytest.mark.parametrize("dataset", PAPER_DATASETS)
def test_experiment_paper_pins_every_value_the_paper_states(hydra_ctx, dataset):
    """Every value `experiment=paper` sets that the paper states (or, marked "(not stated)", the
    component the paper names without the value), on each of the five paper datasets."""
    cfg = compose(
        "config", overrides=["experiment=paper", f"dataset={dataset}"], return_hydra_config=True
    )
    wrong = {
        key: (_at(cfg, key), want, source)
        for key, (want, source) in PAPER_VALUES.items()
        if _at(cfg, key) != want
    }
    assert not wrong, wrong
    task, space, metrics = PAPER_TASKS[dataset]
    assert (cfg.task.name, cfg.task.space, list(cfg.task.metrics)) == (task, space, metrics)
    if dataset == "cnn_dm":  # "we represent summaries as undirected knowledge graphs"
        assert cfg.task.space_options.directed is False
    # Sec. 4.1 Models: Gemma-3-4B/12B, Qwen3-4B, Qwen3-30B-A3B; App. A.4: Qwen-2.5-72B; the
    # five datasets of Table 2
    sweep = cfg.hydra.sweeper.params
    assert sweep.model.split(",") == [
        "gemma-3-4b-it",
        "gemma-3-12b-it",
        "qwen3-4b",
        "qwen3-30b-a3b",
        "qwen2.5-72b-instruct",
    ]
    assert tuple(sweep.dataset.split(",")) == PAPER_DATASETS


# --------------------------------------------------------------------------- C. what was read

PAPER_YAML = Path(__file__).resolve().parents[2] / "conf" / "experiment" / "paper.yaml"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


# revision setting -> the setting naming the checkpoint it pins
PINNED_BY = {
    "task.equivalence.nli_revision": "task.equivalence.nli_model",
    "mappers.sphere.embedder_revision": "mappers.sphere.embedder",
    "uq.groups.lm_polygraph.cross_encoder_revision": "uq.groups.lm_polygraph.cross_encoder",
    "metrics.comet.revision": "metrics.comet.model",
    "metrics.alignscore.model_revision": "metrics.alignscore.model",
}


def _fetch_script():
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "scripts" / "fetch_paper_assets.py"
    spec = importlib.util.spec_from_file_location("fetch_paper_assets", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_auxiliary_checkpoint_has_a_revision_pin_that_paper_assets_prints(
    hydra_ctx, tmp_path, monkeypatch
):
    """docs/fidelity.md "Auxiliary checkpoints' revisions": `experiment=paper` names a revision
    setting for each auxiliary checkpoint it loads (null, the latest commit, until pinned; the
    commit used is recorded either way), and `make paper-assets` prints, for each, the commit to
    pin: the HF cache's (what an offline run reads); one it cannot resolve fails the step."""
    from omegaconf import OmegaConf

    from pipeline.mapping.embed import EMBEDDINGGEMMA_ID

    fetch = _fetch_script()
    paper_yaml = OmegaConf.load(PAPER_YAML)
    aliases = {"embeddinggemma": EMBEDDINGGEMMA_ID}
    for dataset in ("triviaqa", "wmt19_fien", "cnn_dm"):
        cfg = _paper(f"dataset={dataset}")
        for key, repo in fetch.AUX_PINS:
            assert OmegaConf.select(paper_yaml, key, default="absent") is None, key  # stated
            assert OmegaConf.select(cfg, key, default="absent") is None, key
            loads = OmegaConf.select(cfg, PINNED_BY[key])
            assert aliases.get(loads, loads) == repo, (key, loads)
    assert [key for key, _ in fetch.AUX_PINS] == list(PINNED_BY)
    assert {repo for _, repo in fetch.AUX_PINS} == {
        "microsoft/deberta-large-mnli",
        "google/embeddinggemma-300m",
        "cross-encoder/stsb-roberta-large",
        "Unbabel/wmt22-comet-da",
        "roberta-large",
    }

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for _, repo in fetch.AUX_PINS[1:]:
        refs = tmp_path / f"models--{repo.replace('/', '--')}" / "refs"
        refs.mkdir(parents=True)
        (refs / "main").write_text(COMMIT)
    with pytest.raises(RuntimeError) as missing:
        fetch.revisions_to_pin()
    assert "not in the HF cache and the hub unreachable: microsoft/deberta-large-mnli" in str(
        missing.value
    )
    assert "task.equivalence.nli_revision=<unresolved>" in str(missing.value)
    refs = tmp_path / "models--microsoft--deberta-large-mnli" / "refs"
    refs.mkdir(parents=True)
    (refs / "main").write_text(COMMIT)
    said = fetch.revisions_to_pin()
    for key, repo in fetch.AUX_PINS:
        assert f"  {key}={COMMIT}  # {repo}" in said


def test_the_tables_name_the_maqa_file_they_read(tmp_path):
    """docs/fidelity.md "MAQA source": the MAQA JSON's SHA-256 and origin (the provenance
    `make paper-assets` writes beside it) are recorded with the generations and named in every
    table whose rows of ours read MAQA, in markdown and LaTeX, with its pin state; a table
    without MAQA rows of ours says nothing of it."""
    import hashlib

    from pipeline.artifacts.store import ArtifactStore
    from pipeline.data import load_dataset
    from pipeline.data.loaders import recording_sources
    from pipeline.reporting import PAPER_DIR
    from pipeline.reporting.collect import Cell, data_files
    from pipeline.reporting.tables import build_tables, data_note

    data = tmp_path / "MAQA.json"
    data.write_bytes(
        json.dumps([{"question": "Which oceans?", "answers": ["Pacific", "Atlantic"]}]).encode()
    )
    digest = hashlib.sha256(data.read_bytes()).hexdigest()
    repository = "https://github.com/YangYongJin/MAQA-Official-Repo"
    Path(f"{data}.source.json").write_text(
        json.dumps(
            {"repository": repository, "commit": COMMIT, "file": "data/MAQA.json", "sha256": digest}
        )
    )

    def recorded(**pin):
        with recording_sources() as seen:
            load_dataset("maqa", path=str(data), **pin)
        return seen[0]

    unpinned, pinned = recorded(), recorded(sha256=digest)
    assert unpinned == {
        "source": "files",
        "data_files": {"train": str(data)},
        "split": "train",
        "sha256": digest,
        "pinned": False,
        "repository": repository,
        "commit": COMMIT,
        "file": "data/MAQA.json",
    }
    assert pinned == {**unpinned, "pinned": True}

    cell_dir = tmp_path / "outputs" / "paper" / "qwen3-4b" / "maqa"
    cell_dir.mkdir(parents=True)
    (cell_dir / "dataset.manifest.json").write_text(
        json.dumps({"revisions": {"model": {"repo": "Qwen/Qwen3-4B"}, "dataset": unpinned}})
    )
    bundled = tmp_path / "outputs" / "paper" / "qwen3-4b" / "triviaqa_bundled"
    bundled.mkdir(parents=True)
    (bundled / "dataset.manifest.json").write_text(
        json.dumps(
            {"revisions": {"dataset": {"source": "bundled", "file": "x.jsonl", "sha256": "0" * 64}}}
        )
    )
    cells = [
        Cell("qwen3-4b", "maqa", ArtifactStore(cell_dir)),
        Cell("qwen3-4b", "triviaqa_bundled", ArtifactStore(bundled)),
    ]
    files = data_files(cells)
    assert list(files) == ["maqa"]  # a bundled set traces by the package version
    note = data_note("maqa", files["maqa"])
    assert note == (
        f"Data of MAQA {{0,1}}^K: MAQA.json, SHA-256 {digest}, from {repository} "
        f"at commit {COMMIT} (data/MAQA.json) [UNPINNED: no SHA-256 pinned in its "
        "dataset config; make paper-assets fills the pin]."
    )
    assert data_note("maqa", [("m", pinned)]).endswith("(data/MAQA.json) (pinned).")

    quality = pd.DataFrame(
        [
            {
                "model": "qwen3-4b",
                "dataset": "maqa",
                "method": "bayes",
                "metric": "hamming",
                "value": 0.5,
                "low": 0.4,
                "high": 0.6,
                "n": 40,
            }
        ]
    )
    scores = pd.DataFrame(
        columns=["model", "dataset", "target", "estimator", "metric", "prr", "auc"]
    )
    build_tables(
        quality,
        scores,
        pd.read_csv(PAPER_DIR / "generation.csv"),
        pd.read_csv(PAPER_DIR / "uq.csv"),
        tmp_path / "tables",
        data_notes={"maqa": note},
    )
    for ext in ("md", "tex"):
        assert note in (tmp_path / "tables" / f"generation.{ext}").read_text(encoding="utf-8")
    # Table 3's rows of ours: none here (no UQ scores), so the file is not its data
    assert digest not in (tmp_path / "tables" / "uq_prr_bayes.md").read_text(encoding="utf-8")
