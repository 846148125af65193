"""The default session: the one owner of jobs, variables, the seed, the resources and the ordered call queue.

Start-up, as OneFlow does it: defining a job only traces it; the first job
call, `sync_default_session`, `get_all_variables`, `load_variables`,
`checkpoint.save` or `train.CheckPoint().init()` starts the session, which
compiles every job defined so far and so creates every variable (optimizer
state and the train-step counter included) with its initial value. A job
defined after that compiles at once, creating its new variables.

Calls of job functions run one at a time, in call order, on one worker thread
(OneFlow runs a session's jobs in order too): a synchronous call waits for its
own turn, an asynchronous one returns at once with its inputs already copied,
after waiting while `max_calls_in_flight` earlier calls are still queued.
Handlers run in call order as soon as their result is ready. A call whose
handler can no longer be registered (its registration was dropped, or its
result was taken with `.get()`) is skipped, so it never holds later handlers
back. An exception raised by a job or a handler is kept and raised again at
the next call or sync; one still kept when the program ends is printed with
its traceback and the process exits with status 1.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from irflow.dialects.sbp import PlacementAttr
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
class ResourceConfig:
    """The session's resources, set through flow.config (irflow.frontend.config) before the session starts.

    The device counts give the placement of jobs that name none (`placement`):
    every device of kind `device_tag` (which is "gpu" once
    flow.config.gpu_device_num gave a positive count) on each of the
    `machine_num` machines, as OneFlow's default placement spans them all.
    """

    cpu_device_num: int = 1
    gpu_device_num: int = 1
    device_tag: str = "cpu"
    machine_num: int = 1
    legacy_model_io: bool = True
    debug_mode: bool = False
    max_calls_in_flight: int = 1

    def placement(self) -> PlacementAttr:
        """The placement of ops traced outside any placement scope."""
        count = self.gpu_device_num if self.device_tag == "gpu" else self.cpu_device_num
        devices = f"0-{count - 1}" if count > 1 else "0"
        return PlacementAttr(self.device_tag, [f"{machine}:{devices}" for machine in range(self.machine_num)])


@dataclass
class Pending:
    """One asynchronous call: its result once run, and what becomes of it."""

    result: Any = None
    done: threading.Event = field(default_factory=threading.Event)
    failed: BaseException | None = None
    handler: Callable[[Any], Any] | None = None
    skip: bool = False  # nobody will register a handler: delivery passes over it
    detached: bool = False  # left the ordered queue at a sync: a handler registered later runs at once


class Registration:
    """What an asynchronous call returns: call it with the handler of the result (`job(x)(handler)`)."""

    def __init__(self, session: Session, pending: Pending):
        self._session = session
        self.pending = pending

    def __call__(self, handler: Callable[[Any], Any]) -> None:
        if not callable(handler):
            raise TypeError(f"a job's callback must be callable, got {type(handler).__name__}")
        pending = self.pending
        if pending.handler is not None or pending.skip:
            raise ExecutionError("this call's result is already taken (a callback is registered, or .get() ran)")
        pending.handler = handler
        if pending.detached and pending.done.is_set():
            if pending.failed is None:
                handler(pending.result)
        else:
            self._session._deliver()  # a handler's error is kept for the next call or sync

    def wait(self) -> Any:
        """The result, taken out of the ordered delivery: waits for this call only, raises its error."""
        pending = self.pending
        if pending.handler is not None or pending.skip:
            raise ExecutionError("this call's result is already taken (a callback is registered, or .get() ran)")
        pending.skip = True
        self._session._deliver()  # it may have been the front that held others back
        pending.done.wait()
        if pending.failed is not None:
            self._session._forget(pending.failed)
            raise pending.failed
        return pending.result

    def __del__(self) -> None:
        # Dropped without a handler: nobody can register one now, so later handlers must not wait for it.
        if self.pending.handler is None:
            self.pending.skip = True


@dataclass
class Session:
    seed: int = DEFAULT_SEED
    jobs: dict[str, JobFunction] = field(default_factory=dict)
    variables: dict[str, VariableDecl] = field(default_factory=dict)
    resource: ResourceConfig = field(default_factory=ResourceConfig)
    started: bool = False
    gpu_warned: bool = False
    _store: Any = None
    _executor: ThreadPoolExecutor | None = None
    _worker: threading.Thread | None = None
    _slots: threading.Semaphore | None = None  # one per call that may be in flight
    _errors: list[BaseException] = field(default_factory=list)
    _deliveries: deque[Pending] = field(default_factory=deque)
    _delivering: bool = False
    _again: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _queued: int = 0  # calls submitted to the worker and not finished
    _running: threading.RLock = field(default_factory=threading.RLock)  # held by whichever thread runs a job

    # ------------------------------------------------------------- start-up and variables

    def start(self) -> None:
        """Compile every job defined so far, creating every variable; all or nothing."""
        if self.started:
            return
        try:
            for job in list(self.jobs.values()):
                job.executable()
        except BaseException:
            for job in self.jobs.values():
                job.drop_executable()
            self._store = None  # the variables of the jobs that did compile go too
            raise
        self.started = True

    @property
    def store(self) -> Any:
        """The runtime's variables, made on first use from the session's seed, on the host and the configured devices."""
        if self._store is None:
            from irflow.target import Target

            return self.store_for(Target.of("cpu", self.resource.placement()))
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
                comm = mpi.join(target.hierarchy, target.xp)  # MPI, or NCCL for a GPU target
                self._store = LogicalVariables(target.hierarchy, self.seed, target.xp, comm)
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
        if self.started or (self._store is not None and list(self._store.names())):
            raise ExecutionError(
                f"flow.random.seed({seed}) comes after the session started with seed {self.seed}; "
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

    def run_async(self, task: Callable[[], Any]) -> Registration:
        """Queue `task`, waiting while the queue is full; return what registers the handler of its result."""
        self.raise_pending()
        pending = Pending()
        on_worker = threading.current_thread() is self._worker
        if not on_worker:
            if self._slots is None:
                self._slots = threading.Semaphore(self.resource.max_calls_in_flight)
            self._slots.acquire()
        with self._lock:
            self._deliveries.append(pending)
        slots = None if on_worker else self._slots

        def work() -> None:
            try:
                pending.result = task()
            except BaseException as err:  # noqa: BLE001  kept for the next call or sync
                pending.failed = err
                self._keep(err)
            pending.done.set()
            try:
                self._deliver()
            finally:
                if slots is not None:  # after its handler ran: a full queue also means handlers keep up
                    slots.release()

        if on_worker:
            work()
        else:
            self._submit(work)
        return Registration(self, pending)

    def sync(self) -> None:
        """Start the session if needed; wait for every queued call and every registered handler; raise a kept error."""
        self.start()
        if self._executor is not None and threading.current_thread() is not self._worker:
            self._executor.submit(lambda: None).result()
        self._detach_unclaimed()
        self._deliver()
        self.raise_pending()

    @contextlib.contextmanager
    def between_steps(self) -> Iterator[None]:
        """Wait for queued calls, then keep every thread's calls out: the variables as one step left them.

        Snapshots, checkpoints and loads run inside, so none sees or makes
        weights from one step and optimizer state from another.
        """
        self.sync()
        with self._running:
            yield

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

    def _forget(self, err: BaseException) -> None:
        """`err` reached the user through `.get()`: it is not raised a second time."""
        with self._lock:
            self._errors = [e for e in self._errors if e is not err]

    def _detach_unclaimed(self) -> None:
        """At a sync every call has run: results nobody has claimed yet stop holding later handlers back."""
        with self._lock:
            for pending in self._deliveries:
                if pending.done.is_set() and pending.handler is None:
                    pending.detached = True
            self._deliveries = deque(p for p in self._deliveries if not p.detached)

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
                ready = front is not None and front.done.is_set()
                if not ready or (front.handler is None and front.failed is None and not front.skip):
                    if self._again:
                        self._again = False
                        continue
                    self._delivering = False
                    return
                self._deliveries.popleft()
            if front.failed is None and front.handler is not None:
                try:
                    front.handler(front.result)
                except BaseException as err:  # noqa: BLE001  kept for the next call or sync
                    self._keep(err)

    def drain(self) -> None:
        """Finish queued calls and deliver their results; raise a kept error. Used at exit."""
        if self._executor is not None and threading.current_thread() is not self._worker:
            self._executor.shutdown(wait=True)
            self._executor = None
            self._worker = None
        self._detach_unclaimed()
        self._deliver()
        self.raise_pending()

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
    """Drop every job, variable, setting and queued result: the next job starts a fresh session."""
    global _default
    old = _default
    _default = Session()
    old.close()
    for fn in old.jobs.values():
        fn.forget()


def sync_default_session() -> None:
    """Start the session if needed, then wait until every call so far has run and its callback has been called."""
    _default.sync()


def _drain_at_exit() -> None:
    """A callback's error must not vanish with the program: print it and make the exit status 1."""
    try:
        _default.drain()
    except BaseException as err:  # noqa: BLE001  reported here, nothing is left to raise it to
        sys.stdout.flush()
        print("irflow: an asynchronous job call or callback failed after the program's last sync:", file=sys.stderr)
        traceback.print_exception(err, file=sys.stderr)
        sys.stderr.flush()
        os._exit(1)


atexit.register(_drain_at_exit)
