"""KGGen calls, in-process or as a JSON-lines worker in the KGGen venv.

`kg-gen` cannot share the main environment (see scripts/setup_kggen_venv.sh), so the map stage
normally runs this module with `.venv-kggen/bin/python -m pipeline.tasks.graphs.kggen_worker` and
talks to it over stdin/stdout (`pipeline.tasks.graphs.kggen.KGGenRunner`). The module imports only
the standard library at import time; `kg_gen` is imported by `make_kggen`.

Protocol: the first line is the settings object ({"model", "api_base", "api_key_env",
"temperature", "max_tokens", "max_workers"}); the API key is read from the environment variable
named there, never sent over the pipe. Then one request per line and one reply per line:
    {"op": "extract", "texts": [...], "context": "..."} -> {"results": [result, ...]}
    {"op": "cluster", "relations": [[h, r, t], ...], "context": "..."}
        -> {"entity_clusters": {rep: [members]}, "edge_clusters": {rep: [members]}}
    {"op": "cluster_many", "graphs": [[[h, r, t], ...], ...], "context": "..."}
        -> {"results": [clustering, ...]}   (max_workers graphs at a time)
A result is {"relations": [[h, r, t], ...]} or {"error": "...", "kind": "parse" | "api"}.
A fatal error (bad key, unknown model) replies {"fatal": "..."} and the worker exits.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TextIO

__all__ = [
    "make_kggen",
    "extract_graphs",
    "cluster_graph",
    "cluster_graphs",
    "FatalKGGenError",
    "main",
]


class FatalKGGenError(RuntimeError):
    """An error no retry or other text can fix (authentication, unknown model): stop the stage."""


def make_kggen(settings: dict[str, Any]) -> Any:
    from kg_gen import KGGen  # heavy: dspy, litellm, sentence-transformers

    key = os.environ.get(settings.get("api_key_env") or "OPENAI_API_KEY") or None
    return KGGen(
        model=settings["model"],
        temperature=float(settings.get("temperature", 0.0)),
        max_tokens=int(settings.get("max_tokens", 4096)),
        api_key=key or ("EMPTY" if settings.get("loopback") else None),
        api_base=settings.get("api_base") or None,
    )


# Exception class names (anywhere in the MRO) of DSPy 3.4 (`dspy.utils.exceptions`, its vendored
# lm15), LiteLLM and openai. Matched by name so this module needs none of them at import.
_PER_TEXT = {"ContextWindowExceededError", "ContextLengthError"}  # this text only: cached failure
_FATAL = {
    "LMAuthError",
    "LMBillingError",
    "LMConfigurationError",
    "LMUnsupportedModelError",
    "LMInvalidRequestError",
    "AuthError",
    "BillingError",
    "ConfigurationError",
    "UnsupportedModelError",
    "InvalidRequestError",
    "AuthenticationError",
    "PermissionDeniedError",
    "NotFoundError",
    "BadRequestError",
}
_TRANSIENT = {
    "LMServerError",
    "LMRateLimitError",
    "LMTimeoutError",
    "LMTransportError",
    "LMLockTimeoutError",
    "ServerError",
    "RateLimitError",
    "RequestTimeoutError",
    "TransportError",
    "LockTimeoutError",
    "APIConnectionError",
    "APITimeoutError",
    "InternalServerError",
    "ServiceUnavailableError",
    "Timeout",
    "ConnectError",
    "ReadTimeout",
}


def _classify(exc: BaseException) -> str:
    """ "api" for transient transport/provider errors (not cached: a rerun retries them), "parse"
    for a reply that did not parse or a text too long (cached); raises `FatalKGGenError` for
    errors no other text can avoid (bad key, unknown model, invalid request)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:  # the exception and its causes
        seen.add(id(current))
        names = {klass.__name__ for klass in type(current).__mro__}
        if names & _PER_TEXT:
            return "parse"
        if names & _FATAL:
            raise FatalKGGenError(f"{type(current).__name__}: {current}") from exc
        if names & _TRANSIENT:
            return "api"
        current = current.__cause__ or current.__context__
    return "parse"


def _one_graph(kg: Any, text: str, context: str) -> dict[str, Any]:
    try:
        graph = kg.generate(input_data=text, context=context)
    except Exception as exc:  # noqa: BLE001 - one failed extraction is a counted failure
        return {"error": f"{type(exc).__name__}: {str(exc)[:500]}", "kind": _classify(exc)}
    return {"relations": sorted([list(map(str, r)) for r in graph.relations])}


def extract_graphs(
    kg: Any, texts: Sequence[str], context: str, max_workers: int = 4
) -> list[dict[str, Any]]:
    """KGGen's generate (entities, then relations) on each text, `max_workers` texts at a time."""
    if not texts:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(texts)))) as pool:
        return list(pool.map(lambda t: _one_graph(kg, t, context), texts))


def cluster_graph(kg: Any, relations: Sequence[Sequence[str]], context: str) -> dict[str, Any]:
    """KGGen's cluster on the aggregated graph of one prompt: entity and edge clusters."""
    from kg_gen.models import Graph

    triples = {(str(h), str(r), str(t)) for h, r, t in relations}
    graph = Graph(
        entities={x for h, _, t in triples for x in (h, t)},
        edges={r for _, r, _ in triples},
        relations=triples,
    )
    try:
        clustered = kg.cluster(graph, context=context)
    except Exception as exc:  # noqa: BLE001 - clustering failed: keep the graph unclustered
        return {"error": f"{type(exc).__name__}: {str(exc)[:500]}", "kind": _classify(exc)}
    return {
        "entity_clusters": {k: sorted(v) for k, v in (clustered.entity_clusters or {}).items()},
        "edge_clusters": {k: sorted(v) for k, v in (clustered.edge_clusters or {}).items()},
    }


def cluster_graphs(
    kg: Any, graphs: Sequence[Sequence[Sequence[str]]], context: str, max_workers: int = 4
) -> list[dict[str, Any]]:
    """`cluster_graph` on many prompts' graphs, `max_workers` at a time (a clustering is several
    chat requests in sequence, so prompts overlap as extractions do)."""
    if not graphs:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(graphs)))) as pool:
        return list(pool.map(lambda g: cluster_graph(kg, g, context), graphs))


def handle(kg: Any, request: dict[str, Any], max_workers: int) -> dict[str, Any]:
    op = request.get("op")
    if op == "extract":
        return {
            "results": extract_graphs(kg, request["texts"], request.get("context", ""), max_workers)
        }
    if op == "cluster":
        return cluster_graph(kg, request["relations"], request.get("context", ""))
    if op == "cluster_many":
        return {
            "results": cluster_graphs(
                kg, request["graphs"], request.get("context", ""), max_workers
            )
        }
    return {"fatal": f"unknown op {op!r}; expected 'extract', 'cluster' or 'cluster_many'"}


def main(stdin: TextIO = sys.stdin) -> int:
    # Replies go to the real stdout only; anything the libraries print (litellm does) goes to stderr.
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8", buffering=1)
    sys.stdout = sys.stderr
    settings = json.loads(stdin.readline())
    try:
        kg = make_kggen(settings)
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which raises it
        out.write(
            json.dumps({"fatal": f"could not start KGGen: {type(exc).__name__}: {exc}"}) + "\n"
        )
        return 1
    out.write(json.dumps({"ready": True}) + "\n")
    max_workers = int(settings.get("max_workers", 4))
    for line in stdin:
        if not line.strip():
            continue
        try:
            reply = handle(kg, json.loads(line), max_workers)
        except FatalKGGenError as exc:
            reply = {"fatal": str(exc)}
        out.write(json.dumps(reply) + "\n")
        if "fatal" in reply:
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
