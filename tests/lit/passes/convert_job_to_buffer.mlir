// RUN: irflow-opt %s -p convert-job-to-buffer | filecheck %s

// Every tensor gets its own buffer; kernels take explicit outputs; inputs and
// results cross the host boundary through buffer.input / buffer.output.

job.func @mlp(%x: tensor<4x8xf32>) -> tensor<4x2xf32> attributes {job_type = "predict"} {
  %w = job.variable {name = "w", initializer = {kind = "zeros"}} : tensor<2x8xf32>
  %y = job.matmul %x, %w {transpose_b = true} : (tensor<4x8xf32>, tensor<2x8xf32>) -> tensor<4x2xf32>
  %r = job.relu %y : (tensor<4x2xf32>) -> tensor<4x2xf32>
  job.return %r : tensor<4x2xf32>
}

// CHECK-LABEL: buffer.program @mlp on "cpu" attributes {job_type = "predict"} {
// CHECK-NEXT:    %x = buffer.alloc : memref<4x8xf32>
// CHECK-NEXT:    buffer.input %x {index = 0 : i64} : memref<4x8xf32>
// CHECK-NEXT:    %w = buffer.variable {initializer = {kind = "zeros"}, name = "w", trainable = true} : memref<2x8xf32>
// CHECK-NEXT:    %y = buffer.alloc : memref<4x2xf32>
// CHECK-NEXT:    buffer.kernel "matmul" ins(%x, %w : memref<4x8xf32>, memref<2x8xf32>) outs(%y : memref<4x2xf32>) {transpose_a = false, transpose_b = true}
// CHECK-NEXT:    %r = buffer.alloc : memref<4x2xf32>
// CHECK-NEXT:    buffer.kernel "relu" ins(%y : memref<4x2xf32>) outs(%r : memref<4x2xf32>)
// CHECK-NEXT:    buffer.output %r {index = 0 : i64} : memref<4x2xf32>
// CHECK-NEXT:  }
// CHECK-NOT:   job.

// -----

// Updates write the variable in place: it is both an input and the output.

job.func @step(%g: tensor<3xf32>) attributes {job_type = "train"} {
  %w = job.variable {name = "w", initializer = {kind = "zeros"}} : tensor<3xf32>
  %lr = job.fill {value = 0.5 : f64} : tensor<f32>
  job.sgd_update %w, %g, %lr : tensor<3xf32>, tensor<3xf32>, tensor<f32>
  job.return
}

// CHECK-LABEL: buffer.program @step
// CHECK:         buffer.kernel "fill" outs(%lr : memref<f32>) {value = 5.000000e-01 : f64}
// CHECK-NEXT:    buffer.kernel "sgd_update" ins(%w, %g, %lr : memref<3xf32>, memref<3xf32>, memref<f32>) outs(%w : memref<3xf32>) {weight_decay = 0.000000e+00 : f64}

// -----

// A variable read after its update still means the value the step started
// from: the lowering snapshots it before the update writes the variable.

job.func @returns_variable(%g: tensor<3xf32>) -> tensor<3xf32> attributes {job_type = "train"} {
  %w = job.variable {name = "w", initializer = {kind = "zeros"}} : tensor<3xf32>
  %lr = job.fill {value = 0.5 : f64} : tensor<f32>
  job.sgd_update %w, %g, %lr : tensor<3xf32>, tensor<3xf32>, tensor<f32>
  job.return %w : tensor<3xf32>
}

// CHECK-LABEL: buffer.program @returns_variable
// CHECK:         buffer.kernel "fill"
// CHECK-NEXT:    %[[SNAP:[a-z_0-9]+]] = buffer.alloc : memref<3xf32>
// CHECK-NEXT:    buffer.copy %w, %[[SNAP]] : memref<3xf32>, memref<3xf32>
// CHECK-NEXT:    buffer.kernel "sgd_update" ins(%w, %g, %lr : {{.*}}) outs(%w : memref<3xf32>)
// CHECK-NEXT:    buffer.output %[[SNAP]] {index = 0 : i64} : memref<3xf32>

// -----

// Selection, indexing and products lower to kernels of the same names.

job.func @select(%c: tensor<4x1xi8>, %x: tensor<4x3xf32>, %y: tensor<3xf32>, %i: tensor<2xi64>) -> tensor<4x3xf32> attributes {job_type = "predict"} {
  %w = job.where %c, %x, %y : (tensor<4x1xi8>, tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %g = job.gather %w, %i {axis = 1 : i64} : (tensor<4x3xf32>, tensor<2xi64>) -> tensor<4x2xf32>
  %s = job.gather_grad %g, %i {axis = 1 : i64} : (tensor<4x2xf32>, tensor<2xi64>) -> tensor<4x3xf32>
  %p = job.reduce_prod %s {axes = array<i64: 0>, keepdims = true} : (tensor<4x3xf32>) -> tensor<1x3xf32>
  %pg = job.reduce_prod_grad %p, %s {axes = array<i64: 0>, keepdims = true} : (tensor<1x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  job.return %pg : tensor<4x3xf32>
}

// CHECK-LABEL: buffer.program @select
// CHECK:         %w = buffer.alloc : memref<4x3xf32>
// CHECK-NEXT:    buffer.kernel "where" ins(%c, %x, %y : memref<4x1xi8>, memref<4x3xf32>, memref<3xf32>) outs(%w : memref<4x3xf32>)
// CHECK-NEXT:    %g = buffer.alloc : memref<4x2xf32>
// CHECK-NEXT:    buffer.kernel "gather" ins(%w, %i : memref<4x3xf32>, memref<2xi64>) outs(%g : memref<4x2xf32>) {axis = 1 : i64}
// CHECK-NEXT:    %s = buffer.alloc : memref<4x3xf32>
// CHECK-NEXT:    buffer.kernel "gather_grad" ins(%g, %i : memref<4x2xf32>, memref<2xi64>) outs(%s : memref<4x3xf32>) {axis = 1 : i64}
// CHECK-NEXT:    %p = buffer.alloc : memref<1x3xf32>
// CHECK-NEXT:    buffer.kernel "reduce_prod" ins(%s : memref<4x3xf32>) outs(%p : memref<1x3xf32>) {axes = array<i64: 0>, keepdims = true}
// CHECK-NEXT:    %pg = buffer.alloc : memref<4x3xf32>
// CHECK-NEXT:    buffer.kernel "reduce_prod_grad" ins(%p, %s : memref<1x3xf32>, memref<4x3xf32>) outs(%pg : memref<4x3xf32>) {axes = array<i64: 0>, keepdims = true}
// CHECK-NEXT:    buffer.output %pg {index = 0 : i64} : memref<4x3xf32>

// -----

// A per-device job (after lower-to-physical): collectives become buffer
// collectives over the same mesh axis, rank-dependent ops become kernels that
// read the device's coordinate, and the program, its inputs, outputs and
// variables keep the logical shapes and SBP the runtime cuts and joins by.

job.func @model_parallel(%x: tensor<3x4xf32>) -> tensor<5x2xf32> attributes {job_type = "predict", mesh = array<i64: 2>, view = "consistent", arg_sbp = [#job.nd_sbp<[split(0)]>], arg_shapes = [array<i64: 5, 4>], result_sbp = [#job.nd_sbp<[broadcast]>], result_shapes = [array<i64: 5, 2>]} {
  %w = job.variable {name = "w", initializer = {kind = "zeros"}, sbp = #job.nd_sbp<[split(0)]>, logical_shape = array<i64: 4, 2>} : tensor<2x2xf32>
  %g = job.all_gather %x {mesh = array<i64: 2>, mesh_axis = 0 : i64, axis = 0 : i64, sbp = #job.nd_sbp<[broadcast]>} : (tensor<3x4xf32>) -> tensor<6x4xf32>
  %u = job.slice %g {start = array<i64: 0, 0>, stop = array<i64: 5, 4>, step = array<i64: 1, 1>, sbp = #job.nd_sbp<[broadcast]>} : (tensor<6x4xf32>) -> tensor<5x4xf32>
  %s = job.shard_slice %u {mesh = array<i64: 2>, mesh_axis = 0 : i64, axis = 1 : i64, sbp = #job.nd_sbp<[split(1)]>} : (tensor<5x4xf32>) -> tensor<5x2xf32>
  %y = job.matmul %s, %w {sbp = #job.nd_sbp<[partial_sum]>} : (tensor<5x2xf32>, tensor<2x2xf32>) -> tensor<5x2xf32>
  %r = job.all_reduce %y {mesh = array<i64: 2>, mesh_axis = 0 : i64, sbp = #job.nd_sbp<[broadcast]>} : (tensor<5x2xf32>) -> tensor<5x2xf32>
  job.return %r : tensor<5x2xf32>
}

// CHECK-LABEL: buffer.program @model_parallel on "cpu" attributes {job_type = "predict", mesh = array<i64: 2>, view = "consistent"} {
// CHECK-NEXT:    %x = buffer.alloc : memref<3x4xf32>
// CHECK-NEXT:    buffer.input %x {index = 0 : i64, logical_shape = array<i64: 5, 4>, sbp = #job.nd_sbp<[split(0)]>} : memref<3x4xf32>
// CHECK-NEXT:    %w = buffer.variable {initializer = {kind = "zeros"}, logical_shape = array<i64: 4, 2>, name = "w", sbp = #job.nd_sbp<[split(0)]>, trainable = true} : memref<2x2xf32>
// CHECK-NEXT:    %g = buffer.alloc : memref<6x4xf32>
// CHECK-NEXT:    buffer.all_gather %x, %g {axis = 0 : i64, mesh = array<i64: 2>, mesh_axis = 0 : i64} : memref<3x4xf32>, memref<6x4xf32>
// CHECK-NEXT:    %u = buffer.alloc : memref<5x4xf32>
// CHECK-NEXT:    buffer.kernel "slice" ins(%g : memref<6x4xf32>) outs(%u : memref<5x4xf32>) {start = array<i64: 0, 0>, step = array<i64: 1, 1>, stop = array<i64: 5, 4>}
// CHECK-NEXT:    %s = buffer.alloc : memref<5x2xf32>
// CHECK-NEXT:    buffer.kernel "shard_slice" ins(%u : memref<5x4xf32>) outs(%s : memref<5x2xf32>) {axis = 1 : i64, mesh = array<i64: 2>, mesh_axis = 0 : i64}
// CHECK-NEXT:    %y = buffer.alloc : memref<5x2xf32>
// CHECK-NEXT:    buffer.kernel "matmul" ins(%s, %w : memref<5x2xf32>, memref<2x2xf32>) outs(%y : memref<5x2xf32>) {transpose_a = false, transpose_b = false}
// CHECK-NEXT:    %r = buffer.alloc : memref<5x2xf32>
// CHECK-NEXT:    buffer.all_reduce %y, %r {mesh = array<i64: 2>, mesh_axis = 0 : i64, reduction = "sum"} : memref<5x2xf32>, memref<5x2xf32>
// CHECK-NEXT:    buffer.output %r {index = 0 : i64, logical_shape = array<i64: 5, 2>, sbp = #job.nd_sbp<[broadcast]>} : memref<5x2xf32>
// CHECK-NEXT:  }
