"""Differential fuzzing of the distributed path: random small jobs on one device and on N simulated devices.

Hypothesis draws a job: float inputs and variables of random (often unevenly
splittable) shapes, a DAG of the ops below (max and min of int32 among the
reductions), random SBP hints (`with_distribute`, `flow.parallel_cast`,
variables' `distribute`, `gradient_distribute` and
`with_gradient_distribute`) and placement scopes per op, on a mesh of 2, 3 or
4 devices, a 2x2 / 2x3 hierarchy, or devices of 2 or 3 machines
(["0:0-1", "1:0-1"], 1-D or as a 2x2 / 3x2 hierarchy, some set by
`flow.config.machine_num` and `cpu_device_num` instead of a scope). The job is
traced twice: on one device without hints or scopes (the reference), and on the
mesh with them. A predict job must return the reference's outputs; a train job
its losses and outputs at every step and its variables after the last (SGD with
momentum, clipped Adam, AdamW, LazyAdam, centered RMSProp, LAMB or LARS, the
last two taking the norms of split variables from all their pieces; only
SGD after a batch_norm or layer_norm, whose gradients can be rounding alone), up to float64
reassociation. A hint the compiler cannot honour may be refused,
with a CompileError or TraceError located at this file, never with a wrong answer.

The mirrored view: every input is a tp.ListNumpy placeholder of one device's
rows, each device feeding up to that many (fewer, or none, in half the steps),
all inputs of a device alike; outputs come back whole (tp.Numpy) or per device
(tp.ListNumpy, compared joined). Its reference is the same job on one device
with every device's rows in one list placeholder, which is what irflow's
mirrored view computes (docs/dynamic.md); a program that one device refuses
(dynamic rows meeting a static size) is no test. On several devices each
device's own sizes must meet the static ones its ops need (an axis pinned at
its bound for a whole output or a gather, a split variable's piece against
its rows, whole rows of a reshape that regroups them; docs/dynamic.md): a
device short of one is the run's located ExecutionError, though the
reference, with every row on one device, may run.

The CI run is derandomized and small; hunt with more examples and fresh draws:

    IRFLOW_SBP_FUZZ_EXAMPLES=2000 .venv/bin/python -m pytest tests/distributed/test_sbp_fuzz.py \
        --hypothesis-show-statistics
"""

import contextlib
import os
from dataclasses import dataclass, field
from typing import Any, Tuple

import numpy as np
from hypothesis import HealthCheck, Phase, assume, event, given, settings
from hypothesis import strategies as st

import irflow as flow
import irflow.typing as tp

HERE = __file__
EXAMPLES = int(os.environ.get("IRFLOW_SBP_FUZZ_EXAMPLES", "0"))
STEPS = 3
RTOL = 1e-8

# mesh name -> (device ranges, hierarchy, scopes some ops may be placed in: parts, or the devices as another
# mesh); ranges on several machines are comma-separated, as flow.scope.placement's list of "machine:devices"
MESHES: dict[str, tuple[str, list[int] | None, list[str]]] = {
    "2": ("0:0-1", None, ["0:0", "0:1"]),
    "3": ("0:0-2", None, ["0:0-1", "0:1-2", "0:2"]),
    "4": ("0:0-3", None, ["0:0-1", "0:2-3", "0:1-3", "0:0-2", "0:0-3/2x2"]),
    "2x2": ("0:0-3", [2, 2], ["0:0-1", "0:1-3", "0:0-3/4"]),
    "2x3": ("0:0-5", [2, 3], ["0:0-2", "0:3-5", "0:0-5/3x2"]),
    "2m": ("0:0,1:0", None, ["0:0", "1:0"]),
    "2m2": ("0:0-1,1:0-1", None, ["0:0-1", "1:0-1", "0:1,1:0", "0:0-1,1:0-1/2x2", "1:0-1,0:0-1"]),
    "2m2x2": ("0:0-1,1:0-1", [2, 2], ["0:0-1", "1:0-1", "0:1,1:0-1", "0:0-1,1:0-1/4"]),
    "3m2x2": ("0:0-1,1:0-1,2:0-1", [3, 2], ["0:0-1,1:0-1", "2:0-1", "0:0-1,1:0-1,2:0-1/6"]),
}


Shape = tuple[int, ...]
Hint = tuple  # ("S", axis) | ("B",) | ("P",), or a tuple of those per hierarchy axis


def placement(scope: str) -> tuple[list[str], list[int] | None]:
    """A scope's device ranges and hierarchy ("0:0-1,1:0-1/2x2"; none when 1-D)."""
    ranges, _, mesh = scope.partition("/")
    hierarchy = [int(p) for p in mesh.split("x")] if mesh else None
    return ranges.split(","), hierarchy if hierarchy and len(hierarchy) > 1 else None


def mesh_placement(mesh: str) -> tuple[list[str], list[int] | None]:
    return MESHES[mesh][0].split(","), MESHES[mesh][1]


def devices(ranges: list[str]) -> int:
    """How many devices "m:a-b" (or "m:a") ranges name."""
    count = 0
    for spec in ranges:
        first, _, last = spec.split(":")[1].partition("-")
        count += int(last or first) - int(first) + 1
    return count


UNARY = {
    "relu": flow.math.relu, "tanh": flow.math.tanh, "sigmoid": flow.math.sigmoid, "square": flow.math.square,
    "neg": flow.math.negative, "abs": flow.math.abs, "gelu": flow.math.gelu, "erf": flow.math.erf,
    "sin": flow.math.sin, "clip": lambda a: flow.clip_by_value(a, -0.5, 0.7),
}  # fmt: skip
BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / (flow.math.square(b) + 1.0), "maximum": flow.math.maximum, "minimum": flow.math.minimum,
    "pow": lambda a, b: flow.math.pow(flow.math.abs(a) + 0.5, b), "atan2": flow.math.atan2,
}  # fmt: skip


def on_int32(reduce: Any) -> Any:
    """`reduce` of the value times 4 truncated to int32, cast back: an integer reduction, no gradient through it."""
    return lambda a, **kw: flow.cast(reduce(flow.cast(a * 4.0, flow.int32), **kw), flow.float64)


REDUCE = {
    "sum": flow.math.reduce_sum, "mean": flow.math.reduce_mean, "max": flow.math.reduce_max,
    "min": flow.math.reduce_min, "prod": flow.math.reduce_prod, "logsumexp": flow.math.reduce_logsumexp,
    "variance": flow.math.reduce_variance, "max_int32": on_int32(flow.math.reduce_max),
    "min_int32": on_int32(flow.math.reduce_min),
}  # fmt: skip
ON_INT32 = ("max_int32", "min_int32")


OPTIMIZERS = {
    "sgd": lambda: flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.05]), momentum=0.5),
    "adam": lambda: flow.optimizer.Adam(  # clipping by the global norm: a sum over every (split) gradient
        flow.optimizer.PiecewiseConstantScheduler([], [0.01]),
        grad_clipping=flow.optimizer.grad_clipping.by_global_norm(1.0),
    ),
    # the layer-wise ones take norms of each (split) variable and its gradient
    "lamb": lambda: flow.optimizer.LAMB(flow.optimizer.PiecewiseConstantScheduler([], [0.01]), weight_decay=0.01),
    "lars": lambda: flow.optimizer.LARS(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), lars_coefficient=0.1),
    "rmsprop": lambda: flow.optimizer.RMSProp(flow.optimizer.PiecewiseConstantScheduler([], [0.01]), centered=True),
    "adamw": lambda: flow.optimizer.AdamW(flow.optimizer.PiecewiseConstantScheduler([], [0.01]), weight_decay=0.1),
    "lazy_adam": lambda: flow.optimizer.LazyAdam(flow.optimizer.PiecewiseConstantScheduler([], [0.01])),
}


@dataclass
class Step:
    """One value of the job: a new input, variable or int indices, or an op on earlier values."""

    op: str
    operands: tuple[int, ...] = ()
    params: dict[str, Any] = field(default_factory=dict)
    hint: Hint | None = None
    cast: bool = False  # the hint as flow.parallel_cast instead of with_distribute
    grad_hint: Hint | None = None  # its gradient_distribute (the parallel_cast's, or with_gradient_distribute)
    scope: str | None = None


@dataclass
class Program:
    mesh: str
    train: bool
    steps: list[Step]
    shapes: list[Shape]
    outputs: list[int]
    seed: int
    optimizer: str = "sgd"
    by_config: bool = False  # the mesh as flow.config.machine_num and cpu_device_num, not a placement scope
    rows: int = 0  # the mirrored view's rows per device (each device feeds up to this many); 0: consistent view
    lists: tuple[bool, ...] = ()  # per output: returned as tp.ListNumpy (each device's rows) in the mirrored view

    def __repr__(self) -> str:
        lines = [
            f"Program(mesh={self.mesh!r}, by_config={self.by_config}, train={self.train}, outputs={self.outputs}, "
            f"seed={self.seed}, optimizer={self.optimizer!r}, rows={self.rows}, lists={self.lists})"
        ]
        lines += [f"  %{i} {self.shapes[i]} = {s}" for i, s in enumerate(self.steps)]
        return "\n".join(lines)


# ----------------------------------------------------------------- generation


class Draft:
    """A program being drawn: its steps, their shapes and which are floats."""

    def __init__(self, draw: Any, mesh: str, train: bool, batch: int | None = None):
        self.draw, self.mesh, self.train = draw, mesh, train
        self.batch = batch  # the mirrored view's logical rows: every input has them (the devices' rows together)
        self.steps: list[Step] = []
        self.shapes: list[Shape] = []
        self.floats: list[int] = []
        self.used: set[int] = set()

    def add(self, step: Step, shape: Shape, is_float: bool = True) -> int:
        self.steps.append(step)
        self.shapes.append(shape)
        self.used.update(step.operands)
        if is_float:
            self.floats.append(len(self.steps) - 1)
        return len(self.steps) - 1

    def dims(self, rank: int) -> Shape:
        return tuple(self.draw(st.integers(1, 6)) for _ in range(rank))

    def hint(self, shape: Shape, scope: str | None, partial: bool = False) -> Hint | None:
        """A random hint for a value of `shape`: a split of an axis large enough for the devices, broadcast, or
        partial_sum for the ops that can produce one."""
        where, hierarchy = placement(scope) if scope else mesh_placement(self.mesh)
        p = max(hierarchy) if hierarchy else devices(where)
        choices = [("S", a) for a, d in enumerate(shape) if d >= p] + [("B",)] + ([("P",)] if partial else [])

        def one() -> Hint:
            return self.draw(st.sampled_from(choices))

        if hierarchy and self.draw(st.booleans()):
            return tuple(one() for _ in hierarchy)
        return one()

    def scope(self) -> str | None:
        if self.batch:  # a mirrored job has one placement
            return None
        return self.draw(st.sampled_from(MESHES[self.mesh][2])) if self.draw(st.integers(0, 9)) == 0 else None

    def source(self, shape: Shape) -> int:
        """A new float input or variable of `shape` (in the mirrored view inputs have the batch's rows)."""
        if self.batch:
            variable = shape[:1] != (self.batch,) or self.draw(st.integers(0, 3)) == 0
        else:
            variable = self.draw(st.integers(0, 3)) > 0 if self.train else self.draw(st.integers(0, 3)) == 0
        if variable:
            scope = self.scope()
            hint = self.hint(shape, scope) if self.draw(st.integers(0, 2)) == 0 else None
            return self.add(Step("variable", hint=hint, scope=scope), shape)
        # the job's arg_sbp (the mirrored view's is split(0))
        hint = self.hint(shape, None) if not self.batch and self.draw(st.integers(0, 3)) == 0 else None
        return self.add(Step("input", hint=hint), shape)

    def value(self, shape: Shape) -> int:
        """An existing float value of `shape`, or a new source."""
        same = [i for i in self.floats if self.shapes[i] == shape]
        if same and self.draw(st.booleans()):
            return self.draw(st.sampled_from(same))
        return self.source(shape)

    def pick(self, rank_at_least: int = 0, rank: int | None = None) -> int:
        """A float value of at least (or exactly) that rank: mostly an existing one, else a new source."""
        fits = [i for i in self.floats
                if len(self.shapes[i]) >= rank_at_least and (rank is None or len(self.shapes[i]) == rank)]  # fmt: skip
        if fits and self.draw(st.integers(0, 4)) > 0:
            unused = [i for i in fits if i not in self.used]
            return self.draw(st.sampled_from(unused if unused and self.draw(st.booleans()) else fits))
        if rank is None:
            rank = self.draw(st.integers(max(rank_at_least, 1), max(rank_at_least, 3)))
        shape = self.dims(rank)
        if self.batch and rank and self.draw(st.integers(0, 3)) > 0:
            shape = (self.batch, *shape[1:])
        return self.source(shape)


OPS = ["unary", "binary", "matmul", "reduce", "transpose", "reshape", "concat", "slice", "softmax", "gather",
       "layer_norm", "bias_add", "conv2d", "pool", "cast", "cross_entropy", "pad", "expand_squeeze",
       "dim_gather", "gather_nd", "scatter_nd", "segment_sum", "one_hot", "where", "broadcast_like",
       "tensor_scatter_nd", "argmax", "top_k", "softmax_xent", "dropout", "batch_norm", "stack",
       "l2_normalize"]  # fmt: skip
NOT_DIFFERENTIABLE = ("argmax", "top_k")  # and the cast to int32
# the mirrored view's indices are inputs too, with the batch's rows: of these ops only gather draws such indices
# (into a variable: an embedding)
MIRRORED_OPS = [op for op in OPS if op not in ("dim_gather", "gather_nd", "scatter_nd", "tensor_scatter_nd",
                                               "segment_sum")]  # fmt: skip


def draw_op(d: Draft) -> None:
    op = d.draw(st.sampled_from(MIRRORED_OPS if d.batch else OPS))
    draw = d.draw
    scope = d.scope()
    if op == "unary":
        a = d.pick()
        step, shape = Step("unary", (a,), {"fn": draw(st.sampled_from(sorted(UNARY)))}), d.shapes[a]
    elif op == "binary":
        a = d.pick()
        shape = d.shapes[a]
        # b broadcasts to a: leading axes dropped, others possibly 1
        drop = draw(st.integers(0, len(shape)))
        b_shape = tuple(1 if draw(st.integers(0, 3)) == 0 else s for s in shape[drop:])
        b = d.value(b_shape)
        operands = (b, a) if draw(st.booleans()) else (a, b)
        step = Step("binary", operands, {"fn": draw(st.sampled_from(sorted(BINARY)))})
    elif op == "matmul":
        a = d.pick(rank_at_least=2)
        sa = d.shapes[a]
        ta, tb = draw(st.booleans()), draw(st.booleans())
        batch, k, m = sa[:-2], *((sa[-2], sa[-1]) if ta else (sa[-1], sa[-2]))
        n = draw(st.integers(1, 6))
        b_shape = batch + ((n, k) if tb else (k, n))
        b = d.value(b_shape)
        contraction = len(b_shape) - (1 if tb else 2)
        if d.steps[b].op == "variable" and b_shape[contraction] > 1 and draw(st.booleans()):
            d.steps[b].hint = ("S", contraction)  # split along the contraction: partial sums
        step, shape = Step("matmul", (a, b), {"ta": ta, "tb": tb}), batch + (m, n)
    elif op == "reduce":
        a = d.pick(rank_at_least=1)
        sa = d.shapes[a]
        axes = sorted(draw(st.sets(st.integers(0, len(sa) - 1), min_size=1)))
        keep = draw(st.booleans())
        shape = tuple(1 if i in axes else s for i, s in enumerate(sa) if keep or i not in axes)
        step = Step("reduce", (a,), {"fn": draw(st.sampled_from(sorted(REDUCE))), "axes": axes, "keepdims": keep})
    elif op == "transpose":
        a = d.pick(rank_at_least=2)
        perm = draw(st.permutations(range(len(d.shapes[a]))))
        step, shape = Step("transpose", (a,), {"perm": list(perm)}), tuple(d.shapes[a][i] for i in perm)
    elif op == "reshape":
        a = d.pick(rank_at_least=1)
        sa = d.shapes[a]
        splittable = [i for i, s in enumerate(sa) if any(s % f == 0 for f in range(2, s))]
        if len(sa) >= 2 and (not splittable or len(sa) >= 4 or draw(st.booleans())):
            i = draw(st.integers(0, len(sa) - 2))
            shape = sa[:i] + (sa[i] * sa[i + 1],) + sa[i + 2 :]
        elif splittable:
            i = draw(st.sampled_from(splittable))
            f = draw(st.sampled_from([f for f in range(2, sa[i]) if sa[i] % f == 0]))
            shape = sa[:i] + (f, sa[i] // f) + sa[i + 1 :]
        else:
            shape = sa + (1,)
        step = Step("reshape", (a,), {"shape": list(shape)})
    elif op == "concat":
        a = d.pick(rank_at_least=1)
        sa = d.shapes[a]
        axis = draw(st.integers(0, len(sa) - 1))
        others = [i for i in d.floats if len(d.shapes[i]) == len(sa) and i != a
                  and all(x == y for j, (x, y) in enumerate(zip(d.shapes[i], sa)) if j != axis)]  # fmt: skip
        if others and draw(st.booleans()):
            b = draw(st.sampled_from(others))
        else:
            b = d.source(sa[:axis] + (draw(st.integers(1, 4)),) + sa[axis + 1 :])
        step = Step("concat", (a, b), {"axis": axis})
        shape = sa[:axis] + (sa[axis] + d.shapes[b][axis],) + sa[axis + 1 :]
    elif op == "slice":
        a = d.pick(rank_at_least=1)
        begin, size = [], []
        for s in d.shapes[a]:
            if draw(st.booleans()):
                begin.append(0)
                size.append(s)
            else:
                b = draw(st.integers(0, s - 1))
                begin.append(b)
                size.append(draw(st.integers(1, s - b)))
        step, shape = Step("slice", (a,), {"begin": begin, "size": size}), tuple(size)
    elif op == "softmax":
        a = d.pick(rank_at_least=1)
        params = {"axis": draw(st.integers(-1, len(d.shapes[a]) - 1)), "log": draw(st.booleans())}
        step, shape = Step("softmax", (a,), params), d.shapes[a]
    elif op == "cross_entropy":  # sparse, over (rows, classes) logits: the classes may split
        a = d.pick(rank=2)
        if d.batch and d.shapes[a][0] != d.batch:
            a = d.source((d.batch, d.shapes[a][1]))
        rows, classes = d.shapes[a]
        labels = d.add(Step("indices", params={"high": classes}), (rows,), is_float=False)
        step, shape = Step("cross_entropy", (a, labels)), (rows,)
    elif op == "pad":
        a = d.pick(rank_at_least=1)
        widths = [(draw(st.integers(0, 2)), draw(st.integers(0, 2))) if draw(st.booleans()) else (0, 0)
                  for _ in d.shapes[a]]  # fmt: skip
        if not any(b or e for b, e in widths):  # flow.pad of nothing returns its input, which has its own hint
            widths[0] = (0, 1)
        step = Step("pad", (a,), {"paddings": widths, "value": draw(st.sampled_from([0.0, 1.5]))})
        shape = tuple(s + b + e for s, (b, e) in zip(d.shapes[a], widths))
    elif op == "expand_squeeze":
        a = d.pick()
        sa = d.shapes[a]
        ones = [i for i, s in enumerate(sa) if s == 1]
        if ones and draw(st.booleans()):
            axis = draw(st.sampled_from(ones))
            step, shape = Step("squeeze", (a,), {"axis": axis}), sa[:axis] + sa[axis + 1 :]
        else:
            axis = draw(st.integers(0, len(sa)))
            step, shape = Step("expand_dims", (a,), {"axis": axis}), sa[:axis] + (1,) + sa[axis:]
    elif op == "gather" and d.batch:  # an embedding: a table looked up at each device's own indices (its rows)
        sa = d.dims(draw(st.integers(1, 2)))
        a = d.add(Step("variable"), sa)
        axis = draw(st.integers(0, len(sa) - 1))
        index_shape = (d.batch, *d.dims(draw(st.integers(0, 1))))
        indices = d.add(Step("indices", params={"high": sa[axis]}), index_shape, is_float=False)
        step, shape = Step("gather", (a, indices), {"axis": axis, "batch_dims": 0}), sa[:axis] + index_shape + sa[axis + 1 :]
    elif op == "gather":
        a = d.pick(rank_at_least=1)
        sa = d.shapes[a]
        # OneFlow's batch_gather: the indices' leading axes are params' first, and it gathers along the next
        batch = draw(st.integers(1, len(sa) - 1)) if len(sa) > 1 and draw(st.integers(0, 2)) == 0 else 0
        axis = batch if batch else draw(st.integers(0, len(sa) - 1))
        index_shape = sa[:batch] + d.dims(1 if batch else draw(st.integers(1, 2)))
        indices = d.add(Step("indices", params={"high": sa[axis]}), index_shape, is_float=False)
        step = Step("gather", (a, indices), {"axis": axis, "batch_dims": batch})
        shape = sa[:axis] + index_shape[batch:] + sa[axis + 1 :]
    elif op == "dim_gather":
        a = d.pick(rank_at_least=1)
        sa = d.shapes[a]
        dim = draw(st.integers(0, len(sa) - 1))
        index_shape = sa[:dim] + (draw(st.integers(1, 6)),) + sa[dim + 1 :]
        indices = d.add(Step("indices", params={"high": sa[dim]}), index_shape, is_float=False)
        step, shape = Step("dim_gather", (a, indices), {"dim": dim}), index_shape
    elif op == "gather_nd":
        a = d.pick(rank_at_least=1)
        sa = d.shapes[a]
        k = draw(st.integers(1, len(sa)))
        rows = d.dims(draw(st.integers(1, 2)))
        indices = d.add(Step("indices", params={"high": sa[:k]}), (*rows, k), is_float=False)
        step, shape = Step("gather_nd", (a, indices)), rows + sa[k:]
    elif op == "scatter_nd":
        out = d.dims(draw(st.integers(1, 3)))
        k = draw(st.integers(1, len(out)))
        rows = d.dims(draw(st.integers(1, 2)))
        updates = d.value(rows + out[k:])
        indices = d.add(Step("indices", params={"high": out[:k]}), (*rows, k), is_float=False)
        step, shape = Step("scatter_nd", (updates, indices), {"shape": list(out)}), out
    elif op == "tensor_scatter_nd":  # params with slices replaced by (or added to) the updates'
        a = d.pick(rank_at_least=1)
        sa = d.shapes[a]
        k = draw(st.integers(1, len(sa)))
        rows = d.dims(draw(st.integers(1, 2)))
        updates = d.value(rows + sa[k:])
        indices = d.add(Step("indices", params={"high": sa[:k]}), (*rows, k), is_float=False)
        params = {"add": draw(st.booleans())}
        step, shape = Step("tensor_scatter_nd", (a, indices, updates), params), sa
    elif op == "segment_sum":
        a = d.pick(rank_at_least=1)
        sa = d.shapes[a]
        axis = draw(st.integers(0, len(sa) - 1))
        segments = draw(st.integers(1, 6))
        ids = d.add(Step("indices", params={"high": segments}), sa[axis : axis + 1], is_float=False)
        step = Step("segment_sum", (a, ids), {"axis": axis, "segments": segments})
        shape = sa[:axis] + (segments,) + sa[axis + 1 :]
    elif op == "one_hot":  # times a float value of its shape, so that something trains through it
        index_shape = d.dims(draw(st.integers(1, 2)))
        if d.batch:
            index_shape = (d.batch, *index_shape[1:])
        depth = draw(st.integers(1, 6))
        labels = d.add(Step("indices", params={"high": depth}), index_shape, is_float=False)
        shape = index_shape + (depth,)
        step = Step("one_hot", (labels, d.value(shape)), {"depth": depth})
    elif op == "where":  # where(a > 0, a, b)
        a = d.pick()
        step, shape = Step("where", (a, d.value(d.shapes[a]))), d.shapes[a]
    elif op == "broadcast_like":
        like = d.pick(rank_at_least=1)
        sl = d.shapes[like]
        axes = sorted(draw(st.sets(st.integers(0, len(sl) - 1), min_size=1)))
        x = d.value(tuple(s for i, s in enumerate(sl) if i not in axes))
        step, shape = Step("broadcast_like", (x, like), {"axes": axes}), sl
    elif op == "layer_norm":
        a = d.pick(rank_at_least=2)
        sa = d.shapes[a]
        gamma, beta = d.value((sa[-1],)), d.value((sa[-1],))
        step = Step("layer_norm", (a, gamma, beta), {"begin_norm_axis": draw(st.integers(1, len(sa) - 1))})
        shape = sa
    elif op == "bias_add":
        a = d.pick(rank_at_least=2)
        step, shape = Step("bias_add", (a, d.value((d.shapes[a][1],)))), d.shapes[a]
    elif op in ("conv2d", "pool"):
        images = [i for i in d.floats if len(d.shapes[i]) == 4 and min(d.shapes[i][2:]) >= 2]
        a = draw(st.sampled_from(images)) if images and draw(st.booleans()) else d.source(
            (draw(st.integers(1, 5)), draw(st.integers(1, 4)), draw(st.integers(2, 6)), draw(st.integers(2, 6)))
        )
        n, c, h, w = d.shapes[a]
        k, s = draw(st.integers(1, 2 if op == "pool" else 3)), draw(st.integers(1, 2))
        padding = "SAME" if k > min(h, w) else draw(st.sampled_from(["SAME", "VALID"]))
        params = {"k": k, "s": s, "padding": padding}
        out = [-(-x // s) if padding == "SAME" else (x - k) // s + 1 for x in (h, w)]
        if op == "conv2d":
            f = draw(st.integers(1, 5))
            step, shape = Step("conv2d", (a, d.value((f, c, k, k))), params), (n, f, *out)
        else:
            params["fn"] = draw(st.sampled_from(["max", "avg"]))
            step, shape = Step("pool", (a,), params), (n, c, *out)
    elif op in ("argmax", "top_k"):  # the indices as floats
        a = d.pick(rank_at_least=1)
        sa = d.shapes[a]
        if op == "argmax":
            step, shape = Step("argmax", (a,)), sa[:-1]
        else:
            k = draw(st.integers(1, sa[-1]))
            step, shape = Step("top_k", (a,), {"k": k}), sa[:-1] + (k,)
    elif op == "softmax_xent":  # dense labels: a softmax of another value
        a = d.pick(rank=2)
        step, shape = Step("softmax_xent", (a, d.value(d.shapes[a]))), d.shapes[a][:1]
    elif op == "dropout":  # one seed: the same mask on any number of devices
        a = d.pick()
        step, shape = Step("dropout", (a,), {"rate": draw(st.sampled_from([0.25, 0.5]))}), d.shapes[a]
    elif op == "batch_norm":  # its own gamma, beta and moving statistics, updated by a train job
        a = d.pick(rank_at_least=2)
        training = d.train or draw(st.booleans())
        params = {"axis": draw(st.sampled_from([1, -1])), "training": training, "name": f"bn{len(d.steps)}"}
        step = Step("batch_norm", (a,), params)
        shape = d.shapes[a]
    elif op == "stack":
        a = d.pick()
        sa = d.shapes[a]
        axis = draw(st.integers(0, len(sa)))
        step, shape = Step("stack", (a, d.value(sa)), {"axis": axis}), sa[:axis] + (2,) + sa[axis:]
    elif op == "l2_normalize":
        a = d.pick(rank_at_least=1)
        step, shape = Step("l2_normalize", (a,), {"axis": draw(st.integers(0, len(d.shapes[a]) - 1))}), d.shapes[a]
    else:  # cast to float32 (rounding) or int32 (truncation) and back
        a = d.pick()
        step, shape = Step("cast", (a,), {"to": draw(st.sampled_from(["float32", "int32"]))}), d.shapes[a]
    step.scope = scope
    if draw(st.integers(0, 2)) == 0:
        partial = step.op in ("matmul", "conv2d") or step.op == "reduce" and step.params["fn"] == "sum"
        step.hint, step.cast = d.hint(shape, scope, partial), draw(st.integers(0, 3)) == 0
    if draw(st.integers(0, 5)) == 0:  # a gradient_distribute: checked, and otherwise left to sbp-infer
        step.grad_hint = d.hint(shape, scope)
    d.add(step, shape)


def ancestors(steps: list[Step], outputs: list[int]) -> set[int]:
    """The steps `outputs` are differentiably computed from (no gradient crosses an int32 cast)."""
    seen, todo = set(), list(outputs)
    while todo:
        i = todo.pop()
        if i not in seen:
            seen.add(i)
            int32 = steps[i].params.get("to") == "int32" or steps[i].params.get("fn") in ON_INT32
            if not int32 and steps[i].op not in NOT_DIFFERENTIABLE:
                todo.extend(steps[i].operands)
    return seen


@st.composite
def programs(draw: Any, train: bool, mirrored: bool = False) -> Program:
    mesh = draw(st.sampled_from(sorted(MESHES)))
    rows = draw(st.integers(1, 3)) if mirrored else 0
    d = Draft(draw, mesh, train, rows * devices(mesh_placement(mesh)[0]) if mirrored else None)
    for _ in range(draw(st.integers(1, 10))):
        draw_op(d)
    ops = [i for i, s in enumerate(d.steps) if s.op not in ("input", "variable", "indices")]
    sinks = [i for i in ops if i not in d.used] or ops[-1:]
    if d.train:  # the loss must depend on a variable
        assume(any(s.op in ("variable", "batch_norm") for s in (d.steps[i] for i in ancestors(d.steps, sinks[-3:]))))
    optimizer = draw(st.sampled_from(sorted(OPTIMIZERS)))
    if any(s.op in ("batch_norm", "layer_norm") for s in d.steps):
        # their beta's gradient can be 0 but for rounding (two rows normalize to -1 and 1; a layer norm's output
        # normalized again by l2_normalize), which Adam-like updates (g / sqrt(g^2)) blow up to the learning rate:
        # plain momentum keeps the rounding where it is
        optimizer = "sgd"
    ranges, hierarchy = mesh_placement(mesh)
    per_machine = {devices([r]) for r in ranges}
    configurable = hierarchy is None and len(per_machine) == 1 and all(r.split(":")[1][0] == "0" for r in ranges)
    by_config = configurable and draw(st.booleans())
    seed = draw(st.integers(0, 2**16))
    lists = tuple(draw(st.booleans()) if mirrored else False for _ in sinks[-3:])
    return Program(mesh, d.train, d.steps, d.shapes, sinks[-3:], seed, optimizer, by_config, rows, lists)


# ----------------------------------------------------------------- running


def distribute(hint: Hint) -> Any:
    if isinstance(hint[0], tuple):
        return [distribute(h) for h in hint]
    return {"S": lambda: flow.distribute.split(hint[1]), "B": flow.distribute.broadcast,
            "P": flow.distribute.partial_sum}[hint[0]]()  # fmt: skip


def apply(step: Step, args: list[Any]) -> Any:
    """The op of `step` on traced values."""
    p = step.params
    match step.op:
        case "unary":
            return UNARY[p["fn"]](args[0])
        case "binary":
            return BINARY[p["fn"]](*args)
        case "matmul":
            return flow.matmul(args[0], args[1], transpose_a=p["ta"], transpose_b=p["tb"])
        case "reduce":
            return REDUCE[p["fn"]](args[0], axis=p["axes"], keepdims=p["keepdims"])
        case "transpose":
            return flow.transpose(args[0], perm=p["perm"])
        case "reshape":
            return flow.reshape(args[0], p["shape"])
        case "concat":
            return flow.concat(args, axis=p["axis"])
        case "slice":
            return flow.slice(args[0], p["begin"], p["size"])
        case "softmax":
            return (flow.nn.log_softmax if p["log"] else flow.nn.softmax)(args[0], axis=p["axis"])
        case "cross_entropy":
            return flow.nn.sparse_softmax_cross_entropy_with_logits(args[1], args[0])
        case "pad":
            return flow.pad(args[0], p["paddings"], constant_value=p["value"])
        case "expand_dims":
            return flow.expand_dims(args[0], p["axis"])
        case "squeeze":
            return flow.squeeze(args[0], [p["axis"]])
        case "gather":
            if p["batch_dims"]:
                return flow.gather(args[0], args[1], batch_dims=p["batch_dims"])
            return flow.gather(args[0], args[1], axis=p["axis"])
        case "dim_gather":
            return flow.dim_gather(args[0], p["dim"], args[1])
        case "gather_nd":
            return flow.gather_nd(args[0], args[1])
        case "scatter_nd":
            return flow.scatter_nd(args[1], args[0], p["shape"])
        case "tensor_scatter_nd":
            scatter = flow.tensor_scatter_nd_add if p["add"] else flow.tensor_scatter_nd_update
            return scatter(args[0], args[1], args[2])
        case "segment_sum":
            return flow.math.unsorted_segment_sum(args[0], args[1], p["segments"], axis=p["axis"])
        case "one_hot":
            return flow.one_hot(args[0], p["depth"], dtype=flow.float64) * args[1]
        case "where":
            return flow.where(args[0] > 0, args[0], args[1])
        case "broadcast_like":
            return flow.broadcast_like(args[0], args[1], broadcast_axes=p["axes"])
        case "layer_norm":
            return flow.nn.layer_norm(args[0], args[1], args[2], begin_norm_axis=p["begin_norm_axis"])
        case "bias_add":
            return flow.nn.bias_add(args[0], args[1])
        case "conv2d":
            return flow.nn.conv2d(args[0], args[1], strides=p["s"], padding=p["padding"])
        case "pool":
            pool = flow.nn.max_pool2d if p["fn"] == "max" else flow.nn.avg_pool2d
            return pool(args[0], ksize=p["k"], strides=p["s"], padding=p["padding"])
        case "argmax":
            return flow.cast(flow.math.argmax(args[0]), flow.float64)
        case "top_k":
            return flow.cast(flow.math.top_k(args[0], k=p["k"]), flow.float64)
        case "softmax_xent":
            return flow.nn.softmax_cross_entropy_with_logits(flow.nn.softmax(args[1]), args[0])
        case "dropout":
            return flow.nn.dropout(args[0], rate=p["rate"], seed=7)
        case "batch_norm":
            return flow.layers.batch_normalization(args[0], axis=p["axis"], training=p["training"], name=p["name"])
        case "stack":
            return flow.stack(args, axis=p["axis"])
        case "l2_normalize":
            return flow.math.l2_normalize(args[0], axis=p["axis"])
        case "cast" if p["to"] == "float32":
            return flow.cast(flow.cast(args[0], flow.float32), flow.float64)
        case "cast":
            return flow.cast(flow.cast(args[0] * 4.0, flow.int32), flow.float64)
    raise AssertionError(step.op)


def build(program: Program, distributed: bool) -> Any:
    """The job of `program`, on its mesh with its hints and scopes when `distributed`, else on one device."""
    flow.clear_default_session()
    config = flow.function_config()
    config.default_data_type(flow.float64)
    ranges, hierarchy = mesh_placement(program.mesh)
    if distributed and program.by_config:  # the configured devices of every machine, without a scope
        flow.config.machine_num(len(ranges))
        flow.config.cpu_device_num(devices(ranges[:1]))
    elif distributed:
        config.default_placement_scope(flow.scope.placement("cpu", ranges, hierarchy))
    # the mirrored view: one device's rows of each input, and its outputs whole or each device's rows
    leaf, parts = (tp.ListNumpy, devices(ranges) if distributed else 1) if program.rows else (tp.Numpy, 1)
    if program.rows:
        config.default_logical_view(flow.scope.mirrored_view())
    floats, ints = placeholder_shapes(program)
    one = lambda shape: (shape[0] // parts, *shape[1:]) if program.rows else shape  # noqa: E731
    signature = Tuple[tuple(leaf.Placeholder(one(s), dtype=flow.float64) for s in floats)]
    index_signature = Tuple[tuple(leaf.Placeholder(one(s), dtype=flow.int32) for s in ints)]
    returns = Tuple[tuple(tp.ListNumpy if listed else tp.Numpy for listed in (False, *program.lists))]

    def job(inputs: signature, indices: index_signature) -> returns:  # type: ignore[valid-type]
        feeds, index_feeds = iter(inputs), iter(indices)
        values: list[Any] = []
        for i, step in enumerate(program.steps):
            scoped = distributed and step.scope is not None
            hint = step.hint if distributed else None
            with flow.scope.placement("cpu", *placement(step.scope)) if scoped else contextlib.nullcontext():
                if step.op == "input":
                    values.append(next(feeds).with_distribute(distribute(hint)) if hint else next(feeds))
                    continue
                if step.op == "indices":
                    values.append(next(index_feeds))
                    continue
                if step.op == "variable":
                    values.append(flow.get_variable(
                        f"v{i}", shape=program.shapes[i], dtype=flow.float64,
                        initializer=flow.random_uniform_initializer(-1.0, 1.0),
                        distribute=distribute(hint) if hint else None,
                    ))  # fmt: skip
                    continue
                out = apply(step, [values[j] for j in step.operands])
                grad = distribute(step.grad_hint) if step.grad_hint and distributed else None
                if hint is not None and step.cast:
                    out = flow.parallel_cast(out, distribute=distribute(hint), gradient_distribute=grad)
                else:
                    if hint is not None:
                        out = out.with_distribute(distribute(hint))
                    if grad is not None:
                        out = out.with_gradient_distribute(grad)
            values.append(out)
        outputs = [values[i] for i in program.outputs]
        loss = flow.math.add_n([flow.math.reduce_mean(flow.math.square(o) + o) for o in outputs])
        if program.train:
            OPTIMIZERS[program.optimizer]().minimize(loss)
        outputs = [loss, *outputs]
        if program.rows:  # a mirrored output is split along axis 0: it needs one
            outputs = [flow.reshape(o, [1]) if not o.shape else o for o in outputs]
        return tuple(outputs)

    return flow.global_function(type="train" if program.train else "predict", function_config=config)(job)


def indices(rng: np.random.Generator, shape: Shape, high: int | Shape) -> np.ndarray:
    """Random indices below `high`, or coordinates (the last axis) below each of `high`'s sizes."""
    if isinstance(high, int):
        return rng.integers(0, high, shape).astype(np.int32)
    return np.stack([rng.integers(0, h, shape[:-1]) for h in high], axis=-1).astype(np.int32)


def placeholder_shapes(program: Program) -> tuple[list[Shape], list[Shape]]:
    """The logical shapes of the job's float and int placeholders (one unused one when it has none)."""
    unused = (program.rows * devices(mesh_placement(program.mesh)[0]),) if program.rows else (1,)
    floats = [program.shapes[i] for i, s in enumerate(program.steps) if s.op == "input"]
    ints = [program.shapes[i] for i, s in enumerate(program.steps) if s.op == "indices"]
    return floats or [unused], ints or [unused]


def feeds(program: Program, distributed: bool) -> list[tuple[tuple[Any, ...], tuple[Any, ...]]]:
    """Each step's arguments: the logical arrays, or in the mirrored view lists of each device's rows (one list
    of every device's rows on one device): all inputs with the same rows on a device, up to `rows` of them."""
    rng = np.random.default_rng(program.seed)
    float_shapes, int_shapes = placeholder_shapes(program)
    highs = [s.params["high"] for s in program.steps if s.op == "indices"] or [1]
    n = devices(mesh_placement(program.mesh)[0])
    per_step = []
    for _ in range(STEPS if program.train else 1):
        # an axis of bound 1 is exact; otherwise a device may have fewer rows (none included), in half the steps,
        # but for a dropout: its mask is drawn at the bound, a device's rows taking the first of its piece, so only
        # full devices mask their rows as one device masks all of them (docs/dynamic.md)
        full = program.rows == 1 or rng.integers(0, 2) == 0 or any(s.op == "dropout" for s in program.steps)
        counts = [program.rows if full else int(rng.integers(0, program.rows + 1)) for _ in range(n)]
        rows = lambda shape: (sum(counts), *shape[1:]) if program.rows else shape  # noqa: E731
        floats = [rng.standard_normal(rows(s)) for s in float_shapes]
        ints = [indices(rng, rows(s), high) for s, high in zip(int_shapes, highs)]
        if program.rows:
            cut = np.cumsum(counts)[:-1]
            floats, ints = ([np.split(a, cut) if distributed else [a] for a in arrays] for arrays in (floats, ints))
        per_step.append((tuple(floats), tuple(ints)))
    return per_step


def whole(result: Any) -> np.ndarray:
    """An output as one array: a tp.ListNumpy's devices' rows one after another."""
    return np.concatenate(result) if isinstance(result, list) else result


def run(program: Program, distributed: bool) -> tuple[list, dict[str, np.ndarray]]:
    job = build(program, distributed)
    results = [[whole(r) for r in job(*feed)] for feed in feeds(program, distributed)]
    return results, {name: v.numpy() for name, v in flow.get_all_variables().items()}


def check(program: Program) -> None:
    try:
        want = run(program, distributed=False)
    except (flow.TraceError, flow.CompileError, flow.ExecutionError) as err:
        # a mirrored job whose devices' rows meet static sizes is no job on one device either
        if not program.rows:
            raise
        event(f"invalid: {str(err).split('error: ')[-1][:60]}")
        assume(False)
    # a reference that overflows (a product, a power) compares nothing
    assume(all(np.isfinite(a).all() for step in want[0] for a in step))
    try:
        got = run(program, distributed=True)
    except (flow.CompileError, flow.TraceError) as err:  # a hint that cannot be honoured, at its line
        event(f"refused: {str(err).split('error: ')[-1][:60]}")
        assert err.location is not None and err.location.file == HERE, f"{program}\n{err}"
        return
    except flow.ExecutionError as err:
        # A mirrored device whose own sizes miss a static one its op needs (an axis pinned at its bound, a piece
        # of a split variable against its rows, whole rows of a regrouping reshape), checked when the step starts,
        # at the op's line: the one-device reference may still run, its rows all on one device (docs/dynamic.md).
        regrouped = "do not make whole ones on device" in str(err)  # a reshape of the device's own rows
        assert program.rows and ("must have the same size on device" in str(err) or regrouped), f"{program}\n{err}"
        assert err.location is not None and err.location.file == HERE, f"{program}\n{err}"
        kind = "a reshape's rows" if regrouped else "a pinned axis" if "job.pin_size" in str(err) else "a static size"
        event(f"refused at run time: {kind}, a device short of it")
        return
    event("ran")
    if program.train and program.optimizer in ("lamb", "lars") and any(
        s.op == "variable" and s.hint is not None and "S" in _kinds(s.hint) for s in program.steps
    ):
        event("ran: LAMB or LARS of a variable hinted split (norms all-reduced)")
    # a float32 cast of partial sums rounds each part: float32's reassociation, cancellation included
    rtol = 1e-6 if any(s.op == "cast" and s.params["to"] == "float32" for s in program.steps) else RTOL
    for step, (w, g) in enumerate(zip(want[0], got[0])):
        for k, (a, b) in enumerate(zip(w, g)):
            close(b, a, rtol, f"step {step} output {k}\n{program}")
    assert want[1].keys() == got[1].keys()
    for name, a in want[1].items():
        close(got[1][name], a, rtol, f"variable {name}\n{program}")


def _kinds(hint: Hint) -> set[str]:
    """The SBP kinds ("S", "B", "P") of a hint, one per mesh axis of a 2-D one."""
    return {h[0] for h in hint} if isinstance(hint[0], tuple) else {hint[0]}


def close(got: np.ndarray, want: np.ndarray, rtol: float, what: str) -> None:
    """Equal up to `rtol`, relative to the largest magnitude near zero (a sum of cancelling parts)."""
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale, err_msg=what)


FUZZ = settings(
    max_examples=EXAMPLES or 35,
    derandomize=not EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
)


@FUZZ
@given(programs(train=False))
def test_predict_on_n_devices_gives_the_one_device_outputs(program: Program) -> None:
    check(program)


@FUZZ
@given(programs(train=True))
def test_train_on_n_devices_gives_the_one_device_losses_and_variables(program: Program) -> None:
    check(program)


@FUZZ
@given(st.booleans().flatmap(lambda train: programs(train, mirrored=True)))
def test_mirrored_view_on_n_devices_gives_the_one_device_outputs(program: Program) -> None:
    check(program)
