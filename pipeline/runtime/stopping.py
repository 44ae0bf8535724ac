"""Stopping cleanly when told (stdlib only): SIGTERM (what SLURM sends before a preemption or
time-limit kill, and `scancel`'s default) and SIGINT (Ctrl-C) stop the command line's run at
once, and a rerun resumes it.

Stopping at once is safe because every write is atomic (a temporary file renamed into place; a
manifest written last as the commit marker; a shard's sidecar after its rows): the shard in
flight is abandoned whole, and what was committed stays. Waiting for the shard to finish could
take longer than SLURM's grace time (KillWait, 30 s by default) on a real model.

The run then exits with REQUEUE_EXIT = 75 (EX_TEMPFAIL, sysexits.h: "temporary failure, retry
later"). A SLURM cluster requeues a batch job that exits with it when slurm.conf says
`RequeueExit=75` (scripts/slurm_local.sh's cluster does). Under submitit (hydra/launcher=slurm)
SIGTERM is submitit's: it ignores it and requeues on its own signal (SIGUSR2, `signal_delay_s`
before the time limit) through the launcher's checkpoint; the handlers here leave any handler
someone else installed alone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator

__all__ = [
    "REQUEUE_EXIT",
    "StopRequested",
    "check_stop",
    "install_early_stop",
    "stop_requested",
    "stopping_cleanly",
]

REQUEUE_EXIT = 75  # EX_TEMPFAIL

# The stop asked for, kept until the `with` ends: the exception a signal raises can be swallowed
# (raised inside a finaliser, `__del__`, Python prints "Exception ignored" and goes on), the
# request cannot. Safe points (`check_stop`: each stage, each generation batch, each scorer
# part) raise it again, and so does the end of the `with` body.
_requested: StopRequested | None = None


class StopRequested(BaseException):
    """Raised in the main thread by SIGTERM / SIGINT. A BaseException, like KeyboardInterrupt:
    no `except Exception` on the way up may take it for a failed item and carry on."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.signal_name = signal.Signals(signum).name
        super().__init__(f"stopped by {self.signal_name}")

    def __reduce__(self):  # raised in a forked worker, re-raised in its parent
        return (StopRequested, (self.signum,))


def stop_requested() -> StopRequested | None:
    """The stop asked for by a signal inside `stopping_cleanly`, or None."""
    return _requested


def check_stop() -> None:
    """A safe point: raise the stop asked for, if any (a fresh exception of the same signal)."""
    if _requested is not None:
        raise StopRequested(_requested.signum)


@contextlib.contextmanager
def signals_held(signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT)) -> Iterator[None]:
    """SIGTERM / SIGINT held back for a few statements (a temporary file created and its name
    kept; a temporary file removed): a stop raised between them would leave the file behind.
    A held signal is delivered, and its handler runs, when the `with` ends."""
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    except (AttributeError, ValueError, OSError):  # no pthread_sigmask, or not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def install_early_stop(prefix: str) -> None:
    """At a command's very start (before its imports, long on a busy node): SIGTERM / SIGINT
    end it with exit 75 and one line, not a silent death by the signal (exit 143), so SLURM
    requeues a job stopped while it starts. `stopping_cleanly` takes over once work begins."""

    def early(signum: int, frame: object) -> None:
        name = signal.Signals(signum).name
        sys.stderr.write(
            f"{prefix}stopped by {name} before any work began; rerun the same "
            f"command. Exit {REQUEUE_EXIT} asks SLURM to requeue\n"
        )
        sys.stderr.flush()
        os._exit(REQUEUE_EXIT)

    early.taskaware_early = True  # type: ignore[attr-defined]
    for sig in (signal.SIGTERM, signal.SIGINT):
        if signal.getsignal(sig) in (signal.SIG_DFL, signal.default_int_handler):
            signal.signal(sig, early)


def _replaceable(handler: object, default: object) -> bool:
    return handler is default or getattr(handler, "taskaware_early", False)


@contextlib.contextmanager
def stopping_cleanly(
    signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT), exiting: bool = False
) -> Iterator[None]:
    """Within the `with` body, each of `signals` whose handler is still Python's default raises
    StopRequested and is remembered: a body that ends normally after a stop was asked for (its
    exception swallowed in a finaliser) raises it at the end, so a stopped run never exits 0.
    Every signal while stopping raises again (a stop, never a kill: SLURM needs exit 75, not a
    death mid-write; SIGKILL remains for a kill). `exiting`: the process ends after a stop (a
    command line): further signals are then ignored until it exits 75, instead of the default
    handlers killing it after its "stopped cleanly" line."""
    global _requested
    defaults = {signal.SIGTERM: signal.SIG_DFL, signal.SIGINT: signal.default_int_handler}
    previous: dict[int, object] = {}

    def stop(signum: int, frame: object) -> None:
        global _requested
        if _requested is None:
            _requested = StopRequested(signum)
        raise StopRequested(signum)

    for sig in signals:
        current = signal.getsignal(sig)
        if _replaceable(current, defaults.get(sig, signal.SIG_DFL)):
            previous[sig] = current
            signal.signal(sig, stop)
    hook = sys.unraisablehook

    def quiet_stop(unraisable) -> None:
        # a stop raised inside a finaliser: kept in _requested, so no "Exception ignored ...
        # Traceback" page for the user (the one-line stop message comes at the next safe point)
        if not isinstance(unraisable.exc_value, StopRequested):
            hook(unraisable)

    if previous:
        sys.unraisablehook = quiet_stop
    try:
        yield
        check_stop()  # asked for, and swallowed on the way
    except StopRequested:
        raise
    except BaseException as exc:
        # a library the stop interrupted failed in its own cleanup (matplotlib's pdf writer
        # cut mid-file raises AttributeError): still the stop, not that library's traceback
        if _requested is not None:
            raise StopRequested(_requested.signum) from exc
        raise
    finally:
        stopped = _requested is not None
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_IGN if exiting and stopped else handler)
        if previous:
            sys.unraisablehook = hook
            _requested = None
