"""Prompts read as written text on the practitioner's paths (issue 51.4): no "?." or "..", for
every template, whatever end mark the question has (CJK and Arabic ones included); the paper's
runs keep the verbatim filling (docs/fidelity.md)."""

from __future__ import annotations

import re

import pytest

from pipeline.data.prompts import TASK_PROMPTS, build_messages, fill_prompt

QUESTIONS = [
    "Which oceans border the USA?",
    "Name the colours of the flag.",
    "Name the colours",
    "List them!",
    "ポケモンの名前は？",
    "ما هي عاصمة فرنسا؟",
    "Which oceans border the USA?  ",
]


@pytest.mark.parametrize("template", sorted(TASK_PROMPTS))
@pytest.mark.parametrize("question", QUESTIONS)
def test_every_template_reads_as_written_text(template, question):
    text = build_messages(template, {"question": question}, written=True)[0]["content"]
    assert not re.search(r"[?!.\uff1f\u061f]\s*\.(?!\.)", text.replace("...", "")), text
    assert question.rstrip() in text
    if question.rstrip()[-1] not in "?!.\uff1f\u061f" and "{question}." in TASK_PROMPTS[template]:
        assert question + "." in text  # a question without an end mark gets the template's


def test_the_paper_filling_is_verbatim():
    assert fill_prompt(TASK_PROMPTS["single_answer"], "Who wrote Hamlet?") == (
        "Who wrote Hamlet?. Only provide the answer without explanation."
    )
    assert fill_prompt(TASK_PROMPTS["single_answer"], "Who wrote Hamlet?", written=True) == (
        "Who wrote Hamlet? Only provide the answer without explanation."
    )
