"""Progress of a long loop: a tqdm bar on a terminal, log lines elsewhere (a SLURM log, a pipe,
a file), one every ~10 % of the work or every 30 s, whichever comes first:

    generate (vllm): 12/50 prompts (24 %), 41 s, ETA 2m10s

    with progress(total=len(prompts), desc="generate", unit="prompt") as bar:
        for batch in batches:
            ...
            bar.update(len(batch))
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from typing import IO, Any

log = logging.getLogger("pipeline")

LOG_SHARE = 0.10  # a line at every 10 % of the total
LOG_EVERY_S = 30.0  # and at least every 30 s while work is done


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

    def __init__(self, total: int | None, desc: str, unit: str = "it", *,
                 stream: IO[str] | None = None, clock: Callable[[], float] = time.monotonic,
                 emit: Callable[[str], None] | None = None, share: float = LOG_SHARE,
                 every_s: float = LOG_EVERY_S, bar: bool | None = None) -> None:
        self.total, self.desc, self.unit = total, desc, unit
        self.clock, self.every_s = clock, every_s
        self.emit = emit or log.info
        self.done = 0
        self.started = self.last = clock()
        self.step = max(1, int(total * share)) if total else None
        self.next_mark = self.step
        stream = sys.stderr if stream is None else stream
        self.bar: Any = None
        if is_terminal(stream) if bar is None else bar:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc=desc, unit=unit, file=stream)

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

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress(total: int | None, desc: str, unit: str = "it", **kwargs: Any) -> Progress:
    """A bar when stderr is a terminal, else a log line every ~10 % or 30 s (Progress)."""
    return Progress(total, desc, unit, **kwargs)
