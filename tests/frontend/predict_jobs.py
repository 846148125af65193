"""Jobs made on the fly by tests: a function of numpy arrays run as a predict job, and a run on one device
against the same run on several."""

from typing import Tuple

import irflow as flow
import irflow.typing as tp


def run(function, *arrays, returns=tp.Numpy):
    """`function` of the arrays in a predict job, its result as numpy (`returns`: its annotation)."""

    def job(xs):
        return function(*xs)

    job.__annotations__ = {
        "xs": Tuple[tuple(tp.Numpy.Placeholder(a.shape, dtype=flow.frontend.dtypes.from_numpy(a.dtype)) for a in arrays)],
        "return": returns,
    }
    return flow.global_function()(job)(tuple(arrays))


def on_one_device_and(devices, make):
    """`make()` on one device, then again in a session of its own on `devices` simulated devices: both results."""
    one = make()
    flow.clear_default_session()
    flow.config.cpu_device_num(devices)
    return one, make()
