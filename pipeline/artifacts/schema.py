"""Column contracts of every artifact (docs/design.md s5). Stages write exactly these columns.

Kept as plain data (no pyarrow import) so `import pipeline` stays instant; `pipeline.artifacts.store`
turns them into pyarrow schemas and validates every write against them.
"""

from __future__ import annotations

# Logical types: "str", "int", "float", "bool", "list<float>", "list<str>", "list<list<str>>", "json".
# "json" columns hold a JSON string (latents, actions) so artifacts stay readable in any tool.

DATASET = {
    "prompt_id": "str",  # stable id, e.g. "maqa-bundled-0007"
    "dataset": "str",  # dataset config name, e.g. "maqa_bundled"
    "question": "str",  # the model input: question, Finnish source sentence or article
    "answers": "list<list<str>>",  # one alias list per correct answer (QA tasks); [] otherwise
    "probabilities": "list<float>",  # MAQA*: p* aligned with `answers`; [] otherwise
    "reference_text": "str",  # WMT19: reference translation; CNN/DM: reference summary; "" otherwise
}

SAMPLES = {
    "prompt_id": "str",
    "sample_idx": "int",  # 0..M-1
    "text": "str",
    "token_logprobs": "list<float>",  # log p of each generated token, EOS included when generated
    "logprob": "float",  # == sum(token_logprobs)
    # "stop", "length" (cut by the token limit), another reason the server gave; "" unknown
    "finish_reason": "str",
}

# Columns added after artifacts were first written, with the value a writer that predates them
# means (pipeline.artifacts.store.to_table fills it; a reader of an older artifact takes the same).
ADDED_COLUMNS = {"samples": {"finish_reason": ""}}

DECODES = {
    "prompt_id": "str",
    "strategy": "str",  # greedy | beam | contrastive | ar
    "text": "str",
    "token_logprobs": "list<float>",  # under the unmodified model distribution
    "logprob": "float",
}

PTRUE = {
    "prompt_id": "str",
    "logprob_true": "float",  # log p("True") after lm-polygraph's P(True) prompt
    "p_true": "float",  # exp(logprob_true)
}

# Columns an artifact holds only when a setting asks for them: absent otherwise, so that an
# artifact written without the setting is column for column (and byte for byte) what it was
# before the setting existed. pipeline.artifacts.store.to_table writes them when the frame has them.
OPTIONAL_COLUMNS = {
    "ptrue": {
        # generation.ptrue_beam=true: P(True) asked about the beam decode's text (a sensitivity row
        # of the beam-target tables; logprob_true asks about the greedy decode, lm-polygraph's default)
        "logprob_true_beam": "float",
        "p_true_beam": "float",  # exp(logprob_true_beam)
    }
}

LATENTS = {
    "prompt_id": "str",
    "source": "str",  # "sample" or a decode strategy (greedy | beam | contrastive | ar)
    "sample_idx": "int",  # 0..M-1 for samples, -1 for decodes
    "latent": "json",  # pipeline.latent.codec encoding; "null" when parse_ok is False
    # True: decided over (read by g_T, or an unread sample counted as the space's no-answer
    # latent under reading.unreadable=no_answer)
    "parse_ok": "bool",
    "read": "bool",  # g_T read the response (False: unreadable, or cut by the token limit)
}

DECISIONS = {
    "prompt_id": "str",
    "method": "str",  # bayes | bayes_fbeta | map | sample_mbr | self_consistency | beam | greedy | contrastive | ar
    "action": "json",  # latent of the decision ("null" when no parseable latent)
    "risk": "float",  # empirical Bayes risk R(action) under the prompt's samples
    "text": "str",  # text for text metrics (sphere: closest sample; graphs: g_T^-1 joined triples)
}

UNCERTAINTY = {
    "prompt_id": "str",
    "estimator": "str",  # msp | semantic_entropy | kle | sar | cocoa_msp | ptrue | latent_entropy | bayes_risk
    "value": "float",  # higher = less confident
}

QUALITY = {
    "prompt_id": "str",
    "method": "str",  # as DECISIONS.method
    "metric": "str",  # hamming | f1 | exact_match_error | cosine_distance | kl | comet | alignscore
    "value": "float",  # the metric as the paper reports it (see higher_is_better)
    "higher_is_better": "bool",
}

UQ_SCORES = {
    "estimator": "str",
    "target": "str",  # bayes | beam: whose quality the uncertainty should predict
    "metric": "str",
    "prr": "float",
    "prr_low": "float",
    "prr_high": "float",
    "auc": "float",
    "auc_low": "float",
    "auc_high": "float",
    # prompts scored: those of the target's quality where every estimator has a value (one prompt
    # set for every estimator of a target and metric, so their PRRs are comparable)
    "n": "int",
    # prompts with the target's quality left out because an estimator has no value on them (an
    # estimator with no value on any prompt is reported with n = 0 and leaves the set alone)
    "n_dropped": "int",
}

AUDIT = {
    "prompt_id": "str",
    "reference_labels": "list<str>",  # one label per reference answer (canonical first alias)
    # {label: {"answer": index into reference_labels or null, "rule": alias | head_noun | plural
    #  | surname | judge | same | none}} for every label of the prompt's responses and decisions
    "label_matches": "json",
    "warnings": "list<str>",  # pipeline.evaluation.audit.WARNINGS, "kind: detail"
}

# Who drives the stages, recorded as `producer` in every manifest: this pipeline (python -m
# pipeline, one cell per experiment/model/dataset) or the scorer (python -m pipeline.score, one
# work folder per scored file; its config is experiment=score). One's artifacts are never
# read as the other's.
PIPELINE_PRODUCER, SCORER_PRODUCER = "pipeline", "pipeline.score"


def producer_of(experiment: str) -> str:
    """The producer a run of `experiment` records (the scorer composes experiment=score)."""
    return SCORER_PRODUCER if experiment == "score" else PIPELINE_PRODUCER


# The stage that writes each artifact (named in errors that say how to rebuild one).
PRODUCER = {
    "dataset": "generate",
    "samples": "generate",
    "decodes": "generate",
    "ptrue": "generate",
    "latents": "map",
    "decisions": "decide",
    "uncertainty": "uq",
    "quality": "evaluate",
    "uq_scores": "evaluate",
    "audit": "evaluate",
}

ARTIFACTS: dict[str, dict[str, str]] = {
    "dataset": DATASET,
    "samples": SAMPLES,
    "decodes": DECODES,
    "ptrue": PTRUE,
    "latents": LATENTS,
    "decisions": DECISIONS,
    "uncertainty": UNCERTAINTY,
    "quality": QUALITY,
    "uq_scores": UQ_SCORES,
    "audit": AUDIT,
}
