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

__all__ = [
    "REDACTED",
    "argv_problem",
    "settings_problem",
    "redact_files",
    "redact_text",
    "url_secrets",
]

REDACTED = "***"
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"\],}]+")
# parameter names that carry a credential: the name, or its last word after - _ . (Azure's
# api-key and subscription-key, Google's key, x-api-key, client_secret, hf_token, GitLab's
# private_token, auth_token, AWS's X-Amz-Signature and X-Amz-Security-Token, signed URLs' sig)
_SECRET_PARAM = re.compile(
    r"(?i)(?:^|[-_.])(?:api[-_]?key|key|token|secret|password|passwd|pwd|"
    r"passphrase|sig|signature|auth|authorization|credential|credentials|"
    r"jwt|bearer)$"
)
# run-together names (apikey, accesstoken, clientsecret): the word glued to a known prefix
_GLUED_SECRET = re.compile(
    r"(?i)^(?:api|access|auth|client|private|session|secret|refresh|id|"
    r"app|user|account|bearer)(?:key|token|secret|password)$"
)


def secret_parameter(name: str) -> bool:
    """Whether a URL parameter named `name` carries a credential: the name or its last word
    (camelCase, kebab-, snake_ or dotted) is key, token, secret, signature, ...; or a known
    run-together name (apitoken, clientsecret)."""
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)  # accessToken -> access_Token
    return bool(_SECRET_PARAM.search(words) or _GLUED_SECRET.match(name))


def _parameters(part: str) -> list[tuple[str, str]]:
    """name=value pairs of a query, a fragment or path parameters, split at & and ;."""
    return [
        pair
        for chunk in re.split(r"[&;]", part)
        if chunk
        for pair in parse_qsl(chunk, keep_blank_values=False)
    ]


def url_secrets(text: str) -> list[str]:
    """The credentials inside the URLs of `text`: user:password@ parts and key-like parameter
    values, in the query (?api_key=), the fragment (#api_key=) or path parameters (;api_key=)."""
    found: list[str] = []
    for match in _URL.finditer(text):
        try:
            url = urlsplit(match.group(0))
        except ValueError:  # an unparseable netloc ("http://[x") holds nothing we could name
            continue
        if "@" in url.netloc:
            found.append(url.netloc.rsplit("@", 1)[0])
        path_params = url.path.split(";", 1)[1] if ";" in url.path else ""
        for part in (url.query, url.fragment, path_params):
            found += [value for name, value in _parameters(part) if secret_parameter(name)]
    return [s for s in found if s]


# keys of a fixed form, upper case included (AWS access key ids, GitHub and Slack tokens)
_KNOWN_KEY = re.compile(r"^(?:AKIA|ASIA)[0-9A-Z]{16}$|^gh[pousr]_[A-Za-z0-9]{30,}$|^xox[abprs]-")

# a setting that names an environment variable holding a key (backend.api_key_env, ...)
_KEY_ENV_SETTING = re.compile(r"(?:^|\.)api_key_env$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def key_in_env_setting(value: str) -> bool:
    """Whether the value of an `*api_key_env` setting looks like a key rather than the name of
    the variable holding one: not a variable name (sk-..., a dot, a slash), a known key form,
    or a long name mixing lower case and digits (OPENAI_API_KEY is upper case)."""
    if not value:
        return False
    if not _ENV_NAME.match(value) or _KNOWN_KEY.match(value):
        return True
    if any(c.islower() for c in value) and _TEXT_SECRETS.search(value):  # sk_live_..., hf_...
        return True
    return len(value) >= 20 and any(c.islower() for c in value) and any(c.isdigit() for c in value)


# key-like strings in free text (an upstream's error message that echoes what it was sent)
_TEXT_SECRETS = re.compile(
    r"(?i)(?:\bbearer\s+[A-Za-z0-9._~+/=-]{6,}|\b(?:sk|pk|rk|hf|gsk|xai)[-_][A-Za-z0-9._-]{8,}|"
    r"\b(?:api[-_]?key|x-api-key|access[-_]?token|auth[-_]?token|token|secret|password)"
    r"[\"']?\s*[:=]\s*[\"']?[^\s\"',;&}]{4,})"
)


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
    return (
        f"{setting} holds credentials inside a URL (for host {_where(value)}): Hydra would "
        "save them with the run's configs. Remove them from the URL and export the key in "
        "the variable named by backend.api_key_env / task.extractor.api_key_env"
    )


def _env_message(setting: str) -> str:
    return (
        f"{setting} looks like a key, not the name of the environment variable holding one: "
        "Hydra would save it with the run's configs. Export the key (e.g. export "
        f"OPENAI_API_KEY=...) and set {setting}=OPENAI_API_KEY (the variable's name)"
    )


_URL_SETTING = re.compile(r"(?i)(?:url|uri|api_base|endpoint|host)$")


def setting_secrets(setting: str, value: str) -> list[str]:
    """The credentials a setting's value holds: inside its URLs (a URL setting written without
    its scheme, `h:8000/v1?api_key=...` or `//h/v1?...`, read as http://), or the whole value
    of an `*api_key_env` setting that holds a key instead of a variable name."""
    if _KEY_ENV_SETTING.search(setting) and key_in_env_setting(value):
        return [value]
    if _URL_SETTING.search(setting.rsplit(".", 1)[-1]) and "://" not in value and value:
        return url_secrets("http://" + value.lstrip("/"))
    return url_secrets(value)


def _problem(setting: str, value: str) -> str:
    if _KEY_ENV_SETTING.search(setting) and key_in_env_setting(value):
        return _env_message(setting)
    if _URL_SETTING.search(setting.rsplit(".", 1)[-1]) and "://" not in value:
        value = "http://" + value.lstrip("/")  # written without its scheme
    return _message(setting, value)


def argv_problem(argv: list[str]) -> str | None:
    """A command-line override whose value holds a credential, in one line (or None)."""
    for arg in argv:
        key, sep, value = arg.partition("=")
        key = key.lstrip("+~")
        if sep and setting_secrets(key, value):
            return _problem(key, value)
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


def settings_problem(settings: Any) -> tuple[str, list[str]] | None:
    """(the one-line problem, every credential found) for settings (plain dicts and lists, as
    written) holding URL credentials in a string setting, or None."""
    problem, secrets = None, []
    for path, value in _leaves(settings):
        if found := setting_secrets(path, value):
            problem = problem or _problem(path, value)
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
