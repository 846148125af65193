"""Random small job graphs with random SBP hints, on 2 to 4 simulated devices.

Each graph either compiles and gives what numpy computes from the same
inputs and variables, or is rejected with a CompileError located at a line of
this file: never a wrong answer, never an error without a place.
"""

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp

HERE = __file__
ROWS, COLS = 6, 4
HINTS = {
    "split(0)": flow.distribute.split(0),
    "split(1)": flow.distribute.split(1),
    "broadcast": flow.distribute.broadcast(),
    "partial_sum": flow.distribute.partial_sum(),
}
UNARY = {"relu": (flow.math.relu, lambda a: np.maximum(a, 0)), "neg": (lambda b: -b, np.negative),
         "tanh": (flow.math.tanh, np.tanh), "square": (flow.math.square, np.square)}  # fmt: skip
BINARY = {"add": (lambda a, b: a + b, np.add), "sub": (lambda a, b: a - b, np.subtract),
          "mul": (lambda a, b: a * b, np.multiply)}  # fmt: skip


def random_graph(rng: np.random.Generator, size: int) -> list[tuple]:
    """Steps (kind, name, operand indices, hint name or None); values 0 and 1 are the inputs."""
    steps = []
    values = 2
    for _ in range(size):
        kind = rng.choice(["unary", "binary", "matmul"], p=[0.4, 0.4, 0.2])
        if kind == "unary":
            steps.append(("unary", str(rng.choice(list(UNARY))), (int(rng.integers(values)),)))
        elif kind == "binary":
            steps.append(("binary", str(rng.choice(list(BINARY))), tuple(int(i) for i in rng.integers(values, size=2))))
        else:
            steps.append(("matmul", "matmul", (int(rng.integers(values)),)))  # times the variable w
        hint = str(rng.choice(list(HINTS))) if rng.random() < 0.35 else None
        steps[-1] = (*steps[-1], hint)
        values += 1
    return steps


def build(steps, devices: int):
    flow.clear_default_session()
    flow.config.cpu_device_num(devices) if devices > 1 else None
    config = flow.function_config()
    config.default_data_type(flow.float64)

    @flow.global_function(function_config=config)
    def job(
        x: tp.Numpy.Placeholder((ROWS, COLS), dtype=flow.float64),
        y: tp.Numpy.Placeholder((ROWS, COLS), dtype=flow.float64),
    ) -> tp.Numpy:
        w = flow.get_variable("w", shape=(COLS, COLS), initializer=flow.random_normal_initializer(0.0, 0.5))
        values = [x, y]
        for kind, name, operands, hint in steps:
            args = [values[i] for i in operands]
            if kind == "unary":
                out = UNARY[name][0](*args)
            elif kind == "binary":
                out = BINARY[name][0](*args)
            else:
                out = flow.matmul(args[0], w)
            if hint is not None:
                out = out.with_distribute(HINTS[hint])  # the line a rejection must name
            values.append(out)
        return flow.math.reduce_sum(values[-1], axis=1)

    return job


def numpy_result(steps, x, y, w) -> np.ndarray:
    values = [x, y]
    for kind, name, operands, _ in steps:
        args = [values[i] for i in operands]
        values.append(UNARY[name][1](*args) if kind == "unary" else BINARY[name][1](*args) if kind == "binary"
                      else args[0] @ w)  # fmt: skip
    return values[-1].sum(axis=1)


@pytest.mark.parametrize("seed", range(16))
def test_random_graph_matches_numpy_or_is_rejected_with_a_location(seed):
    rng = np.random.default_rng(seed)
    steps = random_graph(rng, int(rng.integers(2, 7)))
    devices = int(rng.integers(2, 5))
    x, y = rng.standard_normal((2, ROWS, COLS)) * 0.5
    job = build(steps, devices)
    try:
        got = job(x, y)
    except flow.CompileError as err:
        assert err.location is not None and err.location.file == HERE, (steps, devices, str(err))
        return
    w = flow.get_all_variables()["w"].numpy()
    np.testing.assert_allclose(got, numpy_result(steps, x, y, w), rtol=1e-10, atol=1e-12, err_msg=str((steps, devices)))
