"""The `sbp-infer` pass: an SBP signature for every op of a job, chosen for the whole graph.

Each op offers the signatures of `passes/sbp_rules.py`; user hints (origin
"hint") fix an op's result (a hint the op cannot produce, from operands it can be
given, moves to a boxing after it), inputs and variables get their defaults.  The plan
minimizes the cost model of sbp_rules (bytes moved per step, plus the compute
each device does) over the whole graph, not op by op: a dynamic program in
program order whose state is the SBP of every value still waiting for a
consumer.  It is exact while the states fit `max_states`; past that it keeps
the cheapest states (a beam) and then improves the plan by coordinate descent,
one op at a time, until no single change lowers the cost.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from irflow.dialects import job
from irflow.dialects.bounds import dynamic_axes
from irflow.dialects.job import shape_of
from irflow.dialects.sbp import (
    NdCode,
    NdSbpAttr,
    PlacementAttr,
    broadcast_codes,
    code_text,
    hierarchy_of,
    nd_attr,
    nd_codes,
    normalize,
)
from irflow.errors import CompileError, source_location
from irflow.passes.sbp_rules import (
    BOXING_COST,
    INFEASIBLE,
    Signature,
    gathers_own_rows,
    moved_bytes,
    nbytes,
    placement_bytes,
    signatures,
    transfer_cost,
)

DEFAULT_PLACEMENT = PlacementAttr("cpu", ["0:0"])

SPECIAL_OPS: frozenset[type[Operation]] = frozenset(
    {job.BoxingOp, job.ApplyGradientsOp, *(c for c in job.COMPUTE_OPS if issubclass(c, job.UpdateOp))}
)
"""Ops without a rule table entry: a boxing's result is its target, updates take their variable's SBP."""


def func_placement(func: job.FuncOp) -> PlacementAttr:
    placement = func.attributes.get("placement")
    return placement if isinstance(placement, PlacementAttr) else DEFAULT_PLACEMENT


def op_placement(op: Operation, func: job.FuncOp) -> PlacementAttr:
    placement = getattr(op, "placement", None)
    return placement if isinstance(placement, PlacementAttr) else func_placement(func)


def return_needs(func: job.FuncOp, value: SSAValue) -> NdCode:
    """job.return: broadcast in the consistent view (every rank holds the result), split(0) in the mirrored view."""
    hierarchy = hierarchy_of(func_placement(func))
    view = func.attributes.get("view")
    if isinstance(view, StringAttr) and view.data == "mirrored" and shape_of(value.type):
        return normalize((0,) * len(hierarchy), hierarchy)
    return broadcast_codes(hierarchy)


def chosen_return_needs(func: job.FuncOp, ret: job.ReturnOp) -> list[NdCode]:
    """What job.return needs of each operand: as sbp-infer chose (`sbp_in`, where a result returned whole comes
    gathered, see `return_choices`), else `return_needs`."""
    chosen = ret.attributes.get("sbp_in")
    if isinstance(chosen, ArrayAttr):
        return [nd_codes(nd) for nd in chosen.data]  # type: ignore[arg-type]
    return [return_needs(func, v) for v in ret.operands]


# Results returned whole whose SBP sbp-infer chooses (split(0) or broadcast), at most: 2**k return signatures.
# Those past them are taken gathered, which every one of them can be (their axes past 0 are pinned).
_WHOLE_CHOICES = 6


def return_choices(func: job.FuncOp, ret: job.ReturnOp) -> list[tuple[NdCode, ...]]:
    """What job.return may need of its operands: `return_needs`, and in the mirrored view, for results returned
    whole with each device's own rows (the func's `whole_results`), broadcast too: rows gathered by an op that
    needed every device's (a softmax over them) come back as they are, every device holding them all."""
    needs = tuple(return_needs(func, v) for v in ret.operands)
    whole = func.attributes.get("whole_results")
    if not isinstance(whole, DenseArrayBase):
        return [needs]
    gathered = broadcast_codes(hierarchy_of(func_placement(func)))
    whole_results = [int(i) for i in whole.get_values()]
    if any(not 0 <= i < len(needs) for i in whole_results):
        raise CompileError(
            f"whole_results {whole_results} of job '{func.sym_name.data}' names results it does not have "
            f"({len(needs)})", source_location(func),
        )  # fmt: skip
    either, always = whole_results[:_WHOLE_CHOICES], whole_results[_WHOLE_CHOICES:]
    choices = []
    for picks in itertools.product((False, True), repeat=len(either)):
        chosen = list(needs)
        for i, pick in [*zip(either, picks), *((i, True) for i in always)]:
            if pick:
                chosen[i] = gathered
        choices.append(tuple(chosen))
    return choices


def is_hint(op: Operation) -> bool:
    origin = op.attributes.get("sbp_origin")
    return isinstance(origin, StringAttr) and origin.data == "hint"


def _box_hint(op: Operation, sbp: NdSbpAttr) -> None:
    """Move a hint `op` cannot produce to a boxing right after it, which its readers then read.

    OneFlow's `with_distribute` names the SBP the blob's consumers take it in, boxed from whatever its
    producer gives: a conv2d's output hinted split along its height, say, is computed split along the
    batch and resliced.
    """
    value = op.results[0]
    readers = list(value.uses)
    box = job.BoxingOp.make([value], sbp=sbp, placement=getattr(op, "placement", None))
    box.attributes["sbp_origin"] = StringAttr("hint")
    box.location = op.location
    if value.name_hint is not None:
        box.res.name_hint = f"{value.name_hint}_hinted"
    del op.properties["sbp"]
    del op.attributes["sbp_origin"]
    Rewriter.insert_op(box, InsertPoint.after(op))
    for use in readers:
        use.operation.operands[use.index] = box.res


# ----------------------------------------------------------------- the search problem


@dataclass
class Node:
    """One value producer (an op or a function argument) and the signatures it may run under."""

    choices: list[Signature]
    operands: tuple[int, ...]
    size: int
    place: int
    in_place: tuple[int, ...]
    shape: tuple[int, ...] = ()
    dynamic: tuple[int, ...] = ()  # axes where each device holds its own sizes: only their rows can be gathered


@dataclass
class Graph:
    nodes: list[Node] = field(default_factory=list)
    hierarchies: list[tuple[int, ...]] = field(default_factory=list)
    devices: list[tuple[object, ...]] = field(default_factory=list)
    _edges: dict[tuple[object, ...], float] = field(default_factory=dict)

    def edge(self, u: int, out: NdCode, v: int, k: int, need: NdCode) -> float:
        """What carrying node u's result, produced as `out`, to operand k of node v (needing `need`) costs."""
        return self.carry(u, out, self.nodes[v].in_place[k], need)

    def carry(self, u: int, out: NdCode, there: int, need: NdCode) -> float:
        """What carrying node u's result, produced as `out`, to placement `there` as `need` costs."""
        src = self.nodes[u]
        if src.dynamic and (src.place != there or out != need and not gathers_own_rows(src.dynamic, out, need)):
            return INFEASIBLE
        key = (out, need, src.size, src.shape, src.place, there)
        cost = self._edges.get(key)
        if cost is None:
            if src.place != there:  # between placements: only the boxes each device lacks move
                itemsize = src.size // max(1, math.prod(src.shape))
                cost = BOXING_COST + placement_bytes(
                    out, need, src.shape, itemsize, (self.hierarchies[src.place], self.devices[src.place]),
                    (self.hierarchies[there], self.devices[there]),
                )  # fmt: skip
            else:
                cost = transfer_cost(out, need, src.size, self.hierarchies[src.place])
            self._edges[key] = cost
        return cost

    def consumers(self) -> list[list[tuple[int, int]]]:
        users: list[list[tuple[int, int]]] = [[] for _ in self.nodes]
        for v, node in enumerate(self.nodes):
            for k, u in enumerate(node.operands):
                users[u].append((v, k))
        return users


def plan_cost(g: Graph, plan: Sequence[int]) -> float:
    """The cost of choosing signature plan[v] for every node v."""
    total = 0.0
    for v, node in enumerate(g.nodes):
        sig = node.choices[plan[v]]
        total += sig.cost
        for k, u in enumerate(node.operands):
            total += g.edge(u, g.nodes[u].choices[plan[u]].out, v, k, sig.ins[k])
    return total


def search(g: Graph, max_states: int) -> tuple[list[int], bool]:
    """Dynamic program over the nodes in order; exact unless more than `max_states` states were cut.

    A state holds, for each value still awaiting a consumer and with several
    possible SBPs, the index of the SBP it was made with, in a slot the value
    keeps while it lives (freed slots read 0, so states differing only in dead
    values merge).
    """
    n = len(g.nodes)
    last = [-1] * n
    for v, node in enumerate(g.nodes):
        for u in node.operands:
            last[u] = max(last[u], v)
    outs = [sorted({c.out for c in node.choices}) for node in g.nodes]
    tracked = [len(outs[v]) > 1 and last[v] > v for v in range(n)]
    slot_of: dict[int, int] = {}
    free: list[int] = []
    width = 0
    states: dict[tuple[int, ...], tuple[float, object]] = {(): (0.0, None)}
    exact = True
    cache: dict[tuple[object, ...], np.ndarray] = {}
    for v, node in enumerate(g.nodes):
        own = np.array([c.cost for c in node.choices])
        # tables[k][j]: cost of each choice of v when operand k's producer made it as its j-th SBP
        tables = [_table(g, u, outs[u], v, k, cache) for k, u in enumerate(node.operands)]
        slots = [slot_of.get(u, -1) for u in node.operands]
        groups = [np.array([i for i, c in enumerate(node.choices) if c.out == out]) for out in outs[v]]
        dying = sorted({slot_of.pop(u) for u in node.operands if u in slot_of and last[u] == v})
        free.extend(dying)
        slot = -1
        if tracked[v]:
            if free:
                free.sort()
                slot = free.pop(0)
            else:
                slot, width = width, width + 1
            slot_of[v] = slot
        # Only the operands' SBPs matter to v: its best choices are worked out once per combination.
        best: dict[tuple[int, ...], list[tuple[int, int, float]]] = {}
        new: dict[tuple[int, ...], tuple[float, object]] = {}
        for key, (cost, chain) in states.items():
            combo = tuple(key[s] if s >= 0 else 0 for s in slots)
            options = best.get(combo)
            if options is None:
                vec = own.copy()
                for table, j in zip(tables, combo):
                    vec += table[j]
                picks = [group[int(vec[group].argmin())] for group in groups] if tracked[v] else [int(vec.argmin())]
                options = [(j, int(ci), float(vec[ci])) for j, ci in enumerate(picks)]
                finite = [o for o in options if o[2] != INFEASIBLE]
                options = best[combo] = finite or options
            if dying or tracked[v]:
                cells = list(key)
                for s in dying:
                    cells[s] = 0
                if slot == len(cells):
                    cells.append(0)
            for j, ci, extra in options:
                if tracked[v]:
                    cells[slot] = j
                    new_key = tuple(cells)
                else:
                    new_key = tuple(cells) if dying else key
                c = cost + extra
                old = new.get(new_key)
                if old is None or c < old[0]:
                    new[new_key] = (c, (ci, chain))
        if len(new) > max_states:
            exact = False
            new = dict(heapq.nsmallest(max_states, new.items(), key=lambda item: item[1][0]))
        states = new
    _, chain = min(states.values(), key=lambda s: s[0])
    plan = [0] * n
    for v in range(n - 1, -1, -1):
        plan[v], chain = chain  # type: ignore[misc]
    return plan, exact


def _table(g: Graph, u: int, outs: list[NdCode], v: int, k: int, cache: dict[tuple[object, ...], np.ndarray]) -> np.ndarray:
    """Edge costs from each SBP node u can make to each choice of node v; repeated layers share one table."""
    src, node = g.nodes[u], g.nodes[v]
    key = (tuple(outs), id(node.choices), k, src.size, src.place, node.in_place[k])
    table = cache.get(key)
    if table is None:
        table = cache[key] = np.array([[g.edge(u, out, v, k, c.ins[k]) for c in node.choices] for out in outs])
    return table


def refine(g: Graph, plan: list[int], max_sweeps: int = 20) -> list[int]:
    """Coordinate descent: move single nodes to their cheapest signature given their neighbours."""
    users = g.consumers()
    outs = [node.choices[plan[v]].out for v, node in enumerate(g.nodes)]
    for _ in range(max_sweeps):
        changed = False
        for v, node in enumerate(g.nodes):
            if len(node.choices) == 1:
                continue

            def local(ci: int) -> float:
                sig = node.choices[ci]
                c = sig.cost
                for k, u in enumerate(node.operands):
                    c += g.edge(u, outs[u], v, k, sig.ins[k])
                for w, k in users[v]:
                    c += g.edge(v, sig.out, w, k, g.nodes[w].choices[plan[w]].ins[k])
                return c

            best = min(range(len(node.choices)), key=local)
            if local(best) < local(plan[v]) - 1e-9:
                plan[v], outs[v], changed = best, node.choices[best].out, True
        if not changed:
            break
    return plan


# ----------------------------------------------------------------- from a job.func to the problem and back


@dataclass
class _Builder:
    func: job.FuncOp
    compute_cost: float
    graph: Graph = field(default_factory=Graph)
    index: dict[SSAValue, int] = field(default_factory=dict)
    places: dict[PlacementAttr, int] = field(default_factory=dict)
    placements: list[PlacementAttr] = field(default_factory=list)
    ops: list[Operation | None] = field(default_factory=list)
    origins: list[str] = field(default_factory=list)
    known: dict[tuple[object, ...], list[Signature]] = field(default_factory=dict)

    def place(self, placement: PlacementAttr) -> int:
        if placement not in self.places:
            self.places[placement] = len(self.placements)
            self.placements.append(placement)
            self.graph.hierarchies.append(hierarchy_of(placement))
            self.graph.devices.append(tuple(placement.devices))
        return self.places[placement]

    def add(self, op: Operation | None, value: SSAValue | None, choices: list[Signature], origin: str,
            operands: Sequence[SSAValue], place: int, in_place: Sequence[int]) -> None:
        if value is not None:
            self.index[value] = len(self.graph.nodes)
        size = nbytes(value.type) if value is not None else 0  # type: ignore[arg-type]
        shape = shape_of(value.type) if value is not None else ()
        ops = tuple(self.index[o] for o in operands)
        dynamic = tuple(dynamic_axes(value.type)) if value is not None else ()
        self.graph.nodes.append(Node(choices, ops, size, place, tuple(in_place), shape, dynamic))
        self.ops.append(op)
        self.origins.append(origin)

    def out_of(self, value: SSAValue) -> NdCode:
        node = self.graph.nodes[self.index[value]]
        return node.choices[0].out

    def build(self) -> None:
        func = self.func
        home = self.place(func_placement(func))
        hierarchy = self.graph.hierarchies[home]
        given = func.attributes.get("arg_sbp")
        for i, arg in enumerate(func.body.block.args):
            if isinstance(given, ArrayAttr) and i < len(given.data):
                codes, origin = nd_codes(given.data[i]), "hint"  # type: ignore[arg-type]
            else:
                codes, origin = ((0,) * len(hierarchy) if shape_of(arg.type) else broadcast_codes(hierarchy)), "default"
            codes = _fitted(codes, hierarchy, len(shape_of(arg.type)), f"arg_sbp #{i} of job '{func.sym_name.data}'", None)
            self.add(None, arg, [Signature((), codes, 0.0)], origin, (), home, ())
        state_of = _optimizer_state(func)
        op = func.body.block.first_op
        while op is not None:  # next_op read after add_op, which may insert a hint's boxing after op
            self.add_op(op, state_of)
            op = op.next_op

    def add_op(self, op: Operation, state_of: dict[job.VariableOp, job.VariableOp]) -> None:
        func = self.func
        if isinstance(op, job.ReturnOp):
            home = self.place(func_placement(func))
            choices = [Signature(needs, (), 0.0) for needs in return_choices(func, op)]
            self.add(op, None, choices, "rule", op.operands, home, [home] * len(op.operands))
            return
        if type(op) in job.PHYSICAL_OPS:  # hand-written, or a func whose `mesh` was dropped: it has no SBP rules
            raise CompileError(
                f"'{op.name}' is a per-device op (lower-to-physical writes it): sbp-infer runs on the logical job",
                source_location(op),
            )
        place = self.place(op_placement(op, func))
        hierarchy = self.graph.hierarchies[place]
        value = op.results[0] if op.results else None
        in_place = [place] * len(op.operands)
        given = getattr(op, "sbp", None)
        rank = len(shape_of(value.type)) if value is not None else 0
        hint = _fitted(nd_codes(given), hierarchy, rank, f"{op.name} sbp", op) if isinstance(given, NdSbpAttr) else None
        if isinstance(op, job.VariableOp):
            origin = "hint" if hint is not None and is_hint(op) else "default"
            if origin == "default" and op in state_of:
                hint, origin = self.out_of(state_of[op].results[0]), "rule"
            codes = hint if origin != "default" else broadcast_codes(hierarchy)
            self.add(op, value, [Signature((), codes, 0.0)], origin, (), place, ())
            return
        if isinstance(op, job.BoxingOp):
            self.add_boxing(op, place, hierarchy, hint)  # type: ignore[arg-type]
            return
        if isinstance(op, (job.UpdateOp, job.ApplyGradientsOp)):
            self.add(op, None, [Signature(self.update_needs(op, hierarchy), (), 0.0)], "rule", op.operands, place,
                     in_place)
            return
        choices = signatures(op, hierarchy, self.compute_cost, self.known)
        origin = "cost" if len(choices) > 1 else "rule"
        if hint is not None and is_hint(op):
            produced = [c for c in choices if c.out == hint and self.can_feed(op, c, place)]
            if produced:
                choices, origin = produced, "hint"
            else:  # the boxing after it is the next op this walk adds
                _box_hint(op, nd_attr(hint))
        self.add(op, value, choices, origin, op.operands, place, in_place)

    def can_feed(self, op: Operation, signature: Signature, place: int) -> bool:
        """Whether each operand of `op` can be had as `signature` reads it, from some SBP its producer can give:
        a hint whose signatures all read partial sums of a whole value is produced by a boxing after the op."""
        g = self.graph
        return all(
            any(g.carry(u, c.out, place, need) != INFEASIBLE for c in g.nodes[u].choices)
            for u, need in zip((self.index[o] for o in op.operands), signature.ins)
        )

    def add_boxing(self, op: job.BoxingOp, place: int, hierarchy: tuple[int, ...], hint: NdCode) -> None:
        """A boxing's result is its target; it may take its input as any SBP the producer can give."""
        u = self.index[op.x]
        producer = self.graph.nodes[u]
        size = producer.size
        sources = sorted({c.out for c in producer.choices} | ({hint} if producer.place == place else set()))
        if producer.dynamic and producer.place == place:  # each device's own sizes: only the conversions an
            # edge could carry, so one it refuses is reported at this boxing, not at a reader of what it makes
            sources = [s for s in sources if self.graph.carry(u, s, place, hint) != INFEASIBLE]
        # The boxing exists anyway: converting in it is cheaper, by BOXING_COST, than adding another.
        if producer.place == place:  # the user's boxing may make partial sums of a whole or split value
            choices = [Signature((s,), hint, moved_bytes(s, hint, size, hierarchy, to_partial=True)) for s in sources]
        else:
            g, there = self.graph, producer.place
            itemsize = size // max(1, math.prod(producer.shape))
            choices = [
                Signature((s,), hint, placement_bytes(
                    s, hint, producer.shape, itemsize, (g.hierarchies[there], g.devices[there]), (hierarchy, g.devices[place])
                ))  # fmt: skip
                for s in sources
            ]
        origin = op.attributes["sbp_origin"].data if "sbp_origin" in op.attributes else "hint"  # type: ignore[attr-defined]
        self.add(op, op.res, choices, origin, op.operands, place, [producer.place])

    def update_needs(self, op: Operation, hierarchy: tuple[int, ...]) -> tuple[NdCode, ...]:
        """Optimizer updates: gradient and state as the variable, scalars (lr, step) broadcast."""
        whole = broadcast_codes(hierarchy)
        if isinstance(op, job.ApplyGradientsOp):
            return tuple(self.out_of(var) for var, _ in op.pairs() for _ in (0, 1))
        count = op.STATE_COUNT  # type: ignore[attr-defined]
        weight = self.out_of(op.operands[0])
        return tuple(weight if i <= count else whole for i in range(len(op.operands)))

    def annotate(self, plan: Sequence[int]) -> None:
        func = self.func
        g = self.graph
        args = func.body.block.args
        func.attributes["placement"] = self.placements[0]
        func.attributes["arg_sbp"] = ArrayAttr([nd_attr(g.nodes[i].choices[0].out) for i in range(len(args))])
        for v in range(len(args), len(g.nodes)):
            op = self.ops[v]
            assert op is not None
            node = g.nodes[v]
            if isinstance(op, job.ReturnOp):
                chosen = node.choices[plan[v]].ins
                if list(chosen) != [return_needs(func, o) for o in op.operands]:  # a whole result comes gathered
                    op.attributes["sbp_in"] = ArrayAttr([nd_attr(c) for c in chosen])
                else:
                    op.attributes.pop("sbp_in", None)
                continue
            sig = node.choices[plan[v]]
            op.properties["placement"] = self.placements[node.place]
            if op.results:
                op.properties["sbp"] = nd_attr(sig.out)
            if op.operands:
                op.attributes["sbp_in"] = ArrayAttr([nd_attr(c) for c in sig.ins])
            op.attributes["sbp_origin"] = StringAttr(self.origins[v])
            if self.origins[v] == "cost":
                op.attributes["sbp_why"] = StringAttr(f"cheapest plan among {len(node.choices)} signatures")
            if isinstance(op, job.BoxingOp):
                op.properties["src_sbp"] = nd_attr(sig.ins[0])
                if node.in_place[0] != node.place:
                    op.properties["src_placement"] = self.placements[node.in_place[0]]

    @staticmethod
    def why_infeasible(src: Node, out: NdCode, need: NdCode, reader: Operation) -> str:
        """Why `src`'s value, produced as `out`, cannot be had as `need`."""
        if not src.dynamic:
            return "no boxing makes a value partial"
        if out == broadcast_codes(out) and 0 in need:  # gathered rows: whose they were is not kept
            whole = " (return it as tp.Numpy: the whole value)" if isinstance(reader, job.ReturnOp) else ""
            return (
                "its rows are every device's, gathered, and each device's own sizes are not split back out of "
                f"them{whole}; docs/dynamic.md"
            )
        return (
            "its dynamic axes hold each device's own sizes, and only a value split along axis 0, its only "
            "dynamic axis, can be gathered, to broadcast (reduce it over them first: a sum or a mean; "
            "docs/dynamic.md)"
        )

    def check(self, plan: Sequence[int]) -> None:
        """A plan of infinite cost needs a value made partial, or a dynamic one moved: name the op that asks for it."""
        g = self.graph
        for v, node in enumerate(g.nodes):
            sig = node.choices[plan[v]]
            for k, u in enumerate(node.operands):
                out = g.nodes[u].choices[plan[u]].out
                if g.edge(u, out, v, k, sig.ins[k]) == INFEASIBLE:
                    op = self.ops[v]
                    assert op is not None
                    why = self.why_infeasible(g.nodes[u], out, sig.ins[k], op)
                    raise CompileError(
                        f"{op.name} needs operand {k} as {code_text(sig.ins[k])}, but it can only be had as "
                        f"{code_text(out)} here: {why}"
                        + (" (the hinted sbp forces this signature)" if self.origins[v] == "hint" else ""),
                        source_location(op),
                    )


def _fitted(codes: NdCode, hierarchy: tuple[int, ...], rank: int, what: str, op: Operation | None) -> NdCode:
    """`codes` normalized for `hierarchy`, or a located error when they do not fit it or the value's rank."""
    where = source_location(op) if op is not None else None
    if len(codes) != len(hierarchy):
        raise CompileError(
            f"{what} {code_text(codes)} has {len(codes)} components for a placement hierarchy {list(hierarchy)}", where
        )
    if any(c >= rank for c in codes):
        raise CompileError(f"{what} {code_text(codes)} splits an axis a rank-{rank} value does not have", where)
    return normalize(codes, hierarchy)


def _optimizer_state(func: job.FuncOp) -> dict[job.VariableOp, job.VariableOp]:
    """Optimizer state variables (momentum, Adam's m and v) -> the weight they belong to."""
    state: dict[job.VariableOp, job.VariableOp] = {}
    for op in func.body.block.ops:
        if isinstance(op, job.UpdateOp) and not isinstance(op, job.AssignOp):
            weight = op.operands[0].owner
            for i in op.WRITTEN_OPERANDS[1:]:
                var = op.operands[i].owner
                if isinstance(var, job.VariableOp) and isinstance(weight, job.VariableOp):
                    state.setdefault(var, weight)
    return state


def build_graph(func: job.FuncOp, compute_cost: float) -> _Builder:
    builder = _Builder(func, compute_cost)
    builder.build()
    return builder


STATE_VISITS = 20_000
"""States kept times nodes: past it the beam narrows, so a 10k-op job still compiles in seconds."""


def solve(g: Graph, max_states: int) -> tuple[list[int], bool]:
    """The plan of least cost: exact while the dynamic program's states fit, else beam plus descent."""
    plan, exact = search(g, max(4, min(max_states, STATE_VISITS // max(1, len(g.nodes)))))
    return (plan, True) if exact else (refine(g, plan), False)


@dataclass(frozen=True)
class SbpInferPass(ModulePass):
    """Chooses an SBP signature for every op of each job.func by a whole-graph search over a cost model.

    Writes `sbp` and `placement` on every op with a result, `sbp_in` (what each
    operand must be) and `sbp_origin` ("hint", "default", "rule" or "cost") on
    every op, and `arg_sbp` and `placement` on the function.  Ops without a
    placement take the function's (default: one CPU device).  `compute-cost` is
    the price of one floating-point operation per device in bytes moved;
    `max-states` bounds the exact search.  A func that has `mesh` is per-device
    already (`lower-to-physical` made it): its SBP were decided on the logical
    job, and its collectives have no rules, so it is left as it is.
    """

    name = "sbp-infer"

    compute_cost: float = 0.25
    max_states: int = 4096

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in op.walk():
            if isinstance(func, job.FuncOp) and "mesh" not in func.attributes:
                builder = build_graph(func, self.compute_cost)
                plan, _ = solve(builder.graph, self.max_states)
                builder.check(plan)
                builder.annotate(plan)


__all__ = ["SbpInferPass", "build_graph", "chosen_return_needs", "plan_cost", "refine", "return_needs", "search", "solve"]
