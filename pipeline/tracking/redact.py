"""What a logged config never holds: credential-like keys (keys come from the environment)."""

from __future__ import annotations

import re
from typing import Any

_SECRET = re.compile(r"(api[_-]?key|token|secret|password|credential)", re.IGNORECASE)


def redact(obj: Any) -> Any:
    """Copy of a plain config without credential-like keys (env var *names* are kept)."""
    if isinstance(obj, dict):
        return {
            k: redact(v)
            for k, v in obj.items()
            if not (_SECRET.search(str(k)) and not str(k).endswith("_env"))
        }
    if isinstance(obj, list):
        return [redact(v) for v in obj]
    return obj
