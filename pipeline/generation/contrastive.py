"""Contrastive search (Su et al. 2022, "A Contrastive Framework for Neural Text Generation").

At each step the candidates are the top-k tokens of p(. | x_<t) and the chosen token is

    argmax_v  (1 - alpha) * p(v | x_<t)  -  alpha * max_j cos(h_v, h_j)

where h_v is the last-layer hidden state of the candidate appended to the context and h_j
runs over the last-layer hidden states of every context token (prompt included, padding
excluded). Defaults alpha = 0.6, k = 4.

transformers 4.57 moved contrastive search to a hub repository that needs
`trust_remote_code` (and a download), so this is the project's own loop: one forward pass
over the prompts, then per step one forward pass of the B x k candidates. With full-attention
layers the k candidates of a row go in side by side as k query positions, each masked to see
the context and itself, on a KV cache that grows in place (`kv_cache.GrowingCache`) and then
keeps the chosen candidate's slot; otherwise (sliding-window layers, flash kernels) as k rows on
the cache repeated k times, then narrowed back. A row leaves the batch at its EOS. Works on a
left-padded batch.
Token log-probs returned are raw model log-probs (log_softmax of unprocessed logits).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def contrastive_search(
    model: Any,
    input_ids: Any,
    attention_mask: Any,
    max_new_tokens: int,
    alpha: float = 0.6,
    top_k: int = 4,
    eos_token_ids: Iterable[int] = (),
    pad_token_id: int = 0,
) -> tuple[list[list[int]], list[list[float]]]:
    """Decode a left-padded batch; returns per row the token ids (up to and including the
    first EOS) and their raw log-probs."""
    import torch

    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1] (got {alpha})")
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1 (got {top_k})")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1 (got {max_new_tokens})")
    eos = torch.tensor(
        sorted({int(e) for e in eos_token_ids}), dtype=torch.long, device=input_ids.device
    )
    batch = input_ids.shape[0]
    mask = attention_mask.long()
    positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)
    tokens: list[list[int]] = [[] for _ in range(batch)]
    logprobs: list[list[float]] = [[] for _ in range(batch)]
    live = list(range(batch))  # original row of each batch row
    keep_logits = _keep_logits(model)

    from pipeline.generation.kv_cache import GrowingCache

    with torch.inference_mode():
        cache = _cache_for(model, max_new_tokens + top_k)
        out = model(
            input_ids=input_ids,
            attention_mask=mask,
            position_ids=positions,
            past_key_values=cache,
            use_cache=True,
            output_hidden_states=True,
            **keep_logits(1),
        )
        cache = out.past_key_values
        context = _unit(out.hidden_states[-1].float())  # (B, T, d), normalised once
        context_valid = mask.bool()  # padding never counts as context
        logits = out.logits[:, -1].float()
        next_position = mask.sum(-1)  # (B,) position id of the next token
        k = min(top_k, logits.shape[-1])
        candidates_see = torch.eye(k, dtype=torch.bool, device=input_ids.device)

        attention = str(getattr(model.config, "_attn_implementation", "") or "")
        # the candidates side by side need an arbitrary mask: SDPA (a boolean one) or eager
        # (an additive one); other kernels (flash) take the candidates as rows
        tree = isinstance(cache, GrowingCache) and (
            attention.startswith("sdpa") or attention == "eager"
        )
        for _ in range(max_new_tokens):
            n = logits.shape[0]
            rows = torch.arange(n, device=input_ids.device)
            logp = torch.log_softmax(logits, dim=-1)
            top_probs, top_ids = logp.exp().topk(k, dim=-1)  # (B, k), sorted by probability
            if tree:
                # The k candidates of a row go in as k query positions at one position id; each
                # sees the context and itself only (not the other candidates), so its hidden
                # state is the one it would have alone, and the cache is not copied k times.
                sees = torch.cat(
                    [context_valid.unsqueeze(1).expand(n, k, -1), candidates_see.expand(n, k, k)],
                    dim=2,
                ).unsqueeze(1)
                if attention == "eager":
                    sees = torch.zeros(
                        sees.shape, dtype=model.dtype, device=sees.device
                    ).masked_fill(~sees, torch.finfo(model.dtype).min)
                cand = model(
                    input_ids=top_ids,
                    attention_mask=sees,
                    position_ids=next_position.unsqueeze(1).expand(n, k),
                    past_key_values=cache,
                    use_cache=True,
                    output_hidden_states=True,
                    **keep_logits(k),
                )
                cand_hidden = _unit(cand.hidden_states[-1][:, -k:].float())  # (B, k, d)
                cand_logits = cand.logits[:, -k:]
            else:  # sliding-window layers: the candidates as k rows on a repeated cache
                cache.batch_repeat_interleave(k)
                seen = torch.cat([context_valid, context_valid.new_ones(n, 1)], dim=1).long()
                cand = model(
                    input_ids=top_ids.reshape(n * k, 1),
                    attention_mask=seen.repeat_interleave(k, dim=0),
                    position_ids=next_position.repeat_interleave(k).unsqueeze(1),
                    past_key_values=cache,
                    use_cache=True,
                    output_hidden_states=True,
                    **keep_logits(1),
                )
                cand_hidden = _unit(cand.hidden_states[-1][:, -1].float()).view(n, k, -1)
                cand_logits = cand.logits[:, -1].view(n, k, -1)
            similarity = torch.einsum("bkd,btd->bkt", cand_hidden, context)
            similarity = similarity.masked_fill(~context_valid.unsqueeze(1), float("-inf"))
            penalty = similarity.max(dim=-1).values  # (B, k)
            score = (1.0 - alpha) * top_probs - alpha * penalty
            pick = score.argmax(dim=-1)  # first maximum on ties: the more probable candidate
            token = top_ids[rows, pick]
            for row, tok, lp in zip(live, token.tolist(), logp[rows, token].tolist()):
                tokens[row].append(int(tok))
                logprobs[row].append(float(lp))

            if tree:
                cache.keep_one_of_last(k, pick)
            else:
                cache.batch_select_indices(rows * k + pick)
            context = torch.cat([context, cand_hidden[rows, pick].unsqueeze(1)], dim=1)
            context_valid = torch.cat([context_valid, context_valid.new_ones(n, 1)], dim=1)
            logits = cand_logits[rows, pick].float()
            next_position = next_position + 1
            going = ~torch.isin(token, eos)
            if not bool(going.any()):
                break
            if not bool(going.all()):  # a finished row leaves the batch
                keep = going.nonzero().squeeze(1)
                live = [live[i] for i in keep.tolist()]
                context, context_valid = context[keep], context_valid[keep]
                logits, next_position = logits[keep], next_position[keep]
                cache.batch_select_indices(keep)
    return tokens, logprobs


def _keep_logits(model: Any) -> Any:
    """n -> the forward's `logits_to_keep=n` where the model takes it (only the last n
    positions are read), else no argument; the signature is read once per search."""
    import inspect

    takes = "logits_to_keep" in inspect.signature(model.forward).parameters
    return lambda n: {"logits_to_keep": n} if takes else {}


def _cache_for(model: Any, spare_tokens: int) -> Any:
    """A KV cache that grows in place when the model has only full-attention layers
    (`kv_cache.GrowingCache`), else transformers' own."""
    from transformers import DynamicCache

    from pipeline.generation.kv_cache import GrowingCache, supports

    return GrowingCache(spare_tokens) if supports(model) else DynamicCache()


def _unit(x: Any) -> Any:
    """Rows scaled to unit L2 norm (cosine similarity becomes a dot product)."""
    import torch

    return x / x.norm(dim=-1, keepdim=True).clamp_min(torch.finfo(x.dtype).tiny)
