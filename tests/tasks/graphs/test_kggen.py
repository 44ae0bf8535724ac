"""KGGenRunner's checks that need no KGGen env: every way to not run KGGen names the fix.

The KGGen path itself (kg-gen in .venv-kggen, DSPy, LiteLLM, HTTP) runs in test_kggen_slow.py.
"""

import sys

import pytest

from pipeline.clients.llm_client import MissingAPIKeyError
from pipeline.tasks.graphs.kggen import KGGenError, KGGenRunner, litellm_model


def test_litellm_model_names():
    assert litellm_model("gpt-4.1-mini") == "openai/gpt-4.1-mini"
    assert litellm_model("hosted_vllm/Qwen/Qwen3-4B") == "hosted_vllm/Qwen/Qwen3-4B"


def test_missing_kggen_python_names_the_setup_script(tmp_path):
    with pytest.raises(KGGenError, match="setup_kggen_venv.sh"):
        KGGenRunner(python=tmp_path / "nope" / "python")


def test_remote_endpoint_without_key_fails_before_starting_a_worker(monkeypatch, tmp_path):
    monkeypatch.delenv("MY_KGGEN_KEY", raising=False)
    runner = KGGenRunner(python=sys.executable, api_key_env="MY_KGGEN_KEY", cache_dir=tmp_path)
    with pytest.raises(MissingAPIKeyError, match="MY_KGGEN_KEY"):
        runner.extract(["Marie Curie won the Nobel Prize."])
    assert runner._proc is None and runner.stats.texts_sent == 0


def test_worker_without_kg_gen_reports_a_clear_error(tmp_path):
    # A real worker process under this (main-env) python, where kg_gen is not installed.
    pytest.importorskip("pipeline")
    try:
        import kg_gen  # noqa: F401

        pytest.skip("kg_gen is importable in this env")
    except ImportError:
        pass
    runner = KGGenRunner(
        python=sys.executable, api_base="http://127.0.0.1:9/v1", cache_dir=tmp_path
    )
    with pytest.raises(KGGenError, match="could not start KGGen: ModuleNotFoundError"):
        runner.extract(["Marie Curie won the Nobel Prize."])
    assert runner._proc is None  # the failed worker is reaped
    assert not list(tmp_path.rglob("*.json"))  # nothing cached from a run that never happened


def _error(name: str, bases: tuple = (Exception,)) -> type:
    return type(name, bases, {})


def test_failure_classes_by_name_through_the_cause_chain():
    # DSPy 3.4 / LiteLLM class names (they are not installed in this env): a transient provider
    # error is "api" (not cached), a reply that did not parse is "parse" (cached), a rejected
    # key stops the stage.
    from pipeline.tasks.graphs.kggen_worker import FatalKGGenError, _classify

    server_error = _error("LMServerError", (_error("LMProviderError"),))
    try:
        try:
            raise _error("ServerError")("HTTP 500")
        except Exception as inner:
            raise server_error("[openai/gpt-4.1-mini] HTTP 500") from inner
    except Exception as exc:
        assert _classify(exc) == "api"
    assert _classify(_error("AdapterParseError")("no [[ ## entities ## ]]")) == "parse"
    assert _classify(ValueError("bad JSON")) == "parse"
    assert (
        _classify(_error("ContextWindowExceededError", (_error("LMInvalidRequestError"),))("long"))
        == "parse"
    )
    with pytest.raises(FatalKGGenError, match="LMAuthError"):
        _classify(_error("LMAuthError")("401"))


def test_the_cache_serves_a_record_only_for_the_request_it_answers(tmp_path):
    # The runner's own cache, no worker: what `extract` and `cluster` read before calling KGGen.
    from pipeline.clients.disk_cache import sha256_key

    runner = KGGenRunner(
        python=sys.executable, api_base="http://127.0.0.1:9/v1", cache_dir=tmp_path
    )
    asked = {t: runner._keyed_by("extract", {"text": t, "context": ""}) for t in ("one", "two")}
    for text, a in asked.items():
        runner.cache.put(sha256_key(a), {"relations": [[text, "is", "text"]], "keyed_by": a})
    key_one, key_two = sha256_key(asked["one"]), sha256_key(asked["two"])
    assert runner.cache.get(key_one)["relations"] == [["one", "is", "text"]]
    runner.cache.path(key_one).write_text(runner.cache.path(key_two).read_text())  # swapped
    assert runner.cache.get(key_one) is None and runner.cache.get(key_two) is not None
    runner.cache.path(key_two).write_text('{"relations": []}')  # no request recorded: a miss
    assert runner.cache.get(key_two) is None


def test_the_default_kggen_interpreter_is_the_checkouts_venv(monkeypatch):
    """The slow KGGen tests skip where this path does not exist: a wrong default would skip them
    silently (it did once, after the module moved into pipeline/tasks/graphs/)."""
    from pathlib import Path

    from pipeline.tasks.graphs.kggen import default_kggen_python

    monkeypatch.delenv("KGGEN_PYTHON", raising=False)
    root = Path(__file__).resolve().parents[3]
    assert default_kggen_python() == root / ".venv-kggen" / "bin" / "python"
    monkeypatch.setenv("KGGEN_PYTHON", "/opt/kg/bin/python")
    assert default_kggen_python() == Path("/opt/kg/bin/python")
