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
