"""job.memory_plan(): the arena of a compiled job, as people read it and look at it."""

import xml.etree.ElementTree as ET

import numpy as np

import irflow as flow
import irflow.typing as tp
from irflow.memplan import validate


def test_memory_plan_of_a_train_job(tmp_path):
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((8, 16)), y: tp.Numpy.Placeholder((8,), dtype=flow.int32)) -> tp.Numpy:
        hidden = flow.layers.dense(x, 32, activation=flow.nn.relu, name="fc1")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, flow.layers.dense(hidden, 4, name="fc2"))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(loss)
        return loss

    train(np.ones((8, 16), np.float32), np.zeros(8, np.int32))
    plan = train.memory_plan()
    buffers, placed = plan.planned()
    validate(buffers, placed, 64)  # the recorded plan is a valid one
    assert plan.lower_bound <= plan.arena_size <= 1.1 * plan.lower_bound + 64 * len(buffers)
    table = plan.table().splitlines()
    assert "lower bound" in table[0] and len(table) == 2 + len(plan.buffers)
    assert any("test_memory_plan.py" in b.name for b in plan.buffers)  # buffers name the user's lines
    plan.plot(tmp_path / "train.svg")
    assert ET.parse(tmp_path / "train.svg").getroot().tag.endswith("svg")
