"""Loaders: the real datasets through HuggingFace `datasets` (or, for MAQA and the CNN/DM
benchmark, their repositories' released files), and the bundled JSONL sets.

Every loader has the signature `loader(spec, select, **options) -> list[record]`:
`select(n)` returns the row indices to keep (see `registry.subset_indices`), so only the
selected rows are converted. `datasets` is imported inside the functions that use it.

Local stand-ins: every hub loader accepts `data_files=` (a path, a list of paths, or a
{split: paths} dict; parquet, json/jsonl or csv) and then reads those files with
`datasets.load_dataset("parquet"|"json"|"csv", data_files=...)` through the same conversion
code; only the hub download is skipped.

Sources: inside `recording_sources()`, every loader notes where its rows came from (a hub
dataset: its repo, config, split, the revision asked for and the commit used; local files; a
bundled file; a released file, MAQA's JSON or the CNN/DM benchmark's, with its SHA-256 and
origin: `file_provenance`), which the generate stage records in its manifests
(pipeline/runtime/revisions.py) and the report names under the tables that use it.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.data import records as R
from pipeline.runtime.errors import PipelineError
from pipeline.runtime.revisions import hub_entry, is_commit

if TYPE_CHECKING:  # pragma: no cover
    from pipeline.data.catalog import DatasetSpec

log = logging.getLogger(__name__)

BUNDLED_DIR = Path(__file__).resolve().parent / "bundled"
Selector = Callable[[int], list[int]]

_BUILDERS = {".parquet": "parquet", ".json": "json", ".jsonl": "json", ".csv": "csv"}


class DatasetUnavailableError(PipelineError, RuntimeError):
    """A real dataset could not be fetched (offline, hub unreachable, file missing)."""


_SOURCES: ContextVar[list[dict[str, Any]] | None] = ContextVar("dataset_sources", default=None)


@contextmanager
def recording_sources() -> Iterator[list[dict[str, Any]]]:
    """The sources the loaders note inside the `with` body, in load order: a hub split as
    {"repo", "config", "split", "requested", "resolved"} (resolved: the commit used), local
    files as {"source": "files", ...}, a bundled set as {"source": "bundled", ...}."""
    seen: list[dict[str, Any]] = []
    token = _SOURCES.set(seen)
    try:
        yield seen
    finally:
        _SOURCES.reset(token)


def recording() -> bool:
    return _SOURCES.get() is not None


def note_source(entry: dict[str, Any]) -> None:
    """Note where a loader's rows came from (nothing outside `recording_sources`)."""
    seen = _SOURCES.get()
    if seen is not None:
        seen.append(entry)


def loaded_commit(ds: Any) -> str | None:
    """The hub commit a `datasets` split was built from: its cache folder
    (<cache>/<name>/<config>/<version>/<commit>/...arrow) is named by the commit."""
    try:
        folder = Path(ds.cache_files[0]["filename"]).parent.name
    except (AttributeError, IndexError, KeyError, TypeError):
        return None
    return folder if is_commit(folder) else None


def plain_data_files(data_files: Any, split: str) -> dict[str, str | list[str]]:
    """`data_files` as {split: path or [paths]} of plain str (Hydra passes List/DictConfig)."""

    def files(value: Any) -> str | list[str]:
        if isinstance(value, str | os.PathLike):
            return os.fspath(value)
        if isinstance(value, Sequence):
            return [os.fspath(v) for v in value]
        raise TypeError(f"data_files entries must be paths or lists of paths, got {value!r}")

    if isinstance(data_files, Mapping):
        return {str(k): files(v) for k, v in data_files.items()}
    return {split: files(data_files)}


def _builder_for(data_files: Any) -> str:
    """The `datasets` packaged builder for local files, from their extension."""
    if isinstance(data_files, Mapping):
        first = next(iter(data_files.values()))
    else:
        first = data_files
    if isinstance(first, list | tuple):
        first = first[0]
    name = str(first).lower().removesuffix(".gz")
    for ext, builder in _BUILDERS.items():
        if name.endswith(ext):
            return builder
    raise ValueError(
        f"cannot tell the format of data_files={data_files!r}; "
        f"use files ending in one of {sorted(_BUILDERS)}"
    )


def _unavailable(
    spec: DatasetSpec, source: str, exc: Exception, *, local: bool = False
) -> DatasetUnavailableError:
    offline = {
        k: os.environ[k] for k in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE") if k in os.environ
    }
    cause = (
        "A local file is missing."
        if local
        else "The hub is unreachable or offline mode is on "
        f"({offline or 'no offline variables set'})."
    )
    fixes = []
    if spec.offline_alternative:
        fixes.append(f"use dataset={spec.offline_alternative} (bundled, works offline)")
    fixes.append("pass data_files=/path/to/a/local/copy in the original format (parquet/json/csv)")
    return DatasetUnavailableError(
        f"Could not load dataset {spec.name!r} from {source} "
        f"({type(exc).__name__}: {str(exc)[:300]}). {cause} Either {', or '.join(fixes)}."
    )


# size: the options every hub dataset shares, as keywords: the hub loaders pass their `**hub`
# (the dataset config's keys) through unchanged; the body picks local files or the hub
def load_hf_split(
    spec: DatasetSpec,
    *,
    path: str,
    config: str | None,
    split: str,
    data_files: Any = None,
    cache_dir: str | None = None,
    revision: str | None = None,
    field: str | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> Any:
    """One split as a `datasets.Dataset`: from the hub, or from local `data_files` (whose noted
    source gets `provenance`, e.g. a released file's SHA-256)."""
    if data_files is not None:
        return _load_files_split(spec, data_files, split, cache_dir, field, provenance)
    return _load_hub_split(spec, path, config, split, cache_dir, revision)


def _load_files_split(
    spec: DatasetSpec,
    data_files: Any,
    split: str,
    cache_dir: str | None,
    field: str | None,
    provenance: Mapping[str, Any] | None,
) -> Any:
    """`load_hf_split` from local files, by the `datasets` builder of their extension."""
    import datasets  # heavy: imported only when a real dataset is loaded

    kwargs: dict[str, Any] = {"cache_dir": cache_dir}
    files = plain_data_files(data_files, split)
    if split not in files:
        raise ValueError(f"data_files has splits {sorted(files)}, but split={split!r} was asked")
    builder = _builder_for(files)
    if field is not None:
        kwargs["field"] = field
    source = f"local files {files!r}"
    try:
        ds = datasets.load_dataset(builder, data_files=dict(files), split=split, **kwargs)
    except FileNotFoundError as exc:
        raise _unavailable(spec, source, exc, local=True) from exc
    note_source({"source": "files", "data_files": files, "split": split, **(provenance or {})})
    return ds


def _load_hub_split(
    spec: DatasetSpec,
    path: str,
    config: str | None,
    split: str,
    cache_dir: str | None,
    revision: str | None,
) -> Any:
    """`load_hf_split` from the hub (or the datasets cache, offline), its commit noted."""
    import datasets  # heavy: imported only when a real dataset is loaded

    source = f"the hub ({path!r}, config={config!r}, split={split!r})"
    try:
        ds = datasets.load_dataset(
            path, config, split=split, revision=revision, cache_dir=cache_dir
        )
    except (ConnectionError, OSError, FileNotFoundError) as exc:
        raise _unavailable(spec, source, exc) from exc
    except Exception as exc:  # datasets/huggingface_hub raise many types when the hub is absent
        if type(exc).__name__ in {
            "DatasetNotFoundError",
            "LocalEntryNotFoundError",
            "OfflineModeIsEnabled",
        }:
            raise _unavailable(spec, source, exc) from exc
        raise
    loaded = loaded_commit(ds)
    if is_commit(revision) and loaded is not None and loaded != revision:
        # offline, `datasets` reads its newest cached build whatever the revision asked
        log.warning(
            "%s: revision %s was asked, but the split was built from commit %s (an "
            "offline load from the datasets cache?)",
            spec.name,
            revision,
            loaded,
        )
    if recording():  # the commit used: resolved only when someone records it
        note_source(hub_entry(path, revision, "dataset", loaded=loaded, config=config, split=split))
    return ds


def _rows(ds: Any, select: Selector) -> list[tuple[int, dict[str, Any]]]:
    """(original index, row) for the selected rows only."""
    indices = select(len(ds))
    subset = (
        ds.select(indices) if len(indices) != len(ds) or indices != list(range(len(ds))) else ds
    )
    return list(zip(indices, subset, strict=True))


# --- hub loaders ------------------------------------------------------------------------------
# Each takes its dataset's field options explicitly and passes the options every hub dataset
# shares (path, config, split, data_files, cache_dir, revision) through `**hub` to
# `load_hf_split`.


def load_triviaqa(spec: DatasetSpec, select: Selector, **hub: Any) -> list[dict[str, Any]]:
    """TriviaQA (mandarjoshi/trivia_qa, rc.nocontext, validation)."""
    return [
        R.triviaqa_record(row, spec.name, i) for i, row in _rows(load_hf_split(spec, **hub), select)
    ]


# size: a dataset loader's options are keywords that mirror the dataset config's keys one to
# one (catalog: `loader(spec, select, **options)`); the body is short
def load_maqa(
    spec: DatasetSpec,
    select: Selector,
    *,
    path: str | None,
    field: str | None = None,
    question_field: str = "question",
    answers_field: str = "answers",
    data_files: Any = None,
    cache_dir: str | None = None,
    sha256: str | None = None,
    commit: str | None = None,
) -> list[dict[str, Any]]:
    """MAQA from the official repository's JSON file (a local path or a URL, via `path=`).

    The JSON may be a list of objects, JSON lines, or an object whose `field` holds the list.
    With `sha256`, a local file with any other content is refused (the pinned release);
    `commit`: the repository commit the pinned file came from (recorded, not checked: the
    SHA-256 is).
    """
    source = data_files if data_files is not None else path
    if source is None:
        raise DatasetUnavailableError(
            f"Dataset {spec.name!r} needs the MAQA JSON file: pass path=/local/file.json or a URL "
            "to the JSON in https://github.com/YangYongJin/MAQA-Official-Repo (2,042 questions). "
            f"Use dataset={spec.offline_alternative} (bundled, works offline) instead."
        )
    if sha256 is not None:
        check_sha256(spec.name, source, sha256)
    ds = load_hf_split(
        spec,
        path="json",
        config=None,
        split="train",
        data_files=source,
        cache_dir=cache_dir,
        field=field,
        provenance=file_provenance(source, sha256, commit) if recording() else None,
    )
    return [
        R.maqa_record(row, spec.name, i, question_field, answers_field)
        for i, row in _rows(ds, select)
    ]


def file_provenance(
    source: Any, pinned: str | None = None, commit: str | None = None
) -> dict[str, Any]:
    """What traces a released data file: its SHA-256, whether a pin checked it (`pinned`: the
    pinned hash, None: unpinned), and where it came from: the `<file>.source.json` that
    `make paper-assets` writes beside it (repository, commit, file) when it describes these very
    bytes, else the pin's `commit`. Empty for a URL or several files (nothing local to hash)."""
    from pipeline.artifacts.store import file_sha256

    if not isinstance(source, (str, os.PathLike)) or str(source).startswith(
        ("http://", "https://")
    ):
        return {}
    path = Path(os.fspath(source)).expanduser()
    if not path.is_file():
        return {}
    digest = file_sha256(path)
    out: dict[str, Any] = {"sha256": digest, "pinned": pinned is not None}
    try:
        origin = json.loads(Path(f"{path}.source.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        origin = None
    if isinstance(origin, dict) and origin.get("sha256") == digest:
        out.update({k: origin[k] for k in ("repository", "commit", "file") if k in origin})
    elif commit is not None:
        out["commit"] = commit
    return out


def check_sha256(name: str, source: Any, expected: str) -> None:
    """Refuse a local data file whose SHA-256 is not `expected` (the pinned release)."""
    import hashlib

    path = Path(os.fspath(source)).expanduser()
    if not path.is_file():
        raise DatasetUnavailableError(
            f"dataset {name!r}: sha256 is pinned, so the data must be a local file; {path} is not "
            "one (run `make paper-assets`)"
        )
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != expected.lower():
        raise DatasetUnavailableError(
            f"dataset {name!r}: {path} has SHA-256 {digest}, not the pinned {expected}: it is "
            "another release of the data. Fetch the pinned one (`make paper-assets`) or, to use "
            "this file knowingly, set dataset.overrides.sha256=null"
        )


def load_maqa_star(
    spec: DatasetSpec,
    select: Selector,
    *,
    question_field: str = "question",
    answers_field: str = "answers",
    **hub: Any,
) -> list[dict[str, Any]]:
    """MAQA* (ttomov/maqa_star, train): p* renormalised to sum to 1 when it does not."""
    out, rescaled = [], 0
    for i, row in _rows(load_hf_split(spec, **hub), select):
        record, was_rescaled = R.maqa_star_record(row, spec.name, i, question_field, answers_field)
        out.append(record)
        rescaled += was_rescaled
    if rescaled:
        log.warning(
            "%s: renormalised p* of %d/%d questions (did not sum to 1 within %g)",
            spec.name,
            rescaled,
            len(out),
            R.PROBABILITY_TOLERANCE,
        )
    return out


def load_gsm8k(spec: DatasetSpec, select: Selector, **hub: Any) -> list[dict[str, Any]]:
    """GSM8K (openai/gsm8k, main, test): question -> the numeric final answer."""
    return [
        R.gsm8k_record(row, spec.name, i) for i, row in _rows(load_hf_split(spec, **hub), select)
    ]


def load_wmt19(
    spec: DatasetSpec,
    select: Selector,
    *,
    source_lang: str = "fi",
    target_lang: str = "en",
    **hub: Any,
) -> list[dict[str, Any]]:
    """WMT19 (wmt/wmt19, fi-en, validation)."""
    return [
        R.wmt19_record(row, spec.name, i, source_lang, target_lang)
        for i, row in _rows(load_hf_split(spec, **hub), select)
    ]


CNN_DM_SOURCES = ("benchmark", "hub")
BENCHMARK_REPO = "https://github.com/Tiiiger/benchmark_llm_summarization"
BENCHMARK_FILE = "writer_summaries.json"
# The options that only the hub source reads: with source=benchmark they must keep their defaults.
_HUB_ONLY = (
    "path",
    "config",
    "split",
    "data_files",
    "revision",
    "article_field",
    "summary_field",
    "id_field",
)


def load_cnn_dm(
    spec: DatasetSpec,
    select: Selector,
    *,
    source: str = "hub",
    benchmark_file: str | None = None,
    article_field: str = "article",
    summary_field: str = "highlights",
    id_field: str | None = "id",
    **hub: Any,
) -> list[dict[str, Any]]:
    """CNN/DailyMail summarisation from one of two sources (`source=`):

    - `benchmark` (the paper's, conf/dataset/cnn_dm.yaml): the CNN/DM-based benchmark of Zhang
      et al. 2023 in its released format, `benchmark_file` = the repository's
      writer_summaries.json (see `load_writer_summaries`);
    - `hub`: abisee/cnn_dailymail 3.0.0 test (article -> highlights), or local files in that
      format via `data_files`; the field options rename its columns. `benchmark_file` is ignored.
    """
    if source not in CNN_DM_SOURCES:
        raise ValueError(
            f"dataset {spec.name!r}: source must be one of {list(CNN_DM_SOURCES)}, got {source!r}"
        )
    if source == "benchmark":
        given = {
            "article_field": article_field,
            "summary_field": summary_field,
            "id_field": id_field,
            **hub,
        }
        changed = sorted(
            k for k in _HUB_ONLY if k in given and given[k] != spec.defaults.get(k, given[k])
        )
        if changed:
            raise TypeError(
                f"dataset {spec.name!r} with source=benchmark reads only benchmark_file; "
                f"{changed} are options of source=hub (set source=hub, or point "
                "benchmark_file at a file in the benchmark's format)"
            )
        return load_writer_summaries(spec, select, benchmark_file, cache_dir=hub.get("cache_dir"))
    return [
        R.cnn_dm_record(row, spec.name, i, article_field, summary_field, id_field)
        for i, row in _rows(load_hf_split(spec, **hub), select)
    ]


def load_writer_summaries(
    spec: DatasetSpec,
    select: Selector,
    benchmark_file: str | os.PathLike | None,
    cache_dir: str | None = None,
) -> list[dict[str, Any]]:
    """The benchmark's writer_summaries.json: one record per article (in the order articles
    first appear), its first writer summary as the reference; `select` picks articles.

    The file is a JSON list of {article_id, article, summary} objects, one per freelance-writer
    summary (JSON lines are read too). `cache_dir` is accepted for symmetry and unused.
    """
    fixes = (
        f"run `make paper-assets` (downloads {BENCHMARK_FILE} from {BENCHMARK_REPO} into "
        "<cache_dir>/data/cnn_dm/), or set dataset.overrides.benchmark_file=<a copy of it>; "
        "dataset.overrides.source=hub reads abisee/cnn_dailymail instead, and "
        f"dataset={spec.offline_alternative or 'cnn_dm_bundled'} works offline"
    )
    if benchmark_file is None:
        raise DatasetUnavailableError(
            f"Dataset {spec.name!r} with source=benchmark needs benchmark_file: {fixes}."
        )
    path = Path(os.fspath(benchmark_file)).expanduser()
    if not path.is_file():
        raise DatasetUnavailableError(
            f"Dataset {spec.name!r}: benchmark file {path} not found. To get it, {fixes}."
        )
    text = path.read_text(encoding="utf-8")
    try:
        rows = json.loads(text)
    except json.JSONDecodeError:
        try:  # JSON lines (the benchmark's README names the file writer_summaries.jsonl)
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise R.DatasetFormatError(
                f"{path}: neither a JSON list nor JSON lines ({exc}); expected the benchmark's "
                f"{BENCHMARK_FILE} ({BENCHMARK_REPO})"
            ) from exc
    if not isinstance(rows, list):
        raise R.DatasetFormatError(
            f"{path}: expected a JSON list of {list(R.WRITER_SUMMARY_COLUMNS)} objects (the "
            f"benchmark's {BENCHMARK_FILE}), got a JSON {type(rows).__name__}"
        )
    if recording():  # the benchmark is pinned at its fetch (make paper-assets), not here
        note_source(
            {
                "source": "file",
                "path": str(path),
                **{k: v for k, v in file_provenance(path).items() if k != "pinned"},
            }
        )
    articles = R.group_writer_summaries(rows, str(path))
    if not articles:
        raise R.DatasetFormatError(f"{path}: no entries")
    return [R.writer_summary_record(*articles[i], spec.name) for i in select(len(articles))]


# --- bundled ----------------------------------------------------------------------------------


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Records from a JSONL file in the DATASET schema (blank lines skipped)."""
    if not path.is_file():
        raise FileNotFoundError(f"bundled dataset file not found: {path}")
    out = []
    with path.open(encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise R.DatasetFormatError(f"{path}:{line_no}: invalid JSON ({exc})") from exc
    return out


def load_bundled(
    spec: DatasetSpec,
    select: Selector,
    *,
    path: str | None = None,
    file: str | None = None,
) -> list[dict[str, Any]]:
    """A bundled JSONL set (`bundled/<file>`), or any JSONL in the same schema via `path=`."""
    source = Path(path) if path is not None else BUNDLED_DIR / (file or f"{spec.name}.jsonl")
    rows = read_jsonl(source)
    if recording():
        from pipeline.artifacts.store import file_sha256

        note_source(
            {
                "source": "bundled" if path is None else "file",
                ("file" if path is None else "path"): source.name if path is None else str(source),
                "sha256": file_sha256(source),
            }
        )
    out = []
    for i in select(len(rows)):
        row = rows[i]
        missing = [c for c in R.COLUMNS if c not in row and c != "dataset"]
        if missing:
            raise R.DatasetFormatError(f"{source} line {i + 1}: missing columns {missing}")
        out.append(
            R.make_record(
                prompt_id=row["prompt_id"],
                dataset=spec.name,
                question=row["question"],
                answers=[list(a) for a in row["answers"]],
                probabilities=[float(p) for p in row["probabilities"]],
                reference_text=row["reference_text"],
            )
        )
    return out
