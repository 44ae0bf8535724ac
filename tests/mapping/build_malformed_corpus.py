"""Writes malformed_responses.json: the corpus of bad model outputs every parser must survive.

Run from the repository root: `.venv/bin/python tests/mapping/build_malformed_corpus.py`.
Huge strings and undecodable bytes are stored as recipes (see `materialise` in
test_malformed_corpus.py) so the data file stays small. Expected outcomes are NOT written here:
the test asserts exact failure counts and per-item results that were reviewed by hand.
"""

import json
from pathlib import Path

from pipeline.data.prompts import SIMPLEX_PROMPT, set_extraction_prompt, simplex_extraction_prompt


def t(text):
    return {"kind": "text", "text": text}


ENTRIES = [
    # empty and whitespace
    t(""),
    t(" "),
    t("\n\n\n"),
    t("\t \r\n "),
    t("\u200b"),
    t("\u00a0\u3000"),
    # invalid or empty JSON
    t("{"),
    t("}"),
    t('{"items":'),
    t('{"items":[{"answer":"Atlantic","p":}]}'),
    t('{"items":[{"answer":,"p":0.5}]}'),
    t("[{]"),
    t('{"Atlantic" 0.5}'),
    t("{'items': ["),
    t("null"),
    t("true"),
    t("[]"),
    t("{}"),
    t('{"items": []}'),
    t('{"items": null}'),
    t('{"items": "Atlantic"}'),
    t('{"items":[{"answer":"Atlantic"}]}'),
    t('{"items":[{"p":0.5}]}'),
    t('{"items":[1,2,3]}'),
    t("[[1,2],[3,4]]"),
    t('{"answer": "Paris"}'),
    t('{"answer": null, "p": 0.3}'),
    t('{"items":[{"answer":"Atlantic","p":"high"}]}'),
    t('{"items":[{"answer":"Atlantic","p":true}]}'),
    t('{"items":[{"answer":"","p":0.5}]}'),
    t('{"items":[{"answer":"...","p":0.5}]}'),
    t('{"items":[{"answer":"A","p":0}]}'),
    t('"just a json string"'),
    t("12345"),
    t("[1, 2, 3]"),
    t('{"items":[{"answer":"Atlantic","p":0.5},]'),
    t("```json\n```"),
    t("```\n{broken\n```"),
    t("<json>{}</json>"),
    # NaN, negative, infinite, out-of-range probabilities
    t('{"Atlantic": NaN}'),
    t('{"Atlantic": -0.5, "Pacific": 1.5}'),
    t('{"Atlantic": Infinity}'),
    t('{"items":[{"answer":"Atlantic","p":-1e-9}]}'),
    t("Atlantic: -20%"),
    t("Atlantic: nan"),
    t("Atlantic: inf"),
    t('{"Atlantic": 1e309}'),
    t('{"Atlantic": 250}'),
    t('{"items":[{"answer":"Atlantic","p":"NaN"}]}'),
    t('{"items":[{"answer":"Atlantic","p":-Infinity}]}'),
    t("Atlantic (-0.3)\nPacific (1.3)"),
    # nested junk
    t('{"items":{"items":{"items":{"items":{"items":{"items":{"Atlantic":0.5}}}}}}}'),
    t("[[[[[[[[[[]]]]]]]]]]"),
    t('{"a":{"b":{"c":[1,{"d":null}]}}}'),
    {"kind": "repeat", "unit": "[", "times": 100000},
    {"kind": "repeat", "unit": '{"a":', "times": 50000},
    t('{"items":[{"answer":{"nested":"Atlantic"},"p":0.5}]}'),
    t('{"items":[{"answer":["Atlantic","Pacific"],"p":0.5}]}'),
    # huge strings (~1 MB)
    {"kind": "repeat", "unit": "a", "times": 1_000_000},
    {"kind": "repeat", "unit": "{", "times": 1_000_000},
    {"kind": "repeat", "unit": "\U0001f642", "times": 250_000},
    {"kind": "repeat", "unit": "lorem ipsum dolor sit amet ", "times": 40_000},
    {"kind": "repeat", "unit": "answer: ", "times": 130_000},
    {"kind": "repeat", "unit": "1.", "times": 500_000},
    {"kind": "repeat", "unit": "Paris, ", "times": 150_000},
    # undecodable bytes
    {"kind": "bytes_hex", "hex": "fffe00"},
    {"kind": "bytes_hex", "hex": "808182"},
    {"kind": "bytes_hex", "hex": "c328"},
    {
        "kind": "bytes_hex",
        "hex": "7b226974656d73223a5b7b22616e73776572223aff2c2270223a302e357d5d7d",
    },
    {"kind": "bytes_hex", "hex": "00000000"},
    {"kind": "bytes_hex", "hex": "e9e0e8ff"},
    # prompt echoes
    t(set_extraction_prompt("Which oceans border the USA?", "")),
    t(simplex_extraction_prompt("Which oceans border the USA?", "")),
    t(SIMPLEX_PROMPT.replace("{question}", "Which oceans border the USA?")),
    t("Q: Which oceans border the USA?\nA:"),
    t("Output:"),
    t("Task: Extract answer probability pairs."),
    t('{"items":[{"answer":string,"p":number}]}'),
    t('Schema:\n{"items":[{"answer":string,"p":number}]}'),
    # wrong Python types handed to the parsers
    {"kind": "value", "value": None},
    {"kind": "value", "value": 42},
    {"kind": "value", "value": 3.5},
    {"kind": "value", "value": [1, 2]},
    {"kind": "value", "value": True},
    {"kind": "value", "value": {"items": 7}},
    {"kind": "nan"},
    {"kind": "bytes_hex", "hex": ""},
    # unicode oddities
    t("\u65e5\u672c\u8a9e\u306e\u7b54\u3048"),
    t("\U0001f642\U0001f642\U0001f642"),
    t("\u202eesirap"),
    t("\x00\x01\x02\x03"),
    t("Z\u0338\u0322\u031ba\u0338lgo"),
    t("\u216b"),
    t("\u0628\u0627\u0631\u064a\u0633"),
    t("\ufeff\ufeff"),
    t("\ud7ff\ue000\uffff"),
    # prose and symbol junk
    t("..."),
    t("???"),
    t("%%%"),
    t("-"),
    t("*"),
    t("answer:"),
    t("1. \n2. \n3."),
    t("<html><body></body></html>"),
    t("SELECT * FROM answers;"),
    t("null null null"),
    t("p=0.5"),
    t("42%"),
    t("0.5"),
    t("N/A"),
    t("As an AI language model, I cannot answer that."),
    t("Sorry, I cannot help with that."),
    t("I don't know."),
    t("I do not know the answer."),
    t("The answer is"),
    t("Lorem ipsum"),
    t("Well, it depends."),
    t("Atlantic\nPacific"),
    t("The answers are Atlantic and Pacific, but I am not sure about probabilities."),
    t("Atlantic: high\nPacific: low"),
    t("Atlantic (likely), Pacific (unlikely)"),
    t("50/50"),
    t("1/0"),
    t("Atlantic: 1/0"),
    t("p: 0.5"),
]


def main() -> None:
    out = Path(__file__).with_name("malformed_responses.json")
    for i, entry in enumerate(ENTRIES):
        entry["id"] = i
    out.write_text(json.dumps(ENTRIES, ensure_ascii=True, indent=0) + "\n", encoding="utf-8")
    print(f"wrote {len(ENTRIES)} entries to {out}")


if __name__ == "__main__":
    main()
