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

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any


# size: the decoding loop: its state (live rows, context states, cache, logits, positions) changes
# together at every step; the candidates' forward pass is _Candidates, the checks
# _check_arguments, and splitting the loop further would thread that state through helpers
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

    _check_arguments(alpha, top_k, max_new_tokens)
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
        candidates = _Candidates.of(
            model, cache, min(top_k, logits.shape[-1]), keep_logits, input_ids.device
        )
        k = candidates.k
        for _ in range(max_new_tokens):
            n = logits.shape[0]
            rows = torch.arange(n, device=input_ids.device)
            logp = torch.log_softmax(logits, dim=-1)
            top_probs, top_ids = logp.exp().topk(k, dim=-1)  # (B, k), sorted by probability
            cand_hidden, cand_logits = candidates.forward(
                cache, top_ids, context_valid, next_position
            )
            similarity = torch.einsum("bkd,btd->bkt", cand_hidden, context)
            similarity = similarity.masked_fill(~context_valid.unsqueeze(1), float("-inf"))
            penalty = similarity.max(dim=-1).values  # (B, k)
            score = (1.0 - alpha) * top_probs - alpha * penalty
            pick = score.argmax(dim=-1)  # first maximum on ties: the more probable candidate
            token = top_ids[rows, pick]
            for row, tok, lp in zip(live, token.tolist(), logp[rows, token].tolist()):
                tokens[row].append(int(tok))
                logprobs[row].append(float(lp))

            candidates.keep_picked(cache, rows, pick)
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


def _check_arguments(alpha: float, top_k: int, max_new_tokens: int) -> None:
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1] (got {alpha})")
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1 (got {top_k})")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1 (got {max_new_tokens})")


@dataclass(frozen=True)
class _Candidates:
    """How a step's k candidates of each row go through the model (fixed for one search)."""

    model: Any
    k: int
    # side by side as k query positions on a GrowingCache (else k rows on a repeated cache)
    tree: bool
    eager: bool  # the attention takes an additive mask, not a boolean one
    keep_logits: Callable[[int], dict[str, int]]
    sees_itself: Any  # (k, k) identity: a candidate sees itself, not the other candidates

    @classmethod
    def of(
        cls,
        model: Any,
        cache: Any,
        k: int,
        keep_logits: Callable[[int], dict[str, int]],
        device: Any,
    ) -> _Candidates:
        """The candidates' pass for `model` with this `cache`, on the inputs' `device`."""
        import torch

        from pipeline.generation.kv_cache import GrowingCache

        attention = str(getattr(model.config, "_attn_implementation", "") or "")
        # the candidates side by side need an arbitrary mask: SDPA (a boolean one) or eager
        # (an additive one); other kernels (flash) take the candidates as rows
        tree = isinstance(cache, GrowingCache) and (
            attention.startswith("sdpa") or attention == "eager"
        )
        sees_itself = torch.eye(k, dtype=torch.bool, device=device)
        return cls(model, k, tree, attention == "eager", keep_logits, sees_itself)

    def forward(
        self, cache: Any, top_ids: Any, context_valid: Any, next_position: Any
    ) -> tuple[Any, Any]:
        """The candidates' unit last-layer hidden states (B, k, d) and next-token logits
        (B, k, vocab); the cache then holds them too (`keep_picked` keeps the chosen ones)."""
        import torch

        model, k, keep_logits = self.model, self.k, self.keep_logits
        n = top_ids.shape[0]
        if self.tree:
            # The k candidates of a row go in as k query positions at one position id; each
            # sees the context and itself only (not the other candidates), so its hidden
            # state is the one it would have alone, and the cache is not copied k times.
            sees = torch.cat(
                [context_valid.unsqueeze(1).expand(n, k, -1), self.sees_itself.expand(n, k, k)],
                dim=2,
            ).unsqueeze(1)
            if self.eager:
                sees = torch.zeros(sees.shape, dtype=model.dtype, device=sees.device).masked_fill(
                    ~sees, torch.finfo(model.dtype).min
                )
            cand = model(
                input_ids=top_ids,
                attention_mask=sees,
                position_ids=next_position.unsqueeze(1).expand(n, k),
                past_key_values=cache,
                use_cache=True,
                output_hidden_states=True,
                **keep_logits(k),
            )
            return _unit(cand.hidden_states[-1][:, -k:].float()), cand.logits[:, -k:]
        # sliding-window layers: the candidates as k rows on a repeated cache
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
        return (
            _unit(cand.hidden_states[-1][:, -1].float()).view(n, k, -1),
            cand.logits[:, -1].view(n, k, -1),
        )

    def keep_picked(self, cache: Any, rows: Any, pick: Any) -> None:
        """The cache narrowed to each row's picked candidate."""
        if self.tree:
            cache.keep_one_of_last(self.k, pick)
        else:
            cache.batch_select_indices(rows * self.k + pick)


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
