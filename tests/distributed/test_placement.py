"""Values moving between device sets (placement n -> m): the plan, the lowered IR and the numbers.

A job over the devices of several placement scopes is one program (SPMD) over
all of them; ops placed on part of them run there only, and a value changing
placement becomes one `job.transfer` (plus a reduction before it or a local
embedding after it for partial sums). The oracles are numpy's own cut of the
logical value and the logical value itself.
"""

import itertools
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp
from irflow.compiler import run_pipeline
from irflow.dialects import job
from irflow.dialects.sbp import PlacementAttr, SbpAttr
from irflow.errors import CompileError, ExecutionError
from irflow.passes.insert_boxing import boxing_bytes
from irflow.runtime.communicator import Site
from irflow.runtime.inprocess import InProcessGroup
from irflow.runtime.sharding import Layout, transfer_plan, transfer_steps
from irflow.runtime.spmd import SpmdExecutor
from irflow.runtime.variables import LogicalVariables
from irflow.textir import parse_module

S0, S1, B, P = SbpAttr("split", 0), SbpAttr("split", 1), SbpAttr("broadcast"), SbpAttr("partial_sum")
KINDS = {"S0": S0, "S1": S1, "B": B, "P": P}
HOME = '#job.placement<cpu, ["0:0-3"]>'
PAIRS = list(itertools.product(KINDS, repeat=2))
UNREDUCED = list(itertools.product(["S0", "S1", "B"], repeat=2))  # what a transfer itself carries
# (source placement, destination placement) inside the 4 devices of HOME
MOVES = {
    "4->2": (HOME, '#job.placement<cpu, ["0:0-1"]>'),
    "2->2 disjoint": ('#job.placement<cpu, ["0:0-1"]>', '#job.placement<cpu, ["0:2-3"]>'),
    "3->3 overlapping": ('#job.placement<cpu, ["0:0-2"]>', '#job.placement<cpu, ["0:1-3"]>'),
    "1->4": ('#job.placement<cpu, ["0:3"]>', HOME),
}


def nd(c: SbpAttr) -> str:
    return f"#job.nd_sbp<[{c}]>"


def move_job(shape, src: SbpAttr, dst: SbpAttr, src_place: str, dst_place: str) -> str:
    """x (on HOME, mirrored: every device's piece given) -> `src` on src_place -> `dst` on dst_place -> B on HOME."""
    t = f"tensor<{'x'.join(map(str, shape))}xf64>"
    arg_sbp = src if src_place == HOME else B
    first = "%x" if src_place == HOME else "%a"
    box = lambda res, x, s, d, sp, dp: (  # noqa: E731
        f'  {res} = job.boxing {x} {{src_sbp = {nd(s)}, sbp = {nd(d)}, src_placement = {sp}, placement = {dp}, '
        f'reason = "test"}} : ({t}) -> {t} loc("model.py":9:3)\n'
    )
    lines = "" if src_place == HOME else box("%a", "%x", B, src, HOME, src_place)
    lines += box("%b", first, src, dst, src_place, dst_place) + box("%c", "%b", dst, B, dst_place, HOME)
    return (
        f'job.func @move(%x: {t}) -> {t} attributes {{placement = {HOME}, arg_sbp = [{nd(arg_sbp)}], '
        f'view = "mirrored"}} {{\n{lines}  job.return %c : {t}\n}}'
    )


def pieces(value: np.ndarray, sbp: SbpAttr, p: int, rng) -> list[np.ndarray]:
    """Every device's piece of `value` laid out as `sbp` over p devices; partial sums as random addends."""
    if sbp.kind.data == "split":
        axis = sbp.axis.data
        widths = [(0, 0)] * value.ndim
        widths[axis] = (0, -value.shape[axis] % p)
        return np.split(np.pad(value, widths), p, axis=axis)
    if sbp.kind.data == "broadcast":
        return [value] * p
    noise = [rng.integers(-5, 5, value.shape).astype(np.float64) for _ in range(p - 1)]
    return [value - sum(noise, np.zeros(value.shape)), *noise]


@pytest.mark.parametrize("move", list(MOVES))
@pytest.mark.parametrize("src, dst", PAIRS, ids=[f"{a}->{b}" for a, b in PAIRS])
def test_a_value_survives_every_placement_change(move, src, dst) -> None:
    rng = np.random.default_rng(len(move) + 7 * len(src + dst))
    src_place, dst_place = MOVES[move]
    for shape in [(4, 8), (5, 7), (1, 2)]:
        module = parse_module(move_job(shape, KINDS[src], KINDS[dst], src_place, dst_place))
        run_pipeline(module, "lower-to-physical,convert-job-to-buffer,plan-memory")
        value = rng.integers(-9, 9, shape).astype(np.float64)
        given = pieces(value, KINDS[src] if src_place == HOME else B, 4, rng)
        (out,) = SpmdExecutor(module.body.block.first_op, LogicalVariables((4,)))([given])
        for rank, piece in enumerate(out):
            np.testing.assert_array_equal(piece, value, err_msg=f"{shape} on rank {rank}")


def lowered_ops(shape, src: SbpAttr, dst: SbpAttr, src_place: str, dst_place: str) -> Counter:
    t = f"tensor<{'x'.join(map(str, shape))}xf64>"
    text = (
        f"job.func @move(%x: {t}) -> {t} attributes {{placement = {HOME}, arg_sbp = [{nd(src)}]}} {{\n"
        f"  %y = job.boxing %x {{src_sbp = {nd(src)}, sbp = {nd(dst)}, src_placement = {src_place}, "
        f"placement = {dst_place}}} : ({t}) -> {t}\n  job.return %y : {t}\n}}"
    )
    module = parse_module(text)
    run_pipeline(module, "lower-to-physical")
    func = module.body.block.first_op
    return Counter(op.name.removeprefix("job.") for op in func.body.block.ops if op.name != "job.return")


@pytest.mark.parametrize("src, dst", PAIRS, ids=[f"{a}->{b}" for a, b in PAIRS])
def test_a_placement_change_is_one_transfer(src, dst) -> None:
    """No collective but a reduce_scatter of a partial source; a partial destination is embedded locally."""
    ops = lowered_ops((8, 4), KINDS[src], KINDS[dst], HOME, '#job.placement<cpu, ["0:0-1"]>')
    expected = Counter({"transfer": 1})
    if src == "P":
        expected["reduce_scatter"] += 1
    if dst == "P":
        expected["shard_embed"] += 1
    assert ops == expected


def layout(shape, sbp: SbpAttr, members) -> Layout:
    return Layout.of(shape, [sbp], [len(members)], members)


def moved_elements(plan) -> int:
    return sum(int(np.prod([s.stop - s.start for s in p.at_src])) for p in plan if p.src != p.dst)


@pytest.mark.parametrize("src, dst", UNREDUCED, ids=[f"{a}->{b}" for a, b in UNREDUCED])
@pytest.mark.parametrize("shape", [(8, 6), (5, 7)])
def test_only_the_missing_boxes_move(src, dst, shape) -> None:
    """Each destination device receives exactly the entries of its piece that it does not already hold."""
    for src_members, dst_members in [((0, 1, 2, 3), (0, 1)), ((0, 1), (2, 3)), ((0, 1, 2), (1, 2, 3)), ((3,), (0, 1, 2, 3))]:
        a, b = layout(shape, KINDS[src], src_members), layout(shape, KINDS[dst], dst_members)
        want = 0
        for index, rank in enumerate(dst_members):
            need = np.zeros(shape, bool)
            need[_box(b.region(index))] = True
            if rank in src_members:
                need[_box(a.region(src_members.index(rank)))] = False
            want += int(need.sum())
        assert moved_elements(transfer_plan(a, b)) == want, (src_members, dst_members)


def _box(region) -> tuple[slice, ...]:
    return tuple(slice(s, s + n) for s, n in zip(region.start, region.valid))


def test_replicas_share_the_sending() -> None:
    plan = transfer_plan(layout((8, 2), B, (0, 1)), layout((8, 2), S0, (2, 3)))
    assert sorted((p.src, p.dst) for p in plan) == [(0, 2), (1, 3)]


def test_transfer_steps_give_every_destination_its_piece() -> None:
    """The runtime half alone: in-process exchange between ranks {0, 1, 2} and {2, 3} of four."""
    shape, rng = (7, 3), np.random.default_rng(3)
    value = rng.standard_normal(shape)
    a, b = layout(shape, S1, (0, 1, 2)), layout(shape, S0, (2, 3))
    group = InProcessGroup((4,))
    srcs = [a.shard(value, r) for r in range(4)]
    dsts = [np.full(b.local_shape, np.nan) for _ in range(4)]
    steps = [
        transfer_steps(srcs[r], dsts[r], a, b, group.communicator(r), Site("transfer"), np) for r in range(4)
    ]
    assert [len(s) for s in steps] == [3, 3, 3, 3]
    group.run(steps)
    np.testing.assert_array_equal(b.gather(dsts), value)
    for r in (2, 3):
        np.testing.assert_array_equal(dsts[r], b.shard(value, r))


def test_an_exchange_whose_sides_disagree_is_a_located_error() -> None:
    group = InProcessGroup((2,))
    c0, c1 = group.communicator(0), group.communicator(1)
    site = Site("job.transfer")
    steps = [
        [lambda: c0.exchange([(1, np.zeros(3))], [], (0, 1), site)],
        [lambda: c1.exchange([], [(0, np.zeros(4))], (0, 1), site)],
    ]
    with pytest.raises(ExecutionError, match=r"exchange mismatch: rank 0 sends \(\(3,\), 'float64'\) to rank 1, which expects \(\(4,\)"):
        group.run(steps)


def test_subgroup_collectives_involve_only_their_members() -> None:
    group = InProcessGroup((4,))
    values = [np.full(2, float(r)) for r in range(4)]
    outs = [np.zeros(2) for _ in range(4)]
    site = Site("job.all_reduce")
    steps = [
        [lambda r=r: group.communicator(r).subgroup((1, 3), (2,)).all_reduce(values[r], outs[r], 0, "sum", site)]
        if r in (1, 3) else []
        for r in range(4)
    ]  # fmt: skip
    group.run(steps)
    assert [o[0] for o in outs] == [0.0, 4.0, 0.0, 4.0]
    assert group.communicator(1).subgroup((1, 3), (2,)).coords == (0,)


def test_an_op_outside_the_jobs_devices_is_a_located_error() -> None:
    t = "tensor<4x4xf64>"
    text = (
        f"job.func @f(%x: {t}) -> {t} attributes {{placement = {HOME}, arg_sbp = [{nd(B)}]}} {{\n"
        f"  %y = job.boxing %x {{src_sbp = {nd(B)}, sbp = {nd(B)}, placement = #job.placement<cpu, [\"0:4-5\"]>, "
        f'src_placement = {HOME}}} : ({t}) -> {t} loc("model.py":3:4)\n  job.return %y : {t}\n}}'
    )
    with pytest.raises(CompileError, match=r"model.py:3:4: error: 'job.boxing' is placed on .*0:4-5.*outside the job's devices"):
        run_pipeline(parse_module(text), "lower-to-physical")


# ----------------------------------------------------------------- a job over two placement scopes

STEPS = 3


def two_scopes(features: str, head: str, head_hint=None, data_parallel_head: bool = False):
    """A feature extractor on `features` and a classifier head on `head`, trained with momentum SGD."""
    config = flow.function_config()
    config.default_data_type(flow.float64)

    @flow.global_function(type="train", function_config=config)
    def train(
        images: tp.Numpy.Placeholder((10, 12), dtype=flow.float64), labels: tp.Numpy.Placeholder((10,), dtype=flow.int32)
    ) -> tp.Numpy:
        init = flow.truncated_normal(0.3)
        with flow.scope.placement("cpu", features):
            h = flow.layers.dense(images, 14, activation=flow.nn.relu, kernel_initializer=init, name="features")
        with flow.scope.placement("cpu", head):
            if data_parallel_head:
                h = flow.parallel_cast(h, distribute=flow.distribute.split(0))
            logits = flow.layers.dense(h, 5, kernel_initializer=init, name="head", model_distribute=head_hint)
            loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0.9).minimize(loss)
        return loss

    return train


def train_steps(devices: int, features: str, head: str, head_hint=None, data_parallel_head: bool = False):
    flow.clear_default_session()
    flow.config.cpu_device_num(devices)
    train = two_scopes(features, head, head_hint, data_parallel_head)
    rng = np.random.default_rng(11)
    losses = [
        train(rng.standard_normal((10, 12)), rng.integers(0, 5, 10).astype(np.int32)) for _ in range(STEPS)
    ]
    return losses, {name: v.numpy() for name, v in flow.get_all_variables().items()}, train


CASES = {
    "4->2 disjoint part, chosen plan": ("0:0-3", "0:2-3", None, False),
    "4->2 data parallel head": ("0:0-3", "0:2-3", None, True),
    "4->2 model parallel head": ("0:0-3", "0:0-1", flow.distribute.split(0), False),
    "2->3 overlapping, data parallel head": ("0:0-1", "0:1-3", None, True),
}


@pytest.mark.parametrize("case", list(CASES))
def test_feature_extractor_and_head_on_different_devices_train_as_one_device(case) -> None:
    features, head, hint, data_parallel_head = CASES[case]
    want_losses, want_vars, _ = train_steps(1, "0:0", "0:0")
    losses, variables, train = train_steps(4, features, head, hint, data_parallel_head)
    for step, (a, b) in enumerate(zip(want_losses, losses)):
        np.testing.assert_allclose(b, a, rtol=1e-10, err_msg=f"loss at step {step}")
    assert want_vars.keys() == variables.keys()
    for name in want_vars:
        np.testing.assert_allclose(variables[name], want_vars[name], rtol=1e-10, atol=1e-13, err_msg=name)
    lowered = train.ir("lower-to-physical").splitlines()
    assert any("job.transfer" in line for line in lowered) and not any("job.boxing" in line for line in lowered)
    if data_parallel_head:  # the head's boxing runs among the head's devices only
        head_placement = f'placement = #job.placement<cpu, ["{head}"]>'
        mesh = f"mesh = array<i64: {len(PlacementAttr('cpu', head).devices)}>"
        assert any(
            kind in line and head_placement in line and mesh in line
            for line in lowered
            for kind in ("job.all_reduce", "job.all_gather", "job.all_to_all", "job.reduce_scatter")
        )


def test_a_two_scope_job_under_mpi_matches_the_simulated_devices(tmp_path) -> None:
    """The same program on 4 MPI ranks: sub-communicators and exchanges through mpi4py."""
    pytest.importorskip("mpi4py", reason="needs the [mpi] extra")
    mpiexec = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
    if mpiexec is None:
        pytest.skip("no mpiexec next to this Python or on PATH")
    out = tmp_path / "ranks.npz"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "OMPI_", "MPI_", "HYDRA_"))}
    cmd = [mpiexec, "-n", "4", sys.executable, "mpi_two_scopes.py", "0:0-1", "0:1-3", "1", str(out)]
    proc = subprocess.run(cmd, cwd=Path(__file__).parent, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = dict(np.load(out))
    losses, variables, _ = train_steps(4, "0:0-1", "0:1-3", None, True)
    np.testing.assert_allclose(got["losses"], np.array(losses), rtol=1e-12)
    for name, value in variables.items():
        np.testing.assert_allclose(got[f"var:{name}"], value, rtol=1e-12, atol=1e-14, err_msg=name)


@pytest.mark.parametrize("move", [m for m in MOVES if MOVES[m][0] == HOME])
@pytest.mark.parametrize("src, dst", UNREDUCED, ids=[f"{a}->{b}" for a, b in UNREDUCED])
def test_the_cost_model_counts_the_bytes_the_transfers_send(move, src, dst, monkeypatch) -> None:
    """sbp-infer's price of a placement change (boxing_bytes, the report's figure) is what the exchanges carry."""
    shape, dst_place = (6, 5), MOVES[move][1]
    t = f"tensor<{'x'.join(map(str, shape))}xf64>"
    text = (
        f'job.func @move(%x: {t}) -> {t} attributes {{placement = {HOME}, arg_sbp = [{nd(KINDS[src])}]}} {{\n'
        f"  %a = job.boxing %x {{src_sbp = {nd(KINDS[src])}, sbp = {nd(KINDS[dst])}, src_placement = {HOME}, "
        f"placement = {dst_place}}} : ({t}) -> {t}\n"
        f"  %b = job.boxing %a {{src_sbp = {nd(KINDS[dst])}, sbp = {nd(B)}, src_placement = {dst_place}, "
        f"placement = {HOME}}} : ({t}) -> {t}\n  job.return %b : {t}\n}}"
    )
    module = parse_module(text)
    priced = sum(boxing_bytes(op) for op in module.walk() if isinstance(op, job.BoxingOp))
    run_pipeline(module, "lower-to-physical,convert-job-to-buffer,plan-memory")
    sent: list[int] = []
    exchange = InProcessGroup.exchange

    def counting(group, calls):
        sent.append(sum(a.nbytes for c in calls for _, a in dict(c.params)["sends"]))
        exchange(group, calls)

    monkeypatch.setattr(InProcessGroup, "exchange", counting)
    value = np.arange(30.0).reshape(shape)
    (out,) = SpmdExecutor(module.body.block.first_op, LogicalVariables((4,)))([value])
    np.testing.assert_array_equal(out, value)
    assert len(sent) == 2 and sum(sent) == priced


def test_a_placement_change_does_not_grow_with_the_device_count() -> None:
    """One transfer op, and one reduce_scatter for a partial source, however many devices either side has."""
    counts = []
    for n in (4, 1024):
        home, part = f'#job.placement<cpu, ["0:0-{n - 1}"]>', f'#job.placement<cpu, ["0:{n // 2}-{n - 1}"]>'
        t = "tensor<4096x3xf64>"
        text = (
            f"job.func @move(%x: {t}) -> {t} attributes {{placement = {home}, arg_sbp = [{nd(P)}]}} {{\n"
            f"  %a = job.boxing %x {{src_sbp = {nd(P)}, sbp = {nd(S1)}, src_placement = {home}, placement = {part}}} : ({t}) -> {t}\n"
            f"  %b = job.boxing %a {{src_sbp = {nd(S1)}, sbp = {nd(B)}, src_placement = {part}, placement = {home}}} : ({t}) -> {t}\n"
            f"  job.return %b : {t}\n}}"
        )
        module = parse_module(text)
        run_pipeline(module, "lower-to-physical,convert-job-to-buffer")
        counts.append(Counter(op.name for op in module.walk()))
    assert counts[0] == counts[1] and counts[0]["buffer.transfer"] == 2 and counts[0]["buffer.reduce_scatter"] == 1
