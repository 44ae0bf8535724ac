"""scripts/commit_subject.py, the commit-msg hook of CONTRIBUTING.md: a subject of at most 72
characters, a blank line before the body."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import commit_subject  # noqa: E402


def test_a_short_subject_with_a_body_passes():
    assert commit_subject.problems("Map stage: read the cell\n\nThe detail.\n") == []
    assert commit_subject.problems("x" * 72) == []


def test_a_long_subject_and_a_missing_blank_line_are_named():
    found = commit_subject.problems("x" * 73 + "\nbody right after\n")
    assert found == [
        "subject has 73 characters (at most 72): put the detail in the body",
        "no blank line between the subject and the body",
    ]
    assert commit_subject.problems("# only a comment\n") == ["empty message"]


def test_the_hook_refuses_a_long_subject(tmp_path):
    message = tmp_path / "COMMIT_EDITMSG"
    message.write_text("y" * 80 + "\n")
    hook = subprocess.run(
        ["sh", str(ROOT / ".githooks" / "commit-msg"), str(message)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert hook.returncode == 1 and "80 characters" in hook.stderr
    message.write_text("A fine subject\n")
    assert (
        subprocess.run(
            ["sh", str(ROOT / ".githooks" / "commit-msg"), str(message)], cwd=ROOT
        ).returncode
        == 0
    )
