"""Asynchronous results that behave: bounded queue, prompt handlers, nothing starved, no error lost."""

import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp

WAIT = 10  # seconds; only reached when something is wrong


def gated_job(gate: threading.Event):
    """A job that cannot finish until `gate` is set (its watcher waits)."""

    def hold(value: tp.Numpy):
        assert gate.wait(WAIT)

    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((2,))) -> tp.Callback[tp.Numpy]:
        flow.watch(x, hold)
        return x

    return f


def test_calls_in_flight_are_bounded():
    flow.config.max_calls_in_flight(2)
    gate = threading.Event()
    f = gated_job(gate)
    x = np.zeros(2, np.float32)
    f(x)(lambda r: None)
    f(x)(lambda r: None)
    third = threading.Thread(target=lambda: f(x)(lambda r: None))
    third.start()
    third.join(0.3)
    assert third.is_alive(), "a third call must wait while two are in flight"
    gate.set()
    third.join(WAIT)
    assert not third.is_alive()
    flow.sync_default_session()


def test_handlers_run_without_a_sync():
    done = threading.Event()

    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((2,))) -> tp.Callback[tp.Numpy]:
        return x * 2

    f(np.ones(2, np.float32))(lambda r: done.set())
    assert done.wait(WAIT)


def test_a_dropped_registration_does_not_hold_later_handlers():
    done = threading.Event()

    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((2,))) -> tp.Callback[tp.Numpy]:
        return x

    f(np.zeros(2, np.float32))  # its handler is never registered
    f(np.ones(2, np.float32))(lambda r: done.set())
    assert done.wait(WAIT)


def test_a_held_but_unregistered_call_stops_holding_others_at_a_sync():
    seen = []

    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((2,))) -> tp.Callback[tp.Numpy]:
        return x

    held = f(np.zeros(2, np.float32))
    f(np.ones(2, np.float32))(lambda r: seen.append(float(r[0])))
    flow.sync_default_session()
    assert seen == [1.0]
    held(lambda r: seen.append(float(r[0])))  # registered after the sync: runs at once
    assert seen == [1.0, 0.0]


def test_async_loop_counts_every_batch_right_after_it(monkeypatch):
    flow.config.max_calls_in_flight(1)
    counted = []

    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((2,))) -> tp.Callback[tp.Numpy]:
        return x + 1

    for i in range(20):
        f(np.full(2, i, np.float32))(counted.append)
    # no sync: with one call in flight, at most the last one is still pending
    assert len(counted) >= 19
    flow.sync_default_session()
    assert [float(c[0]) for c in counted] == [i + 1 for i in range(20)]


FAILING_CALLBACK = textwrap.dedent(
    """
    import numpy as np
    import irflow as flow
    import irflow.typing as tp

    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((2,))) -> tp.Callback[tp.Numpy]:
        return x

    def handler(result):
        raise ValueError("bad result " + str(result.tolist()))

    f(np.ones(2, np.float32))(handler)
    print("program ends")
    """
)


def test_an_error_left_at_exit_is_printed_and_fails_the_process(tmp_path):
    script = tmp_path / "user_program.py"
    script.write_text(FAILING_CALLBACK)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "program ends" in done.stdout
    assert "ValueError: bad result [1.0, 1.0]" in done.stderr
    assert f'File "{script}", line 11, in handler' in done.stderr


def test_a_bad_dump_directory_is_named_before_anything_runs(tmp_path, monkeypatch):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    monkeypatch.setenv("IRFLOW_DUMP_IR", str(not_a_dir / "ir"))
    ran = []

    def seen(value: tp.Numpy):
        ran.append(value)

    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        flow.watch(x, seen)
        return x

    with pytest.raises(flow.ExecutionError, match=r"IRFLOW_DUMP_IR='.*file/ir' is not a directory irflow can write"):
        f(np.ones(2, np.float32))
    assert ran == []
    monkeypatch.delenv("IRFLOW_DUMP_IR")
    f(np.ones(2, np.float32))  # start-up undid itself: the next call starts cleanly
    assert len(ran) == 1
