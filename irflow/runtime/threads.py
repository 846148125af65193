"""How many threads numpy's BLAS runs irflow's CPU kernels on: a deliberate setting, not the library's guess.

OpenBLAS starts one busy-waiting thread per core it sees. On a machine shared
with other processes a BLAS thread that loses its core stalls every GEMM it
takes part in, and a step slows down by 10x and more. irflow therefore sets
the pool's size itself (through threadpoolctl, which finds the BLAS that numpy
loaded) before every CPU step: `flow.config.cpu_thread_num(n)` chooses it.
The default is one thread: on the shared 2-core machines irflow is developed
on, two BLAS threads beside other busy processes ran LeNet and MLP steps 3-5x
slower than one (docs/runtime.md has the figures); a dedicated machine can
ask for more.

The setting is process-wide, as BLAS pools are: numpy code the user runs
between steps sees the same count.
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
    """Choose the BLAS thread count for CPU steps (None: back to the default); applies at once."""
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


def apply(count: int | None = None) -> None:
    """Make numpy's BLAS pools run `cpu_thread_num()` threads (or `count`); cheap when they already do (~1 us).

    Kernels that split their own work over the threads (kernels/parallel.py) run BLAS on one meanwhile.
    """
    wanted = cpu_thread_num() if count is None else count
    for library in _controller().lib_controllers:
        if library.get_num_threads() != wanted:
            library.set_num_threads(wanted)


def blas_info() -> list[dict[str, Any]]:
    """threadpoolctl's description of each BLAS loaded: library, version, kernel architecture, threads."""
    return [dict(library.info()) for library in _controller().lib_controllers]
