"""Hub revisions: which commit of a hub repository (a model, a dataset) a run used.

A hub id loads at the revision its setting asks for (`model.revision`, `dataset.revision`;
null: the repository's default branch, its latest commit when loaded). What was asked and the
commit it resolved to are recorded in the generate stage's manifests as

    {"repo": "Qwen/Qwen3-4B", "requested": null, "resolved": "<40 hex digits>"}

The commit comes, in this order, from what the loader reports (transformers'
`config._commit_hash`, the commit folder of a `datasets` cache), from the local Hugging Face
cache (`<hub cache>/<type>s--<org>--<name>/refs/<revision>`, or the `snapshots/<commit>` folder of
a pinned commit: what an offline load reads) and, online only, from the hub
(`HfApi().repo_info(...).sha`). None when none of them says. A packaged or bundled source has no
hub commit: its entry says `{"source": "bundled", ...}` instead of inventing one.

The auxiliary models the later stages load (the embedder, the NLI model, the cross-encoder,
COMET, AlignScore's base) are recorded the same way in their stage's manifests
(`recording_models`, `model_revisions`), by role: {"embedder": {...}, "nli_model": {...}}.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

COMMIT = re.compile(r"[0-9a-f]{40}")
REPO_TYPES = ("model", "dataset")
HUB_TIMEOUT_S = 10.0
_OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")


def is_commit(value: Any) -> bool:
    """A full commit hash (40 lowercase hex digits)."""
    return isinstance(value, str) and COMMIT.fullmatch(value) is not None


def hub_offline(env: Any = None) -> bool:
    """Whether the Hugging Face libraries are told to stay offline (any of their variables)."""
    env = os.environ if env is None else env
    return any(env.get(v, "") not in ("", "0", "false", "False") for v in _OFFLINE_VARS)


def is_hub_id(source: Any) -> bool:
    """A hub id (`org/name` or a bare name), not a local path, a package, a URL or a variable."""
    if (
        not isinstance(source, str)
        or not source
        or source.startswith((".", "/", "~", "$", "package:", "http://", "https://", "hf://"))
    ):
        return False
    if source.count("/") > 1 or "\\" in source or source.endswith((".json", ".jsonl", ".ckpt")):
        return False
    try:
        return not Path(source).expanduser().exists()
    except (OSError, ValueError):
        return False


def hub_cache(env: Any = None) -> Path:
    """The Hugging Face hub cache (huggingface_hub's HF_HUB_CACHE, without importing it)."""
    env = os.environ if env is None else env
    explicit = env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    home = env.get("HF_HOME") or os.path.join(
        env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "huggingface"
    )
    return Path(home).expanduser() / "hub"


def cached_commit(
    repo: str, revision: str | None = None, repo_type: str = "model", cache: Path | None = None
) -> str | None:
    """The commit `revision` (None: main) of `repo` points to in the local hub cache: the ref
    file a download wrote, or the snapshot folder of a commit asked for by its hash."""
    folder = (cache or hub_cache()) / f"{repo_type}s--{repo.replace('/', '--')}"
    if is_commit(revision):
        return revision if (folder / "snapshots" / revision).is_dir() else None
    try:
        sha = (folder / "refs" / (revision or "main")).read_text(encoding="utf-8").strip()
    except (OSError, ValueError):
        return None
    return sha if is_commit(sha) else None


def online_commit(repo: str, revision: str | None = None, repo_type: str = "model") -> str | None:
    """The commit `revision` of `repo` is at on the hub now (None offline or unanswered)."""
    if hub_offline():
        return None
    try:
        from huggingface_hub import HfApi

        sha = (
            HfApi()
            .repo_info(repo, repo_type=repo_type, revision=revision, timeout=HUB_TIMEOUT_S)
            .sha
        )
    except Exception:  # noqa: BLE001  unreachable, gated, unknown revision: nothing to record
        return None
    return sha if is_commit(sha) else None


def resolve_commit(
    repo: str, revision: str | None = None, repo_type: str = "model", *, loaded: str | None = None
) -> str | None:
    """The commit a load of `repo` at `revision` used: `loaded` (what the loader reported),
    else the local cache's, else the hub's now; None when none is known."""
    if repo_type not in REPO_TYPES:
        raise ValueError(f"repo_type={repo_type!r}: one of {', '.join(REPO_TYPES)}")
    if is_commit(loaded):
        return loaded
    if is_commit(revision):
        return revision
    return cached_commit(repo, revision, repo_type) or online_commit(repo, revision, repo_type)


def hub_entry(
    repo: str,
    requested: str | None,
    repo_type: str = "model",
    *,
    loaded: str | None = None,
    **where: Any,
) -> dict[str, Any]:
    """The manifest entry of a hub load: {"repo", "requested", "resolved"} (+ `where`, e.g. a
    dataset's config and split)."""
    return {
        "repo": repo,
        **where,
        "requested": requested,
        "resolved": resolve_commit(repo, requested, repo_type, loaded=loaded),
    }


def snapshot_commit(path: str | os.PathLike) -> str | None:
    """The commit of a local folder inside a hub cache (`.../snapshots/<commit>[/...]`)."""
    parts = Path(path).expanduser().parts
    for i, part in enumerate(parts[:-1]):
        if part == "snapshots" and is_commit(parts[i + 1]):
            return parts[i + 1]
    return None


def package_entry(module: str) -> dict[str, Any]:
    """{"source": "bundled", "package": <distribution>, "version": ...} of a module's package."""
    from importlib import metadata

    dists = metadata.packages_distributions().get(module.split(".")[0]) or [module]
    try:
        version = metadata.version(dists[0])
    except metadata.PackageNotFoundError:
        version = None
    return {"source": "bundled", "package": dists[0], "version": version}


def unpinned(entry: dict[str, Any] | None) -> bool:
    """Whether a manifest entry is a hub load at the moving default (requested null)."""
    return bool(entry) and "repo" in entry and entry.get("requested") is None


def loaded_commit(model: Any) -> str | None:
    """The commit a loaded transformers or sentence-transformers model came from (the
    `_commit_hash` transformers sets on a config it read from a hub cache), None when none says."""
    configs = [getattr(model, "config", None)]
    modules = getattr(model, "modules", None)
    if callable(modules):  # a sentence-transformers model: its transformer module's config
        configs += [getattr(m, "config", None) for m in modules()]
    return next(
        (c._commit_hash for c in configs if is_commit(getattr(c, "_commit_hash", None))), None
    )


def checkpoint_entry(
    source: str, requested: str | None = None, *, loaded: str | None = None
) -> dict[str, Any]:
    """The manifest entry of an auxiliary checkpoint: a hub id as hub_entry (`loaded`: the
    commit the loader reported), a local folder or file as {"source": "local", "path"} (with
    `resolved` when it lies in a hub cache's snapshot)."""
    if is_hub_id(source):
        return hub_entry(source, requested, "model", loaded=loaded)
    commit = snapshot_commit(source) or (loaded if is_commit(loaded) else None)
    return {"source": "local", "path": str(source), **({"resolved": commit} if commit else {})}


# role -> the models noted in it, while a stage runs (None: nobody records)
_MODELS: ContextVar[dict[str, list[Any]] | None] = ContextVar("auxiliary_models", default=None)


@contextmanager
def recording_models() -> Iterator[dict[str, list[Any]]]:
    """The auxiliary models handed out inside the `with` body, by role ({"nli_model": [judge]});
    `model_revisions` reads their entries once the body is done (a model loads lazily)."""
    seen: dict[str, list[Any]] = {}
    token = _MODELS.set(seen)
    try:
        yield seen
    finally:
        _MODELS.reset(token)


def note_model(role: str, model: Any) -> Any:
    """Note that `model` (it has `revision_entry()`) serves as `role`; returns `model`."""
    seen = _MODELS.get()
    if seen is not None and not any(m is model for m in seen.setdefault(role, [])):
        seen[role].append(model)
    return model


def model_revisions(seen: dict[str, list[Any]]) -> dict[str, Any]:
    """{role: the entry of the checkpoint it loaded} (several distinct ones: a list)."""
    out: dict[str, Any] = {}
    for role, models in seen.items():
        entries = []
        for model in models:
            if (entry := model.revision_entry()) not in entries:
                entries.append(entry)
        if entries:
            out[role] = entries[0] if len(entries) == 1 else entries
    return out
