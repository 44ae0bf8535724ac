"""Where models run: `device: auto` resolves to the GPU when one is visible.

Every auxiliary model (NLI, embedder, COMET, AlignScore, contrastive search under vLLM) and the
transformers generation backend take their device through `resolve_device`, so a GPU node uses
its GPU without a config change and a CPU machine keeps working.
"""

from __future__ import annotations


def cuda_device_count() -> int:
    """Number of CUDA devices torch sees (0 without torch or without a GPU)."""
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def resolve_device(device: str | None) -> str:
    """`auto` (or None) -> "cuda" when a GPU is visible, else "cpu"; anything else unchanged."""
    if device in (None, "", "auto"):
        return "cuda" if cuda_device_count() > 0 else "cpu"
    return str(device)


def comet_gpus(device: str) -> int:
    """COMET's `predict(gpus=...)` for a resolved torch device string."""
    return 1 if str(device).startswith("cuda") else 0
