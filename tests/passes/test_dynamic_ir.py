"""Bounded dynamic dimensions in the IR: the `#job.bounded` encoding, which ops accept it, the buffer ops that
carry actual sizes, and their text round trip (docs/dynamic.md)."""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import f32, i32
from xdsl.ir import Block
from xdsl.utils.exceptions import VerifyException

from irflow.dialects import buffer, job
from irflow.dialects.bounds import BoundedAttr, dynamic_axes, with_dynamic
from irflow.dialects.job import tensor
from irflow.textir import parse_module, print_module

BOUNDED = "tensor<100x784xf32, #job.bounded<[0]>>"

JOB = f"""builtin.module {{
  job.func @f(%x: {BOUNDED}, %labels: tensor<100xi32, #job.bounded<[0]>>) -> tensor<f32> {{
    %w = job.variable {{initializer = {{kind = "zeros"}}, name = "w"}} : tensor<10x784xf32>
    %logits = job.matmul %x, %w {{transpose_b = true}} : ({BOUNDED}, tensor<10x784xf32>) -> tensor<100x10xf32, #job.bounded<[0]>>
    %loss = job.sparse_softmax_cross_entropy %logits, %labels : (tensor<100x10xf32, #job.bounded<[0]>>, tensor<100xi32, #job.bounded<[0]>>) -> tensor<100xf32, #job.bounded<[0]>>
    %mean = job.reduce_mean %loss {{axes = array<i64: 0>}} : (tensor<100xf32, #job.bounded<[0]>>) -> tensor<f32>
    %n = job.size_of %loss {{axes = array<i64: 0>}} : (tensor<100xf32, #job.bounded<[0]>>) -> tensor<f32>
    %r = job.div %mean, %n : (tensor<f32>, tensor<f32>) -> tensor<f32>
    job.return %r : tensor<f32>
  }}
}}"""


def test_bounded_type_round_trips_through_the_text_ir():
    module = parse_module(JOB)
    text = print_module(module)
    assert text.count("#job.bounded<[0]>") == JOB.count("#job.bounded<[0]>")
    assert print_module(parse_module(text)) == text
    func = next(iter(module.body.block.ops))
    assert dynamic_axes(func.body.block.args[0].type) == (0,)
    assert dynamic_axes(func.body.block.args[1].type) == (0,)


def test_bounded_attr_rejects_bad_axes():
    with pytest.raises(VerifyException, match="ascending and distinct"):
        BoundedAttr([1, 0])
    with pytest.raises(VerifyException, match="out of range"):
        with_dynamic(tensor((4,), f32), [1])


def test_results_take_the_dynamic_axes_of_their_operands():
    module = parse_module(JOB)
    ops = {op.name: op for op in next(iter(module.body.block.ops)).body.block.ops}
    assert dynamic_axes(ops["job.matmul"].res.type) == (0,)
    assert dynamic_axes(ops["job.reduce_mean"].res.type) == ()  # reduced over the dynamic axis
    # Given a result type at the bound, `make` adds the dynamic axes the operands give it.
    x = ops["job.matmul"].operands[0]
    relu = job.ReluOp.make([x])
    assert relu.res.type == x.type
    cast = job.CastOp.make([x], tensor((100, 784), job.f64))
    assert dynamic_axes(cast.res.type) == (0,)


def test_a_result_typed_static_for_a_dynamic_operand_does_not_verify():
    text = JOB.replace(
        "-> tensor<100x10xf32, #job.bounded<[0]>>\n", "-> tensor<100x10xf32>\n", 1
    ).replace("%logits, %labels : (tensor<100x10xf32, #job.bounded<[0]>>", "%logits, %labels : (tensor<100x10xf32>")
    with pytest.raises(Exception, match="does not match the inferred"):
        parse_module(text)


def test_static_only_op_on_a_dynamic_value_is_a_verify_error():
    x = parse_module(JOB).body.block.ops.first.body.block.args[0]
    # a reshape regroups the rows of a dynamic axis 0, its only dynamic axis
    assert job.ReshapeOp.make([x], tensor((78400,), f32)).res.type == with_dynamic(tensor((78400,), f32), [0])
    ragged = Block(arg_types=[with_dynamic(tensor((100, 784), f32), [0, 1])]).args[0]
    with pytest.raises(VerifyException, match=r"job.reshape keeps a dynamic axis only as axis 0, with static axes "
                       r"after it, each row split into whole rows or joined whole with others, and \(<=100, <=784\) cannot"):
        job.ReshapeOp.make([ragged], tensor((78400,), f32))
    # rows joined two by two (or all into one row, as a device's piece of those may be), not cut across rows
    assert job.ReshapeOp.make([x], tensor((50, 1568), f32)).res.type == with_dynamic(tensor((50, 1568), f32), [0])
    assert job.ReshapeOp.make([x], tensor((1, 78400), f32)).res.type == with_dynamic(tensor((1, 78400), f32), [0])
    with pytest.raises(VerifyException, match=r"and \(<=100, 784\) cannot become \(112, 700\)"):
        job.ReshapeOp.make([x], tensor((112, 700), f32))
    # broadcast_to passes on the axes it does not broadcast, of a value that keeps its rank
    assert job.BroadcastToOp.make([x], tensor((100, 784), f32)).res.type == x.type
    with pytest.raises(VerifyException, match=r"broadcast_to of \(<=100, 784\) keeps its rank"):
        job.BroadcastToOp.make([x], tensor((2, 100, 784), f32))
    with pytest.raises(VerifyException, match=r"job.all_reduce needs static shapes, but operand #0 \(<=100, 784\)"):
        job.AllReduceOp.make([x], mesh=job.i64_array([2]), mesh_axis=0)
    # concat relates every axis but the concatenated one, where its size is the inputs' sum
    assert dynamic_axes(job.ConcatOp.make([x, x], axis=1).res.type) == (0,)
    assert job.ConcatOp.make([x, x], axis=0).res.type == with_dynamic(tensor((200, 784), f32), [0])
    images = Block(arg_types=[with_dynamic(tensor((8, 1, 28, 28), f32), [0]), tensor((4, 1, 5, 5), f32)]).args
    # conv2d takes a dynamic batch, not a dynamic channel or window axis
    conv = job.Conv2DOp.make(images, strides=[1, 1], pads=[0, 0, 0, 0])
    assert dynamic_axes(conv.res.type) == (0,)
    ragged = Block(arg_types=[with_dynamic(tensor((8, 1, 28, 28), f32), [0, 2]), tensor((4, 1, 5, 5), f32)]).args
    with pytest.raises(VerifyException, match="job.conv2d cannot relate dynamic axis 2 of operand #0"):
        job.Conv2DOp.make(ragged, strides=[1, 1], pads=[0, 0, 0, 0])
    # A reshape may keep axis 0 dynamic where it leaves it in place.
    flat = job.ReshapeOp.make([images[0]], tensor((8, 784), f32))
    assert dynamic_axes(flat.res.type) == (0,)


def test_a_dynamic_axis_meeting_a_static_one_gives_a_static_axis_checked_at_run_time():
    module = parse_module(JOB)
    x = module.body.block.ops.first.body.block.args[0]
    static = job.FillOp.make([], tensor((100, 784), f32), value=1.0).res
    assert job.AddOp.make([x, static]).res.type == tensor((100, 784), f32)
    # A contraction over a dynamic axis with a static one: the result has no dynamic axis left.
    rows = job.FillOp.make([], tensor((100, 10), f32), value=1.0).res
    assert job.MatmulOp.make([x, rows], transpose_a=True).res.type == tensor((784, 10), f32)
    # and a result given with the dynamic axis does not verify
    with pytest.raises(VerifyException, match="does not match the inferred"):
        job.AddOp.create(operands=[x, static], result_types=[with_dynamic(tensor((100, 784), f32), [0])]).verify()


def test_a_static_size_and_a_pin_lower_to_run_time_checks_against_constants():
    program = lowered("""
builtin.module {
  job.func @f(%x: tensor<100x784xf32, #job.bounded<[0, 1]>>, %w: tensor<10x784xf32>) -> (tensor<100x10xf32, #job.bounded<[0]>>, tensor<100x784xf32, #job.bounded<[0]>>) {
    %y = job.matmul %x, %w {transpose_b = true} : (tensor<100x784xf32, #job.bounded<[0, 1]>>, tensor<10x784xf32>) -> tensor<100x10xf32, #job.bounded<[0]>>
    %p = job.pin_size %x {axes = array<i64: 1>} : (tensor<100x784xf32, #job.bounded<[0, 1]>>) -> tensor<100x784xf32, #job.bounded<[0]>>
    job.return %y, %p : tensor<100x10xf32, #job.bounded<[0]>>, tensor<100x784xf32, #job.bounded<[0]>>
  }
}""")
    checks = [op for op in program.body.block.ops if isinstance(op, buffer.AssertSameSizeOp)]
    consts = {op.res: op.value.value.data for op in program.body.block.ops if isinstance(op, buffer.ConstSizeOp)}
    assert [[consts.get(v) for v in op.sizes] for op in checks] == [[None, 784], [None, 784]]
    assert "argument 'x' axis 1" in checks[0].what.data and "operand #1 axis 1 (static 784)" in checks[0].what.data
    assert checks[1].what.data.startswith("job.return takes axes [1] of operand #0 at their bound")


def lowered(text: str) -> buffer.ProgramOp:
    from xdsl.context import Context

    from irflow.passes.convert_job_to_buffer import ConvertJobToBufferPass

    module = parse_module(text)
    ConvertJobToBufferPass().apply(Context(), module)
    module.verify()
    return next(iter(module.body.block.ops))


def test_conversion_cuts_bound_buffers_at_sizes_read_from_the_inputs():
    program = lowered(JOB)
    ops = list(program.body.block.ops)
    dims = [op for op in ops if isinstance(op, buffer.InputDimOp)]
    assert [(d.index.value.data, d.axis.value.data) for d in dims] == [(0, 0), (1, 0)]
    cuts = [op for op in ops if isinstance(op, buffer.CutOp)]
    # every dynamic value: a buffer at the bound, cut at the size of the input it follows
    assert [str(c.res.type) for c in cuts] == [
        "memref<?x784xf32>", "memref<?xi32>", "memref<?x10xf32>", "memref<?xf32>",
    ]  # fmt: skip
    assert all(isinstance(c.buf.owner, buffer.AllocOp) for c in cuts)
    assert cuts[2].sizes[0] is dims[0].res  # the logits take the images' size
    # logits and labels come from two inputs: their sizes are checked equal at run time
    (check,) = [op for op in ops if isinstance(op, buffer.AssertSameSizeOp)]
    assert [s.owner for s in check.sizes] == dims
    assert "job.sparse_softmax_cross_entropy" in check.what.data
    (store,) = [op for op in ops if isinstance(op, buffer.StoreSizeOp)]
    assert store.sizes[0] is dims[0].res and store.factor.value.data == 1


def test_buffer_program_with_dynamic_sizes_round_trips_and_plans_at_the_bound():
    from xdsl.context import Context

    from irflow.passes.plan_memory import PlanMemoryPass

    program = lowered(JOB)
    module = program.parent_op()
    PlanMemoryPass().apply(Context(), module)
    text = print_module(module)
    assert "buffer.cut" in text and "buffer.input_dim" in text and "buffer.assert_same_size" in text
    assert print_module(parse_module(text)) == text
    views = [op for op in program.body.block.ops if isinstance(op, buffer.ViewOp)]
    assert "memref<100x784xf32>" in {str(v.res.type) for v in views}  # planned at the bound
    assert program.attributes["arena_size"].value.data >= 100 * 784 * 4


def test_cut_verifier():
    with pytest.raises(Exception, match="one size per '\\?'"):
        parse_module("""builtin.module {
  buffer.program @p on "cpu" {
    %n = buffer.input_dim {index = 0 : i64, axis = 0 : i64} : index
    %b = buffer.alloc : memref<4x3xf32>
    %c = buffer.cut %b, %n, %n : (memref<4x3xf32>, index, index) -> memref<?x3xf32>
  }
}""")


def test_docs_state_which_ops_accept_dynamic_shapes():
    """docs/dynamic.md's table lists every job op once, as accepting dynamic shapes or as static, as the code has it."""
    from pathlib import Path

    doc = (Path(__file__).parents[2] / "docs" / "dynamic.md").read_text()
    stated: dict[str, bool] = {}
    for line in doc.splitlines():
        if line.startswith("| `"):
            names, verdict = line.split("|")[1:3]
            for name in names.strip().strip("`").split():
                assert name not in stated, f"{name} is listed twice"
                stated[name] = verdict.strip().startswith("accepted")
    ops = [c for c in job.COMPUTE_OPS + list(job.PHYSICAL_OPS) if issubclass(c, job.JobOp)]
    actual = {c.name.removeprefix("job."): c.size_groups.__func__ is not job.JobOp.size_groups.__func__ for c in ops}
    assert stated == actual


def test_all_gather_of_each_devices_own_rows_is_dynamic_at_n_times_the_bound():
    x = Block(arg_types=[with_dynamic(tensor((25, 3), f32), [0])]).args[0]
    gathered = job.AllGatherOp.make([x], axis=0, mesh=job.i64_array([4]), mesh_axis=0)
    assert gathered.res.type == with_dynamic(tensor((100, 3), f32), [0])
    with pytest.raises(VerifyException, match=r"job.all_gather gathers each device's own sizes along axis 0 only"):
        job.AllGatherOp.make([x], axis=1, mesh=job.i64_array([4]), mesh_axis=0)
    ragged = Block(arg_types=[with_dynamic(tensor((25, 3), f32), [0, 1])]).args[0]
    with pytest.raises(VerifyException, match=r"with every other axis static; given \(<=25, <=3\)"):
        job.AllGatherOp.make([ragged], axis=0, mesh=job.i64_array([4]), mesh_axis=0)


def test_buffer_gather_of_own_rows_and_sum_sizes_round_trip_and_verify():
    text = """builtin.module {
  buffer.program @p on "cpu" {
    %n = buffer.input_dim {index = 0 : i64, axis = 0 : i64} : index
    %s = buffer.sum_sizes %n {mesh = array<i64: 4>, mesh_axis = 0 : i64} : index -> index
    %b = buffer.alloc : memref<25x3xf32>
    %c = buffer.cut %b, %n : (memref<25x3xf32>, index) -> memref<?x3xf32>
    %g = buffer.alloc : memref<100x3xf32>
    %d = buffer.cut %g, %s : (memref<100x3xf32>, index) -> memref<?x3xf32>
    buffer.all_gather %c, %d {axis = 0 : i64, mesh = array<i64: 4>, mesh_axis = 0 : i64} : memref<?x3xf32>, memref<?x3xf32>
  }
}"""
    printed = print_module(parse_module(text))
    assert "buffer.sum_sizes %n {mesh = array<i64: 4>, mesh_axis = 0 : i64} : index -> index" in printed
    with pytest.raises(Exception, match=r"mesh_axis 1 out of range for the mesh \[4\]"):
        parse_module(text.replace("mesh_axis = 0 : i64} : index -> index", "mesh_axis = 1 : i64} : index -> index"))
    with pytest.raises(Exception, match="all_gather of memref<\\?x3xf32> over 4 ranks cannot produce memref<\\?x4xf32>"):
        parse_module(text.replace("memref<100x3xf32>", "memref<100x4xf32>").replace("-> memref<?x3xf32>\n    buffer.all", "-> memref<?x4xf32>\n    buffer.all")
                     .replace("memref<?x3xf32>, memref<?x3xf32>", "memref<?x3xf32>, memref<?x4xf32>"))


CONCAT = """builtin.module {
  job.func @join(%a: tensor<4x3xf32, #job.bounded<[0]>>, %b: tensor<5x3xf32, #job.bounded<[0]>>, %dy: tensor<9x3xf32, #job.bounded<[0]>>) -> (tensor<9x3xf32, #job.bounded<[0]>>, tensor<5x3xf32, #job.bounded<[0]>>) {
    %ab = job.concat %a, %b {axis = 0 : i64} : (tensor<4x3xf32, #job.bounded<[0]>>, tensor<5x3xf32, #job.bounded<[0]>>) -> tensor<9x3xf32, #job.bounded<[0]>>
    %db = job.concat_grad %dy, %a, %b {axis = 0 : i64, index = 1 : i64} : (tensor<9x3xf32, #job.bounded<[0]>>, tensor<4x3xf32, #job.bounded<[0]>>, tensor<5x3xf32, #job.bounded<[0]>>) -> tensor<5x3xf32, #job.bounded<[0]>>
    job.return %ab, %db : tensor<9x3xf32, #job.bounded<[0]>>, tensor<5x3xf32, #job.bounded<[0]>>
  }
}"""


def test_concat_grad_takes_its_inputs_part_of_dy_at_their_sizes():
    a, b = Block(arg_types=[with_dynamic(tensor((4, 3), f32), [0]), tensor((5, 3), f32)]).args
    dy = job.ConcatOp.make([a, b], axis=0).res
    assert dy.type == with_dynamic(tensor((9, 3), f32), [0])
    assert job.ConcatGradOp.make([dy, a, b], axis=0, index=0).res.type == a.type
    assert job.ConcatGradOp.make([dy, a, b], axis=0, index=1).res.type == b.type  # static: its own size
    with pytest.raises(VerifyException, match="concat_grad index 2 is out of range for 2 inputs"):
        job.ConcatGradOp.make([dy, a, b], axis=0, index=2)
    with pytest.raises(VerifyException, match="is not the concatenation of its inputs"):
        job.ConcatGradOp.make([dy, a, a], axis=0, index=0)
    assert print_module(parse_module(CONCAT)) == print_module(parse_module(print_module(parse_module(CONCAT))))


def test_a_concat_grads_subview_keeps_dy_live_until_its_part_is_copied_out():
    from xdsl.context import Context

    from irflow.passes.plan_memory import PlanMemoryPass

    program = lowered(CONCAT)
    PlanMemoryPass().apply(Context(), program.parent_op())
    ops = list(program.body.block.ops)
    views = {op.res.name_hint: op for op in ops if isinstance(op, buffer.ViewOp)}
    (part,) = [op for op in ops if isinstance(op, buffer.SubviewOp)]
    assert buffer.storage_of(part.res) is views["dy"].res
    dy, db = (range(views[k].offset.value.data, views[k].offset.value.data + buffer.nbytes(views[k].res.type)) for k in ("dy", "db"))
    assert not set(dy) & set(db)  # db is written while dy is still read


def test_subview_add_sizes_and_scale_size_verifiers():
    text = """builtin.module {
  buffer.program @p on "cpu" {
    %n = buffer.input_dim {index = 0 : i64, axis = 0 : i64} : index
    %s = buffer.add_sizes %n, %n {constant = 2 : i64} : index, index -> index
    %b = buffer.alloc : memref<10x3xf32>
    %c = buffer.cut %b, %s : (memref<10x3xf32>, index) -> memref<?x3xf32>
    %v = buffer.subview %c, %n, %n {axis = 0 : i64} : (memref<?x3xf32>, index, index) -> memref<?x3xf32>
  }
}"""
    assert print_module(parse_module(text)) == print_module(parse_module(print_module(parse_module(text))))
    with pytest.raises(Exception, match=r"a subview along axis 1 of memref<\?x3xf32> is \?x\?, got memref<\?x3xf32>"):
        parse_module(text.replace("{axis = 0 : i64} : (memref<?x3xf32>", "{axis = 1 : i64} : (memref<?x3xf32>"))
    with pytest.raises(Exception, match="add_sizes' constant must be non-negative, got -1"):
        parse_module(text.replace("constant = 2", "constant = -1"))
    scaled = text.replace("    %b = buffer.alloc", '    %r = buffer.scale_size %s {multiplier = 3 : i64, divisor = 2 : i64, what = "rows"} : index -> index\n    %b = buffer.alloc')
    assert "buffer.scale_size %s {divisor = 2 : i64, multiplier = 3 : i64, what = \"rows\"}" in print_module(parse_module(scaled))
    with pytest.raises(Exception, match="scale_size needs a positive multiplier and divisor, got 3 / 0"):
        parse_module(scaled.replace("divisor = 2", "divisor = 0"))


def test_slice_size_verifier_and_its_clamped_length():
    text = """builtin.module {
  buffer.program @p on "cpu" {
    %n = buffer.input_dim {index = 0 : i64, axis = 0 : i64} : index
    %m = buffer.slice_size %n {start = 1 : i64, stop = 6 : i64, step = 2 : i64} : index -> index
  }
}"""
    module = parse_module(text)
    assert print_module(module) == print_module(parse_module(print_module(module)))
    (sliced,) = [op for op in module.walk() if isinstance(op, buffer.SliceSizeOp)]
    assert [sliced.of(n) for n in range(9)] == [len(range(9)[:n][1:6:2]) for n in range(9)]  # numpy's clamping
    with pytest.raises(Exception, match=r"slice_size needs 0 <= start <= stop and a positive step, got \[1:6:0\]"):
        parse_module(text.replace("step = 2", "step = 0"))
    with pytest.raises(Exception, match=r"got \[7:6:2\]"):
        parse_module(text.replace("start = 1", "start = 7"))


def test_a_slice_of_a_dynamic_axis_is_dynamic_and_its_gradient_takes_the_sizes_of_like():
    (x,) = Block(arg_types=[with_dynamic(tensor((8, 3), f32), [0])]).args
    props = {"start": [1, 0], "stop": [6, 3], "step": [2, 1]}
    s = job.SliceOp.make([x], **props).res
    assert s.type == with_dynamic(tensor((3, 3), f32), [0])
    assert job.SliceGradOp.make([s, x], x.type, **props).res.type == x.type
    with pytest.raises(VerifyException, match=r"cannot relate dynamic axes \[0\].*give it the sliced input as `like`"):
        job.SliceGradOp.make([s], x.type, **props)
    (other,) = Block(arg_types=[with_dynamic(tensor((9, 3), f32), [0])]).args
    with pytest.raises(VerifyException, match="slice_grad's like tensor<9x3xf32.* does not have its result's shape"):
        job.SliceGradOp.make([s, other], x.type, **props)


def test_gather_relates_dynamic_ids_and_params_and_its_gradient_takes_the_sizes_of_like():
    params, ids = Block(arg_types=[with_dynamic(tensor((6, 3), f32), [0]), with_dynamic(tensor((4,), i32), [0])]).args
    picked = job.GatherOp.make([params, ids], axis=0).res
    assert picked.type == with_dynamic(tensor((4, 3), f32), [0])  # the ids' count; params' rows only checked
    assert job.GatherGradOp.make([picked, ids, params], params.type, axis=0).res.type == params.type
    # without `like`, params' rows are its bound: a static table, an embedding's
    assert job.GatherGradOp.make([picked, ids], params.type, axis=0).res.type == tensor((6, 3), f32)
    (wide,) = Block(arg_types=[with_dynamic(tensor((7, 3), f32), [0])]).args
    with pytest.raises(VerifyException, match="gather_grad's like tensor<7x3xf32.* does not have its result's shape"):
        job.GatherGradOp.make([picked, ids, wide], params.type, axis=0)
    (at,) = Block(arg_types=[with_dynamic(tensor((6, 2), i32), [0, 1])]).args
    columns = job.DimGatherOp.make([params, at], dim=1).res
    assert columns.type == with_dynamic(tensor((6, 2), f32), [0, 1])  # the index's sizes
    assert job.DimGatherGradOp.make([columns, at, params], params.type, dim=1).res.type == params.type
    with pytest.raises(VerifyException, match="dim_gather_grad's like tensor<7x3xf32.* does not have its result's shape"):
        job.DimGatherGradOp.make([columns, at, wide], params.type, dim=1)


def test_an_op_sized_by_like_hands_its_kernel_no_like():
    program = lowered("""builtin.module {
  job.func @expand(%s: tensor<8xf32>, %x: tensor<100x8xf32, #job.bounded<[0]>>) -> tensor<100x8xf32, #job.bounded<[0]>> {
    %y = job.broadcast_like %s, %x : (tensor<8xf32>, tensor<100x8xf32, #job.bounded<[0]>>) -> tensor<100x8xf32, #job.bounded<[0]>>
    job.return %y : tensor<100x8xf32, #job.bounded<[0]>>
  }
}""")
    (kernel,) = [op for op in program.body.block.ops if isinstance(op, buffer.KernelOp)]
    assert [v.name_hint for v in kernel.ins] == ["s"]  # x's buffer is not read, so it need not live on
