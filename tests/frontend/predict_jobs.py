"""Predict jobs made on the fly by tests: a function of numpy arrays, traced and run as one job."""

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
