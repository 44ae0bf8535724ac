"""Progress when stderr is no terminal (a SLURM log, a pipe): a log line every ~10 % of the work
or every 30 s, with the count, the share, the time spent and the time left; a bar on a terminal.
A fake clock: no sleeps."""

from __future__ import annotations

import io
import re

from pipeline.generation.base import Generation, SamplingConfig
from pipeline.generation.runner import generate_records
from pipeline.runtime.progress import Progress, duration


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Pipe(io.StringIO):
    def isatty(self) -> bool:
        return False


def test_lines_every_tenth_with_count_share_elapsed_and_eta():
    clock, lines = Clock(), []
    bar = Progress(50, "generate", unit="prompt", stream=Pipe(), clock=clock, emit=lines.append)
    assert bar.bar is None  # no tqdm bar when stderr is no terminal
    for _ in range(12):
        clock.now += 3.4
        bar.update(1)
    # one line per 10 % (5 prompts), the first at 5/50
    assert len(lines) == 2
    clock.now += 0.2  # 12 prompts took 41 s
    assert bar.line() == "generate: 12/50 prompts (24 %), 41 s, ETA 2m10s"
    for _ in range(38):
        clock.now += 1
        bar.update(1)
    bar.close()
    assert len(lines) == 10 and lines[-1].startswith("generate: 50/50 prompts (100 %), 1m19s")
    assert "ETA" not in lines[-1]


def test_a_slow_loop_logs_every_30_s_between_the_tenths():
    clock, lines = Clock(), []
    bar = Progress(1000, "map", unit="prompt", stream=Pipe(), clock=clock, emit=lines.append)
    for _ in range(20):  # 20 prompts, 10 s each: far from 10 % (100 prompts)
        clock.now += 10
        bar.update(1)
    assert [re.match(r"map: (\d+)/", line).group(1) for line in lines] == [
        "3",
        "6",
        "9",
        "12",
        "15",
        "18",
    ]
    assert "ETA 2h46m" in lines[0]  # 997 prompts at 10 s


def test_a_batch_past_several_marks_logs_once_and_the_last_batch_logs_100():
    clock, lines = Clock(), []
    bar = Progress(7, "decode", unit="prompt", stream=Pipe(), clock=clock, emit=lines.append)
    bar.update(4)
    bar.update(3)
    assert [line.split(",")[0] for line in lines] == [
        "decode: 4/7 prompts (57 %)",
        "decode: 7/7 prompts (100 %)",
    ]


def test_a_terminal_gets_a_bar_not_lines():
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    lines, stream = [], Tty()
    with Progress(3, "generate", unit="prompt", stream=stream, emit=lines.append) as bar:
        bar.update(3)
    assert lines == [] and "3/3" in stream.getvalue()


def test_durations():
    assert [duration(s) for s in (0, 41, 130, 3900)] == ["0 s", "41 s", "2m10s", "1h05m"]


class FakeBackend:
    name, batch_size = "fake", 2

    def sample(self, prompts, cfg):
        return [[Generation("x", [1], [-0.5]) for _ in range(cfg.n)] for _ in prompts]

    def greedy(self, prompts, max_new_tokens):
        return [Generation("g", [1], [-0.1]) for _ in prompts]


def test_generate_records_logs_progress_lines_when_stderr_is_a_pipe(caplog, capsys):
    """The generation runner's bar: log lines in a SLURM log instead of nothing."""
    caplog.set_level("INFO", logger="pipeline")
    prompts = [f"p{i}" for i in range(6)]
    generate_records(
        FakeBackend(),
        prompts,
        prompts,
        SamplingConfig(n=2, max_new_tokens=4),
        strategies=("greedy",),
        ptrue=False,
        progress=True,
        chunk_size=2,
    )
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("generate (fake)")]
    assert lines[-1].startswith("generate (fake): 6/6 prompts (100 %)") and len(lines) == 3
    assert "generated 6 prompts" in capsys.readouterr().err


def test_generate_records_updates_a_bar_of_the_caller_over_several_calls():
    clock, lines = Clock(), []
    bar = Progress(
        4, "generate (cell)", unit="prompt", stream=Pipe(), clock=clock, emit=lines.append
    )
    for ids in (["a", "b"], ["c", "d"]):
        generate_records(
            FakeBackend(),
            ids,
            ids,
            SamplingConfig(n=1, max_new_tokens=4),
            strategies=("greedy",),
            ptrue=False,
            progress=bar,
        )
    assert bar.done == 4 and lines[-1].startswith("generate (cell): 4/4 prompts (100 %)")


def test_a_heartbeat_says_a_silent_stage_is_alive_with_the_open_progress_and_its_eta():
    """A timer, not an update: nothing happens in the body for 1.2 s and the heartbeat says so
    every 0.2 s; with a progress open, its count and ETA come with it."""
    import time

    from pipeline.runtime.progress import heartbeat

    lines: list[str] = []
    with heartbeat("[uq]", every_s=0.2, emit=lines.append):
        time.sleep(1.2)
    assert len(lines) >= 2 and all(re.fullmatch(r"\[uq\] still running, \d+ s", x) for x in lines)
    lines.clear()
    with heartbeat("[map]", every_s=0.2, emit=lines.append):
        with Progress(10, "[map] sets", unit="prompt", stream=Pipe(), lines=False) as bar:
            bar.update(4)
            time.sleep(0.6)
    assert lines and "; [map] sets: 4/10 prompts (40 %), " in lines[0] and "ETA" in lines[0]
    after = len(lines)
    time.sleep(0.5)
    assert len(lines) == after  # stopped with the body


def test_a_heartbeat_stays_quiet_while_the_pipeline_logs():
    import logging
    import time

    from pipeline.runtime.progress import heartbeat

    lines: list[str] = []
    logger = logging.getLogger("pipeline")
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        with heartbeat("[generate]", every_s=0.3, emit=lines.append):
            for _ in range(8):  # a line every 0.1 s: the stage is visibly alive
                logger.info("shard written")
                time.sleep(0.1)
    finally:
        logger.setLevel(level)
    assert lines == []
