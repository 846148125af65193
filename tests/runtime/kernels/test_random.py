import subprocess
import sys

import numpy as np
import pytest

from .conftest import build_on_gpu


def masks(build_kernel, seed: int, calls: int, rate: float = 0.3, shape=(64, 50), dtype=np.float32) -> list[np.ndarray]:
    step, (mask,) = build_kernel("dropout_mask", [], [(shape, dtype)], rate=rate, seed=seed)
    out = []
    for _ in range(calls):
        step()
        out.append(mask.copy())
    return out


def test_same_seed_same_sequence(build_kernel) -> None:
    first, second = masks(build_kernel, 7, 3), masks(build_kernel, 7, 3)
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)


def test_calls_and_seeds_differ(build_kernel) -> None:
    a, b = masks(build_kernel, 7, 2)
    (c,) = masks(build_kernel, 8, 1)
    assert (a != b).any() and (a != c).any()


@pytest.mark.parametrize("rate", [0.1, 0.5, 0.9])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_values_and_mean(build_kernel, rate, dtype) -> None:
    (mask,) = masks(build_kernel, 3, 1, rate=rate, shape=(200, 500), dtype=dtype)
    scale = dtype(1 / (1 - rate))
    assert mask.dtype == dtype
    assert set(np.unique(mask)) <= {0, scale}
    assert abs(float(mask.astype(np.float64).mean()) - 1) < 0.03
    assert abs(float((mask == 0).mean()) - rate) < 0.01


def test_rate_zero_keeps_everything(build_kernel) -> None:
    for mask in masks(build_kernel, 5, 2, rate=0.0):
        np.testing.assert_array_equal(mask, 1)


def test_rate_one_is_rejected(build_kernel) -> None:
    with pytest.raises(ValueError, match="rate"):
        build_kernel("dropout_mask", [], [((2,), np.float32)], rate=1.0, seed=0)


def test_stream_is_the_same_in_another_process(build_kernel) -> None:
    xp = "cupy" if build_kernel is build_on_gpu else "numpy"
    script = (
        f"import numpy as np, {xp} as xp; from irflow.runtime.kernels import get_kernel;"
        "m = xp.empty((8, 8), np.float32); run = get_kernel('dropout_mask')(xp, dict(rate=0.5, seed=11), [], [m]);"
        "run(); run(); print(','.join(str(int(v)) for v in (xp.asnumpy(m) if xp is not np else m).reshape(-1) > 0))"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    second = masks(build_kernel, 11, 2, rate=0.5, shape=(8, 8))[1]
    assert result.stdout.strip() == ",".join(str(int(v)) for v in (second > 0).reshape(-1))
