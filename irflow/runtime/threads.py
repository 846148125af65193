"""How many threads irflow's CPU kernels run on, and why numpy's BLAS runs on one of them.

`flow.config.cpu_thread_num(n)` chooses irflow's own threads (kernels/parallel.py): the
kernels with independent pieces split them over n threads, each piece one single-threaded
BLAS call. numpy's BLAS itself is held at one thread (through threadpoolctl, which finds the
BLAS that numpy loaded), set when the count is chosen and again before every CPU step.
OpenBLAS's own threads split each GEMM, meet after it, and busy-wait for about 0.1 s after
the last one: on a shared machine a meeting waits for the thread that lost its core, and a
spinning BLAS thread takes the core irflow's other thread needs. With BLAS at the chosen
count between kernels, LeNet's step at 2 threads took 63.7 ms; held at one, 36.6 ms
(docs/runtime.md). The default is one thread: on the shared 2-core machines irflow is
developed on, two threads beside other busy processes ran steps several times slower.

The BLAS setting is process-wide, as BLAS pools are: numpy code the user runs between
steps runs on one BLAS thread too, and a step resets it if that code changed it.
"""

from __future__ import annotations

from typing import Any

from threadpoolctl import ThreadpoolController

DEFAULT_CPU_THREADS = 1
_chosen: int | None = None  # None: the default
_blas: Any = None  # the BLAS libraries' controller, found on first use (scanning the loaded libraries takes ~1 ms)


def cpu_thread_num() -> int:
    """The thread count CPU steps run with: the chosen one, else DEFAULT_CPU_THREADS."""
    return _chosen if _chosen is not None else DEFAULT_CPU_THREADS


def set_cpu_thread_num(value: int | None) -> None:
    """Choose the thread count of CPU steps (None: back to the default); BLAS is held at one at once."""
    global _chosen
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"flow.config.cpu_thread_num expects a positive int (or None for the default), got {value!r}")
    _chosen = value
    apply()


def _controller() -> Any:
    global _blas
    if _blas is None:
        _blas = ThreadpoolController().select(user_api="blas")
    return _blas


def apply() -> None:
    """Hold numpy's BLAS pools at one thread; cheap when they already are (~1 us)."""
    for library in _controller().lib_controllers:
        if library.get_num_threads() != 1:
            library.set_num_threads(1)


def blas_info() -> list[dict[str, Any]]:
    """threadpoolctl's description of each BLAS loaded: library, version, kernel architecture, threads."""
    return [dict(library.info()) for library in _controller().lib_controllers]
