#!/usr/bin/env python
"""Build a tiny, randomly initialised COMET checkpoint folder, fully offline.

The folder has the layout ``comet.load_from_checkpoint`` expects of a hub download::

    OUT/hparams.yaml
    OUT/checkpoints/model.ckpt
    OUT/encoder/{config.json, tokenizer.json, ...}   # tiny XLM-R, referenced by hparams

so ``pipeline.evaluation.text_metrics.comet_scores(..., model=OUT)`` runs the real COMET code
path (load_from_checkpoint -> RegressionMetric -> predict) on it. Weights are random: the
scores carry no quality meaning. Usage: ``python scripts/make_tiny_comet.py OUT``.
"""

from __future__ import annotations

import sys
from pathlib import Path

# A little English and Finnish so the unigram vocabulary covers both sides of WMT19 fi-en.
TOKENIZER_CORPUS = [
    "The cat sat on the mat.",
    "A dog barked at the moon last night.",
    "Helsinki is the capital of Finland.",
    "The weather is cold in winter.",
    "We translate sentences from Finnish into English.",
    "Kissa istui matolla.",
    "Koira haukkui kuulle eilen illalla.",
    "Helsinki on Suomen pääkaupunki.",
    "Talvella on kylmä sää.",
    "Käännämme lauseita suomesta englanniksi.",
    "Hello world, this is a tiny model for tests.",
    "Numbers 0 1 2 3 4 5 6 7 8 9.",
]
XLMR_SPECIAL_TOKENS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]  # XLM-R's ids 0..4


def build_xlmr_tokenizer(out_dir: Path, vocab_size: int = 300):
    """Train a tiny unigram (sentencepiece-style) tokenizer; save it as XLM-R's fast one."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from tokenizers.trainers import UnigramTrainer
    from transformers import XLMRobertaTokenizerFast

    tokenizer = Tokenizer(models.Unigram())
    tokenizer.normalizer = normalizers.NFKC()
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    trainer = UnigramTrainer(
        vocab_size=vocab_size,
        special_tokens=XLMR_SPECIAL_TOKENS,
        unk_token="<unk>",
        show_progress=False,
    )
    tokenizer.train_from_iterator(TOKENIZER_CORPUS, trainer=trainer)
    bos, eos = tokenizer.token_to_id("<s>"), tokenizer.token_to_id("</s>")
    # XLM-R's templates: <s> A </s> and <s> A </s></s> B </s>.
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>",
        pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", bos), ("</s>", eos)],
    )
    fast = XLMRobertaTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<s>",
        eos_token="</s>",
        sep_token="</s>",
        cls_token="<s>",
        unk_token="<unk>",
        pad_token="<pad>",
        mask_token="<mask>",
        model_max_length=128,
    )
    fast.save_pretrained(out_dir)
    return fast


def build_tiny_comet(out_dir: str | Path, seed: int = 0) -> Path:
    """Write a tiny random RegressionMetric (wmt22-comet-da architecture) to ``out_dir``.

    Returns the path of ``checkpoints/model.ckpt``.
    """
    import pytorch_lightning
    import torch
    import yaml
    from comet.models import RegressionMetric
    from transformers import XLMRobertaConfig

    out_dir = Path(out_dir)
    encoder_dir = out_dir / "encoder"
    tokenizer = build_xlmr_tokenizer(encoder_dir)
    XLMRobertaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=130,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    ).save_pretrained(encoder_dir)

    torch.manual_seed(seed)
    # Same hyper-parameters as Unbabel/wmt22-comet-da except the encoder and head sizes.
    model = RegressionMetric(
        pretrained_model=str(encoder_dir.resolve()),
        load_pretrained_weights=False,
        local_files_only=True,
        pool="avg",
        layer="mix",
        layer_transformation="sparsemax",
        layer_norm=False,
        hidden_sizes=[64, 32],
        activations="Tanh",
        dropout=0.1,
    )
    hparams = dict(model.hparams)
    ckpt_path = out_dir / "checkpoints" / "model.ckpt"
    ckpt_path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(
        {
            "state_dict": model.state_dict(),
            "hyper_parameters": hparams,
            "pytorch-lightning_version": pytorch_lightning.__version__,
            "epoch": 0,
            "global_step": 0,
        },
        ckpt_path,
    )
    (out_dir / "hparams.yaml").write_text(yaml.safe_dump(hparams))
    return ckpt_path


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_tiny_comet.py OUT_DIR")
    print(build_tiny_comet(sys.argv[1]))
