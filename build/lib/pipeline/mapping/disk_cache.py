"""A directory of JSON records keyed by sha256, written atomically (temp file + rename).

Shared by the extractors that call a model per item (`LLMClient`, `KGGenRunner`), so a rerun
reads every answer back and makes zero calls. A damaged record reads as a miss and is rewritten,
and so does a record that does not recompute to its own key (`key_of`): one swapped in from
another request, or edited, is never served for this one.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["JsonRecordCache", "sha256_key"]


def sha256_key(payload: Any) -> str:
    """sha256 of the canonical JSON of `payload` (sorted keys), the record's file name."""
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()  # a lone surrogate is no crash


class JsonRecordCache:
    """`get(key)` / `put(key, record)` over `root/<key[:2]>/<key>.json`; `root=None` caches nothing.

    `key_of(record)` recomputes a record's key from what it holds (the request it answers); a
    record whose key differs, or that lacks what the key is made of, reads as a miss."""

    def __init__(self, root: str | os.PathLike[str] | None,
                 key_of: Callable[[dict[str, Any]], str] | None = None) -> None:
        self.root = Path(root) if root is not None else None
        self.key_of = key_of
        self._made: set[Path] = set()  # folders this cache has created or found

    def path(self, key: str) -> Path | None:
        return None if self.root is None else self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        path = self.path(key)
        if path is None:
            return None
        try:  # no exists() first: one system call less per lookup (a miss is the common case)
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(record, dict):
            return None
        if self.key_of is not None:
            try:
                if self.key_of(record) != key:
                    return None
            except (KeyError, TypeError, ValueError):
                return None
        return record

    def put(self, key: str, record: dict[str, Any]) -> None:
        path = self.path(key)
        if path is None:
            return
        if path.parent not in self._made:  # a mkdir per write costs a directory lookup
            path.parent.mkdir(parents=True, exist_ok=True)
            self._made.add(path.parent)
        try:
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        except FileNotFoundError:  # the folder was removed while the cache was open
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                # one write (json.dump writes chunk by chunk); ASCII escapes: lone surrogates
                # in model output stay writable
                fh.write(json.dumps(record))
            os.replace(tmp, path)  # atomic: readers see the old file or the whole new one
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
