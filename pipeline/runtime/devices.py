"""Where models run: `device: auto` resolves to the GPU when one is visible.

Every auxiliary model (NLI, embedder, COMET, AlignScore, contrastive search under vLLM) and the
transformers generation backend take their device through `resolve_device`, so a GPU node uses
its GPU without a config change and a CPU machine keeps working.
"""

from __future__ import annotations

import os


def cuda_device_count() -> int:
    """Number of CUDA devices torch sees (0 without torch or without a GPU)."""
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def resolve_device(device: str | None) -> str:
    """`auto` (or None) -> "cuda" when a GPU is visible, else "cpu"; anything else unchanged."""
    if device in (None, "", "auto"):
        return "cuda" if cuda_device_count() > 0 else "cpu"
    return str(device)


HALF_DTYPES = ("bfloat16", "float16")
DTYPES = ("auto", "float32", *HALF_DTYPES)


def resolve_dtype(dtype: str, device: str) -> str:
    """A model's weights' precision on a resolved `device`: `auto` -> bfloat16 on a CUDA GPU that
    has it (float16 on one without: V100, T4), float32 on CPU (half precision there is slower
    than float32 on most CPUs); anything else unchanged."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype={dtype!r}: choose one of {', '.join(DTYPES)}")
    if dtype != "auto":
        return dtype
    if not str(device).startswith("cuda"):
        return "float32"
    import torch

    return "bfloat16" if torch.cuda.is_bf16_supported() else "float16"


def cpu_threads() -> int:
    """CPU threads this job may use: SLURM's cpus-per-task when running as a SLURM job (a
    cluster without CPU cgroups does not restrict the affinity mask), else the CPUs the process
    is allowed on. More torch threads than cores spin-wait: measured 6-13 vs 65-77 tokens/s."""
    import os

    slurm = os.environ.get("SLURM_CPUS_PER_TASK")
    if slurm and slurm.isdigit() and int(slurm) > 0:
        return int(slurm)
    return max(1, len(os.sched_getaffinity(0)))


def forked_workers(tasks: int) -> int:
    """How many forked worker processes `tasks` independent pieces of CPU work may use: up to
    `cpu_threads()`, on Linux (fork), and only from the main process (a worker already shares
    the cores); 1 = run them here."""
    import multiprocessing
    import sys

    if sys.platform != "linux" or multiprocessing.parent_process() is not None:
        return 1
    return max(1, min(cpu_threads(), tasks))


def forked_pool(workers: int):
    """A process pool of `workers` forked workers (they inherit this process's memory).

    This process's objects are frozen out of the garbage collector's reach until the pool
    shuts down (`gc.freeze`, as the gc docs advise before a fork): the workers' collections
    then skip everything they inherited, and touch (copy) none of its pages."""
    import gc
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    class _ForkedPool(ProcessPoolExecutor):
        def shutdown(self, *args, **kwargs) -> None:
            try:
                super().shutdown(*args, **kwargs)
            finally:
                gc.unfreeze()

    gc.freeze()
    return _ForkedPool(
        workers,
        mp_context=multiprocessing.get_context("fork"),
        initializer=_worker_signals,
        initargs=(os.getpid(),),
    )


def _worker_signals(parent: int) -> None:
    """A forked worker: dies with its parent (a SIGKILLed parent left workers running, holding
    the input and its store's lock), leaves Ctrl-C to the parent (which stops the pool), and
    dies quietly on SIGTERM (the parent's stop handler it inherited printed tracebacks)."""
    import ctypes
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the parent's shutdown stops them
        pass
    if os.getppid() != parent:  # the parent died before the line above: no signal will come
        os._exit(1)


def configure_torch_threads(num_threads: int | None = None) -> int:
    """Set torch's process-wide intra-op threads (default: `cpu_threads()`); returns it."""
    import torch

    threads = int(num_threads or cpu_threads())
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    return threads


def comet_gpus(device: str) -> int:
    """COMET's `predict(gpus=...)` for a resolved torch device string."""
    return 1 if str(device).startswith("cuda") else 0
