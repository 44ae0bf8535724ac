"""Keys never reach disk: a URL setting holding credentials (`http://user:sk-...@host/v1`, or
`?api_key=sk-...`) is refused before Hydra writes its run folder (command-line overrides), and
a config file holding one has Hydra's saved copies redacted before the run stops (stdlib only).

Keys come from the environment (`backend.api_key_env`, `task.extractor.api_key_env`); Hydra
saves every override and the composed config verbatim under `<output_root>/<experiment>/.hydra/`,
so a key inside a URL would stay there, and in W&B, for anyone who reads the outputs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

__all__ = ["url_secrets", "argv_problem", "config_problem", "redact_files", "redact_text",
           "REDACTED"]

REDACTED = "***"
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"\],}]+")
# query parameters that carry a credential (Azure's api-key, Google's key, signed URLs' sig)
_SECRET_PARAM = re.compile(r"(?i)^(?:api[-_]?key|key|token|access[-_]?token|secret|password|"
                           r"passwd|sig|signature|auth|authorization)$")


def url_secrets(text: str) -> list[str]:
    """The credentials inside the URLs of `text`: user:password@ parts and key-like query values."""
    found: list[str] = []
    for match in _URL.finditer(text):
        try:
            url = urlsplit(match.group(0))
        except ValueError:  # an unparseable netloc ("http://[x") holds nothing we could name
            continue
        if "@" in url.netloc:
            found.append(url.netloc.rsplit("@", 1)[0])
        found += [value for name, value in parse_qsl(url.query, keep_blank_values=False)
                  if _SECRET_PARAM.match(name)]
    return [s for s in found if s]


# key-like strings in free text (an upstream's error message that echoes what it was sent)
_TEXT_SECRETS = re.compile(
    r"(?i)(?:\bbearer\s+[A-Za-z0-9._~+/=-]{6,}|\b(?:sk|pk|rk|hf|gsk|xai)[-_][A-Za-z0-9._-]{8,}|"
    r"\b(?:api[-_]?key|x-api-key|access[-_]?token|auth[-_]?token|token|secret|password)"
    r"[\"']?\s*[:=]\s*[\"']?[^\s\"',;&}]{4,})")


def redact_text(text: str, known: Iterable[str] = ()) -> str:
    """`text` with bearer tokens, key-like strings (sk-..., api_key=...), URL credentials and
    every `known` secret (the keys this process holds) replaced by ***."""
    for secret in sorted({k for k in known if k and len(k) >= 4}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    for secret in url_secrets(text):
        text = text.replace(secret, REDACTED)
    return _TEXT_SECRETS.sub(REDACTED, text)


def _where(url_text: str) -> str:
    """The URL's host, for the message (never the credential)."""
    match = _URL.search(url_text)
    try:
        return urlsplit(match.group(0)).hostname or "?" if match else "?"
    except ValueError:
        return "?"


def _message(setting: str, value: str) -> str:
    return (f"{setting} holds credentials inside a URL (for host {_where(value)}): Hydra would "
            "save them with the run's configs. Remove them from the URL and export the key in "
            "the variable named by backend.api_key_env / task.extractor.api_key_env")


def argv_problem(argv: list[str]) -> str | None:
    """A command-line override whose value holds a URL credential, in one line (or None)."""
    for arg in argv:
        key, sep, value = arg.partition("=")
        if sep and url_secrets(value):
            return _message(key.lstrip("+~"), value)
    return None


def _leaves(node: Any, path: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _leaves(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, list | tuple):
        for i, value in enumerate(node):
            yield from _leaves(value, f"{path}[{i}]")
    elif isinstance(node, str):
        yield path, node


def config_problem(cfg: Any) -> tuple[str, list[str]] | None:
    """(the one-line problem, every credential found) for a composed config holding URL
    credentials in a string setting as written (before interpolation: a key read from the
    environment by ${oc.env:...} is not in the saved files), or None."""
    from omegaconf import OmegaConf

    container = OmegaConf.to_container(cfg, resolve=False) if OmegaConf.is_config(cfg) else cfg
    problem, secrets = None, []
    for path, value in _leaves(container):
        if found := url_secrets(value):
            problem = problem or _message(path, value)
            secrets += found
    return (problem, secrets) if problem else None


def redact_files(paths: Iterable[Path], secrets: list[str]) -> list[Path]:
    """Replace every credential in the text files `paths` by REDACTED; the files changed."""
    changed = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        redacted = text
        for secret in sorted(set(secrets), key=len, reverse=True):
            redacted = redacted.replace(secret, REDACTED)
        if redacted != text:
            path.write_text(redacted, encoding="utf-8")
            changed.append(path)
    return changed
