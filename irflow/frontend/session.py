"""The default session: the one owner of jobs, variables, the seed and the ordered call queue.

Calls of job functions run one at a time, in call order, on one worker thread
(OneFlow runs a session's jobs in order too): a synchronous call waits for its
own turn, an asynchronous one (`tp.Callback`) returns at once with its inputs
already copied. Callback handlers run in call order. An exception raised by
a job or a handler is kept and raised again at the next call or sync.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from irflow.errors import ExecutionError, SourceLocation

if TYPE_CHECKING:
    from irflow.frontend.dtypes import DType
    from irflow.frontend.function import JobFunction
    from irflow.target import Target

DEFAULT_SEED = 0


@dataclass(frozen=True)
class VariableDecl:
    """What the first job to declare a variable said about it; later jobs must agree."""

    name: str
    shape: tuple[int, ...]
    dtype: DType
    initializer: dict[str, Any]
    trainable: bool
    job: str
    location: SourceLocation | None
    distribute: Any = None  # the SBP hint (flow.distribute...), if the declaration gave one


@dataclass
class Pending:
    """One asynchronous call: its result once run, and the handler once registered."""

    result: Any = None
    done: bool = False
    failed: bool = False
    handler: Callable[[Any], Any] | None = None


@dataclass
class Session:
    seed: int = DEFAULT_SEED
    jobs: dict[str, JobFunction] = field(default_factory=dict)
    variables: dict[str, VariableDecl] = field(default_factory=dict)
    gpu_warned: bool = False
    _store: Any = None
    _executor: ThreadPoolExecutor | None = None
    _worker: threading.Thread | None = None
    _errors: list[BaseException] = field(default_factory=list)
    _deliveries: deque[Pending] = field(default_factory=deque)
    _delivering: bool = False
    _again: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _queued: int = 0  # calls submitted to the worker and not finished
    _running: threading.RLock = field(default_factory=threading.RLock)  # held by whichever thread runs a job

    # ------------------------------------------------------------- variables

    @property
    def store(self) -> Any:
        """The runtime's variables, made on first use from the session's seed, on the host and the configured devices."""
        if self._store is None:
            from irflow.frontend.config import default_placement
            from irflow.target import Target

            return self.store_for(Target.of("cpu", default_placement()))
        return self._store

    def store_for(self, target: Target, job: str = "") -> Any:
        """The store, made for `target`'s array module and mesh if no variable exists yet.

        On many devices it is a logical view over one store per device, so users
        and checkpoints still see whole values. Jobs of one session share their
        variables, hence their devices.
        """
        from irflow.runtime import VariableStore, mpi
        from irflow.runtime.variables import LogicalVariables

        mesh = getattr(self._store, "mesh", (1,))
        if self._store is None or (not len(self._store) and (self._store.xp is not target.xp or mesh != target.hierarchy)):
            if mpi.launched_size() > 1:  # under mpiexec: this process is one device of the mesh
                self._store = LogicalVariables(target.hierarchy, self.seed, target.xp, mpi.join(target.hierarchy))
            elif target.num_devices > 1:
                self._store = LogicalVariables(target.hierarchy, seed=self.seed, xp=target.xp)
            else:
                self._store = VariableStore(seed=self.seed, xp=target.xp)
        elif mesh != target.hierarchy:
            raise ExecutionError(
                f"job '{job}' runs on the device mesh {list(target.hierarchy)}, but this session's variables "
                f"live on {list(mesh)}; the jobs of one session share their devices "
                "(flow.clear_default_session() starts over)"
            )
        return self._store

    def set_seed(self, seed: int) -> None:
        if self._store is not None and list(self._store.names()):
            raise ExecutionError(
                f"flow.random.seed({seed}) comes after variables were created with seed {self.seed}; "
                "set the seed before the first call of a job (or after flow.clear_default_session())"
            )
        self.seed = int(seed)
        self._store = None

    # ------------------------------------------------------------- the queue

    def run(self, task: Callable[[], Any]) -> Any:
        """Run `task` after every earlier call, and return its result (or raise its error).

        With nothing queued, the caller's thread runs it at once: a synchronous
        call then costs no thread hand-off.
        """
        self.raise_pending()
        if threading.current_thread() is self._worker:
            return task()  # a handler calling a job: it is already this call's turn
        with self._lock:
            idle = self._queued == 0
        if idle:
            with self._running:
                return task()

        def in_turn() -> Any:
            self.raise_pending()  # an earlier queued call failed: this one does not run
            return task()

        return self._submit(in_turn).result()

    def run_async(self, task: Callable[[], Any]) -> Callable[[Callable[[Any], Any]], None]:
        """Queue `task`; return the function that registers the handler of its result."""
        self.raise_pending()
        pending = Pending()
        with self._lock:
            self._deliveries.append(pending)

        def work() -> None:
            try:
                pending.result = task()
            except BaseException as err:  # noqa: BLE001  kept for the next call or sync
                pending.failed = True
                self._keep(err)
            pending.done = True
            self._deliver()

        if threading.current_thread() is self._worker:
            work()
        else:
            self._submit(work)

        def register(handler: Callable[[Any], Any]) -> None:
            if not callable(handler):
                raise TypeError(f"a job's callback must be callable, got {type(handler).__name__}")
            if pending.handler is not None:
                raise ExecutionError("this call's callback is already registered")
            pending.handler = handler
            self._deliver()
            self.raise_pending()

        return register

    def sync(self) -> None:
        """Wait for every queued call and every registered handler; raise a kept error."""
        if self._executor is not None and threading.current_thread() is not self._worker:
            self._executor.submit(lambda: None).result()
        self._deliver()
        self.raise_pending()

    def raise_pending(self) -> None:
        """Raise the first kept error; those after it usually follow from it and are counted in a note."""
        with self._lock:
            if not self._errors:
                return
            err, later = self._errors[0], len(self._errors) - 1
            self._errors.clear()
        if later:
            err.add_note(f"({later} later queued call(s) or callback(s) failed as well)")
        raise err

    def _keep(self, err: BaseException) -> None:
        with self._lock:
            self._errors.append(err)

    def _submit(self, task: Callable[[], Any]) -> Future:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="irflow-session")
            self._executor.submit(self._bind_worker).result()
        with self._lock:
            self._queued += 1

        def queued() -> Any:
            try:
                with self._running:
                    return task()
            finally:
                with self._lock:
                    self._queued -= 1

        return self._executor.submit(queued)

    def _bind_worker(self) -> None:
        self._worker = threading.current_thread()

    def _deliver(self) -> None:
        """Run ready handlers in call order; one thread delivers at a time, never holding the lock in a handler."""
        with self._lock:
            if self._delivering:
                self._again = True  # the delivering thread looks once more before it stops
                return
            self._delivering = True
        while True:
            with self._lock:
                front = self._deliveries[0] if self._deliveries else None
                if front is None or not front.done or (front.handler is None and not front.failed):
                    if self._again:
                        self._again = False
                        continue
                    self._delivering = False
                    return
                self._deliveries.popleft()
            if not front.failed:
                try:
                    front.handler(front.result)  # type: ignore[misc]
                except BaseException as err:  # noqa: BLE001  kept for the next call or sync
                    self._keep(err)

    def close(self) -> None:
        """Finish queued calls and stop the worker; kept errors are dropped with the session."""
        if self._executor is not None:
            if threading.current_thread() is not self._worker:
                self._executor.shutdown(wait=True)
            self._executor = None
            self._worker = None


_default = Session()


def default_session() -> Session:
    return _default


def clear_default_session() -> None:
    """Drop every job, variable and queued result: the next job starts a fresh session."""
    global _default
    from irflow.frontend.config import reset_devices

    reset_devices()
    old = _default
    _default = Session()
    old.close()
    for fn in old.jobs.values():
        fn.forget()


def sync_default_session() -> None:
    """Wait until every call so far has run and its callback has been called."""
    _default.sync()
