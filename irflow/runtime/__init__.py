"""Compiling and running jobs: the pipeline, the executor, the variable store."""

from irflow.runtime.compile import Executable, compile_job
from irflow.runtime.variables import VariableStore

__all__ = ["Executable", "VariableStore", "compile_job"]
