"""Progress of a long loop: a tqdm bar on a terminal, log lines elsewhere (a SLURM log, a pipe,
a file), one every ~10 % of the work or every 30 s, whichever comes first:

    generate (vllm): 12/50 prompts (24 %), 41 s, ETA 2m10s

    with progress(total=len(prompts), desc="generate", unit="prompt") as bar:
        for batch in batches:
            ...
            bar.update(len(batch))

and a heartbeat around each stage (`heartbeat`): a timer that says the stage is alive every
30 s when nothing else has been said (a model loading, one long batch of LLM calls, an NLI
matrix), with the open progress line and its ETA when there is one:

    [uq] still running, 1m30s
    [generate] still running, 2m00s; generate (smollm2-135m): 12/50 prompts (24 %), ETA 6m20s
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import IO, Any

log = logging.getLogger("pipeline")

LOG_SHARE = 0.10  # a line at every 10 % of the total
LOG_EVERY_S = 30.0  # and at least every 30 s while work is done
HEARTBEAT_S = 30.0  # a stage says it is alive at least this often

# What the heartbeat reads: the progress open now (the innermost) and when a line was last said
_open: weakref.WeakSet[Progress] = weakref.WeakSet()  # one never closed goes with its object
_said = {"at": time.monotonic()}


def duration(seconds: float) -> str:
    """41 s, 2m10s, 1h05m."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def is_terminal(stream: IO[str] | None) -> bool:
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


class Progress:
    """`update(n)` after each piece of work, `close()` at the end (or use it as a context)."""

    # size: a public keyword API (`progress(total, desc, unit, **kwargs)` passes its keywords
    # on): the bar's text, when it speaks (share, every_s, bar, lines) and what tests swap in
    # (stream, clock, emit); the body stores them and opens the bar
    def __init__(
        self,
        total: int | None,
        desc: str,
        unit: str = "it",
        *,
        stream: IO[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        emit: Callable[[str], None] | None = None,
        share: float = LOG_SHARE,
        every_s: float = LOG_EVERY_S,
        bar: bool | None = None,
        lines: bool = True,
    ) -> None:
        """`lines=False`: no log lines of its own (a loop that is usually short): the stage's
        heartbeat says its line when the loop runs long."""
        self.total, self.desc, self.unit = total, desc, unit
        self.lines = lines
        self.clock, self.every_s = clock, every_s
        self.emit = _saying(emit or log.info)
        self.done = 0
        self.started = self.last = clock()
        self.step = max(1, int(total * share)) if total else None
        self.next_mark = self.step
        stream = sys.stderr if stream is None else stream
        self.bar: Any = None
        if is_terminal(stream) if bar is None else bar:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc=desc, unit=unit, file=stream)
        self.opened = time.monotonic()
        _open.add(self)

    def line(self) -> str:
        elapsed = self.clock() - self.started
        text = f"{self.desc}: {self.done}"
        if self.total:
            text += f"/{self.total} {self.unit}s ({100 * self.done / self.total:.0f} %)"
        else:
            text += f" {self.unit}s"
        text += f", {duration(elapsed)}"
        if self.total and 0 < self.done < self.total:
            text += f", ETA {duration(elapsed / self.done * (self.total - self.done))}"
        return text

    def update(self, n: int = 1) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
            return
        if not self.lines:
            return
        now = self.clock()
        due = self.next_mark is not None and self.done >= self.next_mark
        if due or now - self.last >= self.every_s:
            self.emit(self.line())
            self.last = now
            if self.step is not None:  # the next multiple of the step past what is done
                self.next_mark = (self.done // self.step + 1) * self.step
                if self.next_mark > self.total and self.done < self.total:
                    self.next_mark = self.total

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        _open.discard(self)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress(total: int | None, desc: str, unit: str = "it", **kwargs: Any) -> Progress:
    """A bar when stderr is a terminal, else a log line every ~10 % or 30 s (Progress)."""
    return Progress(total, desc, unit, **kwargs)


def _saying(emit: Callable[[str], None]) -> Callable[[str], None]:
    """`emit` that also records when a line was said (the heartbeat stays quiet after one)."""

    def say(line: str) -> None:
        _said["at"] = time.monotonic()
        emit(line)

    return say


@contextlib.contextmanager
def heartbeat(
    desc: str,
    every_s: float = HEARTBEAT_S,
    emit: Callable[[str], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[None]:
    """While the body runs, a line every `every_s` seconds in which nothing else was said:
    "`desc` still running, <elapsed>" and the open progress line (with its ETA) if any. Quiet
    while a terminal bar is drawn (the bar moves). A daemon thread; it stops with the body."""
    emit = emit or log.info
    started, stop = clock(), threading.Event()
    seen = _Seen()  # the pipeline's own log lines count as signs of life too
    log.addHandler(seen)

    def beat() -> None:
        while not stop.wait(min(every_s / 4, 1.0)):
            quiet = clock() - max(_said["at"], started)
            current = [p for p in list(_open) if p.total is None or p.done < p.total]
            if quiet < every_s or any(p.bar is not None for p in current):
                continue
            line = f"{desc} still running, {duration(clock() - started)}"
            if current:  # the innermost (latest opened) loop still at work
                line += f"; {max(current, key=lambda p: p.opened).line()}"
            _said["at"] = clock()
            emit(line)

    thread = threading.Thread(target=beat, name=f"heartbeat {desc}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=2)
        log.removeHandler(seen)


class _Seen(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)

    def emit(self, record: logging.LogRecord) -> None:
        _said["at"] = time.monotonic()
