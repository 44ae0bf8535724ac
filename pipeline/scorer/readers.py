"""Readers for `pipeline.score`: a user's own sampled responses -> one `ScorePrompt` per prompt.

Three input formats (docs/score.md):
- ``jsonl``: one JSON object per line, one line per prompt, its M responses as a list of strings;
- ``parquet``: the same columns in a parquet file;
- ``lm-eval``: lm-evaluation-harness ``samples_<task>_<date>.jsonl`` written by its
  EvaluationTracker with ``--log_samples`` (tasks run with ``repeats: M``).

Field names are found by a short list of usual names unless given; a dotted path reads nested
fields (``doc.question``).

Errors come in two kinds (docs/score.md, "When the input has problems"):
- a problem of one row (invalid JSON or UTF-8 on that line, a field of the wrong type, no
  responses, bad log-probs, an odd or too long id, nesting deeper than `MAX_DEPTH`) becomes a
  `RowProblem` (line or row, field, what is wrong, how to fix it); the row is skipped and the
  others are read (`read_input(..., strict=True)` raises for the first one instead);
- a problem of the file or the options (missing or unreadable file, no usable row, a field no
  row has, duplicate ids) raises `ScoreInputError` with a one-line message naming the fix.
Lone UTF-16 surrogates in strings (``"\\ud800"`` escapes without their pair, as truncated LLM
output has them) cannot be written as UTF-8 anywhere downstream: they are replaced by U+FFFD
when read, and counted. Only the stdlib, pandas and pyarrow (parquet) are used.
"""

from __future__ import annotations

import ast
import gzip
import hashlib
import io
import json
import logging
import math
import os
import re
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("pipeline")

FORMATS = ("auto", "jsonl", "parquet", "lm-eval")

# Names tried in order when a field is not given explicitly.
ID_FIELDS = ("prompt_id", "id", "doc_id", "qid", "question_id")
QUESTION_FIELDS = ("question", "prompt", "query", "input", "problem")
RESPONSES_FIELDS = ("responses", "samples", "generations", "outputs", "completions")
LOGPROBS_FIELDS = ("logprobs", "sample_logprobs", "log_probs")
REFERENCE_FIELDS = ("reference", "references", "answers", "answer", "target")
# lm-evaluation-harness: where the question sits inside `doc` for common tasks.
LM_EVAL_QUESTION_FIELDS = (
    "question",
    "query",
    "problem",
    "input",
    "prompt",
    "text",
    "sentence",
    "source",
    "article",
    "context",
)

MAX_ID_CHARS = 1000  # longer ids are a mistake (a whole text, a number gone wrong)
MAX_DEPTH = 100  # JSON nesting a row may have; real inputs have < 10 levels
REPLACEMENT = "\ufffd"

_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_UTF8_BOM = b"\xef\xbb\xbf"


class ScoreInputError(ValueError):
    """The input file or the options do not fit: the message names the problem and the fix."""


class ScoreRowError(ScoreInputError):
    """One row (prompt) does not fit. Raised by the per-row checks; `read_input` turns it into a
    `RowProblem` and skips the row (or, with strict=True, stops with it)."""

    def __init__(self, field: str | None, problem: str, fix: str, subject: str = ""):
        self.field, self.problem, self.fix = field, problem, fix
        super().__init__(f"{subject + ': ' if subject else ''}{problem}; {fix}")


@dataclass(frozen=True)
class RowProblem:
    """A row that was skipped: where it is, which field, what is wrong and how to fix it.

    `line` is the 1-based line of a JSONL / lm-eval file (as editors count, blank lines
    included); `row` the 0-based row of a parquet file (as pandas' ``iloc``)."""

    line: int | None
    row: int | None
    field: str | None
    problem: str
    fix: str
    id: str | None = None

    @property
    def where(self) -> str:
        return f"line {self.line}" if self.line is not None else f"row {self.row}"

    @property
    def position(self) -> int:
        return self.line if self.line is not None else (self.row or 0)

    def message(self) -> str:
        return f"{self.where}: {self.problem}; {self.fix}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "row": self.row,
            "id": self.id,
            "field": self.field,
            "problem": self.problem,
            "fix": self.fix,
        }


@dataclass
class FieldNames:
    """Which input fields hold what; None = try the usual names (see the *_FIELDS tuples)."""

    id: str | None = None
    question: str | None = None
    responses: str | None = None
    reference: str | None = None
    logprobs: str | None = None
    lm_eval_filter: str | None = None  # lm-eval files with several filters: which one to keep

    def as_dict(self) -> dict[str, str | None]:
        return dict(self.__dict__)


@dataclass
class ScorePrompt:
    """One prompt with its sampled responses, as read from the input."""

    prompt_id: str
    question: str
    responses: list[str]
    logprobs: list[float] | None = None
    reference: Any = None  # raw reference value; None when the input gives none
    # each response's finish reason ("stop", "length": cut by the token limit); None: unknown
    finish_reasons: list[str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    line: int | None = None  # where it was read: JSONL line (1-based) or parquet row (0-based)
    row: int | None = None

    @property
    def where(self) -> str:
        return f"line {self.line}" if self.line is not None else f"row {self.row}"


@dataclass
class ScoreInput:
    """What `read_input` read: the good prompts, the skipped rows and what was repaired."""

    prompts: list[ScorePrompt]
    format: str
    skipped: list[RowProblem]
    n_rows: int  # rows (non-blank lines) in the file, good and bad
    replaced_surrogates: dict[str, int] = field(default_factory=dict)  # where -> count


def format_problems(problems: Sequence[RowProblem], limit: int = 10, indent: str = "  ") -> str:
    """The first `limit` problems, one per line, plus how many more there are."""
    lines = [indent + p.message() for p in problems[:limit]]
    if len(problems) > limit:
        lines.append(f"{indent}... and {len(problems) - limit} more")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# raw rows


class _HugeInt(str):
    """An integer literal with more digits than Python converts (sys.get_int_max_str_digits()):
    kept as its digit string, so it can only fail the row that uses it (a 5001-digit id is
    "too long"), never the reader."""


def _parse_int(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        return _HugeInt(text)


@dataclass
class _Raw:
    """One parsed input row and where it came from; `index` = 0-based count of non-blank rows
    (the prompt id when the file has none)."""

    data: dict
    index: int
    line: int | None = None
    row: int | None = None

    @property
    def where(self) -> str:
        return f"line {self.line}" if self.line is not None else f"row {self.row}"


class _Cleaner:
    """Walks a parsed row: lone surrogates -> U+FFFD (counted), bytes decoded with replacement,
    nesting deeper than MAX_DEPTH is a row problem (recursion stays bounded by MAX_DEPTH)."""

    def __init__(self) -> None:
        self.replaced = 0

    def text(self, s: str) -> str:
        if type(s) is str and _SURROGATE.search(s):
            s, n = _SURROGATE.subn(REPLACEMENT, s)
            self.replaced += n
        return s

    def __call__(self, value: Any, path: str = "", depth: int = 0) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, (bytes, bytearray)):
            return bytes(value).decode("utf-8", errors="replace")
        if isinstance(value, (dict, list, tuple)):
            if depth >= MAX_DEPTH:
                raise ScoreRowError(
                    path.split(".")[0] or None,
                    f"nested more than {MAX_DEPTH} levels deep"
                    + (f" (in field {path.split('.')[0]!r})" if path else ""),
                    "flatten that field: a row holds a prompt, its responses "
                    "(a list of strings) and a reference",
                )
            if isinstance(value, dict):
                return {
                    self.text(str(k)): self(v, f"{path}.{k}" if path else str(k), depth + 1)
                    for k, v in value.items()
                }
            return [
                self(v, f"{path}.{i}" if path else str(i), depth + 1) for i, v in enumerate(value)
            ]
        return value


def clean_value(value: Any) -> Any:
    """`value` with lone surrogates replaced by U+FFFD and bytes decoded; ScoreRowError when it
    is nested deeper than MAX_DEPTH. For values decoded from inside a field (a JSON string)."""
    return _Cleaner()(value)


def _problem(
    raw_or_line: _Raw | tuple[int | None, int | None], exc: ScoreRowError, pid: str | None = None
) -> RowProblem:
    line, row = (
        (raw_or_line.line, raw_or_line.row) if isinstance(raw_or_line, _Raw) else raw_or_line
    )
    return RowProblem(line=line, row=row, field=exc.field, problem=exc.problem, fix=exc.fix, id=pid)


def _format_from_name(path: Path, fmt: str) -> str:
    """parquet / jsonl / lm-eval from --format, else 'parquet' or 'json' (JSON lines: jsonl or
    lm-eval, decided from the first good row) from the file name."""
    if fmt not in FORMATS:
        raise ScoreInputError(f"--format {fmt!r} is not known; choose one of {', '.join(FORMATS)}")
    if fmt != "auto":
        return fmt
    name = path.name.lower()
    if name.endswith((".parquet", ".pq")):
        return "parquet"
    if not name.endswith((".jsonl", ".json", ".ndjson", ".jsonl.gz", ".json.gz", ".ndjson.gz")):
        raise ScoreInputError(
            f"{path}: cannot tell the format from the file name; pass --format jsonl, parquet "
            "or lm-eval"
        )
    return "json"


def _looks_lm_eval(rows: Sequence[_Raw]) -> bool:
    first = rows[0].data if rows else {}
    return "doc_id" in first and ("resps" in first or "filtered_resps" in first)


def detect_format(path: Path, fmt: str = "auto") -> str:
    """The input format: the given one, else from the suffix and (for JSONL) the first good row."""
    kind = _format_from_name(Path(path), fmt)
    if kind != "json":
        return kind
    return "lm-eval" if _looks_lm_eval(_read_jsonl(Path(path), [], {}, limit=1)) else "jsonl"


class _HashingFile(io.RawIOBase):
    """A file read through: every byte it hands out goes into `digest` (the scorer's key is the
    hash of what was read, not of the file as it is before or after: docs/score.md)."""

    def __init__(self, path: Path, digest) -> None:
        self._fh, self.digest = path.open("rb", buffering=0), digest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self._fh.readinto(buffer)
        if n:
            self.digest.update(memoryview(buffer)[:n])
        return n

    def close(self) -> None:
        self._fh.close()
        super().close()


# path -> its bytes, read once: a whole read (parquet, or a file read whole) parses these, so
# what is parsed is exactly what was hashed (`InputChunks._whole`), however the file changes
_SNAPSHOTS: dict[Path, bytes] = {}


@contextmanager
def _snapshot(path: Path, data: bytes):
    _SNAPSHOTS[path] = data
    try:
        yield
    finally:
        _SNAPSHOTS.pop(path, None)


def _open_binary(path: Path, digest=None):
    """`path` for reading bytes (a gzip file decompressed); with `digest`, every byte read from
    the disk also goes into it. A path with a snapshot is read from the snapshot."""
    snapshot = _SNAPSHOTS.get(path)
    if snapshot is not None:
        magic = snapshot[:4]
    else:
        with path.open("rb") as fh:
            magic = fh.read(4)

    def raw():
        if snapshot is not None:
            return io.BytesIO(snapshot)
        return (
            path.open("rb")
            if digest is None
            else io.BufferedReader(_HashingFile(path, digest), 1 << 20)
        )

    if magic[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=raw(), mode="rb")
    if magic == b"PAR1":
        raise ScoreInputError(
            f"{path}: this is a parquet file (it starts with PAR1), not JSON "
            "Lines; pass --format parquet (or name it .parquet)"
        )
    if magic[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise ScoreInputError(
            f"{path}: this is UTF-16 text (it starts with a UTF-16 byte-order "
            "mark); save it as UTF-8, e.g. iconv -f utf-16 -t utf-8 IN > OUT"
        )
    return raw()


def _read_jsonl(
    path: Path, problems: list[RowProblem], replaced: dict[str, int], limit: int | None = None
) -> list[_Raw]:
    """Good rows of a JSON Lines file; each bad line becomes a RowProblem (line number, what)."""
    rows: list[_Raw] = []
    for chunk in _jsonl_chunks(path, problems, replaced, limit=limit):
        rows += chunk
    return rows


def _jsonl_chunks(
    path: Path,
    problems: list[RowProblem],
    replaced: dict[str, int],
    chunk_rows: int | None = None,
    limit: int | None = None,
    counted: list[int] | None = None,
    digest=None,
):
    """The good rows of a JSON Lines file, a list per `chunk_rows` non-blank lines (None: one
    list); each bad line becomes a RowProblem; `limit` stops after that many good rows;
    `counted[0]` is kept at the non-blank lines read so far; `digest` takes every byte read."""
    rows: list[_Raw] = []
    index = 0
    try:
        with _open_binary(path, digest) as fh:
            for lineno, raw in enumerate(fh, start=1):
                raw = raw.removeprefix(_UTF8_BOM)  # the file's first line, or a joined file's
                if not raw.strip():
                    continue
                index += 1
                row = _parse_line(raw, lineno, index - 1, problems, replaced)
                if row is not None:
                    rows.append(row)
                    if limit is not None and len(rows) >= limit:
                        break
                if chunk_rows is not None and index % chunk_rows == 0:
                    if counted is not None:
                        counted[0] = index
                    yield rows
                    rows = []
    except ScoreInputError:
        raise
    except (OSError, EOFError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise ScoreInputError(f"input file {path} does not exist; check the path") from None
        raise ScoreInputError(
            f"{path}: cannot be read as JSON Lines: {getattr(exc, 'strerror', None) or exc}"
        ) from None
    if counted is not None:
        counted[0] = index
    if rows or chunk_rows is None or index % chunk_rows:
        yield rows


def _parse_line(
    raw: bytes, lineno: int, index: int, problems: list[RowProblem], replaced: dict[str, int]
) -> _Raw | None:
    """Line `lineno` of a JSON Lines file as a row (cleaned where it must be), or None with
    its problem appended to `problems`."""
    where = (lineno, None)
    try:
        text = _utf8_text(raw)
        data = _json_object(text)
    except ScoreRowError as exc:
        problems.append(_problem(where, exc))
        return None
    if text.count("[") + text.count("{") <= MAX_DEPTH and not _SURROGATE_ESCAPE.search(text):
        # nothing to clean (the walk costs as much as the parse): a lone surrogate in JSON is a
        # \\uD800-\\uDFFF escape, and the nesting is at most the count of brackets
        return _Raw(data=data, index=index, line=lineno)
    return _clean_row(_Raw(data=data, index=index, line=lineno), problems, replaced)


def _utf8_text(raw: bytes) -> str:
    """A line's bytes as text, or the ScoreRowError naming the first byte that is not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        byte = raw[exc.start : exc.start + 1].hex().upper()
        raise ScoreRowError(
            None,
            f"not UTF-8 text (byte 0x{byte} at byte {exc.start + 1} of the line: {exc.reason})",
            "save the file as UTF-8, e.g. iconv -f latin1 -t utf-8 IN > OUT",
        ) from None


def _json_object(text: str) -> dict:
    """A line's one JSON object, or the ScoreRowError saying why the line holds none."""
    try:
        data = json.loads(text.rstrip("\r\n"), parse_int=_parse_int)
    except json.JSONDecodeError as exc:
        raise ScoreRowError(
            None,
            f"not valid JSON ({exc.msg} at column {exc.colno})",
            "each line must hold one complete JSON object (JSON Lines)",
        ) from None
    except RecursionError:
        raise ScoreRowError(
            None,
            "nested too deeply for the JSON parser",
            f"flatten it (at most {MAX_DEPTH} levels): a row holds a prompt, its responses and "
            "a reference",
        ) from None
    except ValueError as exc:  # e.g. a number the float/int conversion refuses
        raise ScoreRowError(
            None, f"cannot be read as JSON ({exc})", "check the values on that line"
        ) from None
    if not isinstance(data, dict):
        raise ScoreRowError(
            None,
            f"is a JSON {_json_type(data)}, not an object",
            'write one object per prompt, e.g. {"question": ..., "responses": [...]}',
        )
    return data


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _clean_row(raw: _Raw, problems: list[RowProblem], replaced: dict[str, int]) -> _Raw | None:
    cleaner = _Cleaner()
    try:
        raw.data = cleaner(raw.data)
    except ScoreRowError as exc:
        pid = next((i for i in (_peek_id(raw.data, f) for f in ID_FIELDS) if i), None)
        problems.append(_problem(raw, exc, pid))
        return None
    if cleaner.replaced:
        replaced[raw.where] = cleaner.replaced
    return raw


def _json_type(value: Any) -> str:
    return {
        list: "list",
        str: "string",
        int: "number",
        float: "number",
        bool: "boolean",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def _plain(value: Any) -> Any:
    """numpy arrays / scalars from parquet -> plain Python lists / scalars (recursively)."""
    import numpy as np

    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()] if value.dtype == object else value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    return value


def _read_parquet(path: Path, problems: list[RowProblem], replaced: dict[str, int]) -> list[_Raw]:
    import pandas as pd
    import pyarrow as pa

    try:
        snapshot = _SNAPSHOTS.get(path)
        df = pd.read_parquet(io.BytesIO(snapshot) if snapshot is not None else path)
    except (pa.ArrowInvalid, pa.ArrowException, OSError, ValueError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise ScoreInputError(f"input file {path} does not exist; check the path") from None
        hint = "; if it is JSON Lines, pass --format jsonl" if _starts_like_json(path) else ""
        raise ScoreInputError(f"{path}: cannot be read as parquet ({exc}){hint}") from None
    rows = []
    for i, rec in enumerate(df.to_dict(orient="records")):
        raw = _clean_row(
            _Raw(data={str(k): _plain(v) for k, v in rec.items()}, index=i, row=i),
            problems,
            replaced,
        )
        if raw is not None:
            rows.append(raw)
    return rows


def _starts_like_json(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            head = fh.read(64).lstrip(_UTF8_BOM).lstrip()
    except OSError:
        return False
    return head[:1] in (b"{", b"[")


def read_rows_check(path: Path) -> None:
    """ScoreInputError unless `path` is a file there."""
    if not path.exists():
        raise ScoreInputError(f"input file {path} does not exist; check the path")
    if path.is_dir():
        raise ScoreInputError(f"input {path} is a directory; pass one .jsonl or .parquet file")


def read_rows(
    path: Path,
    fmt: str,
    problems: list[RowProblem] | None = None,
    replaced: dict[str, int] | None = None,
) -> list[_Raw]:
    """The good raw rows of the input file; bad ones are appended to `problems`."""
    problems = [] if problems is None else problems
    replaced = {} if replaced is None else replaced
    read_rows_check(path)
    if fmt == "parquet":
        return _read_parquet(path, problems, replaced)
    return _read_jsonl(path, problems, replaced)


# ---------------------------------------------------------------------------------------------
# fields


_MISSING = object()


def get_path(row: dict, path: str) -> Any:
    """row["a"]["b"] for "a.b" (a literal key containing dots wins); _MISSING when absent."""
    if path in row:
        return row[path]
    node: Any = row
    for part in path.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return _MISSING
    return node


def _present(row: dict | set, limit: int = 40) -> str:
    names = sorted(map(str, row))
    shown = ", ".join(names[:limit]) + (
        f", ... ({len(names)} fields)" if len(names) > limit else ""
    )
    return shown or "(none)"


def resolve_field(
    rows: Sequence[_Raw],
    given: str | None,
    candidates: Sequence[str],
    what: str,
    option: str,
    path: Path,
    required: bool,
) -> str | None:
    """The field name to use: the given one (present in at least one row) or the first usual
    name present in any row. No row with it is a problem of the file (ScoreInputError)."""
    present = {k for r in rows for k in r.data}
    if given is not None:
        if not any(get_path(r.data, given) is not _MISSING for r in rows):
            raise ScoreInputError(
                f"{path}: the {what} field {given!r} ({option}) is in no row; fields present: "
                f"{_present(present)}. Pass {option} with one of them"
            )
        return given
    for name in candidates:
        if name in present:
            return name
    if required:
        raise ScoreInputError(
            f"{path}: no {what} field in any row (looked for {', '.join(candidates)}); fields "
            f"present: {_present(present)}. Name it with {option} FIELD"
        )
    return None


def _value(row: dict, name: str | None, what: str, option: str, required: bool) -> Any:
    if name is None:
        return None
    value = get_path(row, name)
    if value is _MISSING:
        if required:
            raise ScoreRowError(
                name,
                f"no {what} field {name!r} (fields present: {_present(row)})",
                f"every row needs it (or name another with {option})",
            )
        return None
    return value


def _responses(value: Any, name: str) -> list[str]:
    if isinstance(value, str):
        raise ScoreRowError(
            name,
            f"field {name!r} is one string",
            "make it the list of the M sampled responses of that prompt, e.g. "
            '["Paris", "Lyon", ...]',
        )
    if not isinstance(value, list):
        raise ScoreRowError(
            name,
            f"field {name!r} is a {_json_type(value)}",
            "make it the list of the M sampled responses (strings)",
        )
    if not value:
        raise ScoreRowError(
            name,
            f"field {name!r} is an empty list",
            "give the prompt's M sampled responses (at least one), or leave the row out",
        )
    for j, v in enumerate(value):
        # a number is read as its text (a numeric answer); null, true/false, objects and lists
        # are not responses: a row holding one is damaged, not an unparseable answer
        if not isinstance(v, str) and (isinstance(v, bool) or not isinstance(v, int | float)):
            kind = _json_type(v)
            raise ScoreRowError(
                name,
                f"response {j} of field {name!r} is {kind if v is None else 'a ' + kind}",
                'every response must be the model\'s text (a string; "" for an empty one)',
            )
    return [v if isinstance(v, str) else repr(v) if isinstance(v, float) else str(v) for v in value]


def _one_per_response(value: Any, n: int, name: str, fix: str) -> None:
    """A field that holds one entry per response: a list of `n`, else the row's error."""
    if not isinstance(value, list) or len(value) != n:
        got = f"{len(value)} entries" if isinstance(value, list) else f"a {_json_type(value)}"
        raise ScoreRowError(name, f"field {name!r} has {got} for {n} responses", fix)


def _logprobs(value: Any, n: int, name: str) -> list[float] | None:
    if value is None:
        return None
    fix = "give one sequence log-probability (a number <= 0) per response, in the same order"
    _one_per_response(value, n, name, fix)
    out = []
    for j, v in enumerate(value):
        try:
            if isinstance(v, bool) or (isinstance(v, list) and any(isinstance(x, bool) for x in v)):
                raise TypeError
            # a list of token log-probs: the sequence log-prob is their sum
            f = math.fsum(float(x) for x in v) if isinstance(v, list) else float(v)
        except (TypeError, ValueError, OverflowError):
            raise ScoreRowError(
                name, f"field {name!r} holds {_short(v)} at position {j}, not a number", fix
            ) from None
        if math.isnan(f) or f > 1e-9:
            raise ScoreRowError(
                name,
                f"field {name!r} holds {f} at position {j}",
                "a log-probability must be <= 0 (pass log p, not p)",
            )
        out.append(min(f, 0.0))
    return out


FINISH_REASON_FIELDS = ("finish_reasons", "finish_reason")


def _finish_reasons(row: Any, n: int) -> list[str] | None:
    """The responses' finish reasons (`finish_reasons`: one string or null per response, as the
    OpenAI API's choices give them; "length" = cut by the token limit); None when absent."""
    name = next((f for f in FINISH_REASON_FIELDS if isinstance(row, dict) and f in row), None)
    value = None if name is None else row[name]
    if value is None:
        return None
    fix = 'give one finish reason per response ("stop", "length" or null), in the same order'
    _one_per_response(value, n, name, fix)
    bad = next((j for j, v in enumerate(value) if v is not None and not isinstance(v, str)), None)
    if bad is not None:
        raise ScoreRowError(
            name, f"field {name!r} holds {_short(value[bad])} at position {bad}, not a string", fix
        )
    return ["" if v is None else v.strip().lower()[:32] for v in value]


def _short(value: Any, n: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= n else text[:n] + "..."


def _prompt_id(
    value: Any,
    name: str | None,
    index: int,
    explicit: bool,
    fix_missing: str = "give every row an id, or leave --id-field out to number the rows",
) -> str:
    """The prompt id of a row: a string or an integer; none (or null) -> the row's index unless
    the id field was named explicitly."""
    if isinstance(value, float) and math.isnan(value):
        value = None  # a parquet integer column with a gap
    if value is _MISSING or value is None:
        if explicit:
            raise ScoreRowError(
                name,
                f"no id (field {name!r} is {'missing' if value is _MISSING else 'null'})",
                fix_missing,
            )
        return str(index)
    fix = f"ids are strings or integers of at most {MAX_ID_CHARS} characters"
    if isinstance(value, _HugeInt):
        raise ScoreRowError(name, f"id is a {len(value.lstrip('-'))}-digit number", fix)
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ScoreRowError(name, f"id is a {_json_type(value)} ({_short(value)})", fix)
    if isinstance(value, float) and not math.isfinite(value):
        raise ScoreRowError(name, f"id is {value}", fix)
    pid = str(value)
    if not pid.strip():
        raise ScoreRowError(name, "id is empty", fix)
    if len(pid) > MAX_ID_CHARS:
        raise ScoreRowError(name, f"id has {len(pid)} characters", fix)
    if _CONTROL.search(pid):
        raise ScoreRowError(
            name,
            f"id {_short(pid)} holds control characters (newline, tab, ...)",
            fix + ", without control characters",
        )
    return pid


def _peek_id(row: dict, name: str | None) -> str | None:
    """The row's id for a problem report, when it is a short plain one."""
    value = get_path(row, name) if name else _MISSING
    if isinstance(value, (_HugeInt, bool)) or not isinstance(value, (str, int)):
        return None
    text = str(value)
    return text if 0 < len(text) <= MAX_ID_CHARS and not _CONTROL.search(text) else None


def _question(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


# (FieldNames attribute, the usual names tried in order, what, option, required) per field
_ROW_FIELDS = (
    ("id", ID_FIELDS, "id", "--id-field", False),
    ("question", QUESTION_FIELDS, "question", "--question-field", False),
    ("responses", RESPONSES_FIELDS, "responses", "--responses-field", True),
    ("logprobs", LOGPROBS_FIELDS, "log-probs", "--logprobs-field", False),
    ("reference", REFERENCE_FIELDS, "reference", "--reference-field", False),
)


def row_field_names(rows: Sequence[_Raw], fields: FieldNames, path: Path) -> tuple:
    """The field names generic rows are read with (id, question, responses, log-probs,
    reference), from `rows` (`resolve_field`)."""
    return tuple(
        resolve_field(rows, getattr(fields, attr), names, what, option, path, required)
        for attr, names, what, option, required in _ROW_FIELDS
    )


def _usual_field(present: set, names: Sequence[str]) -> str | None:
    """The first of the usual `names` some row has (what `resolve_field` picks unless named)."""
    return next((name for name in names if name in present), None)


def prompts_from_rows(
    rows: Sequence[_Raw],
    fields: FieldNames,
    path: Path,
    problems: list[RowProblem],
    names: tuple | None = None,
) -> list[ScorePrompt]:
    """Generic JSONL/parquet rows -> ScorePrompts; bad rows are appended to `problems`.
    `names`: the field names (`row_field_names`), else resolved from `rows`."""
    id_f, q_f, r_f, lp_f, ref_f = names or row_field_names(rows, fields, path)
    out = []
    for raw in rows:
        row = raw.data
        try:
            pid = _prompt_id(
                get_path(row, id_f) if id_f else _MISSING,
                id_f,
                raw.index,
                explicit=fields.id is not None,
            )
            responses = _responses(_value(row, r_f, "responses", "--responses-field", True), r_f)
            logprobs = _logprobs(
                _value(row, lp_f, "log-probs", "--logprobs-field", fields.logprobs is not None),
                len(responses),
                lp_f,
            )
            question = _question(
                _value(row, q_f, "question", "--question-field", fields.question is not None)
            )
            reference = _value(
                row, ref_f, "reference", "--reference-field", fields.reference is not None
            )
            finish_reasons = _finish_reasons(row, len(responses))
        except ScoreRowError as exc:
            problems.append(_problem(raw, exc, _peek_id(row, id_f)))
            continue
        out.append(
            ScorePrompt(
                prompt_id=pid,
                question=question,
                responses=responses,
                logprobs=logprobs,
                reference=reference,
                line=raw.line,
                row=raw.row,
                finish_reasons=finish_reasons,
            )
        )
    return out


def check_unique_ids(prompts: Sequence[ScorePrompt], path: Path, option: str) -> None:
    """Two rows with one id are a problem of the file: which one is right cannot be told."""
    ids = _UniqueIds()
    ids.add(prompts)
    ids.check(path, option)


class _UniqueIds:
    """`check_unique_ids` over prompts handed in a chunk at a time."""

    def __init__(self) -> None:
        # id -> where its row is (line, else row): all a message needs, not the prompt
        self.seen: dict[str, int | None] = {}
        self.dupes: list[tuple[str, int | None, int | None]] = []
        self.unit = "lines"

    def add(self, prompts: Sequence[ScorePrompt]) -> None:
        seen = self.seen
        for p in prompts:
            where = p.line if p.line is not None else p.row
            if p.prompt_id in seen:
                self.dupes.append((p.prompt_id, seen[p.prompt_id], where))
            else:
                seen[p.prompt_id] = where
            if p.line is None:
                self.unit = "rows"

    def check(self, path: Path, option: str) -> None:
        if not self.dupes:
            return
        pid, first, second = self.dupes[0]
        more = f" ({len(self.dupes) - 1} more rows repeat an id)" if len(self.dupes) > 1 else ""
        raise ScoreInputError(
            f"{path}: {self.unit} {first} and {second} share the id {_short(pid)}{more}; ids must "
            f"be unique (one row per prompt with all its responses), or pick another {option}"
        )


# ---------------------------------------------------------------------------------------------
# lm-evaluation-harness


def _flatten_responses(value: Any) -> list[Any]:
    """resps [[r1..rK]] (one list per request, one entry per repeat) -> [r1..rK];
    filtered_resps ["r"] (take_first) or [[r1..rK]] -> the same flattening."""
    if not isinstance(value, list):
        return [value]
    out: list[Any] = []
    for item in value:
        out.extend(item if isinstance(item, list) else [item])
    return out


def parse_target(value: Any) -> Any:
    """lm-eval writes `target` as str(target): "['Paris', 'paris']" becomes a list again."""
    if isinstance(value, str):
        s = value.strip()
        if s[:1] in "[{" and s[-1:] in "]}":
            for loader in (json.loads, ast.literal_eval):
                try:
                    return _Cleaner()(loader(s))  # bounded nesting, no lone surrogates
                except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                    continue  # ScoreRowError (too deep) is a ValueError: keep the text
    return value


def _lm_eval_question(row: dict, given: str | None) -> str:
    if given is not None:
        value = get_path(row, given)
        if value is _MISSING and not given.startswith("doc."):
            value = get_path(row.get("doc") or {}, given)
        if value is _MISSING:
            doc_fields = _present(row["doc"]) if isinstance(row.get("doc"), dict) else "(no doc)"
            raise ScoreRowError(
                given,
                f"no question field {given!r} (top-level fields: "
                f"{_present(row)}; doc fields: {doc_fields})",
                "pass --question-field doc.FIELD",
            )
        return _question(value)
    doc = row.get("doc")
    if isinstance(doc, dict):
        for name in LM_EVAL_QUESTION_FIELDS:
            if isinstance(doc.get(name), str) and doc[name].strip():
                return doc[name]
    args = row.get("arguments")
    # EvaluationTracker writes {"gen_args_0": {"arg_0": context, "arg_1": gen_kwargs}};
    # the in-memory results keep [[context, gen_kwargs]].
    if isinstance(args, dict) and isinstance(args.get("gen_args_0"), dict):
        return _question(args["gen_args_0"].get("arg_0"))
    if isinstance(args, list) and args and isinstance(args[0], list) and args[0]:
        return _question(args[0][0])
    return ""


def lm_eval_filters(rows: Sequence[_Raw]) -> list[str]:
    """The filters of lm-eval rows, in order of first appearance."""
    return list(dict.fromkeys(_filter_name(r.data) for r in rows if "filter" in r.data))


def lm_eval_filter(rows: Sequence[_Raw], fields: FieldNames, path: Path) -> str | None:
    """The one filter lm-eval rows are scored under (None: all rows): --lm-eval-filter, else
    the first of several (ScoreInputError when no row has the id field or the named filter)."""
    id_f = fields.id or "doc_id"
    if not any(get_path(r.data, id_f) is not _MISSING for r in rows):
        if fields.id is None:
            raise ScoreInputError(
                f"{path}: no row has a doc_id; fields present: "
                f"{_present({k for r in rows for k in r.data})}. Is this an "
                "lm-evaluation-harness samples file? Else pass --format jsonl"
            )
        raise ScoreInputError(f"{path}: the id field {fields.id!r} (--id-field) is in no row")
    filters = lm_eval_filters(rows)
    if fields.lm_eval_filter is not None:
        if fields.lm_eval_filter not in filters:
            raise ScoreInputError(
                f"{path}: no rows with filter {fields.lm_eval_filter!r}; filters present: "
                f"{', '.join(filters) or '(the file has no filter field)'}"
            )
        return fields.lm_eval_filter
    return filters[0] if len(filters) > 1 else None


def _warn_filters(path: Path, filters: Sequence[str]) -> None:
    log.warning(
        "[score] %s holds %d filters (%s); scoring filter %r only (choose with --lm-eval-filter)",
        path,
        len(filters),
        ", ".join(filters),
        filters[0],
    )


def _warn_single_filtered(count: int) -> None:
    if count:
        log.warning(
            "[score] %d prompts have one filtered response but several raw ones: the "
            "task's filter keeps one repeat (take_first / majority_vote); score the raw "
            "repeats with --responses-field resps",
            count,
        )


def prompts_from_lm_eval(
    rows: Sequence[_Raw], fields: FieldNames, path: Path, problems: list[RowProblem]
) -> list[ScorePrompt]:
    """lm-evaluation-harness samples rows -> ScorePrompts (mapping documented in docs/score.md);
    bad rows are appended to `problems`."""
    chosen = lm_eval_filter(rows, fields, path)
    if chosen is not None and fields.lm_eval_filter is None:
        _warn_filters(path, lm_eval_filters(rows))
    prompts, single_filtered = _lm_eval_prompts(rows, fields, chosen, problems)
    _warn_single_filtered(single_filtered)
    return prompts


def _lm_eval_prompts(
    rows: Sequence[_Raw], fields: FieldNames, chosen: str | None, problems: list[RowProblem]
) -> tuple[list[ScorePrompt], int]:
    """(the prompts of lm-eval rows under filter `chosen` (None: all rows), how many have one
    filtered response but several raw ones); bad rows are appended to `problems`."""
    if chosen is not None:
        rows = [r for r in rows if _filter_name(r.data) == chosen]
    out = []
    single_filtered = 0
    for raw in rows:
        try:
            prompt = _lm_eval_prompt(raw, fields)
        except ScoreRowError as exc:
            problems.append(_problem(raw, exc, _peek_id(raw.data, fields.id or "doc_id")))
            continue
        if (
            (fields.responses or "resps") == "filtered_resps"
            and len(prompt.responses) == 1
            and len(_flatten_responses(raw.data.get("resps", []))) > 1
        ):
            single_filtered += 1
        out.append(prompt)
    return out, single_filtered


def _lm_eval_prompt(raw: _Raw, fields: FieldNames) -> ScorePrompt:
    """One lm-eval samples row as a prompt (docs/score.md), or the ScoreRowError of the field
    that does not fit."""
    row = raw.data
    id_f = fields.id or "doc_id"
    resp_f = fields.responses or "resps"
    pid = _prompt_id(
        get_path(row, id_f),
        id_f,
        raw.index,
        explicit=True,
        fix_missing="every lm-eval sample has one; name another with --id-field",
    )
    value = get_path(row, resp_f)
    if value is _MISSING:
        raise ScoreRowError(
            resp_f,
            f"no {resp_f!r} field (fields present: {_present(row)})",
            "use --responses-field resps (raw generations, one per repeat) or filtered_resps",
        )
    responses = _responses(_flatten_responses(value), resp_f)
    reference = _lm_eval_reference(row, fields)
    lp = None
    if fields.logprobs is not None:
        lp = _logprobs(
            _value(row, fields.logprobs, "log-probs", "--logprobs-field", True),
            len(responses),
            fields.logprobs,
        )
    return ScorePrompt(
        prompt_id=pid,
        question=_lm_eval_question(row, fields.question),
        responses=responses,
        logprobs=lp,
        reference=None if reference is _MISSING else parse_target(reference),
        extra={"filter": row.get("filter")},
        line=raw.line,
        row=raw.row,
    )


def _lm_eval_reference(row: dict, fields: FieldNames) -> Any:
    """The row's reference as written (`target`, else the named field, also under `doc`), or
    _MISSING where a row has none; a reference field named on purpose must be there."""
    ref_f = fields.reference or "target"
    reference = get_path(row, ref_f)
    if reference is _MISSING and not ref_f.startswith("doc."):
        reference = get_path(row.get("doc") if isinstance(row.get("doc"), dict) else {}, ref_f)
    if reference is _MISSING and fields.reference is not None:
        raise ScoreRowError(
            ref_f,
            f"no reference field {ref_f!r} (fields present: {_present(row)})",
            "every row needs it (or name another with --reference-field)",
        )
    return reference


def _filter_name(row: dict) -> str:
    value = row.get("filter")
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


# ---------------------------------------------------------------------------------------------
# entry points


# What an in-memory input is called in messages, and its formats (`read_input(data)`).
IN_MEMORY = Path("<data>")
MEMORY_FORMATS = ("dataframe", "records", "lists")


def is_path(source: Any) -> bool:
    """A file to read (str or os.PathLike) rather than data in memory."""
    import os

    return isinstance(source, (str, os.PathLike))


def rows_from_data(
    data: Any, problems: list[RowProblem], replaced: dict[str, int]
) -> tuple[list[_Raw], str]:
    """In-memory input -> raw rows and its format: a pandas DataFrame (one row per prompt, the
    columns of the JSONL format), a list of dicts (the same fields) or a list of lists of
    response strings (one list per prompt; ids are the positions)."""
    import pandas as pd

    if isinstance(data, pd.DataFrame):
        records, kind = data.to_dict(orient="records"), "dataframe"
    elif isinstance(data, (list, tuple)):
        if all(isinstance(x, dict) for x in data):
            records, kind = list(data), "records"
        elif all(isinstance(x, (list, tuple)) for x in data):
            records, kind = [{"responses": list(x)} for x in data], "lists"
        else:
            kinds = sorted({type(x).__name__ for x in data})
            raise ScoreInputError(
                f"the data is a list of {', '.join(kinds)}: give one entry per prompt, either all "
                "dicts ({'responses': [...], 'question': ..., 'reference': ...}) or all lists of "
                "response strings"
            )
    elif isinstance(data, dict):
        raise ScoreInputError(
            "the data is one dict: give a list of dicts, one per prompt (e.g. "
            "[data]), or a DataFrame with one row per prompt"
        )
    else:
        raise ScoreInputError(
            f"the data is a {type(data).__name__}: give a file path, a pandas "
            "DataFrame, a list of dicts or a list of lists of response strings"
        )
    rows = []
    for i, rec in enumerate(records):
        raw = _clean_row(
            _Raw(data={str(k): _plain(v) for k, v in rec.items()}, index=i, row=i),
            problems,
            replaced,
        )
        if raw is not None:
            rows.append(raw)
    return rows, kind


def read_input(
    source: Any,
    fmt: str = "auto",
    fields: FieldNames | None = None,
    *,
    strict: bool = False,
    validate: Callable[[ScorePrompt], Any] | None = None,
) -> ScoreInput:
    """Read the input: every good row becomes a ScorePrompt, every bad one a RowProblem.

    `source` is a file path or data in memory (`rows_from_data`: a DataFrame, a list of dicts,
    a list of lists of responses; `fmt` is then ignored, rows are numbered from 0).
    `validate(prompt)` may raise ScoreRowError to reject a prompt (score() checks the reference's
    shape for the task this way). With `strict`, the first bad row (lowest line) raises
    ScoreInputError instead. File-level problems always raise ScoreInputError, among them a file
    in which no row is good (the message names the first problems) and duplicate ids.
    """
    with _collector_paused():
        return _read_input(source, fmt, fields, strict=strict, validate=validate)


@contextmanager
def _collector_paused():
    """The cyclic garbage collector off while rows are read: parsing makes millions of
    containers and no cycles, and the collector's passes over them were ~40 % of reading
    100k prompts (5.1 s vs 3.0 s)."""
    import gc

    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _read_input(
    source: Any,
    fmt: str,
    fields: FieldNames | None,
    *,
    strict: bool,
    validate: Callable[[ScorePrompt], Any] | None,
) -> ScoreInput:
    fields = fields or FieldNames()
    problems: list[RowProblem] = []
    replaced: dict[str, int] = {}
    if is_path(source):
        path = Path(source)
        kind = _format_from_name(path, fmt)
        rows = read_rows(path, "parquet" if kind == "parquet" else "jsonl", problems, replaced)
    else:
        path = IN_MEMORY
        rows, kind = rows_from_data(source, problems, replaced)
    n_rows = len(rows) + len(problems)
    if n_rows == 0:
        raise ScoreInputError(
            f"{path} is empty: no rows to score; give one row per prompt with its sampled responses"
        )
    if kind == "json":
        kind = "lm-eval" if _looks_lm_eval(rows) else "jsonl"
    reading = _Reading(path, kind, fields, strict, validate, problems, replaced)
    prompts: list[ScorePrompt] = []
    if rows:
        try:
            reading.plan(rows)
        except ScoreInputError:
            if strict and problems:  # a bad row before the file-level problem: report it first
                _raise_first(path, problems)
            raise
        prompts = reading.take(rows)
    got = reading.finish(n_rows)
    got.prompts = prompts
    return got


_UNSET = object()


class _Reading:
    """Raw rows to good prompts, a chunk at a time, with every check of the whole input.

    `plan(rows)` takes what a read decides from the rows (the field names, the lm-eval filter)
    from the first rows it is given; `take(rows)` turns rows into prompts (bad ones become
    RowProblems; `strict` raises at the first); `finish(n_rows)` runs the checks of the whole
    input (no good row, duplicate ids). Given all rows at once this is `read_input`; given the
    rows a chunk at a time, `exact()` says whether the first chunk's decisions are those all the
    rows would have given: not where a later row has a usual name of a field that ranks before
    the one taken (an optional field no earlier row had is taken when it first comes), or a
    second lm-eval filter (the earlier rows were not filtered)."""

    def __init__(
        self,
        path: Path,
        kind: str,
        fields: FieldNames,
        strict: bool,
        validate: Callable[[ScorePrompt], Any] | None,
        problems: list[RowProblem],
        replaced: dict[str, int],
    ) -> None:
        self.path, self.kind, self.fields = path, kind, fields
        self.strict, self.validate = strict, validate
        self.problems, self.replaced = problems, replaced  # the row reader appends to both
        self.names: Any = _UNSET  # field names (generic rows) or the filter (lm-eval)
        self.present: set[str] = set()  # every row's top-level fields
        self.filters: dict[str, None] = {}  # lm-eval filters in order of appearance
        self.single_filtered = 0
        self.ids = _UniqueIds()
        self.n_prompts = 0
        self.kept_replaced: dict[str, int] = {}
        self._sorted = 0

    def plan(self, rows: Sequence[_Raw]) -> None:
        if self.kind == "lm-eval":
            self.names = lm_eval_filter(rows, self.fields, self.path)
        else:
            self.names = row_field_names(rows, self.fields, self.path)

    def take(self, rows: Sequence[_Raw]) -> list[ScorePrompt]:
        """The good prompts of `rows` (after `plan`); the chunk's problems sorted in place."""
        problems = self.problems
        start = self._sorted  # the problems before are earlier chunks', sorted already
        if self.kind == "lm-eval":
            for r in rows:
                if "filter" in r.data:
                    self.filters.setdefault(_filter_name(r.data))
            prompts, single_filtered = _lm_eval_prompts(rows, self.fields, self.names, problems)
            self.single_filtered += single_filtered
        else:
            for r in rows:
                self.present.update(r.data)
            if None in self.names:
                # An optional field no earlier row had under any usual name: taken from the rows
                # so far, as a whole read would (the earlier rows lack it under every name).
                self.names = tuple(
                    _usual_field(self.present, usual) if name is None else name
                    for name, (_, usual, *_) in zip(self.names, _ROW_FIELDS, strict=True)
                )
            prompts = prompts_from_rows(rows, self.fields, self.path, problems, self.names)
        if self.validate is not None:
            good = []
            for p in prompts:
                try:
                    self.validate(p)
                except ScoreRowError as exc:
                    problems.append(
                        RowProblem(
                            line=p.line,
                            row=p.row,
                            field=exc.field,
                            problem=exc.problem,
                            fix=exc.fix,
                            id=p.prompt_id,
                        )
                    )
                    continue
                good.append(p)
            prompts = good
        problems[start:] = sorted(problems[start:], key=lambda p: p.position)
        self._sorted = len(problems)
        if self.strict and problems:
            _raise_first(self.path, problems)
        self.ids.add(prompts)
        self.n_prompts += len(prompts)
        if self.replaced:
            kept = {p.where for p in prompts}
            self.kept_replaced.update((w, n) for w, n in self.replaced.items() if w in kept)
            self.replaced.clear()  # the next chunk's rows are elsewhere
        return prompts

    def exact(self) -> bool:
        """Whether the decisions taken from the first chunk are those of all rows."""
        if self.names is _UNSET:
            return True
        if self.kind == "lm-eval":
            if self.fields.lm_eval_filter is not None:
                return True
            filters = list(self.filters)
            return self.names == (filters[0] if len(filters) > 1 else None)
        return all(
            getattr(self.fields, attr) is not None or name == _usual_field(self.present, usual)
            for name, (attr, usual, *_) in zip(self.names, _ROW_FIELDS, strict=True)
        )

    def finish(self, n_rows: int) -> ScoreInput:
        """The whole input's checks and what was read (its prompts are the chunks'); an empty
        input never gets here (`_read_input` refuses it first, a chunked read of one reads it
        whole)."""
        if self.kind == "lm-eval" and self.fields.lm_eval_filter is None and self.names:
            _warn_filters(self.path, list(self.filters))
        _warn_single_filtered(self.single_filtered)
        if not self.n_prompts:
            err = ScoreInputError(
                f"{self.path}: no row can be scored ({len(self.problems)} of {n_rows} rows have "
                f"problems); the first: {self.problems[0].message()}"
            )
            err.problems = self.problems  # score() writes them next to --out
            raise err
        self.ids.check(
            self.path,
            "--id-field (or --lm-eval-filter: one filter per doc_id)"
            if self.kind == "lm-eval"
            else "--id-field",
        )
        return ScoreInput(
            prompts=[],
            format=self.kind,
            skipped=self.problems,
            n_rows=n_rows,
            replaced_surrogates=self.kept_replaced,
        )


class ReadAgain(Exception):
    """A chunked read's first chunk decided otherwise than the whole input does (a usual field
    or a second lm-eval filter only in later rows): what was read must be read again whole."""


class InputChunks:
    """The good prompts of an input a chunk at a time, as `read_input` would read them.

    A JSON Lines (or lm-eval) file is read `chunk_rows` rows (non-blank lines) at a time: the
    caller holds one chunk, not the file (`unit` "rows"). The checks over the whole file
    (duplicate ids, no good row) come from `finish()` after the last chunk; the decisions a read
    takes from the rows (the field names, the lm-eval filter) are taken from the first chunk and
    checked by `finish()`, which raises ReadAgain where all the rows would have decided otherwise
    (read again with `whole=True`). A first chunk that cannot decide (no good row, no responses
    field in it, ...) makes the reader read the file whole first, with `read_input`'s errors.
    A parquet file or data in memory is read whole and handed out `chunk_rows` prompts at a time
    (`unit` "prompts"). `format` is known once the first chunk is out."""

    def __init__(
        self,
        source: Any,
        fmt: str = "auto",
        fields: FieldNames | None = None,
        *,
        strict: bool = False,
        validate: Callable[[ScorePrompt], Any] | None = None,
        chunk_rows: int = 2000,
        whole: bool = False,
    ) -> None:
        self.source, self.fmt, self.fields = source, fmt, fields or FieldNames()
        self.strict, self.validate = strict, validate
        self.chunk_rows, self.whole = max(1, int(chunk_rows)), whole
        self.format: str | None = None
        self.unit: str | None = None
        self.prompts: list[ScorePrompt] | None = None  # all of them, when read whole
        # a file's SHA-256 and (size, mtime) before the read; finish() checks the read saw them
        self.file_hash: str | None = None
        self._stat: tuple[int, int] | None = None
        self._finished: Any = None

    def again(self) -> InputChunks:
        """The same input, read whole (after ReadAgain)."""
        return InputChunks(
            self.source,
            self.fmt,
            self.fields,
            strict=self.strict,
            validate=self.validate,
            chunk_rows=self.chunk_rows,
            whole=True,
        )

    def __iter__(self):
        path = Path(self.source) if is_path(self.source) else None
        kind = _format_from_name(path, self.fmt) if path is not None else None
        if path is not None:
            read_rows_check(path)
            self._stat, self.file_hash = _file_stat(path), file_sha256(path)
        if self.whole or kind in (None, "parquet"):
            yield from self._whole()
            return
        problems: list[RowProblem] = []
        replaced: dict[str, int] = {}
        counted = [0]
        digest = hashlib.sha256()
        chunks = _jsonl_chunks(
            path, problems, replaced, chunk_rows=self.chunk_rows, counted=counted, digest=digest
        )
        with _collector_paused():
            first = next(chunks, [])
            if first and kind == "json":
                kind = "lm-eval" if _looks_lm_eval(first) else "jsonl"
            reading = _Reading(
                path, kind, self.fields, self.strict, self.validate, problems, replaced
            )
            try:
                if first:
                    reading.plan(first)
            except ScoreInputError:
                first = []
            if not first:  # nothing to decide from: the whole file, read_input's way
                chunks.close()
                yield from self._whole()
                return
            prompts = reading.take(first)
        self.format, self.unit = kind, "rows"
        yield prompts
        while True:
            with _collector_paused():
                rows = next(chunks, None)
                if rows is None:
                    break
                prompts = reading.take(rows)
            yield prompts

        def finish() -> ScoreInput:
            self._check_unchanged(path, digest.hexdigest())
            if not reading.exact():
                raise ReadAgain(
                    f"{path}: later rows decide the fields otherwise than the first "
                    f"{self.chunk_rows}"
                )
            return reading.finish(counted[0])

        self._finished = finish

    def _whole(self):
        if is_path(self.source):  # parsed from one snapshot of its bytes, keyed by their hash
            path = Path(self.source)
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise ScoreInputError(f"{path}: cannot be read ({exc.strerror or exc})") from None
            self.file_hash = hashlib.sha256(data).hexdigest()
            with _snapshot(path, data):
                got = read_input(
                    self.source, self.fmt, self.fields, strict=self.strict, validate=self.validate
                )
        else:
            got = read_input(
                self.source, self.fmt, self.fields, strict=self.strict, validate=self.validate
            )
        self.format, self.unit, self.prompts = got.format, "prompts", got.prompts
        self._finished = lambda: got
        size = self.chunk_rows
        for start in range(0, len(got.prompts), size):
            yield got.prompts[start : start + size]

    def _check_unchanged(self, path: Path, read_hash: str) -> None:
        """ScoreInputError when the file changed while it was streamed: the bytes read differ
        from the file's hash before the read, or its size or modification time moved."""
        now = _file_stat(path) if path.exists() else None
        if read_hash != self.file_hash or now != self._stat:
            raise ScoreInputError(
                f"{path} changed while it was read (what was read is not the file as it was "
                "when the read began); nothing was kept from this read: score it again once "
                "nothing writes to it, or score a copy"
            )

    def finish(self) -> ScoreInput:
        """After the last chunk: what was read (ScoreInput without its prompts, which were the
        chunks'); the whole input's problems raise ScoreInputError, a first chunk that decided
        otherwise than all rows ReadAgain."""
        if self._finished is None:
            raise RuntimeError("InputChunks.finish: the chunks have not all been read")
        got = self._finished()
        return ScoreInput(
            prompts=[],
            format=got.format,
            skipped=got.skipped,
            n_rows=got.n_rows,
            replaced_surrogates=got.replaced_surrogates,
        )


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _file_stat(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns


def _raise_first(path: Path, problems: list[RowProblem]) -> None:
    first = min(problems, key=lambda p: p.position)
    raise ScoreInputError(
        f"{path}: {first.message()} (--strict stops at the first bad row; "
        "without it bad rows are skipped and listed)"
    )


def read_prompts(
    path: str | Path, fmt: str = "auto", fields: FieldNames | None = None
) -> tuple[list[ScorePrompt], str]:
    """Read the input file into ScorePrompts, strictly: the first bad row raises
    ScoreInputError. Returns (prompts, the format used). `read_input` skips bad rows instead."""
    got = read_input(path, fmt, fields, strict=True)
    return got.prompts, got.format
