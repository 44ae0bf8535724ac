"""A directory of JSON records keyed by sha256, written atomically (temp file + rename).

Shared by the extractors that call a model per item (`LLMClient`, `KGGenRunner`), so a rerun
reads every answer back and makes zero calls. A record is served only when it verifies:

- its "digest" field, written last, is the sha256 of its key and of the JSON text before it
  (`record_digest`), so a record edited on disk ("Paris" -> "Berlin", still valid JSON, or the
  same content reformatted) is no longer what was written. Hashing the text as written, not a
  re-serialisation of what was parsed, keeps a read at one parse and one hash (a 60 kB record
  of 20 choices with log-probs: 0.97 ms read and checked, 0.89 ms before digests, where
  re-serialising it cost 2.0 ms);
- it recomputes to its own key (`key_of`): one swapped in from another request is not served
  for this one.

Anything else found under a key (damaged JSON, no digest: a cache written before digests, a
wrong digest or key) reads as a miss, is counted in `unverified`, and is rewritten by the next
answer; the first one is logged, once per cache.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["JsonRecordCache", "record_digest", "sha256_key"]

log = logging.getLogger("pipeline")

DIGEST_FIELD = "digest"


def sha256_key(payload: Any) -> str:
    """sha256 of the canonical JSON of `payload` (sorted keys), the record's file name."""
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(
        text.encode("utf-8", "surrogatepass")
    ).hexdigest()  # a lone surrogate is no crash


def record_digest(key: str, record: dict[str, Any]) -> str:
    """sha256 of the key and the record's JSON text as `put` writes it (without the digest)."""
    return _text_digest(key, json.dumps(record))


def _text_digest(key: str, body: str) -> str:
    return hashlib.sha256(f"{key}\n{body}".encode("utf-8", "surrogatepass")).hexdigest()


_DIGEST_MARK = f'"{DIGEST_FIELD}": "'
_DIGEST_TAIL = len(_DIGEST_MARK) + 64 + 2  # "digest": "<64 hex>"}


class JsonRecordCache:
    """`get(key)` / `put(key, record)` over `root/<key[:2]>/<key>.json`; `root=None` caches nothing.

    Records are JSON objects with string keys; `put` adds the "digest" field and `get` returns
    the record without it. `key_of(record)` recomputes a record's key from what it holds (the
    request it answers); a record whose key differs, or that lacks what the key is made of,
    reads as a miss, as does one whose digest does not match (module docstring)."""

    def __init__(
        self,
        root: str | os.PathLike[str] | None,
        key_of: Callable[[dict[str, Any]], str] | None = None,
    ) -> None:
        self.root = Path(root) if root is not None else None
        self.key_of = key_of
        self.unverified = 0  # records found on disk that did not verify (read as misses)
        # keys read unverified and not rewritten since: a record read twice (a caller checking
        # again under its lock) is counted once
        self._pending: set[str] = set()
        self._made: set[Path] = set()  # folders this cache has created or found

    def path(self, key: str) -> Path | None:
        return None if self.root is None else self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        path = self.path(key)
        if path is None:
            return None
        try:  # no exists() first: one system call less per lookup (a miss is the common case)
            text = path.read_text(encoding="utf-8")
        except OSError:
            return None
        record = self._verified(key, text)
        if record is None and key not in self._pending:
            self._pending.add(key)
            self._unverified(path)
        return record

    def _verified(self, key: str, text: str) -> dict[str, Any] | None:
        """The record `text` holds, without its digest, if it verifies; else None. `put` wrote
        `{...record..., "digest": "<hex>"}`: the text before the digest field, closed, is the
        record's own JSON text, which the digest hashes."""
        cut = len(text) - _DIGEST_TAIL
        if cut < 1 or not text.startswith(_DIGEST_MARK, cut) or not text.endswith('"}'):
            return None  # no digest last: written before digests, edited or damaged
        head = text[:cut]
        if head.endswith(", "):
            body = head[:-2] + "}"
        elif head == "{":
            body = "{}"
        else:
            return None
        if text[cut + len(_DIGEST_MARK) : -2] != _text_digest(key, body):
            return None
        try:
            record = json.loads(body)
            if self.key_of is not None and self.key_of(record) != key:
                return None
        except (KeyError, TypeError, ValueError):
            return None
        return record if isinstance(record, dict) else None

    def _unverified(self, path: Path) -> None:
        self.unverified += 1
        if self.unverified == 1:  # once per cache: a stale cache would log every record
            log.warning(
                "cache records in %s did not verify (the first: %s; edited, damaged, or "
                "written before record digests): read as misses and asked again; "
                "counted in the cache's `unverified`, this warning is not repeated",
                self.root,
                path.name,
            )

    def put(self, key: str, record: dict[str, Any]) -> None:
        path = self.path(key)
        if path is None:
            return
        if not isinstance(record, dict) or DIGEST_FIELD in record:
            raise ValueError(
                f"a cache record is a dict without a {DIGEST_FIELD!r} field (the "
                f"cache writes that one); got {type(record).__name__}"
            )
        if path.parent not in self._made:  # a mkdir per write costs a directory lookup
            path.parent.mkdir(parents=True, exist_ok=True)
            self._made.add(path.parent)
        body = json.dumps(record)  # ASCII escapes: lone surrogates in model output stay writable
        stored = (
            body[:-1]
            + (", " if body != "{}" else "")
            + _DIGEST_MARK
            + _text_digest(key, body)
            + '"}'
        )
        self._pending.discard(key)
        try:
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        except FileNotFoundError:  # the folder was removed while the cache was open
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(stored)  # one write (json.dump writes chunk by chunk)
            os.replace(tmp, path)  # atomic: readers see the old file or the whole new one
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
