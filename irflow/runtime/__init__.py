"""Running buffer programs: the executor, the variable store, the array backends.

The runtime receives planned buffer programs and never imports a pass; the
compiler (`irflow.compiler`) is the one that runs pipelines.
"""

from irflow.runtime.executor import Executor
from irflow.runtime.variables import VariableStore

__all__ = ["Executor", "VariableStore"]
