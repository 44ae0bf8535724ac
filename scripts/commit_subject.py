"""Check commit subjects: at most 72 characters, then a blank line before the body.

python scripts/commit_subject.py .git/COMMIT_EDITMSG    # one message (the commit-msg hook)
python scripts/commit_subject.py --range origin/main..HEAD   # every commit of a range
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

MAX_SUBJECT = 72


def problems(message: str) -> list[str]:
    """What is wrong with a commit message (comment lines, as git strips them, ignored)."""
    lines = [line for line in message.splitlines() if not line.startswith("#")]
    while lines and not lines[0].strip():
        lines.pop(0)
    if not lines:
        return ["empty message"]
    out = []
    if len(lines[0]) > MAX_SUBJECT:
        out.append(
            f"subject has {len(lines[0])} characters (at most {MAX_SUBJECT}): put the "
            "detail in the body"
        )
    if len(lines) > 1 and lines[1].strip():
        out.append("no blank line between the subject and the body")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("message_file", nargs="?", type=Path)
    parser.add_argument("--range", help="a git revision range, e.g. origin/main..HEAD")
    args = parser.parse_args(argv)
    if args.range:
        shas = subprocess.run(
            ["git", "rev-list", args.range], capture_output=True, text=True, check=True
        ).stdout.split()
        messages = {
            sha[:10]: subprocess.run(
                ["git", "log", "-1", "--format=%B", sha], capture_output=True, text=True, check=True
            ).stdout
            for sha in shas
        }
    elif args.message_file:
        messages = {str(args.message_file): args.message_file.read_text(encoding="utf-8")}
    else:
        parser.error("give a message file or --range")
    bad = {name: p for name, message in messages.items() if (p := problems(message))}
    for name, found in bad.items():
        print(f"{name}: {'; '.join(found)}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
