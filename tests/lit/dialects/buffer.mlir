// RUN: IRFLOW_ROUNDTRIP
// RUN: irflow-opt %s --split-input-file --verify-roundtrip | filecheck %s
// RUN: IRFLOW_GENERIC_ROUNDTRIP

// Every buffer op in its custom form: printed, parsed back (from the generic
// form too) and printed again to the same text.

// Storage: the arena and views into it, allocs not yet planned, variables, constants.

buffer.program @storage on "cpu" attributes {job_type = "predict"} {
  %arena = buffer.arena {size = 1024 : i64, alignment = 64 : i64} : memref<1024xi8>
  %v = buffer.view %arena {offset = 64 : i64} : memref<1024xi8> -> memref<4x8xf32>
  %a = buffer.alloc : memref<4x8xf32>
  %w = buffer.variable {name = "w"} : memref<4x8xf32>
  %c = buffer.constant {value = dense<[1, 2, 3]> : tensor<3xi32>} : memref<3xi32>
}

// CHECK-LABEL: buffer.program @storage on "cpu" attributes {job_type = "predict"} {
// CHECK-NEXT:    %arena = buffer.arena {alignment = 64 : i64, size = 1024 : i64} : memref<1024xi8>
// CHECK-NEXT:    %v = buffer.view %arena {offset = 64 : i64} : memref<1024xi8> -> memref<4x8xf32>
// CHECK-NEXT:    %a = buffer.alloc : memref<4x8xf32>
// CHECK-NEXT:    %w = buffer.variable {name = "w"} : memref<4x8xf32>
// CHECK-NEXT:    %c = buffer.constant {value = dense<[1, 2, 3]> : tensor<3xi32>} : memref<3xi32>
// CHECK-NEXT:  }

// -----

// Host transfers, kernels with and without inputs, copies.

buffer.program @compute on "cpu" {
  %x = buffer.alloc : memref<4x8xf32>
  buffer.input %x {index = 0 : i64} : memref<4x8xf32>
  %w = buffer.variable {name = "w"} : memref<8x2xf32>
  %y = buffer.alloc : memref<4x2xf32>
  buffer.kernel "matmul" ins(%x, %w : memref<4x8xf32>, memref<8x2xf32>) outs(%y : memref<4x2xf32>) {transpose_a = false, transpose_b = false}
  %z = buffer.alloc : memref<4x2xf32>
  buffer.kernel "fill" outs(%z : memref<4x2xf32>) {value = 0.0 : f32}
  buffer.copy %y, %z : memref<4x2xf32>, memref<4x2xf32>
  buffer.output %z {index = 0 : i64} : memref<4x2xf32>
}

// CHECK-LABEL: buffer.program @compute on "cpu" {
// CHECK-NEXT:    %x = buffer.alloc : memref<4x8xf32>
// CHECK-NEXT:    buffer.input %x {index = 0 : i64} : memref<4x8xf32>
// CHECK-NEXT:    %w = buffer.variable {name = "w"} : memref<8x2xf32>
// CHECK-NEXT:    %y = buffer.alloc : memref<4x2xf32>
// CHECK-NEXT:    buffer.kernel "matmul" ins(%x, %w : memref<4x8xf32>, memref<8x2xf32>) outs(%y : memref<4x2xf32>) {transpose_a = false, transpose_b = false}
// CHECK-NEXT:    %z = buffer.alloc : memref<4x2xf32>
// CHECK-NEXT:    buffer.kernel "fill" outs(%z : memref<4x2xf32>) {value = 0.000000e+00 : f32}
// CHECK-NEXT:    buffer.copy %y, %z : memref<4x2xf32>, memref<4x2xf32>
// CHECK-NEXT:    buffer.output %z {index = 0 : i64} : memref<4x2xf32>
// CHECK-NEXT:  }
// The kernel name and its parameters are properties, so no parameter name can
// collide with them; the segment sizes split the operands into ins and outs.
// CHECK-GENERIC: "buffer.kernel"(%x, %w, %y) <{kernel = "matmul", operandSegmentSizes = array<i32: 2, 1>, params = {transpose_a = false, transpose_b = false}}> : (memref<4x8xf32>, memref<8x2xf32>, memref<4x2xf32>) -> ()
// CHECK-GENERIC: "buffer.kernel"(%z) <{kernel = "fill", operandSegmentSizes = array<i32: 0, 1>, params = {value = 0.000000e+00 : f32}}> : (memref<4x2xf32>) -> ()

// -----

// Collectives over a group of ranks, and point-to-point transfers.

buffer.program @collectives on "gpu" {
  %a = buffer.alloc : memref<4x8xf32>
  %b = buffer.alloc : memref<4x8xf32>
  %g = buffer.alloc : memref<8x8xf32>
  %s = buffer.alloc : memref<2x8xf32>
  %t = buffer.alloc : memref<8x4xf32>
  buffer.all_reduce %a, %b {mesh = array<i64: 2, 2>, mesh_axis = 1 : i64, reduction = "sum"} : memref<4x8xf32>, memref<4x8xf32>
  buffer.all_gather %a, %g {mesh = array<i64: 2>, mesh_axis = 0 : i64, axis = 0 : i64} : memref<4x8xf32>, memref<8x8xf32>
  buffer.reduce_scatter %a, %s {mesh = array<i64: 2>, mesh_axis = 0 : i64, axis = 0 : i64, reduction = "max"} : memref<4x8xf32>, memref<2x8xf32>
  buffer.all_to_all %a, %t {mesh = array<i64: 2>, mesh_axis = 0 : i64, split_axis = 1 : i64, concat_axis = 0 : i64} : memref<4x8xf32>, memref<8x4xf32>
  buffer.broadcast %a, %b {mesh = array<i64: 2>, mesh_axis = 0 : i64, root = 0 : i64} : memref<4x8xf32>, memref<4x8xf32>
  buffer.reduce %a, %b {mesh = array<i64: 2>, mesh_axis = 0 : i64, root = 1 : i64, reduction = "min"} : memref<4x8xf32>, memref<4x8xf32>
  buffer.send %a {peer = 1 : i64} : memref<4x8xf32>
  buffer.recv %b {peer = 0 : i64} : memref<4x8xf32> loc("model.py":9:2)
  buffer.transfer %a, %t {logical_shape = array<i64: 8, 8>, src_sbp = #job.nd_sbp<[split(0)]>, src_placement = #job.placement<gpu, ["0:0-1"]>, sbp = #job.nd_sbp<[split(1)]>, placement = #job.placement<gpu, ["0:1-2"]>} : memref<4x8xf32>, memref<8x4xf32>
}

// CHECK-LABEL: buffer.program @collectives on "gpu" {
// CHECK-NEXT:    %a = buffer.alloc : memref<4x8xf32>
// CHECK-NEXT:    %b = buffer.alloc : memref<4x8xf32>
// CHECK-NEXT:    %g = buffer.alloc : memref<8x8xf32>
// CHECK-NEXT:    %s = buffer.alloc : memref<2x8xf32>
// CHECK-NEXT:    %t = buffer.alloc : memref<8x4xf32>
// CHECK-NEXT:    buffer.all_reduce %a, %b {mesh = array<i64: 2, 2>, mesh_axis = 1 : i64, reduction = "sum"} : memref<4x8xf32>, memref<4x8xf32>
// CHECK-NEXT:    buffer.all_gather %a, %g {axis = 0 : i64, mesh = array<i64: 2>, mesh_axis = 0 : i64} : memref<4x8xf32>, memref<8x8xf32>
// CHECK-NEXT:    buffer.reduce_scatter %a, %s {axis = 0 : i64, mesh = array<i64: 2>, mesh_axis = 0 : i64, reduction = "max"} : memref<4x8xf32>, memref<2x8xf32>
// CHECK-NEXT:    buffer.all_to_all %a, %t {concat_axis = 0 : i64, mesh = array<i64: 2>, mesh_axis = 0 : i64, split_axis = 1 : i64} : memref<4x8xf32>, memref<8x4xf32>
// CHECK-NEXT:    buffer.broadcast %a, %b {mesh = array<i64: 2>, mesh_axis = 0 : i64, root = 0 : i64} : memref<4x8xf32>, memref<4x8xf32>
// CHECK-NEXT:    buffer.reduce %a, %b {mesh = array<i64: 2>, mesh_axis = 0 : i64, reduction = "min", root = 1 : i64} : memref<4x8xf32>, memref<4x8xf32>
// CHECK-NEXT:    buffer.send %a {peer = 1 : i64} : memref<4x8xf32>
// CHECK-NEXT:    buffer.recv %b {peer = 0 : i64} : memref<4x8xf32>
// CHECK-NEXT:    buffer.transfer %a, %t {logical_shape = array<i64: 8, 8>, placement = #job.placement<gpu, ["0:1-2"]>, sbp = #job.nd_sbp<[split(1)]>, src_placement = #job.placement<gpu, ["0:0-1"]>, src_sbp = #job.nd_sbp<[split(0)]>} : memref<4x8xf32>, memref<8x4xf32>
// CHECK-NEXT:  }

// -----

// Dynamic sizes (docs/dynamic.md): an input's actual rows, a constant size, a cut of a buffer planned at the
// bound, checks, counts, each device's rows summed and gathered, sizes added (a concatenation's) or
// scaled (a reshape's rows regrouped) and a subview of a cut along one axis (a concatenation's gradient).

buffer.program @dynamic on "cpu" {
  %n = buffer.input_dim {index = 0 : i64, axis = 0 : i64} : index
  %m = buffer.input_dim {index = 1 : i64, axis = 0 : i64} : index
  %k = buffer.const_size {value = 2 : i64} : index
  %x = buffer.alloc : memref<100x8xf32>
  %xn = buffer.cut %x, %n : (memref<100x8xf32>, index) -> memref<?x8xf32>
  buffer.input %xn {index = 0 : i64} : memref<?x8xf32>
  buffer.assert_same_size %n, %m {what = "job.add: operand #0 axis 0 and operand #1 axis 0"} : index, index
  %c = buffer.alloc : memref<f32>
  buffer.store_size %c, %n {factor = 8 : i64} : memref<f32>, index
  %s = buffer.sum_sizes %n {mesh = array<i64: 4>, mesh_axis = 0 : i64} : index -> index
  %g = buffer.alloc : memref<400x8xf32>
  %gs = buffer.cut %g, %s : (memref<400x8xf32>, index) -> memref<?x8xf32>
  buffer.all_gather %xn, %gs {axis = 0 : i64, mesh = array<i64: 4>, mesh_axis = 0 : i64} : memref<?x8xf32>, memref<?x8xf32>
  %t = buffer.add_sizes %n, %m {constant = 2 : i64} : index, index -> index
  %r = buffer.scale_size %t {multiplier = 3 : i64, divisor = 2 : i64, what = "job.reshape: operand #0 axis 0, rows of 3 regrouped into rows of 2"} : index -> index
  %q = buffer.slice_size %t {start = 1 : i64, stop = 6 : i64, step = 2 : i64} : index -> index
  %p = buffer.subview %gs, %n, %m {axis = 0 : i64} : (memref<?x8xf32>, index, index) -> memref<?x8xf32>
}

// CHECK-LABEL: buffer.program @dynamic on "cpu" {
// CHECK-NEXT:    %n = buffer.input_dim {axis = 0 : i64, index = 0 : i64} : index
// CHECK-NEXT:    %m = buffer.input_dim {axis = 0 : i64, index = 1 : i64} : index
// CHECK-NEXT:    %k = buffer.const_size {value = 2 : i64} : index
// CHECK-NEXT:    %x = buffer.alloc : memref<100x8xf32>
// CHECK-NEXT:    %xn = buffer.cut %x, %n : (memref<100x8xf32>, index) -> memref<?x8xf32>
// CHECK-NEXT:    buffer.input %xn {index = 0 : i64} : memref<?x8xf32>
// CHECK-NEXT:    buffer.assert_same_size %n, %m {what = "job.add: operand #0 axis 0 and operand #1 axis 0"} : index, index
// CHECK-NEXT:    %c = buffer.alloc : memref<f32>
// CHECK-NEXT:    buffer.store_size %c, %n {factor = 8 : i64} : memref<f32>, index
// CHECK-NEXT:    %s = buffer.sum_sizes %n {mesh = array<i64: 4>, mesh_axis = 0 : i64} : index -> index
// CHECK-NEXT:    %g = buffer.alloc : memref<400x8xf32>
// CHECK-NEXT:    %gs = buffer.cut %g, %s : (memref<400x8xf32>, index) -> memref<?x8xf32>
// CHECK-NEXT:    buffer.all_gather %xn, %gs {axis = 0 : i64, mesh = array<i64: 4>, mesh_axis = 0 : i64} : memref<?x8xf32>, memref<?x8xf32>
// CHECK-NEXT:    %t = buffer.add_sizes %n, %m {constant = 2 : i64} : index, index -> index
// CHECK-NEXT:    %r = buffer.scale_size %t {divisor = 2 : i64, multiplier = 3 : i64, what = "job.reshape: operand #0 axis 0, rows of 3 regrouped into rows of 2"} : index -> index
// CHECK-NEXT:    %q = buffer.slice_size %t {start = 1 : i64, step = 2 : i64, stop = 6 : i64} : index -> index
// CHECK-NEXT:    %p = buffer.subview %gs, %n, %m {axis = 0 : i64} : (memref<?x8xf32>, index, index) -> memref<?x8xf32>
// CHECK-NEXT:  }
