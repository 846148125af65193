"""Dynamic rows within a bound against a job compiled for the exact size.

The OneFlow quick-start MLP forward (784 -> 512 -> relu -> 10) on batches of 1,
7 and 100 rows: one job whose `tp.ListNumpy.Placeholder((100, 784))` takes any
number of rows up to 100 (docs/dynamic.md), against the same job compiled with
a `tp.Numpy.Placeholder((n, 784))` for each n.  Both share the weights (by
name) and run in this process; the two are timed in alternating rounds, best
of each, in wall-clock and CPU time (the CPU ratio is steadier on a busy machine).  Goal: the dynamic job costs at most 1.1x the static one at 100 rows.

Then 4 simulated devices, 25 rows each at most: the mirrored-view job, whose
devices each take their own rows (dynamic), against the same layers in the
consistent view with a static `tp.Numpy.Placeholder((100, 784))` split over
the devices, both returning the whole logits, at full rows; and the mirrored
job on rows 25, 25, 25, 13.
"""

import time

import numpy as np

import irflow as flow
import irflow.typing as tp

BOUND = 100
SIZES = (1, 7, 100)


def forward(images: flow.Blob) -> flow.Blob:
    hidden = flow.layers.dense(images, 512, activation=flow.nn.relu, name="dense1")
    return flow.layers.dense(hidden, 10, name="dense2")


def static_job(rows: int):  # no `from __future__ import annotations`: the annotation reads `rows` here
    @flow.global_function(type="predict")
    def mlp_static(images: tp.Numpy.Placeholder((rows, 784), dtype=flow.float)) -> tp.Numpy:
        return forward(images)

    return mlp_static


WEIGHTS_SEED = 0
DEVICES, PER_DEVICE = 4, 25


def load_weights(rng: np.random.Generator) -> None:
    flow.load_variables({
        "dense1-weight": rng.standard_normal((512, 784)).astype(np.float32) * 0.05,
        "dense1-bias": rng.standard_normal(512).astype(np.float32),
        "dense2-weight": rng.standard_normal((10, 512)).astype(np.float32) * 0.05,
        "dense2-bias": rng.standard_normal(10).astype(np.float32),
    })  # fmt: skip


def best_per_call(calls: dict[str, object], number: int, rounds: int) -> dict[str, tuple[float, float]]:
    """Each callable's best (wall-clock, CPU) seconds per call over `rounds` rounds that alternate between them."""
    best = {name: (float("inf"), float("inf")) for name in calls}
    for _ in range(rounds):
        for name, fn in calls.items():
            wall, cpu = time.perf_counter(), time.process_time()
            for _ in range(number):
                fn()  # type: ignore[operator]
            wall, cpu = (time.perf_counter() - wall) / number, (time.process_time() - cpu) / number
            best[name] = (min(best[name][0], wall), min(best[name][1], cpu))
    return best


def main() -> None:
    flow.clear_default_session()

    @flow.global_function(type="predict")
    def mlp_dynamic(images: tp.ListNumpy.Placeholder((BOUND, 784), dtype=flow.float)) -> tp.ListNumpy:
        return forward(images)

    statics = {n: static_job(n) for n in SIZES}
    rng = np.random.default_rng(WEIGHTS_SEED)
    load_weights(rng)
    x = rng.random((BOUND, 784), dtype=np.float32)
    print(f"{'rows':>5}{'static job':>14}{'dynamic job':>14}{'ratio':>9}{'CPU ratio':>11}")
    ratios = {}
    for n in SIZES:
        batch = x[:n]
        np.testing.assert_allclose(mlp_dynamic([batch])[0], statics[n](batch), rtol=1e-5, atol=1e-5)
        number = 400 if n < BOUND else 100
        best = best_per_call({"static": lambda: statics[n](batch), "dynamic": lambda: mlp_dynamic([batch])}, number, 7)
        ratios[n] = best["dynamic"][0] / best["static"][0]
        cpu = best["dynamic"][1] / best["static"][1]
        print(f"{n:>5}{best['static'][0] * 1e6:>12.1f}us{best['dynamic'][0] * 1e6:>12.1f}us{ratios[n]:>8.3f}x{cpu:>10.3f}x")
    print(f"ratio dynamic / static at {BOUND} rows: {ratios[BOUND]:.3f}x (goal <= 1.1x)")
    mirrored()


def mirrored() -> None:
    """4 simulated devices: each device's own rows (mirrored view) against static shapes (consistent view)."""
    flow.clear_default_session()
    flow.config.cpu_device_num(DEVICES)
    config = flow.function_config()
    config.default_logical_view(flow.scope.mirrored_view())

    @flow.global_function(type="predict", function_config=config)
    def mirrored_dynamic(images: tp.ListNumpy.Placeholder((PER_DEVICE, 784), dtype=flow.float)) -> tp.Numpy:
        return forward(images)

    @flow.global_function(type="predict")
    def consistent_static(images: tp.Numpy.Placeholder((PER_DEVICE * DEVICES, 784), dtype=flow.float)) -> tp.Numpy:
        return forward(images)

    rng = np.random.default_rng(WEIGHTS_SEED)
    load_weights(rng)
    x = rng.random((DEVICES, PER_DEVICE, 784), dtype=np.float32)
    full, last, whole = list(x), [x[0], x[1], x[2], x[3, :13]], x.reshape(-1, 784)
    np.testing.assert_allclose(mirrored_dynamic(full), consistent_static(whole), rtol=1e-5, atol=1e-5)
    best = best_per_call({
        "static (consistent)": lambda: consistent_static(whole),
        "dynamic (mirrored)": lambda: mirrored_dynamic(full),
        "dynamic, rows 25, 25, 25, 13": lambda: mirrored_dynamic(last),
    }, 100, 7)  # fmt: skip
    static = best["static (consistent)"]
    print(f"\n{DEVICES} simulated devices, {PER_DEVICE} rows per device at most (wall, ratio, CPU ratio):")
    for name, (wall, cpu) in best.items():
        print(f"{name:>30}{wall * 1e6:>12.1f}us{wall / static[0]:>8.3f}x{cpu / static[1]:>10.3f}x")


if __name__ == "__main__":
    main()
