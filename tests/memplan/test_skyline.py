"""The skyline packer (irflow/memplan/skyline.py): canonical, valid plans."""

import numpy as np
import pytest

from irflow.memplan import Plan, validate
from irflow.memplan.instances import mixed, tiled, training
from irflow.memplan.orderings import ORDERINGS
from irflow.memplan.problem import as_arrays
from irflow.memplan.skyline import compress, skyline_pack, step_load


@pytest.mark.parametrize("make", [tiled, training, mixed])
@pytest.mark.parametrize("order", list(ORDERINGS))
def test_plans_are_valid_and_canonical(make, order):
    buffers = [b for b in make(400, seed=11) if b.size]
    size, first, last = as_arrays(buffers)
    cfirst, clast, steps = compress(first, last)
    offsets = np.array(skyline_pack(cfirst, clast, size, ORDERINGS[order](size, first, last), steps))
    validate(buffers, Plan(tuple(offsets.tolist()), int((offsets + size).max())), 1)
    # Canonical: every buffer rests on the floor or on a buffer live with it.
    tops = offsets + size
    for i in range(len(buffers)):
        live = (first <= last[i]) & (last >= first[i])
        assert offsets[i] == 0 or offsets[i] in tops[live]


def test_compress_keeps_overlaps():
    first, last = np.array([5, 100, 7, -3]), np.array([7, 200, 99, 5])
    cfirst, clast, steps = compress(first, last)
    assert steps == 6
    overlap = (first[:, None] <= last[None, :]) & (first[None, :] <= last[:, None])
    assert ((cfirst[:, None] <= clast[None, :]) & (cfirst[None, :] <= clast[:, None]) == overlap).all()
    assert step_load(cfirst, clast, np.array([1, 2, 4, 8]), steps).tolist() == [8, 9, 5, 4, 2, 2]
