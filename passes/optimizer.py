"""The `optimizer` pass: job.apply_gradients -> learning-rate schedule, clipping and update ops.

The optimizer dictionary that job.minimize carries (docs/training.md):

    {kind = "sgd" | "adam" | "adamw" | "rmsprop" | "lamb" | "lars" | "lazy_adam",
     momentum, beta1, beta2, epsilon, do_bias_correction, weight_decay, decay_rate, centered, lars_coefficient,
     clip_norm,                                   (optional)
     weight_decay_includes | weight_decay_excludes = [regular expressions]   (optional, one of them)
     indexed_slices = [variable names]            (optional: function_config.indexed_slices_optimizer_conf)
     lr = {kind = "piecewise_constant", boundaries, values} | {kind = "piecewise_scaling", base_lr, boundaries, scales}
        | {kind = "cosine", base_lr, steps, alpha} | {kind = "linear_cosine", base_lr, steps, num_periods, alpha, beta}
        | {kind = "polynomial", base_lr, steps, end_learning_rate, power, cycle}
        | {kind = "exponential" | "inverse_time" | "natural_exp", base_lr, steps, decay_rate, staircase},
     warmup = {kind = "linear" | "constant", steps, multiplier}}   (optional)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

from xdsl.context import Context
from xdsl.dialects.builtin import (
    ArrayAttr,
    BoolAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    DictionaryAttr,
    FloatAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    i1,
    i64,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from irflow.dialects import job
from irflow.dialects.job import FLOAT_TYPES, dtype_of, shape_of, tensor
from irflow.errors import CompileError, SourceLocation, source_location
from irflow.passes.gradients import GradientBuilder

TRAIN_STEP = "System-Train-TrainStep"
"""The non-trainable i64 variable counting finished train steps (OneFlow's name)."""

ZEROS = {"kind": "constant", "value": 0.0}
"""The initializer of the step counter and optimizer state (OneFlow's zeros_initializer)."""

# Keys each dictionary may hold, with the defaults of the values it may leave out (OneFlow's).
_OPTIMIZER_KEYS: dict[str, dict[str, object]] = {
    "sgd": {"momentum": 0.9, "weight_decay": 0.0},
    "adam": {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, "do_bias_correction": True, "weight_decay": 0.0},
    "adamw": {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, "do_bias_correction": True, "weight_decay": 0.0},
    "rmsprop": {"decay_rate": 0.99, "epsilon": 1e-8, "centered": False},
    "lamb": {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-6, "weight_decay": 0.0},
    "lars": {"momentum": 0.9, "epsilon": 1e-9, "lars_coefficient": 0.0001, "weight_decay": 0.0},
    "lazy_adam": {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8},
}
_COMMON_KEYS = ("kind", "lr", "warmup", "clip_norm", "weight_decay_includes", "weight_decay_excludes",
                "indexed_slices")
_INDEXED_SLICES_KINDS = ("sgd", "adam", "adamw", "lazy_adam")
"""The optimizers whose update has an indexed-slices form (OneFlow's indexed_slices_{sgd,momentum,adam}_update)."""
LAZY_ADAM_ZERO = 1e-12
"""A gradient element below this in magnitude is absent for LazyAdam (OneFlow's lazy_adam kernel's test)."""
_DECAY_RATE: dict[str, object] = {"base_lr": None, "steps": None, "decay_rate": None, "staircase": False}
_SCHEDULE_KEYS: dict[str, dict[str, object]] = {
    "piecewise_constant": {"boundaries": None, "values": None},
    "piecewise_scaling": {"base_lr": None, "boundaries": None, "scales": None},
    "cosine": {"base_lr": None, "steps": None, "alpha": 0.0},
    "linear_cosine": {"base_lr": None, "steps": None, "num_periods": 0.5, "alpha": 0.0, "beta": 0.001},
    "polynomial": {"base_lr": None, "steps": None, "end_learning_rate": 0.0001, "power": 1.0, "cycle": False},
    "exponential": _DECAY_RATE,
    "inverse_time": _DECAY_RATE,
    "natural_exp": _DECAY_RATE,
}
_WARMUP_KEYS: dict[str, dict[str, object]] = {
    "linear": {"steps": None, "multiplier": 0.0},
    "constant": {"steps": None, "multiplier": None},
}


@dataclass(frozen=True)
class OptimizerPass(ModulePass):
    """Lowers job.apply_gradients to a learning-rate schedule and per-variable update ops.

    The train-step counter `System-Train-TrainStep` (a non-trainable i64
    variable) feeds job.learning_rate; gradients are optionally clipped by
    their global norm with ordinary job ops; each variable gets the update op
    of its optimizer (job.sgd_update, momentum_update, adam_update,
    rmsprop_update, centered_rmsprop_update, lamb_update, lars_update or
    lazy_adam_update; indexed_slices_* for the variables whose gradient is
    an indexed slice, see `_indexed_rows`), with
    optimizer state kept in zero-initialized non-trainable variables named
    `<var>-momentum`, `<var>-m`, `<var>-v`, `<var>-mean_square`,
    `<var>-mean_gradient`, so checkpoints save it.  The step
    counter is incremented with job.assign after the updates (OneFlow's
    model-update ops; MLIR has no counterpart).
    """

    name = "optimizer"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for apply in [o for o in op.walk() if isinstance(o, job.ApplyGradientsOp)]:
            lower_apply_gradients(apply)


# ----------------------------------------------------------------- the optimizer dictionary


@dataclass(frozen=True)
class OptimizerConfig:
    kind: str
    params: Mapping[str, float | bool]
    schedule: DictionaryAttr
    clip_norm: float | None
    decay_includes: tuple[str, ...] | None = None
    decay_excludes: tuple[str, ...] = ()
    indexed_slices: tuple[str, ...] = ()

    def params_of(self, variable: str) -> Mapping[str, float | bool]:
        """The params for one variable: OneFlow's weight_decay_includes / _excludes patterns (regular expressions
        searched anywhere in the variable's name, as RE2::PartialMatch) decide whether its weight_decay applies."""
        decayed = (any(re.search(p, variable) for p in self.decay_includes) if self.decay_includes is not None
                   else not any(re.search(p, variable) for p in self.decay_excludes))
        return self.params if decayed or "weight_decay" not in self.params else {**self.params, "weight_decay": 0.0}


class _Reader:
    """Reads one dictionary attribute, failing with the key's path and the user's location."""

    def __init__(self, attr: Attribute, path: str, location: SourceLocation | None):
        self.path, self.location = path, location
        if not isinstance(attr, DictionaryAttr):
            self.fail(f"{path} must be a dictionary, got {attr}")
        self.data: dict[str, Attribute] = dict(attr.data)

    def fail(self, message: str) -> None:
        raise CompileError(f"optimizer: {message}", self.location)

    def kind(self, choices: Mapping[str, object]) -> str:
        attr = self.data.get("kind")
        if not isinstance(attr, StringAttr) or attr.data not in choices:
            self.fail(f"{self.path}.kind must be one of {', '.join(repr(c) for c in choices)}, got {attr}")
        return attr.data  # type: ignore[union-attr]

    def only(self, allowed: Sequence[str]) -> None:
        unknown = sorted(set(self.data) - set(allowed))
        if unknown:
            self.fail(f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} in {self.path} "
                      f"(expected {', '.join(allowed)})")

    def value(self, key: str, default: object = None) -> object:
        attr = self.data.get(key)
        if attr is None:
            if default is None:
                self.fail(f"{self.path} needs '{key}'")
            return default
        is_bool = isinstance(attr, IntegerAttr) and attr.type == i1
        if isinstance(default, bool):
            if is_bool:
                return bool(attr.value.data)  # type: ignore[union-attr]
        elif isinstance(attr, (IntegerAttr, FloatAttr)) and not is_bool:
            return attr.value.data
        if isinstance(attr, DenseArrayBase):
            return list(attr.get_values())
        self.fail(f"{self.path}.{key} has the wrong kind of value: {attr}")
        return None

    def number(self, key: str, default: object = None, *, lo: float | None = None, hi: float | None = None,
               lo_open: bool = False, hi_open: bool = False) -> float:
        v = self.value(key, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            self.fail(f"{self.path}.{key} must be a number, got {v}")
        x = float(v)  # type: ignore[arg-type]
        below = lo is not None and (x <= lo if lo_open else x < lo)
        above = hi is not None and (x >= hi if hi_open else x > hi)
        if below or above:
            left = "(" if lo_open else "["
            right = ")" if hi_open else "]"
            self.fail(f"{self.path}.{key} must be in {left}{lo if lo is not None else '-inf'}, "
                      f"{hi if hi is not None else 'inf'}{right}, got {x}")
        return x


def parse_optimizer(attr: Attribute, location: SourceLocation | None) -> OptimizerConfig:
    """Validate the optimizer dictionary and fill in defaults."""
    top = _Reader(attr, "optimizer", location)
    kind = top.kind(_OPTIMIZER_KEYS)
    defaults = _OPTIMIZER_KEYS[kind]
    # The frontend writes every optimizer key whatever the kind; those of other kinds are ignored.
    top.only([*_COMMON_KEYS, *dict.fromkeys(k for keys in _OPTIMIZER_KEYS.values() for k in keys)])
    params: dict[str, float | bool] = {}
    for key, default in defaults.items():
        if isinstance(default, bool):
            params[key] = bool(top.value(key, default))
        elif key in ("beta1", "beta2", "momentum", "decay_rate"):
            params[key] = top.number(key, default, lo=0.0, hi=1.0, hi_open=True)
        else:
            params[key] = top.number(key, default, lo=0.0)
    clip_norm = top.number("clip_norm", lo=0.0, lo_open=True) if "clip_norm" in top.data else None
    includes, excludes = (_patterns(top, key) for key in ("weight_decay_includes", "weight_decay_excludes"))
    if includes is not None and excludes is not None:
        top.fail("optimizer takes weight_decay_includes or weight_decay_excludes, not both")
    indexed_slices = _strings(top, "indexed_slices") or ()

    if "lr" not in top.data:
        top.fail("optimizer needs 'lr', the learning-rate schedule")
    lr = _Reader(top.data["lr"], "optimizer.lr", location)
    lr_kind = lr.kind(_SCHEDULE_KEYS)
    lr.only(["kind", *_SCHEDULE_KEYS[lr_kind]])
    schedule = _parse_schedule(lr, lr_kind)
    if "warmup" in top.data:
        warm = _Reader(top.data["warmup"], "optimizer.warmup", location)
        warm_kind = warm.kind(_WARMUP_KEYS)
        warm.only(["kind", *_WARMUP_KEYS[warm_kind]])
        # OneFlow: a linear warmup starts at `multiplier` in [0, 1); a constant one holds it in (0, 1).
        multiplier = warm.number("multiplier", _WARMUP_KEYS[warm_kind]["multiplier"], lo=0.0, hi=1.0,
                                 lo_open=warm_kind == "constant", hi_open=True)
        schedule["warmup"] = DictionaryAttr({
            "kind": StringAttr(warm_kind),
            "steps": IntegerAttr(int(warm.number("steps", lo=0.0)), i64),
            "multiplier": FloatAttr(multiplier, job.f64),
        })
    return OptimizerConfig(kind, params, DictionaryAttr(schedule), clip_norm, includes, excludes or (), indexed_slices)


def _strings(reader: _Reader, key: str) -> tuple[str, ...] | None:
    """An array of strings; None when absent."""
    attr = reader.data.get(key)
    if attr is None:
        return None
    if not isinstance(attr, ArrayAttr) or not all(isinstance(a, StringAttr) for a in attr.data):
        reader.fail(f"{reader.path}.{key} must be an array of strings, got {attr}")
    return tuple(a.data for a in attr.data)  # type: ignore[union-attr]


def _patterns(reader: _Reader, key: str) -> tuple[str, ...] | None:
    """An array of regular expressions over variable names, each checked to compile; None when absent."""
    patterns = _strings(reader, key)
    if patterns is None:
        return None
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as err:
            reader.fail(f"{reader.path}.{key}: {pattern!r} is not a regular expression ({err})")
    return patterns


def _parse_schedule(lr: _Reader, kind: str) -> dict[str, Attribute]:
    """The `lr` dictionary of `kind` with its defaults filled in, each value checked."""
    schedule: dict[str, Attribute] = {"kind": StringAttr(kind)}
    boundaries: list[int] = []
    for key, default in _SCHEDULE_KEYS[kind].items():
        if key == "boundaries":
            boundaries = [int(b) for b in _array(lr, key)]
            if any(b >= a for a, b in zip(boundaries[1:], boundaries)):
                lr.fail(f"{kind} boundaries must increase, got {boundaries}")
            schedule[key] = job.i64_array(boundaries)
        elif key in ("values", "scales"):
            values = [float(v) for v in _array(lr, key)]
            wanted = len(boundaries) + (key == "values")
            if len(values) != wanted:
                lr.fail(f"{kind} needs {'one more value than' if key == 'values' else 'as many scales as'} "
                        f"boundaries, got {len(boundaries)} boundaries and {len(values)} {key}")
            schedule[key] = job.f64_array(values)
        elif key == "steps":
            schedule[key] = IntegerAttr(int(lr.number(key, lo=1.0)), i64)
        elif isinstance(default, bool):
            schedule[key] = BoolAttr.from_bool(bool(lr.value(key, default)))
        else:
            hi = 1.0 if (kind, key) == ("cosine", "alpha") else None
            schedule[key] = FloatAttr(lr.number(key, default, lo=0.0, hi=hi), job.f64)
    return schedule


def _array(reader: _Reader, key: str) -> list[float]:
    values = reader.value(key)
    if not isinstance(values, list):
        reader.fail(f"{reader.path}.{key} must be an array, got {values}")
    return values  # type: ignore[return-value]


# ----------------------------------------------------------------- lowering


def _variable(declared: Mapping[str, job.VariableOp], b: GradientBuilder, name: str, type: Attribute,
              hint: str | None = None) -> SSAValue:
    """The job's non-trainable zero-initialized variable `name`, declared here unless it already is."""
    op = declared.get(name)
    if op is not None:
        if op.results[0].type != type:
            raise CompileError(f"variable '{name}' is declared as {op.results[0].type}, the optimizer needs {type}",
                               source_location(op))
        return op.results[0]
    value = b.emit(job.VariableOp, [], type, name=name, trainable=False, initializer=ZEROS)
    value.name_hint = hint or _hint(name)
    return value


def _hint(name: str) -> str | None:
    hint = "".join(c if c.isalnum() or c in "_.$-" else "_" for c in name)
    return hint if hint and not hint[0].isdigit() else None


def _clip_by_global_norm(b: GradientBuilder, grads: list[SSAValue], clip_norm: float) -> list[SSAValue]:
    """g * clip_norm / max(global_norm, clip_norm), as tf.clip_by_global_norm and OneFlow's clipping."""
    widest = max((dtype_of(g.type) for g in grads), key=lambda t: FLOAT_TYPES.index(t))
    total: SSAValue | None = None
    for g in grads:
        sq = b.emit(job.SquareOp, [g])
        rank = len(shape_of(g.type))
        s = b.emit(job.ReduceSumOp, [sq], axes=list(range(rank))) if rank else sq
        if dtype_of(s.type) != widest:
            s = b.emit(job.CastOp, [s], tensor((), widest))
        total = s if total is None else b.emit(job.AddOp, [total, s])
    assert total is not None
    norm = b.emit(job.SqrtOp, [total])
    limit = b.fill(clip_norm, norm.type)
    factor = b.emit(job.DivOp, [limit, b.emit(job.MaximumOp, [norm, limit])])
    factor.name_hint = "clip_factor"
    clipped = []
    for g in grads:
        f = factor if dtype_of(g.type) == widest else b.emit(job.CastOp, [factor], tensor((), dtype_of(g.type)))
        clipped.append(b.emit(job.MulOp, [g, f]))
    return clipped


def lower_apply_gradients(apply: job.ApplyGradientsOp) -> None:
    location = source_location(apply)
    config = parse_optimizer(apply.optimizer, location)
    block = apply.parent_block()
    assert block is not None
    declared = {op.var_name.data: op for op in block.ops if isinstance(op, job.VariableOp)}
    b = GradientBuilder(InsertPoint.before(apply))
    b.at(apply)

    pairs = apply.pairs()
    seen: set[str] = set()
    for var, grad in pairs:
        assert isinstance(var.owner, job.VariableOp)
        name = var.owner.var_name.data
        if name in seen:
            raise CompileError(f"variable '{name}' is given two gradients", location)
        if dtype_of(var.type) not in FLOAT_TYPES:
            raise CompileError(f"variable '{name}' of type {var.type} cannot be trained", location)
        if assigned := [op for op in block.ops if isinstance(op, job.AssignOp) and op.variable == var]:
            raise CompileError(f"variable '{name}' is trained here and written by flow.assign at "
                               f"{source_location(assigned[0])}; a variable takes one write per step", location)  # fmt: skip
        seen.add(name)
    unknown = sorted(set(config.indexed_slices) - seen)
    if unknown:
        raise CompileError(f"optimizer: indexed_slices_optimizer_conf names {', '.join(map(repr, unknown))}, which "
                           f"this job does not train (it trains {', '.join(map(repr, sorted(seen))) or 'nothing'})",
                           location)
    indexed = {var: _indexed_rows(apply, config, var, grad) for var, grad in pairs}

    step = _variable(declared, b, TRAIN_STEP, tensor((), i64), hint="train_step")
    lr = b.emit(job.LearningRateOp, [step], schedule=config.schedule)
    lr.name_hint = "lr"
    one = b.emit(job.ConstantOp, [], tensor((), i64),
                 value=DenseIntOrFPElementsAttr.from_list(tensor((), i64), [1]))
    next_step = b.emit(job.AddOp, [step, one])
    next_step.name_hint = "next_step"

    grads = [g for _, g in pairs]
    if config.clip_norm is not None and grads:
        grads = _clip_by_global_norm(b, grads, config.clip_norm)

    shared = b.placement
    for (var, _), grad in zip(pairs, grads):
        assert isinstance(var.owner, job.VariableOp)
        b.placement = var.owner.placement or shared  # a variable's state and update live on its devices
        name = var.owner.var_name.data
        rows = indexed[var]
        present = None if rows is None else _present(b, job.GreaterOp, rows, 0.0, name)
        _UPDATES[config.kind](_Target(b, declared, var, name, present), grad, lr, next_step, config.params_of(name))

    b.placement = shared
    _update(b, job.AssignOp, [step, next_step])
    Rewriter.erase_op(apply)


def _indexed_rows(apply: job.ApplyGradientsOp, config: OptimizerConfig, var: SSAValue,
                  grad: SSAValue) -> SSAValue | None:
    """How many times each row of `var` is gathered (a job.gather_grad of ones, of var's type), where
    indexed_slices_optimizer_conf makes its gradient an indexed slice; None where the update stays dense.

    As OneFlow's IndexedSlicesOptimizerRewritePass: the variable is named, its gradient is the gather_grad
    of a gather along axis 0 and feeds the update alone (no clipping), and the optimizer has an
    indexed-slices update with no L2 term folded into the gradient (Adam's weight_decay).  The rows not
    gathered keep their value and state; a gathered row is updated even where its gradient is 0.
    """
    assert isinstance(var.owner, job.VariableOp)
    name = var.owner.var_name.data
    source = grad.owner
    if (name not in config.indexed_slices or config.kind not in _INDEXED_SLICES_KINDS
            or (config.kind == "adam" and config.params_of(name)["weight_decay"])
            or config.clip_norm is not None or not isinstance(source, job.GatherGradOp)
            or source.axis.value.data != 0 or source.batch_dims is not None and source.batch_dims.value.data
            or any(use.operation is not apply for use in grad.uses)):
        return None
    b = GradientBuilder(InsertPoint.after(source))
    b.at(source)
    rows = b.emit(job.GatherGradOp, [b.fill(1.0, source.dy.type), source.indices], grad.type, axis=0)
    rows.name_hint = _hint(f"{name}-rows")
    return rows


def _present(b: GradientBuilder, compare: type[job.JobOp], x: SSAValue, bound: float, name: str) -> SSAValue:
    """The int8 mask `compare(x, bound)` of the elements a sparse update writes, named `<var>-present`."""
    present = b.emit(compare, [x, b.scalar(bound, x)])
    present.name_hint = _hint(f"{name}-present")
    return present


def _update(b: GradientBuilder, cls: type[job.UpdateOp], operands: Sequence[SSAValue], **props: object) -> None:
    b.place(cls.make(operands, **props))


@dataclass(frozen=True)
class _Target:
    """The variable one update op writes, and where its optimizer state comes from."""

    b: GradientBuilder
    declared: Mapping[str, job.VariableOp]
    var: SSAValue
    name: str
    present: SSAValue | None = None
    """Where the gradient is an indexed slice: int8, nonzero at the rows gathered (`_indexed_rows`)."""

    def state(self, suffix: str) -> SSAValue:
        """The variable's zero-initialized state `<var>-<suffix>` (OneFlow's names), of the variable's type."""
        return _variable(self.declared, self.b, f"{self.name}-{suffix}", self.var.type)


Params = Mapping[str, float | bool]


def _sgd(t: _Target, grad: SSAValue, lr: SSAValue, step: SSAValue, p: Params) -> None:
    present = [] if t.present is None else [t.present]
    if p["momentum"] == 0.0:
        cls = job.SgdUpdateOp if t.present is None else job.IndexedSlicesSgdUpdateOp
        _update(t.b, cls, [t.var, grad, *present, lr], weight_decay=p["weight_decay"])
    else:
        cls = job.MomentumUpdateOp if t.present is None else job.IndexedSlicesMomentumUpdateOp
        _update(t.b, cls, [t.var, grad, *present, t.state("momentum"), lr], beta=p["momentum"],
                weight_decay=p["weight_decay"])


def _adam(t: _Target, grad: SSAValue, lr: SSAValue, step: SSAValue, p: Params, *, decoupled: bool) -> None:
    decay = p["weight_decay"]
    if not decoupled and decay:
        # Adam's weight decay is L2 regularization folded into the gradient (torch.optim.Adam);
        # adam_update's own weight_decay is AdamW's decoupled decay.
        grad = t.b.emit(job.AddOp, [grad, t.b.emit(job.MulOp, [t.var, t.b.scalar(float(decay), t.var)])])
        decay = 0.0
    cls = job.AdamUpdateOp if t.present is None else job.IndexedSlicesAdamUpdateOp
    present = [] if t.present is None else [t.present]
    _update(t.b, cls, [t.var, grad, *present, t.state("m"), t.state("v"), lr, step], beta1=p["beta1"],
            beta2=p["beta2"], epsilon=p["epsilon"], weight_decay=decay, do_bias_correction=p["do_bias_correction"])


def _lazy_adam(t: _Target, grad: SSAValue, lr: SSAValue, step: SSAValue, p: Params) -> None:
    """OneFlow's LazyAdam: the elements whose gradient is not 0 (all of an indexed slice's rows) are updated."""
    present = t.present
    if present is None:
        present = _present(t.b, job.GreaterEqualOp, t.b.emit(job.AbsOp, [grad]), LAZY_ADAM_ZERO, t.name)
    _update(t.b, job.LazyAdamUpdateOp, [t.var, grad, present, t.state("m"), t.state("v"), lr, step],
            beta1=p["beta1"], beta2=p["beta2"], epsilon=p["epsilon"])


def _rmsprop(t: _Target, grad: SSAValue, lr: SSAValue, step: SSAValue, p: Params) -> None:
    mean_square = t.state("mean_square")
    if p["centered"]:
        _update(t.b, job.CenteredRmsPropUpdateOp, [t.var, grad, mean_square, t.state("mean_gradient"), lr],
                decay_rate=p["decay_rate"], epsilon=p["epsilon"])
    else:
        _update(t.b, job.RmsPropUpdateOp, [t.var, grad, mean_square, lr], decay_rate=p["decay_rate"],
                epsilon=p["epsilon"])


def _lamb(t: _Target, grad: SSAValue, lr: SSAValue, step: SSAValue, p: Params) -> None:
    decay = {"weight_decay": p["weight_decay"]} if p["weight_decay"] else {}  # the IR shows a decay only where one applies
    _update(t.b, job.LambUpdateOp, [t.var, grad, t.state("m"), t.state("v"), lr, step], beta1=p["beta1"],
            beta2=p["beta2"], epsilon=p["epsilon"], **decay)


def _lars(t: _Target, grad: SSAValue, lr: SSAValue, step: SSAValue, p: Params) -> None:
    decay = {"weight_decay": p["weight_decay"]} if p["weight_decay"] else {}  # as _lamb's
    _update(t.b, job.LarsUpdateOp, [t.var, grad, t.state("momentum"), lr], momentum_beta=p["momentum"],
            epsilon=p["epsilon"], lars_coefficient=p["lars_coefficient"], **decay)


_UPDATES: dict[str, Callable[[_Target, SSAValue, SSAValue, SSAValue, Params], None]] = {
    "sgd": _sgd,
    "adam": partial(_adam, decoupled=False),
    "adamw": partial(_adam, decoupled=True),
    "rmsprop": _rmsprop,
    "lamb": _lamb,
    "lars": _lars,
    "lazy_adam": _lazy_adam,
}
