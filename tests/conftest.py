"""Shared test settings: never touch the network, keep caches inside the test's tmp dirs."""

import importlib.util
import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


# Tiny randomly initialised COMET / AlignScore checkpoints built locally (no hub): the real
# checkpoints cannot be downloaded here; the code paths are the real ones.
SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def tiny_comet(tmp_path_factory) -> Path:
    """Folder with hparams.yaml + checkpoints/model.ckpt + encoder/ (tiny random XLM-R)."""
    out = tmp_path_factory.mktemp("tiny_comet")
    _script("make_tiny_comet").build_tiny_comet(out)
    return out


@pytest.fixture(scope="session")
def tiny_alignscore(tmp_path_factory) -> tuple[Path, Path]:
    out = tmp_path_factory.mktemp("tiny_alignscore")
    return _script("make_tiny_alignscore").build_tiny_alignscore(out)


@pytest.fixture(scope="session")
def tiny_chat_model(tmp_path_factory) -> Path:
    """A tiny random Llama chat model with its own tokenizer and template
    (scripts/make_tiny_model.py, untrained): real transformers code, seconds per stage run."""
    out = tmp_path_factory.mktemp("tiny_chat_model")
    _script("make_tiny_model").main([str(out), "--train-steps", "0"])
    return out


@pytest.fixture(scope="module")
def hydra_ctx():
    """Hydra initialised on conf/ for a test module (compose(...) inside works like the CLI)."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from pipeline.config import register_configs

    register_configs()
    GlobalHydra.instance().clear()
    conf = Path(__file__).resolve().parents[1] / "conf"
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        yield
    GlobalHydra.instance().clear()


@pytest.fixture()
def compose_cfg(hydra_ctx):
    """compose_cfg(*overrides) -> the composed Hydra config of conf/ (like the command line)."""
    from hydra import compose

    return lambda *overrides: compose("config", overrides=list(overrides))


@pytest.fixture()
def compose_cell(compose_cfg):
    """compose_cell(*overrides) -> the resolved cell of conf/ (pipeline.config), as an entry
    point builds it: composed, checked, resolved."""
    from pipeline.config import resolve_cell, validate

    def cell(*overrides):
        cfg = compose_cfg(*overrides)
        validate(cfg)
        return resolve_cell(cfg)

    return cell
