"""Choosing a kernel's algorithm by measuring (kernels/algorithms.py): which wins, when it is measured, what is kept."""

import types

import numpy as np
import pytest

from irflow.runtime import threads
from irflow.runtime.kernels import algorithms, get_kernel

from .test_conv import conv_reference


@pytest.fixture(autouse=True)
def fresh_choices(monkeypatch):
    monkeypatch.setattr(algorithms, "_chosen", {})


class Clock:
    """A clock that each candidate's run advances by its own cost, so timings are exact."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def run(self, cost: float, log: list[str], name: str):
        def run() -> None:
            log.append(name)
            self.now += cost

        return run


def test_fastest_keeps_the_least_time_ties_go_to_the_earlier_and_hopeless_ones_run_once() -> None:
    clock, log = Clock(), []
    runs = {
        "a": clock.run(2.0, log, "a"),
        "b": clock.run(1.0, log, "b"),
        "c": clock.run(1.0, log, "c"),
        "slow": clock.run(3.5, log, "slow"),  # over 3x the fastest first run: not timed again
    }
    assert algorithms.fastest(runs, clock) == "b"
    assert log.count("slow") == 1
    assert log.count("a") == log.count("b") == log.count("c") == 1 + algorithms._ROUNDS


def test_a_noisy_first_run_does_not_decide() -> None:
    """Each run keeps its least time: a slow first run of the fastest algorithm (a cold cache, another process)
    loses to its later runs."""
    clock, costs = Clock(), iter([5.0, 1.0, 1.0, 1.0])

    def cold_then_fast() -> None:
        clock.now += next(costs)

    def steady() -> None:
        clock.now += 2.0

    assert algorithms.fastest({"steady": steady, "cold": cold_then_fast}, clock) == "cold"


def counting(built: list[str], ran: list[str], name: str):
    def build():
        built.append(name)
        return lambda: ran.append(name)

    return build


def test_heuristics_build_only_their_choice() -> None:
    built, ran = [], []
    candidates = {name: counting(built, ran, name) for name in ("im2col", "winograd")}
    run = algorithms.choose(np, "k", candidates, "winograd")
    run()
    assert (built, ran) == (["winograd"], ["winograd"])


def test_a_search_measures_once_per_key_and_thread_count(monkeypatch) -> None:
    monkeypatch.setattr(algorithms, "_HOPELESS", float("inf"))  # every candidate is timed, whatever the clock says
    built, ran = [], []
    candidates = {name: counting(built, ran, name) for name in ("im2col", "winograd")}
    with algorithms.search(True):
        run = algorithms.choose(np, "k", candidates, "winograd")
    assert not built  # nothing is built or measured before the first run
    run()
    assert sorted(built) == ["im2col", "winograd"]
    winner = algorithms.chosen()[("k", threads.cpu_thread_num())]
    assert ran[-1] == winner and len(ran) == 2 * (1 + algorithms._ROUNDS) + 1
    run()
    assert ran[-1] == winner and len(ran) == 2 * (1 + algorithms._ROUNDS) + 2

    # the same kernel built again (another job, the same shapes): no new measurement, only the winner built
    built.clear()
    with algorithms.search(True):
        again = algorithms.choose(np, "k", candidates, "winograd")
    again()
    assert built == [winner]

    # another thread count is measured on its own
    monkeypatch.setattr(algorithms, "thread_count", lambda xp: 7)
    before = len(ran)
    run()
    assert ("k", 7) in algorithms.chosen() and len(ran) - before == 2 * (1 + algorithms._ROUNDS) + 1


def test_no_search_on_a_gpu_or_without_a_choice() -> None:
    built, ran = [], []
    cupy_like = types.ModuleType("cupy")
    with algorithms.search(True):
        algorithms.choose(cupy_like, "k", {n: counting(built, ran, n) for n in ("a", "b")}, "b")()
        algorithms.choose(np, "k", {"a": counting(built, ran, "a")}, "a")()
    assert ran == ["b", "a"] and not algorithms.chosen()


@pytest.mark.parametrize("kind", ["conv2d", "conv2d_grad_input", "conv2d_grad_filter"])
def test_a_searched_convolution_tries_every_algorithm_and_its_result_is_right(kind) -> None:
    """16 channels, 3x3, stride 1, few rows: Winograd, shifted rows, im2col and the in-place GEMM can all run it
    (the input gradient: a correlation or in place); the search runs each and the output is the convolution's
    (a direct loop, or its gradients as sums of window products)."""
    rng = np.random.default_rng(0)
    attrs = {"strides": (1, 1), "pads": (1, 1, 1, 1), "dilations": (1, 1), "groups": 1}
    x = rng.standard_normal((3, 16, 6, 6))
    w = rng.standard_normal((8, 16, 3, 3))
    dy = rng.standard_normal((3, 8, 6, 6))
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    if kind == "conv2d":
        ins, out, expected = [x, w], np.empty((3, 8, 6, 6)), conv_reference(x, w, (1, 1), (1, 1, 1, 1))
    elif kind == "conv2d_grad_input":
        # dx[n, c] = sum over f, i, j of dy[n, f] shifted back by tap (i, j), times w[f, c, i, j]
        grads = np.zeros(padded.shape)
        for i in range(3):
            for j in range(3):
                grads[:, :, i : i + 6, j : j + 6] += np.einsum("nfhv,fc->nchv", dy, w[:, :, i, j])
        ins, out, expected = [dy, w], np.empty(x.shape), grads[:, :, 1:7, 1:7]
    else:
        # dw[f, c, i, j] = sum over n, h, v of dy[n, f, h, v] * padded x[n, c, h + i, v + j]
        expected = np.stack(
            [np.einsum("nfhv,nchv->fc", dy, padded[:, :, i : i + 6, j : j + 6]) for i in range(3) for j in range(3)], -1
        ).reshape(8, 16, 3, 3)
        ins, out = [dy, x], np.empty((8, 16, 3, 3))
    with algorithms.search(True):
        run = get_kernel(kind)(np, attrs, ins, [out])
    names = {"correlation", "in_place"} if kind == "conv2d_grad_input" else {"winograd", "shifts", "im2col", "in_place"}
    assert set(run.candidates) == names
    run()
    np.testing.assert_allclose(out, expected, rtol=1e-9, atol=1e-9)
    (key, count), *_ = [item for item in algorithms.chosen() if item[0][0] == kind]
    assert count == threads.cpu_thread_num()
    name = algorithms.chosen()[key, count]
    assert name in names
    assert set(run.built) == {name}  # the losers' scratch is gone


def test_the_job_option_checks_its_value() -> None:
    import irflow as flow

    config = flow.FunctionConfig()
    with pytest.raises(TypeError, match="cudnn_conv_heuristic_search_algo expects True or False, got 'no'"):
        config.cudnn_conv_heuristic_search_algo("no")
