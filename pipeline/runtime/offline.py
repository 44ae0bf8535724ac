"""Offline runs never wait on hub retries. Unless HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) is set,
an entry point asks the hub once, with a short timeout, before any hub library is imported; when
it does not answer, the Hugging Face libraries are put offline for the whole process (and the
processes it starts): they read the local cache instead of retrying each file for minutes.

    from pipeline.runtime.offline import go_offline_if_unreachable
    go_offline_if_unreachable()  # first thing of a command line's main, before transformers loads

Set HF_HUB_OFFLINE=0 to skip the probe and always ask the hub, HF_HUB_OFFLINE=1 to skip it and
never ask.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, MutableMapping

log = logging.getLogger("pipeline")

# Read by huggingface_hub, transformers and datasets at import time.
OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")
PROBE_TIMEOUT_S = 2.0


def hub_endpoint(env: MutableMapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    return (env.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


def hub_reachable(endpoint: str, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """True when the endpoint answers an HTTP request (any status) within `timeout` seconds, name
    resolution included (a thread, since getaddrinfo ignores socket timeouts)."""
    import urllib.error
    import urllib.request

    answer: list[bool] = []

    def probe() -> None:
        try:
            urllib.request.urlopen(
                urllib.request.Request(endpoint, method="HEAD"), timeout=timeout
            ).close()
            answer.append(True)
        except urllib.error.HTTPError:  # the hub answered (4xx/5xx): it is reachable
            answer.append(True)
        except (OSError, ValueError):  # DNS, refused, timeout, proxy tunnel refused, bad URL
            answer.append(False)

    thread = threading.Thread(target=probe, name="hub-probe", daemon=True)
    thread.start()
    thread.join(timeout)
    return bool(answer and answer[0])


def go_offline_if_unreachable(
    env: MutableMapping[str, str] | None = None, reachable: Callable[[str], bool] | None = None
) -> bool:
    """Set the offline variables when none is set and the hub does not answer; a user's own
    setting always wins (no probe then). True when this call put the process offline."""
    env = os.environ if env is None else env
    if any(env.get(name, "") != "" for name in OFFLINE_VARS[:2]):
        return False
    endpoint = hub_endpoint(env)
    if (reachable or hub_reachable)(endpoint):
        return False
    for name in OFFLINE_VARS:
        env.setdefault(name, "1")
    log.warning(
        "[offline] %s did not answer within %.0f s: running offline from the local cache "
        "(HF_HUB_OFFLINE=1); set HF_HUB_OFFLINE=0 to always ask the hub",
        endpoint,
        PROBE_TIMEOUT_S,
    )
    return True
