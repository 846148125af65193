"""The executor's contract: run() reads the ins' current contents and writes into the very outs it was given."""

import numpy as np
import pytest

CASES = {
    "matmul": ([(3, 4), (4, 5)], (3, 5), {}),
    "conv2d": ([(2, 3, 6, 6), (4, 3, 3, 3)], (2, 4, 6, 6), dict(strides=(1, 1), pads=(1, 1, 1, 1))),
    "conv2d_grad_input": ([(2, 4, 3, 3), (4, 3, 3, 3)], (2, 3, 6, 6), dict(strides=(2, 2), pads=(0, 1, 0, 1))),
    "conv2d_grad_filter": ([(2, 4, 3, 3), (2, 3, 6, 6)], (4, 3, 3, 3), dict(strides=(2, 2), pads=(0, 1, 0, 1))),
    "max_pool2d": ([(2, 3, 5, 5)], (2, 3, 3, 3), dict(kernel=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1))),
    "add": ([(3, 1), (4,)], (3, 4), {}),
    "gelu": ([(7,)], (7,), {}),
    "sigmoid": ([(7,)], (7,), {}),
    "softmax": ([(3, 4)], (3, 4), dict(axis=1)),
}


@pytest.mark.parametrize("name", CASES)
def test_run_rereads_inputs_and_writes_the_bound_outputs(build_kernel, kernel, rng, name) -> None:
    in_shapes, out_shape, attrs = CASES[name]
    ins = [rng.standard_normal(s) for s in in_shapes]
    step, (out,) = build_kernel(name, ins, [(out_shape, np.float64)], **attrs)
    bound = out
    for _ in range(2):
        for a in ins:  # new contents, same memory: as the executor refills the arena
            a[...] = rng.standard_normal(a.shape)
        step()
        (fresh,) = kernel(name, [a.copy() for a in ins], [(out_shape, np.float64)], **attrs)
        assert out is bound
        np.testing.assert_array_equal(out, fresh)


def test_outputs_may_be_views_into_one_arena(rng) -> None:
    from irflow.runtime.kernels import get_kernel

    arena = np.zeros(64)
    a, b, y = arena[:12].reshape(3, 4), arena[12:32].reshape(4, 5), arena[32:47].reshape(3, 5)
    a[...], b[...] = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    get_kernel("matmul")(np, {}, [a, b], [y])()
    np.testing.assert_allclose(arena[32:47].reshape(3, 5), a @ b)
    assert not arena[47:].any()
