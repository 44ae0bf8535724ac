"""Prompt templates: the paper's generation prompts, the g_T extraction prompts and P(True).

Sources (paper appendix "Prompts", shared/paper/task_awareness.tex):
  lst:singleqa_prompt       -> SINGLE_QA_PROMPT       ("single_answer": TriviaQA)
  lst:mt_prompt             -> TRANSLATION_PROMPT     ("translation": WMT19 fi-en)
  lst:simplex_prompt        -> SIMPLEX_PROMPT         ("answer_probabilities": MAQA*)
  lst:summarization_prompt  -> SUMMARIZATION_PROMPT   ("summary": CNN/DM)
  lst:set_prompt_gt         -> SET_EXTRACTION_PROMPT  (g_T of answer sets)
  lst:simplex_prompt_gt     -> SIMPLEX_EXTRACTION_PROMPT (g_T of answer distributions)
The listings are reproduced character for character, line breaks included (the paper's
lstlisting text is the prompt; we do not re-wrap it). One line is cut in the source: the simplex
g_T's example answer, which SIMPLEX_EXTRACTION_PROMPT_RESTORED completes (the one sent by
default; docs/fidelity.md "Simplex g_T example"). The paper gives no generation prompt for
the MAQA set task: SET_QA_PROMPT is our choice, written in the style of the single-answer one.

Placeholders are filled by one regex pass (never `str.format`), so braces inside a question or
an answer are kept as they are and a question containing "{answer}" is not substituted twice.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

# --- generation prompts (verbatim from the paper's appendix) -----------------------------------

SINGLE_QA_PROMPT = "{question}. Only provide the answer without explanation."

TRANSLATION_PROMPT = (
    "Translate the following sentence into english. Only return the translation without any\n"
    "other text.\n"
    "Sentence: {question}\n"
    "Translation:"
)

SIMPLEX_PROMPT = (
    "Given a question with multiple possible answers provide the individual answers together\n"
    "with their associated probabilities. Only return the individual answers and\n"
    "probabilities without explanations and ensure that the probabilities sum to 1.0. Question:\n"
    "{question}."
)

SUMMARIZATION_PROMPT = (
    "Article: {article}\n"
    "Summarize the above article in three simple sentences containing the main points. "
    "Only give back the summary without newlines or other formatting.\n"
    "Summary:"
)

# OUR CHOICE (the paper lists no MAQA generation prompt): same shape as SINGLE_QA_PROMPT; asking
# for a comma-separated list keeps answers easy to split for the rule-based set extractor.
SET_QA_PROMPT = "{question}. List all correct answers, separated by commas, without explanation."

# Prompt name (a task's `prompt`) -> generation template, named after what it asks for.
TASK_PROMPTS: dict[str, str] = {
    "single_answer": SINGLE_QA_PROMPT,
    "answer_list": SET_QA_PROMPT,
    "answer_probabilities": SIMPLEX_PROMPT,
    "translation": TRANSLATION_PROMPT,
    "summary": SUMMARIZATION_PROMPT,
}

# --- g_T extraction prompts (verbatim from the paper's appendix) -------------------------------

SET_EXTRACTION_PROMPT = """You extract explicit, semantically distinct atomic answers from a model answer.

Rules:
- Extract only what the answer explicitly states; no inference.
- Split coordinated lists (commas, and/or, slashes) into separate items.
- Merge synonyms/rephrasings; keep one canonical surface form, preserving key head nouns.
- Remove leading articles/hedges; remove trailing punctuation/parentheticals unless part of the name.
- Ignore explanations/justifications; include quantities only if the quantity itself is the item.
- If no explicit item appears (I don't know, etc.), output: I don't know.
- Output strictly: one item per line, no bullets or extra text.

Follow the output format in the examples.

Example 1
Q: Which oceans border the USA?
A: The Atlantic and Pacific Oceans.
Output:
Atlantic Ocean
Pacific Ocean

Example 2
Q: What are the official languages of Switzerland?
A: German, French, Italian, and Romansh are the four official languages.
Output:
German
French
Italian
Romansh



Q: {question}
A: {answer}

Task: List all explicit, distinct answers from the model answer, one per line."""

# Verbatim, defects included: the example line "A: Atlantic (55%" is cut where the paper's LaTeX
# source starts a '%' comment (restored below: SIMPLEX_EXTRACTION_PROMPT_RESTORED), the
# example JSON lacks a closing quote after "Atlantic,"/"Pacific,", and the example is written with
# doubled braces (str.format escaping) while the schema lines use single ones. We keep the text
# as published; `fill_extraction_prompt` renders "{{"/"}}" as "{"/"}" so the model sees single
# braces everywhere.
SIMPLEX_EXTRACTION_PROMPT = """You extract explicit, semantically distinct atomic answers and their stated probabilities.

Rules:
- Extract only what is explicitly stated; no inference.
- Each atomic answer must have the probability stated in the text.
- Split lists only if items have separate probabilities.
- Merge synonyms/rephrasings into one canonical answer; SUM their probabilities.
- Convert percentages/ratios to decimals in [0,1].
- Do NOT renormalize or modify probabilities.
- If no explicit answer appears, output exactly: {"items":[{"answer":"I don't know","p":1.0}]}
- Output valid JSON only, no extra text.

Schema:
{"items":[{"answer":string,"p":number}]}

Example
Q: Which oceans border the USA?
A: Atlantic (55%
Output:
{{"items":[{{"answer":"Atlantic,"p":0.55}},{{"answer":"Pacific,"p":0.45}}]}}

Q: {question}
A: {answer}

Task: Extract answer probability pairs."""

# The example answer before the cut, read off the JSON line after it (Atlantic 0.55, Pacific
# 0.45) in the form the line starts with, "<answer> (<percent>%)": what the paper's g_T most
# likely sent, since outside LaTeX a "%" starts no comment. The two answers and their
# percentages are the JSON's; the separator ", " is our reading.
SIMPLEX_EXAMPLE_AS_PUBLISHED = "A: Atlantic (55%\n"
SIMPLEX_EXAMPLE_RESTORED = "A: Atlantic (55%), Pacific (45%)\n"
SIMPLEX_EXTRACTION_PROMPT_RESTORED = SIMPLEX_EXTRACTION_PROMPT.replace(
    SIMPLEX_EXAMPLE_AS_PUBLISHED, SIMPLEX_EXAMPLE_RESTORED
)
# mappers.simplex.prompt_example -> the simplex g_T template
SIMPLEX_EXTRACTION_PROMPTS: dict[str, str] = {
    "restored": SIMPLEX_EXTRACTION_PROMPT_RESTORED,  # experiment=paper (docs/fidelity.md)
    "verbatim": SIMPLEX_EXTRACTION_PROMPT,  # the listing as published, example cut at "%"
}

EXTRACTION_PROMPTS: dict[str, str] = {
    "answer_set": SET_EXTRACTION_PROMPT,
    "answer_distribution": SIMPLEX_EXTRACTION_PROMPT_RESTORED,
}

# --- P(True) (lm-polygraph's wording) ---------------------------------------------------------
# Copied from lm-polygraph 0.7.0, lm_polygraph/stat_calculators/prompt.py:
# PromptCalculator (stat "p_true") and SamplingPromptCalculator (stat "p_true_sampling").
# lm-polygraph fills them with `prompt.format(q=input_text, s=", ".join(samples), a=greedy_text)`
# and reads the log-probability of the single token "True" (PTRUE_EXPECTED) at the next position.
PTRUE_PROMPT = (
    "Question: {q}\n Possible answer:{a}\n "
    "Is the possible answer:\n (A) True\n (B) False\n The possible answer is:"
)
PTRUE_SAMPLING_PROMPT = (
    "Question: {q}\n Here are some ideas that were brainstormed: {s}\n Possible answer:{a}\n "
    "Is the possible answer:\n (A) True\n (B) False\n The possible answer is:"
)
PTRUE_EXPECTED = "True"

_GENERATION_SLOT = re.compile(r"\{(question|article)\}")
_EXTRACTION_SLOT = re.compile(r"\{\{|\}\}|\{(question|answer)\}")


def _require_str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, got {type(value).__name__}: {value!r}")
    return value


# a slot followed by the template's own full stop ("{question}. Only provide ...")
_SLOT_STOP = re.compile(r"(\{(?:question|article)\})\.")
_ENDS_SENTENCE = re.compile(r"[.?!\u2026\u3002\uff1f\uff01\u061f]['\")\]\u201d\u2019]*\s*$")


def fill_prompt(template: str, question: str, written: bool = False) -> str:
    """Fill a generation template's {question} / {article} slot with `question`.

    `written`: as written text, where the question's own end mark ("?", ".", "!", and their
    CJK and Arabic forms) stands in for the template's full stop after the slot ("Which oceans
    border the USA? List all ...", not "USA?. List"). The paper's runs fill the template
    verbatim (False: `experiment=paper` and the default run, docs/fidelity.md); the
    practitioner's paths (generate_and_score, serve's task_prompt) fill it as written text."""
    _require_str(question, "question")
    if written and _ENDS_SENTENCE.search(question):
        question = question.rstrip()
        template = _SLOT_STOP.sub(lambda m: m.group(1), template)
    return _GENERATION_SLOT.sub(lambda _m: question, template)


def is_prompt(prompt: str) -> bool:
    """A task's `prompt`: the name of a template here, or a template itself ("{question}" slot)."""
    return prompt in TASK_PROMPTS or bool(_GENERATION_SLOT.search(prompt or ""))


def task_prompt(prompt: str, question: str, written: bool = False) -> str:
    """The generation prompt: `prompt` names a template of TASK_PROMPTS (the paper's, by what
    they ask for) or is a template with a {question} slot (a task config can carry its own)."""
    if prompt in TASK_PROMPTS:
        return fill_prompt(TASK_PROMPTS[prompt], question, written)
    if not is_prompt(prompt):
        raise ValueError(
            f"unknown prompt {prompt!r}: name one of {sorted(TASK_PROMPTS)} or give "
            "a template with a {question} slot"
        )
    return fill_prompt(prompt, question, written)


def build_messages(
    task: str, record: Mapping[str, Any], written: bool = False
) -> list[dict[str, str]]:
    """Chat messages for one dataset record (a row of the DATASET artifact).

    The paper uses no system prompt, so this is a single user turn holding the task prompt
    (`written`: filled as written text, `fill_prompt`).
    """
    if "question" not in record:
        raise KeyError(f"record has no 'question' field (fields: {sorted(record)})")
    question = _require_str(record["question"], "record['question']")
    return [{"role": "user", "content": task_prompt(task, question, written)}]


def render_chat(tokenizer: Any, messages: Sequence[Mapping[str, str]]) -> str:
    """The model input string: the tokenizer's chat template with the generation prompt added.

    Tokenizers without a chat template (base models) get the raw user text, several user turns
    joined by a blank line.
    """
    if not messages:
        raise ValueError("messages is empty; build them with build_messages(task, record)")
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(
            [dict(m) for m in messages], add_generation_prompt=True, tokenize=False
        )
    return "\n\n".join(m["content"] for m in messages if m.get("role", "user") == "user")


def fill_extraction_prompt(template: str, question: str, answer: str) -> str:
    """Fill a g_T extraction prompt's {question}/{answer}; "{{" and "}}" become "{" and "}".

    Single braces that are not a placeholder (the JSON schema lines) are kept as they are.
    """
    _require_str(question, "question")
    _require_str(answer, "answer")
    values = {"question": question, "answer": answer}

    def _sub(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        return values[match.group(1)]

    return _EXTRACTION_SLOT.sub(_sub, template)


def set_extraction_prompt(question: str, answer: str) -> str:
    """lst:set_prompt_gt filled for one (question, model answer) pair."""
    return fill_extraction_prompt(SET_EXTRACTION_PROMPT, question, answer)


def simplex_extraction_prompt(question: str, answer: str, example: str = "restored") -> str:
    """lst:simplex_prompt_gt filled for one (question, model answer) pair; `example`: its example
    answer "restored" (SIMPLEX_EXAMPLE_RESTORED) or "verbatim" (cut at "%", as published)."""
    if example not in SIMPLEX_EXTRACTION_PROMPTS:
        raise ValueError(
            f"example={example!r}: choose one of {', '.join(SIMPLEX_EXTRACTION_PROMPTS)}"
        )
    return fill_extraction_prompt(SIMPLEX_EXTRACTION_PROMPTS[example], question, answer)


def ptrue_prompt(question: str, greedy_answer: str, samples: Sequence[str] | None = None) -> str:
    """lm-polygraph's P(True) prompt; with `samples`, its sampling variant ("brainstormed" ideas).

    `question` is what lm-polygraph calls the input text (the model's prompt).
    """
    _require_str(question, "question")
    _require_str(greedy_answer, "greedy_answer")
    if samples is None:
        return PTRUE_PROMPT.format(q=question, a=greedy_answer)
    if isinstance(samples, str) or not all(isinstance(s, str) for s in samples):
        raise TypeError("samples must be a list of str (or None for the plain P(True) prompt)")
    return PTRUE_SAMPLING_PROMPT.format(q=question, s=", ".join(samples), a=greedy_answer)
