"""The kernel library the executor calls: `get_kernel(name)(xp, attrs, ins, outs)` -> run.

See docs/kernels.md for the contract. Importing this package registers every
kernel; each module holds one theme.
"""

from . import activation, conv, ctc, elementwise, linalg, mesh, nn, normalization, optimizer, pooling, random, reduction
from . import schedule
from . import shape
from . import tensor_buffer
from .registry import CHECKS_DATA, KERNELS, Array, DataError, KernelFactory, Run, checks_data, get_kernel, register, sequence

__all__ = [
    "CHECKS_DATA", "KERNELS", "Array", "DataError", "KernelFactory", "Run", "checks_data", "get_kernel", "register", "sequence"
]
del activation, conv, ctc, elementwise, linalg, mesh, nn, normalization, optimizer, pooling, random, reduction
del schedule
del shape
del tensor_buffer
