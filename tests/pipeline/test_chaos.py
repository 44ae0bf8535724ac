"""scripts/chaos.py --quick: every attack of issue 23 (kills, damaged shards and artifacts,
foreign artifacts, bad config values, hostile scorer rows, broken outside calls, a damaged pair
cache, a killed report, two runs of one cell at once) and of issue 38 (a scorer folder in a
pipeline cell, cache records that must not be kept or served, keys in URL settings, a full disk,
hung / oversized / failing endpoints, SIGTERM and SIGINT, invisible characters and reals past
float range, a packaged-SmolLM2 cell with W&B offline), of issue 52 (`taskaware serve` under
attack over loopback) and of issue 53 (an input changed while read, SIGTERM inside a finaliser,
an edited plugin, a kill while --out is written, the scorer on a full disk, three scorers at
once, the scorer stopped by a signal) tried a few times; no try may end in
other artifacts without an error, a traceback or a crash."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ATTACKS = 26


def parse_table(stdout: str) -> dict[str, dict[str, int]]:
    """{attack: {tries, identical, refused, wrong}} from the Markdown table chaos.py prints."""
    rows = {}
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[1].isdigit():
            rows[cells[0]] = dict(
                zip(("tries", "identical", "refused", "wrong"), map(int, cells[1:]))
            )
    return rows


@pytest.mark.slow  # a few minutes: each attack also has its own fast test beside the behaviour
def test_quick_chaos_run_has_no_wrong_outcome(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "chaos.py"),
            "--quick",
            "--keep",
            str(tmp_path / "work"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    rows = parse_table(done.stdout)
    assert len(rows) == ATTACKS, done.stdout + done.stderr[-3000:]
    wrong = [line for line in done.stderr.splitlines() if "WRONG" in line]
    for attack, counts in rows.items():
        assert counts["tries"] > 0, attack
        assert counts["identical"] + counts["refused"] + counts["wrong"] == counts["tries"]
        assert counts["wrong"] == 0, (attack, wrong)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
