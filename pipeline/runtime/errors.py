"""Errors a user can act on: their message says what is wrong and how to fix it, and the
command line prints that message alone (no traceback) and exits with status 2."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


class PipelineError(Exception):
    """Base of the errors whose message is the whole story."""


class ConfigError(PipelineError, ValueError):
    """A config value is out of range or unknown; raised before any model loads."""


class DiskFullError(PipelineError, OSError):
    """No space left (or the quota spent) where a file was being written."""


# ENOSPC, EDQUOT: a full disk and a spent quota read the same to the user
DISK_FULL_ERRNOS = (28, 122)


def _size(n_bytes: int) -> str:
    return f"{n_bytes / 2**20:.1f} MiB" if n_bytes >= 2**20 else f"{n_bytes / 2**10:.1f} KiB"


def disk_full_message(
    path: object, needed_bytes: int | None = None, settings: str = "output_root / cache_dir"
) -> str:
    """One line: the folder that filled up, what it has free, what the write needed."""
    import shutil
    from pathlib import Path

    folder = Path(str(path)) if path is not None else None
    while folder is not None and not folder.is_dir() and folder != folder.parent:
        folder = folder.parent
    try:
        free = f"{_size(shutil.disk_usage(folder).free)} free" if folder else "?"
    except OSError:
        free = "free space unknown"
    needed = f"; this write needed about {_size(needed_bytes)}" if needed_bytes else ""
    return (
        f"no space left on the device of {folder or 'the output folder'} ({free}{needed}): "
        f"free space there (or set {settings} to a larger disk) and rerun; "
        "what was written before is kept and the run resumes"
    )


def is_disk_full(exc: BaseException) -> bool:
    """Whether `exc` says the disk (or the quota) is full: an OSError's errno, or sqlite's."""
    return getattr(exc, "errno", None) in DISK_FULL_ERRNOS or "disk is full" in str(exc)


@contextlib.contextmanager
def naming_a_full_disk(
    output_root: str, settings: str = "output_root / cache_dir"
) -> Iterator[None]:
    """A full disk anywhere (a cache record, a lock, a library's file, sqlite; the store's own
    writes say more) as a DiskFullError: one line, not a library's traceback (`settings`: what
    the user sets to write elsewhere)."""
    import sqlite3

    try:
        yield
    except (OSError, sqlite3.OperationalError) as exc:
        if isinstance(exc, PipelineError) or not is_disk_full(exc):
            raise
        where = getattr(exc, "filename", None)
        raise DiskFullError(
            f"writing {where or 'under ' + output_root}: "
            f"{disk_full_message(where or output_root, settings=settings)}"
        ) from None
