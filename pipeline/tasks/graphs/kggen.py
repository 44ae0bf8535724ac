"""KGGen (the paper's graph extractor) with an on-disk cache, from any environment.

`kg-gen` needs its own venv (scripts/setup_kggen_venv.sh). The calls go to
`pipeline.tasks.graphs.kggen_worker` running under that venv's interpreter, one worker per runner:
`python` (the map stage's `task.extractor.kggen_python`), else $KGGEN_PYTHON, else
<repo>/.venv-kggen/bin/python. When none of these exists, kg_gen is imported in this process
(a map stage that itself runs in the KGGen venv).

Every result is cached as JSON keyed by (kg-gen settings, text, context): a rerun sends nothing
to the worker or the model. Extraction failures are counted; parse failures are cached (at
temperature 0 a retry gives the same answer), API failures are not (a rerun retries them).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import subprocess
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.clients.disk_cache import JsonRecordCache, sha256_key
from pipeline.clients.llm_client import _is_loopback, api_key_from_env
from pipeline.runtime.errors import PipelineError
from pipeline.runtime.resources import CHECKOUT_DIR

__all__ = ["KGGenError", "KGGenRunner", "KGGenStats", "default_kggen_python", "litellm_model"]

Triple = tuple[str, str, str]
log = logging.getLogger(__name__)
CACHE_VERSION = "kg-gen-0.4.0"  # the pinned kg-gen: its prompts define what a cached answer means


def default_kggen_python() -> Path:
    """$KGGEN_PYTHON if set, else <repo>/.venv-kggen/bin/python (made by scripts/setup_kggen_venv.sh)."""
    override = os.environ.get("KGGEN_PYTHON")
    return Path(override) if override else CHECKOUT_DIR / ".venv-kggen" / "bin" / "python"


class KGGenError(PipelineError, RuntimeError):
    """KGGen could not run at all (worker missing or crashed, bad key, unknown model)."""


@dataclass
class KGGenStats:
    texts_sent: int = 0  # texts KGGen extracted (cache misses)
    cache_hits: int = 0
    parse_failures: int = 0
    api_failures: int = 0  # extractions and clusterings the API failed (not cached)
    clusterings_sent: int = 0
    last_error: str = ""

    @property
    def requests(self) -> int:
        """Extractions and clusterings sent to the model (cache hits excluded)."""
        return self.texts_sent + self.clusterings_sent


def litellm_model(model: str) -> str:
    """KGGen takes LiteLLM model strings: a bare name ("gpt-4.1-mini") means an OpenAI-API model."""
    return model if "/" in model else f"openai/{model}"


class KGGenRunner:
    def __init__(
        self,
        model: str = "gpt-4.1-mini",
        api_base: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        python: str | os.PathLike[str] | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        temperature: float = 0.0,
        max_tokens: int = 4096,
        max_workers: int = 4,
    ) -> None:
        self.settings: dict[str, Any] = {
            "model": litellm_model(model),
            "api_base": api_base,
            "api_key_env": api_key_env,
            "temperature": temperature,
            "max_tokens": max_tokens,
            "max_workers": max_workers,
            "loopback": _is_loopback(api_base),
        }
        if python:
            self.python: Path | None = Path(python)
            if not self.python.exists():
                raise KGGenError(
                    f"task.extractor.kggen_python={python} does not exist. Build the KGGen env with "
                    "`bash scripts/setup_kggen_venv.sh` (kg-gen conflicts with the main env), or unset it to "
                    "use $KGGEN_PYTHON / .venv-kggen, or kg_gen in this process."
                )
        else:
            default = default_kggen_python()
            self.python = default if default.exists() else None
        self.cache = JsonRecordCache(
            cache_dir, key_of=lambda record: sha256_key(record["keyed_by"])
        )
        self.stats = KGGenStats()
        self._logged: KGGenStats | None = None
        self._proc: subprocess.Popen[str] | None = None
        self._kg: Any = None
        self._lock = threading.Lock()
        # this run's extractions by `prefetch`: sent (their cache reads are no hits) or failed
        # on the API (not cached; not sent again in this run, a rerun retries them)
        self._sent: set[str] = set()
        self._failed: dict[str, dict[str, Any]] = {}

    # ------------------------------------------------------------------ transport
    def _check_key(self) -> None:
        """Fail here, before a worker starts, when the endpoint needs a key that is not set."""
        api_base = self.settings["api_base"]
        api_key_from_env(
            self.settings["api_key_env"],
            api_base,
            where=f"KGGen at {api_base or 'the provider of ' + self.settings['model']}",
        )

    def _start_worker(self) -> None:
        assert self.python is not None
        # PYTHONHASHSEED: KGGen iterates sets of strings when clustering; fixed so prompts repeat.
        env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen(
            [str(self.python), "-m", "pipeline.tasks.graphs.kggen_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,
            text=True,
            encoding="utf-8",
            env=env,
        )
        self._proc = proc
        self._send(self.settings)  # names the key's variable, not the key

    def _send(self, message: dict[str, Any]) -> dict[str, Any]:
        proc = self._proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(json.dumps(message) + "\n")  # ASCII escapes: any str crosses the pipe
            proc.stdin.flush()
            line = proc.stdout.readline()
        except (BrokenPipeError, OSError) as exc:
            line = ""
            if proc.poll() is None:
                raise KGGenError(f"lost the KGGen worker: {exc}") from exc
        if not line:
            code = proc.wait(timeout=10)
            self._proc = None
            raise KGGenError(
                f"the KGGen worker ({self.python}) exited with code {code}; its stderr is above"
            )
        reply = json.loads(line)
        if "fatal" in reply:
            self.close()
            raise KGGenError(f"KGGen failed: {reply['fatal']}")
        return reply

    def _call(self, request: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            if self.python is not None:
                if self._proc is None:
                    self._start_worker()
                return self._send(request)
            from pipeline.tasks.graphs import kggen_worker

            if self._kg is None:
                try:
                    self._kg = kggen_worker.make_kggen(self.settings)
                except ImportError as exc:
                    raise KGGenError(
                        f"kg_gen is not importable here and {default_kggen_python()} does not exist: build the "
                        "KGGen env with `bash scripts/setup_kggen_venv.sh` (kg-gen conflicts with the main env), "
                        "or point task.extractor.kggen_python / $KGGEN_PYTHON at a python that has kg-gen"
                    ) from exc
            try:
                reply = kggen_worker.handle(self._kg, request, int(self.settings["max_workers"]))
            except kggen_worker.FatalKGGenError as exc:
                raise KGGenError(f"KGGen failed: {exc}") from exc
            if "fatal" in reply:
                raise KGGenError(f"KGGen failed: {reply['fatal']}")
            return reply

    def close(self) -> None:
        stats = getattr(self, "stats", None)
        if stats is not None and (stats.texts_sent or stats.cache_hits) and stats != self._logged:
            self._logged = dataclasses.replace(stats)  # close() runs again from __del__: log once
            log.info(
                "[kggen] %s: %d texts extracted, %d from the cache, %d parse and %d API failures, "
                "%d clusterings",
                self.settings["model"],
                stats.texts_sent,
                stats.cache_hits,
                stats.parse_failures,
                stats.api_failures,
                stats.clusterings_sent,
            )
        proc, self._proc = getattr(self, "_proc", None), None
        if proc is not None and proc.poll() is None:
            try:
                if proc.stdin is not None:
                    proc.stdin.close()  # EOF: the worker's loop ends
                proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()

    def __enter__(self) -> KGGenRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()

    # ------------------------------------------------------------------ cached operations
    def _keyed_by(self, op: str, payload: dict[str, Any]) -> dict[str, Any]:
        """What a cached record answers (stored in it, so a swapped record is a miss)."""
        settings = {k: self.settings[k] for k in ("model", "api_base", "temperature", "max_tokens")}
        return {"version": CACHE_VERSION, "op": op, "settings": settings, **payload}

    def _extraction_request(self, text: str, context: str) -> tuple[dict[str, Any], str]:
        """(what a text's cached extraction answers, its key)."""
        asked = self._keyed_by("extract", {"text": text, "context": context})
        return asked, sha256_key(asked)

    def _in_chunks(self, items: list) -> Iterator[list]:
        """A cell's queued requests in chunks of 8 x max_workers, each cached as it finishes."""
        chunk = 8 * max(1, int(self.settings["max_workers"]))
        for start in range(0, len(items), chunk):
            yield items[start : start + chunk]

    def extract(self, texts: Sequence[str], context: str = "") -> list[list[Triple] | None]:
        """KGGen's triples of each text (None: extraction failed, counted in `stats`)."""
        requests = [self._extraction_request(t, context) for t in texts]
        asked, keys = [a for a, _ in requests], [k for _, k in requests]
        out: list[list[Triple] | None] = [None] * len(texts)
        todo: dict[str, list[int]] = {}
        for i, key in enumerate(keys):
            if key in self._failed:  # failed on the API in this run's prefetch: not sent again
                self._count_failure(self._failed[key])
                continue
            record = self.cache.get(key)
            if record is not None:
                self.stats.cache_hits += key not in self._sent
                out[i] = _triples(record.get("relations"))
                self.stats.parse_failures += out[i] is None
            else:
                todo.setdefault(key, []).append(i)  # duplicate texts: one extraction
        if todo:
            first = [idx[0] for idx in todo.values()]
            results = self._send_extractions(
                [texts[i] for i in first], [asked[i] for i in first], list(todo), context
            )
            for key, result in zip(todo, results):
                for i in todo[key]:
                    out[i] = _triples(result.get("relations"))
                    if out[i] is None:
                        self._count_failure(result)
        return out

    def prefetch(self, texts: Sequence[str], context: str = "") -> None:
        """Extract every text of a cell not cached yet, all prompts through the worker's one
        pool (`max_workers` in flight across prompts, not within one), in chunks cached as they
        finish (a killed run keeps what it got); the per-prompt `extract` calls then read the
        cache and count the failures."""
        keyed = {}
        for text in dict.fromkeys(texts):
            asked, key = self._extraction_request(text, context)
            if key not in self._failed and self.cache.get(key) is None:
                keyed[key] = (text, asked)
        for part in self._in_chunks(list(keyed.items())):
            results = self._send_extractions(
                [t for _, (t, _) in part], [a for _, (_, a) in part], [k for k, _ in part], context
            )
            for (key, _), result in zip(part, results):
                self._sent.add(key)
                if result.get("relations") is None and result.get("kind") == "api":
                    self._failed[key] = result

    def _send_extractions(
        self, texts: list[str], asked: list[dict[str, Any]], keys: list[str], context: str
    ) -> list[dict[str, Any]]:
        """One extract request for `texts`; relations and parse failures cached (a retry at
        temperature 0 gives the same answer), API failures not."""
        self._check_key()
        results = self._call({"op": "extract", "texts": texts, "context": context})["results"]
        self.stats.texts_sent += len(texts)
        for key, keyed_by, result in zip(keys, asked, results):
            relations = result.get("relations")
            if relations is not None:
                self.cache.put(key, {"relations": relations, "keyed_by": keyed_by})
            elif result.get("kind") == "parse":
                self.cache.put(
                    key, {"relations": None, "error": result.get("error", ""), "keyed_by": keyed_by}
                )
            elif result.get("kind") == "api":
                self.stats.last_error = str(result.get("error", ""))
        return results

    def _count_failure(self, result: dict[str, Any]) -> None:
        self.stats.api_failures += result.get("kind") == "api"
        self.stats.parse_failures += result.get("kind") != "api"

    def cached_relations(
        self, texts: Sequence[str], context: str = ""
    ) -> list[list[Triple] | None]:
        """The triples `extract` would give each text from the cache, with nothing sent or
        counted (None: not cached, or failed)."""
        records = [self.cache.get(self._extraction_request(t, context)[1]) for t in texts]
        return [None if record is None else _triples(record.get("relations")) for record in records]

    def _clustering_request(
        self, relations: Sequence[Triple], context: str
    ) -> tuple[list, dict, str]:
        """(the sorted distinct triples, what their cached record answers, its key)."""
        triples = sorted({tuple(map(str, r)) for r in relations})
        asked = self._keyed_by("cluster", {"relations": triples, "context": context})
        return triples, asked, sha256_key(asked)

    def _store_clustering(self, key: str, asked: dict[str, Any], record: dict[str, Any]) -> None:
        """A clustering's reply cached; an API failure is not (a rerun retries it) but kept for
        this run, so it is not sent again and is counted when read."""
        self.stats.clusterings_sent += 1
        if record.get("kind") != "api":
            self.cache.put(key, {**record, "keyed_by": asked})
        else:
            self._failed[key] = record

    def prefetch_clusters(self, graphs: Sequence[Sequence[Triple]], context: str = "") -> None:
        """Cluster every prompt's aggregated graph not cached yet through the worker's one pool
        (`max_workers` clusterings in flight across prompts), in chunks cached as they finish;
        the per-prompt `cluster` calls then read the cache."""
        todo: dict[str, tuple[list, dict[str, Any]]] = {}
        for relations in graphs:
            triples, asked, key = self._clustering_request(relations, context)
            if triples and key not in self._failed and self.cache.get(key) is None:
                todo[key] = (triples, asked)
        for part in self._in_chunks(list(todo.items())):
            self._check_key()
            results = self._call(
                {"op": "cluster_many", "graphs": [t for _, (t, _) in part], "context": context}
            )["results"]
            for (key, (_, asked)), record in zip(part, results):
                self._store_clustering(key, asked, record)

    def cluster(
        self, relations: Sequence[Triple], context: str = ""
    ) -> tuple[dict[str, str], dict[str, str]]:
        """KGGen's clustering of one prompt's aggregated graph: (entity -> representative, edge -> representative).

        A failed clustering leaves every entity and edge as it is (an empty mapping).
        """
        triples, asked, key = self._clustering_request(relations, context)
        if not triples:
            return {}, {}
        record = self._failed.get(key) or self.cache.get(key)
        if record is None:
            self._check_key()
            record = self._call({"op": "cluster", "relations": triples, "context": context})
            self._store_clustering(key, asked, record)
        if record.get("kind") == "api":  # counted: the map stage fails when calls failed
            self.stats.api_failures += 1
            self.stats.last_error = str(record.get("error", ""))
        if "error" in record:
            return {}, {}
        entity_of = {m: rep for rep, members in record["entity_clusters"].items() for m in members}
        edge_of = {m: rep for rep, members in record["edge_clusters"].items() for m in members}
        return entity_of, edge_of


def _triples(relations: list | None) -> list[Triple] | None:
    """A record's relations as triples (None: the extraction failed)."""
    return None if relations is None else [tuple(r) for r in relations]
