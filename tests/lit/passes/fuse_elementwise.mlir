// RUN: irflow-opt %s --split-input-file -p fuse-elementwise | filecheck %s

// conv2d -> bias_add -> relu becomes one conv2d with the bias as a third input
// and the epilogue as an attribute; dense's bias_add -> relu becomes
// bias_add_relu. The intermediates' allocs are gone.

buffer.program @convnet on "cpu" {
  %x = buffer.alloc : memref<2x1x6x6xf32>
  buffer.input %x {index = 0 : i64} : memref<2x1x6x6xf32>
  %w = buffer.variable {name = "w", initializer = {kind = "zeros"}} : memref<4x1x3x3xf32>
  %b = buffer.variable {name = "b", initializer = {kind = "zeros"}} : memref<4xf32>
  %c = buffer.alloc : memref<2x4x4x4xf32>
  buffer.kernel "conv2d" ins(%x, %w : memref<2x1x6x6xf32>, memref<4x1x3x3xf32>) outs(%c : memref<2x4x4x4xf32>) {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>}
  %t = buffer.alloc : memref<2x4x4x4xf32>
  buffer.kernel "bias_add" ins(%c, %b : memref<2x4x4x4xf32>, memref<4xf32>) outs(%t : memref<2x4x4x4xf32>) {axis = 1 : i64}
  %r = buffer.alloc : memref<2x4x4x4xf32>
  buffer.kernel "relu" ins(%t : memref<2x4x4x4xf32>) outs(%r : memref<2x4x4x4xf32>)
  %f = buffer.alloc : memref<2x64xf32>
  buffer.kernel "reshape" ins(%r : memref<2x4x4x4xf32>) outs(%f : memref<2x64xf32>)
  %v = buffer.variable {name = "v", initializer = {kind = "zeros"}} : memref<8x64xf32>
  %vb = buffer.variable {name = "vb", initializer = {kind = "zeros"}} : memref<8xf32>
  %h = buffer.alloc : memref<2x8xf32>
  buffer.kernel "matmul" ins(%f, %v : memref<2x64xf32>, memref<8x64xf32>) outs(%h : memref<2x8xf32>) {transpose_b = true}
  %hb = buffer.alloc : memref<2x8xf32>
  buffer.kernel "bias_add" ins(%h, %vb : memref<2x8xf32>, memref<8xf32>) outs(%hb : memref<2x8xf32>) {axis = 1 : i64}
  %y = buffer.alloc : memref<2x8xf32>
  buffer.kernel "relu" ins(%hb : memref<2x8xf32>) outs(%y : memref<2x8xf32>)
  buffer.output %y {index = 0 : i64} : memref<2x8xf32>
}

// CHECK-LABEL: buffer.program @convnet on "cpu" {
// CHECK-NOT:     %c = buffer.alloc
// CHECK-NOT:     %t = buffer.alloc
// CHECK:         %r = buffer.alloc : memref<2x4x4x4xf32>
// CHECK-NEXT:    buffer.kernel "conv2d" ins(%x, %w, %b : memref<2x1x6x6xf32>, memref<4x1x3x3xf32>, memref<4xf32>) outs(%r : memref<2x4x4x4xf32>) {epilogue = "bias_add_relu", pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>}
// CHECK-NEXT:    %f = buffer.alloc
// CHECK-NEXT:    buffer.kernel "reshape"
// CHECK:         %h = buffer.alloc : memref<2x8xf32>
// CHECK-NEXT:    buffer.kernel "matmul" ins(%f, %v : memref<2x64xf32>, memref<8x64xf32>) outs(%h : memref<2x8xf32>) {transpose_b = true}
// CHECK-NEXT:    %y = buffer.alloc : memref<2x8xf32>
// CHECK-NEXT:    buffer.kernel "bias_add_relu" ins(%h, %vb : memref<2x8xf32>, memref<8xf32>) outs(%y : memref<2x8xf32>) {axis = 1 : i64}
// CHECK-NEXT:    buffer.output %y

// -----

// No fusion when the intermediate has another reader (%t is returned), when the
// bias is not along the channel axis, or when an op in between overwrites what
// the first kernel read (the update of %b before the relu).

buffer.program @kept on "cpu" {
  %x = buffer.alloc : memref<2x3xf32>
  buffer.input %x {index = 0 : i64} : memref<2x3xf32>
  %b = buffer.variable {name = "b", initializer = {kind = "zeros"}} : memref<3xf32>
  %t = buffer.alloc : memref<2x3xf32>
  buffer.kernel "bias_add" ins(%x, %b : memref<2x3xf32>, memref<3xf32>) outs(%t : memref<2x3xf32>) {axis = 1 : i64}
  %r = buffer.alloc : memref<2x3xf32>
  buffer.kernel "relu" ins(%t : memref<2x3xf32>) outs(%r : memref<2x3xf32>)
  buffer.output %t {index = 0 : i64} : memref<2x3xf32>
  buffer.output %r {index = 1 : i64} : memref<2x3xf32>
  %img = buffer.alloc : memref<1x2x3x3xf32>
  buffer.input %img {index = 1 : i64} : memref<1x2x3x3xf32>
  %w = buffer.variable {name = "w", initializer = {kind = "zeros"}} : memref<3x2x1x1xf32>
  %c = buffer.alloc : memref<1x3x3x3xf32>
  buffer.kernel "conv2d" ins(%img, %w : memref<1x2x3x3xf32>, memref<3x2x1x1xf32>) outs(%c : memref<1x3x3x3xf32>)
  %cb = buffer.alloc : memref<1x3x3x3xf32>
  buffer.kernel "bias_add" ins(%c, %b : memref<1x3x3x3xf32>, memref<3xf32>) outs(%cb : memref<1x3x3x3xf32>) {axis = 3 : i64}
  buffer.output %cb {index = 2 : i64} : memref<1x3x3x3xf32>
  %u = buffer.alloc : memref<2x3xf32>
  buffer.kernel "bias_add" ins(%x, %b : memref<2x3xf32>, memref<3xf32>) outs(%u : memref<2x3xf32>) {axis = 1 : i64}
  %g = buffer.alloc : memref<3xf32>
  buffer.input %g {index = 2 : i64} : memref<3xf32>
  %lr = buffer.alloc : memref<f32>
  buffer.input %lr {index = 3 : i64} : memref<f32>
  buffer.kernel "sgd_update" ins(%b, %g, %lr : memref<3xf32>, memref<3xf32>, memref<f32>) outs(%b : memref<3xf32>)
  %ur = buffer.alloc : memref<2x3xf32>
  buffer.kernel "relu" ins(%u : memref<2x3xf32>) outs(%ur : memref<2x3xf32>)
  buffer.output %ur {index = 3 : i64} : memref<2x3xf32>
}

// CHECK-LABEL: buffer.program @kept on "cpu" {
// CHECK:         buffer.kernel "bias_add" ins(%x, %b
// CHECK:         buffer.kernel "relu" ins(%t
// CHECK:         buffer.kernel "conv2d" ins(%img, %w : memref<1x2x3x3xf32>, memref<3x2x1x1xf32>) outs(%c
// CHECK:         buffer.kernel "bias_add" ins(%c, %b {{.*}}{axis = 3 : i64}
// CHECK:         buffer.kernel "bias_add" ins(%x, %b {{.*}} outs(%u
// CHECK:         buffer.kernel "sgd_update"
// CHECK:         buffer.kernel "relu" ins(%u
// CHECK-NOT:     bias_add_relu
// CHECK-NOT:     epilogue

// -----

// relu_grad of a max-pool gradient by the pool's own input is absorbed into
// max_pool2d_grad; by any other tensor it stays.

buffer.program @poolgrad on "cpu" {
  %dy = buffer.alloc : memref<1x2x2x2xf32>
  buffer.input %dy {index = 0 : i64} : memref<1x2x2x2xf32>
  %x = buffer.alloc : memref<1x2x4x4xf32>
  buffer.input %x {index = 1 : i64} : memref<1x2x4x4xf32>
  %y = buffer.alloc : memref<1x2x2x2xf32>
  buffer.input %y {index = 2 : i64} : memref<1x2x2x2xf32>
  %d = buffer.alloc : memref<1x2x4x4xf32>
  buffer.kernel "max_pool2d_grad" ins(%dy, %x, %y : memref<1x2x2x2xf32>, memref<1x2x4x4xf32>, memref<1x2x2x2xf32>) outs(%d : memref<1x2x4x4xf32>) {strides = array<i64: 2, 2>}
  %dx = buffer.alloc : memref<1x2x4x4xf32>
  buffer.kernel "relu_grad" ins(%d, %x : memref<1x2x4x4xf32>, memref<1x2x4x4xf32>) outs(%dx : memref<1x2x4x4xf32>)
  buffer.output %dx {index = 0 : i64} : memref<1x2x4x4xf32>
  %e = buffer.alloc : memref<1x2x4x4xf32>
  buffer.kernel "max_pool2d_grad" ins(%dy, %x, %y : memref<1x2x2x2xf32>, memref<1x2x4x4xf32>, memref<1x2x2x2xf32>) outs(%e : memref<1x2x4x4xf32>) {strides = array<i64: 2, 2>}
  %ex = buffer.alloc : memref<1x2x4x4xf32>
  buffer.kernel "relu_grad" ins(%e, %dx : memref<1x2x4x4xf32>, memref<1x2x4x4xf32>) outs(%ex : memref<1x2x4x4xf32>)
  buffer.output %ex {index = 1 : i64} : memref<1x2x4x4xf32>
}

// CHECK-LABEL: buffer.program @poolgrad on "cpu" {
// CHECK-NOT:     %d = buffer.alloc
// CHECK:         %dx = buffer.alloc : memref<1x2x4x4xf32>
// CHECK-NEXT:    buffer.kernel "max_pool2d_grad" ins(%dy, %x, %y : memref<1x2x2x2xf32>, memref<1x2x4x4xf32>, memref<1x2x2x2xf32>) outs(%dx : memref<1x2x4x4xf32>) {epilogue = "relu_grad", strides = array<i64: 2, 2>}
// CHECK-NEXT:    buffer.output %dx
// CHECK-NEXT:    %e = buffer.alloc
// CHECK-NEXT:    buffer.kernel "max_pool2d_grad" {{.*}} outs(%e : memref<1x2x4x4xf32>) {strides = array<i64: 2, 2>}
// CHECK-NEXT:    %ex = buffer.alloc
// CHECK-NEXT:    buffer.kernel "relu_grad" ins(%e, %dx

// -----

// A weight gradient's matmul takes the update that alone reads it as its
// epilogue: inputs a, b, then the update's without the gradient; outputs the
// update's. The learning rate computed in between is read where the update
// stood. A gradient that is also returned keeps its update apart, and so does
// one whose matmul input is overwritten before the update (%h by the copy).

buffer.program @updates on "cpu" {
  %dy = buffer.alloc : memref<4x2xf32>
  buffer.input %dy {index = 0 : i64} : memref<4x2xf32>
  %h = buffer.alloc : memref<4x3xf32>
  buffer.input %h {index = 1 : i64} : memref<4x3xf32>
  %h2 = buffer.alloc : memref<4x3xf32>
  buffer.input %h2 {index = 2 : i64} : memref<4x3xf32>
  %w = buffer.variable {name = "w", initializer = {kind = "zeros"}} : memref<2x3xf32>
  %m = buffer.variable {name = "w-momentum", initializer = {kind = "zeros"}} : memref<2x3xf32>
  %v = buffer.variable {name = "v", initializer = {kind = "zeros"}} : memref<2x3xf32>
  %u = buffer.variable {name = "u", initializer = {kind = "zeros"}} : memref<2x3xf32>
  %w_grad = buffer.alloc : memref<2x3xf32>
  buffer.kernel "matmul" ins(%dy, %h : memref<4x2xf32>, memref<4x3xf32>) outs(%w_grad : memref<2x3xf32>) {transpose_a = true}
  %v_grad = buffer.alloc : memref<2x3xf32>
  buffer.kernel "matmul" ins(%dy, %h : memref<4x2xf32>, memref<4x3xf32>) outs(%v_grad : memref<2x3xf32>) {transpose_a = true}
  buffer.output %v_grad {index = 0 : i64} : memref<2x3xf32>
  %u_grad = buffer.alloc : memref<2x3xf32>
  buffer.kernel "matmul" ins(%dy, %h : memref<4x2xf32>, memref<4x3xf32>) outs(%u_grad : memref<2x3xf32>) {transpose_a = true}
  %lr = buffer.alloc : memref<f32>
  buffer.kernel "fill" outs(%lr : memref<f32>) {value = 1.000000e-01 : f64}
  buffer.kernel "momentum_update" ins(%w, %w_grad, %m, %lr : memref<2x3xf32>, memref<2x3xf32>, memref<2x3xf32>, memref<f32>) outs(%w, %m : memref<2x3xf32>, memref<2x3xf32>) {beta = 9.000000e-01 : f64, weight_decay = 0.000000e+00 : f64}
  buffer.kernel "sgd_update" ins(%v, %v_grad, %lr : memref<2x3xf32>, memref<2x3xf32>, memref<f32>) outs(%v : memref<2x3xf32>) {weight_decay = 0.000000e+00 : f64}
  buffer.copy %h2, %h : memref<4x3xf32>, memref<4x3xf32>
  buffer.kernel "sgd_update" ins(%u, %u_grad, %lr : memref<2x3xf32>, memref<2x3xf32>, memref<f32>) outs(%u : memref<2x3xf32>) {weight_decay = 0.000000e+00 : f64}
}

// CHECK-LABEL: buffer.program @updates on "cpu" {
// CHECK-NOT:     %w_grad = buffer.alloc
// CHECK:         %v_grad = buffer.alloc
// CHECK:         %u_grad = buffer.alloc
// CHECK:         buffer.kernel "fill" outs(%lr
// CHECK-NEXT:    buffer.kernel "matmul" ins(%dy, %h, %w, %m, %lr : memref<4x2xf32>, memref<4x3xf32>, memref<2x3xf32>, memref<2x3xf32>, memref<f32>) outs(%w, %m : memref<2x3xf32>, memref<2x3xf32>) {beta = 9.000000e-01 : f64, epilogue = "momentum_update", transpose_a = true, weight_decay = 0.000000e+00 : f64}
// CHECK-NEXT:    buffer.kernel "sgd_update" ins(%v, %v_grad, %lr
// CHECK-NEXT:    buffer.copy
// CHECK-NEXT:    buffer.kernel "sgd_update" ins(%u, %u_grad, %lr
