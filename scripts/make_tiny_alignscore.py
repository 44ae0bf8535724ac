#!/usr/bin/env python
"""Build a tiny, randomly initialised AlignScore checkpoint, fully offline.

Writes::

    OUT/tiny-roberta/{config.json, tokenizer.json, vocab.json, merges.txt, ...}
    OUT/AlignScore-tiny.ckpt     # {"state_dict": ...} of lm-polygraph's BERTAlignModel

so ``pipeline.evaluation.text_metrics.alignscore_scores(contexts, claims,
ckpt_path=OUT/AlignScore-tiny.ckpt, model=OUT/tiny-roberta)`` runs the real AlignScore code
on it (the folder name must contain "roberta": AlignScore picks the architecture by name).
Weights are random: the scores carry no quality meaning.
Usage: ``python scripts/make_tiny_alignscore.py OUT``.
"""

from __future__ import annotations

import sys
from pathlib import Path

TOKENIZER_CORPUS = [
    "The cat sat on the mat.",
    "A dog barked at the moon last night.",
    "Paris is the capital of France.",
    "The company reported higher profits this quarter.",
    "Police said the suspect was arrested on Monday.",
    "The team won the final match 2-1.",
    "Scientists found water on the planet.",
    "The president met the prime minister.",
    "Hello world, this is a tiny model for tests.",
    "Numbers 0 1 2 3 4 5 6 7 8 9.",
]
ROBERTA_SPECIAL_TOKENS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]


def build_roberta_tokenizer(out_dir: Path, vocab_size: int = 400, max_length: int = 64):
    """Train a tiny byte-level BPE and save it as RoBERTa's fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from tokenizers.trainers import BpeTrainer
    from transformers import RobertaTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=ROBERTA_SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(TOKENIZER_CORPUS, trainer=trainer)
    # RoBERTa's pair template: <s> A </s></s> B </s>.
    tokenizer.post_processor = processors.RobertaProcessing(
        sep=("</s>", tokenizer.token_to_id("</s>")),
        cls=("<s>", tokenizer.token_to_id("<s>")),
        trim_offsets=True,
        add_prefix_space=False,
    )
    fast = RobertaTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<s>",
        eos_token="</s>",
        sep_token="</s>",
        cls_token="<s>",
        unk_token="<unk>",
        pad_token="<pad>",
        mask_token="<mask>",
        model_max_length=max_length,
    )
    fast.save_pretrained(out_dir)
    return fast


def build_tiny_alignscore(out_dir: str | Path, seed: int = 0) -> tuple[Path, Path]:
    """Write the tiny base model folder and checkpoint; returns ``(ckpt_path, model_dir)``."""
    import torch
    from lm_polygraph.generation_metrics.alignscore_utils import BERTAlignModel
    from transformers import RobertaConfig

    out_dir = Path(out_dir)
    model_dir = out_dir / "tiny-roberta"
    tokenizer = build_roberta_tokenizer(model_dir)
    RobertaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=tokenizer.model_max_length + 2,
        type_vocab_size=1,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        # Wider random init than 0.02 so random heads give visibly input-dependent scores.
        initializer_range=0.5,
    ).save_pretrained(model_dir)
    torch.manual_seed(seed)
    model = BERTAlignModel(model=str(model_dir.resolve()), using_pretrained=False)
    ckpt_path = out_dir / "AlignScore-tiny.ckpt"
    torch.save({"state_dict": model.state_dict()}, ckpt_path)
    return ckpt_path, model_dir.resolve()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_tiny_alignscore.py OUT_DIR")
    print(*build_tiny_alignscore(sys.argv[1]))
