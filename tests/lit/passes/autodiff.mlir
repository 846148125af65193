// RUN: irflow-opt %s --split-input-file -p autodiff | filecheck %s
// RUN: irflow-opt %s --split-input-file -p autodiff --print-debuginfo | filecheck %s --check-prefix=LOC
// RUN: irflow-opt %s --split-input-file -p autodiff | irflow-opt --split-input-file | filecheck %s

// A dense layer: the backward ops follow the forward ones, job.minimize becomes
// job.apply_gradients over (variable, gradient) pairs, and every gradient op
// carries the location of the forward op it differentiates.

job.func @dense(%x: tensor<4x3xf32>) -> tensor<f32> attributes {job_type = "train"} {
  %w = job.variable {name = "w", initializer = {kind = "constant", value = 0.0}} : tensor<3x2xf32>
  %b = job.variable {name = "b", initializer = {kind = "constant", value = 0.0}} : tensor<2xf32>
  %y = job.matmul %x, %w : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32> loc("model.py":5:8)
  %z = job.bias_add %y, %b : (tensor<4x2xf32>, tensor<2xf32>) -> tensor<4x2xf32> loc("model.py":6:8)
  %r = job.relu %z : (tensor<4x2xf32>) -> tensor<4x2xf32> loc("model.py":7:8)
  %l = job.reduce_mean %r {axes = array<i64: 0, 1>} : (tensor<4x2xf32>) -> tensor<f32> loc("model.py":8:8)
  job.minimize %l {optimizer = {kind = "sgd", momentum = 0.0, lr = {kind = "piecewise_constant", boundaries = array<i64>, values = array<f64: 0.1>}}} : tensor<f32> loc("model.py":9:4)
  job.return %l : tensor<f32>
}

// CHECK-LABEL: job.func @dense
// CHECK:         %l = job.reduce_mean %r
// CHECK-NEXT:    %l_grad = job.fill {value = 1.000000e+00 : f64} : tensor<f32>
// CHECK-NEXT:    %[[SCALE:.*]] = job.fill {value = 1.250000e-01 : f64} : tensor<f32>
// CHECK-NEXT:    %[[MEAN:.*]] = job.mul %l_grad, %[[SCALE]] : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK-NEXT:    %[[KEPT:.*]] = job.reshape %[[MEAN]] : (tensor<f32>) -> tensor<1x1xf32>
// CHECK-NEXT:    %r_grad = job.broadcast_to %[[KEPT]] : (tensor<1x1xf32>) -> tensor<4x2xf32>
// CHECK-NEXT:    %z_grad = job.relu_grad %r_grad, %r : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
// CHECK-NEXT:    %b_grad = job.reduce_sum %z_grad {axes = array<i64: 0>} : (tensor<4x2xf32>) -> tensor<2xf32>
// CHECK-NEXT:    %w_grad = job.matmul %x, %z_grad {transpose_a = true} : (tensor<4x3xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
// CHECK-NEXT:    job.apply_gradients %w, %w_grad, %b, %b_grad {optimizer = {kind = "sgd", lr = {boundaries = array<i64>, kind = "piecewise_constant", values = array<f64: 1.000000e-01>}, momentum = 0.000000e+00 : f64}} : tensor<3x2xf32>, tensor<3x2xf32>, tensor<2xf32>, tensor<2xf32>
// CHECK-NEXT:    job.return %l : tensor<f32>
// CHECK-NOT:     job.minimize

// LOC-LABEL: job.func @dense
// LOC:         %l_grad = job.fill {{.*}} loc("model.py":9:4)
// LOC:         %r_grad = job.broadcast_to {{.*}} loc("model.py":8:8)
// LOC-NEXT:    %z_grad = job.relu_grad {{.*}} loc("model.py":7:8)
// LOC-NEXT:    %b_grad = job.reduce_sum {{.*}} loc("model.py":6:8)
// LOC-NEXT:    %w_grad = job.matmul {{.*}} loc("model.py":5:8)
// LOC-NEXT:    job.apply_gradients {{.*}} loc("model.py":9:4)

// -----

// A non-scalar loss is minimized through its mean: the seed is 1/numel.
// Broadcast operands get their gradient summed over the broadcast axes.

job.func @broadcast(%x: tensor<2x3xf32>) -> tensor<2x3xf32> attributes {job_type = "train"} {
  %row = job.variable {name = "row", initializer = {kind = "constant", value = 0.0}} : tensor<3xf32>
  %col = job.variable {name = "col", initializer = {kind = "constant", value = 0.0}} : tensor<2x1xf32>
  %a = job.mul %x, %row : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %l = job.sub %a, %col : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
  job.minimize %l {optimizer = {kind = "sgd", lr = {kind = "piecewise_constant", boundaries = array<i64>, values = array<f64: 0.1>}}} : tensor<2x3xf32>
  job.return %l : tensor<2x3xf32>
}

// CHECK-LABEL: job.func @broadcast
// CHECK:         %l_grad = job.fill {value = 0.16666666666666666 : f64} : tensor<2x3xf32>
// CHECK-NEXT:    %[[SUM:.*]] = job.reduce_sum %l_grad {axes = array<i64: 1>} : (tensor<2x3xf32>) -> tensor<2xf32>
// CHECK-NEXT:    %[[KEEP:.*]] = job.reshape %[[SUM]] : (tensor<2xf32>) -> tensor<2x1xf32>
// CHECK-NEXT:    %col_grad = job.neg %[[KEEP]] : (tensor<2x1xf32>) -> tensor<2x1xf32>
// CHECK-NEXT:    %[[PROD:.*]] = job.mul %l_grad, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %row_grad = job.reduce_sum %[[PROD]] {axes = array<i64: 0>} : (tensor<2x3xf32>) -> tensor<3xf32>
// CHECK-NEXT:    job.apply_gradients %row, %row_grad, %col, %col_grad

// -----

// Fan-out: a value used twice gets the sum of both gradients (job.add).
// Gradients stop at non-trainable variables, integer values, argmax and
// comparisons.

job.func @fanout(%x: tensor<3x4xf32>) -> tensor<f32> attributes {job_type = "train"} {
  %w = job.variable {name = "w", initializer = {kind = "constant", value = 0.0}} : tensor<3x4xf32>
  %frozen = job.variable {name = "frozen", trainable = false, initializer = {kind = "constant", value = 0.0}} : tensor<3x4xf32>
  %e = job.exp %w : (tensor<3x4xf32>) -> tensor<3x4xf32>
  %m = job.mul %e, %w : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %f = job.mul %m, %frozen : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %i = job.argmax %w : (tensor<3x4xf32>) -> tensor<3xi64>
  %c = job.cast %i : (tensor<3xi64>) -> tensor<3xf32>
  %s = job.reduce_sum %f {axes = array<i64: 1>} : (tensor<3x4xf32>) -> tensor<3xf32>
  %t = job.add %s, %c : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %l = job.reduce_sum %t {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
  job.minimize %l {optimizer = {kind = "sgd", lr = {kind = "piecewise_constant", boundaries = array<i64>, values = array<f64: 0.1>}}} : tensor<f32>
  job.return %l : tensor<f32>
}

// CHECK-LABEL: job.func @fanout
// CHECK:         %l_grad = job.fill {value = 1.000000e+00 : f64} : tensor<f32>
// CHECK-NEXT:    %[[K:.*]] = job.reshape %l_grad : (tensor<f32>) -> tensor<1xf32>
// CHECK-NEXT:    %t_grad = job.broadcast_to %[[K]] : (tensor<1xf32>) -> tensor<3xf32>
// CHECK-NEXT:    %[[K2:.*]] = job.reshape %t_grad : (tensor<3xf32>) -> tensor<3x1xf32>
// CHECK-NEXT:    %f_grad = job.broadcast_to %[[K2]] : (tensor<3x1xf32>) -> tensor<3x4xf32>
// CHECK-NEXT:    %m_grad = job.mul %f_grad, %frozen
// CHECK-NEXT:    %e_grad = job.mul %m_grad, %w
// CHECK-NEXT:    %w_grad = job.mul %m_grad, %e
// CHECK-NEXT:    %[[DEXP:.*]] = job.mul %e_grad, %e
// CHECK-NEXT:    %w_grad_1 = job.add %w_grad, %[[DEXP]]
// CHECK-NEXT:    job.apply_gradients %w, %w_grad_1 {{.*}} : tensor<3x4xf32>, tensor<3x4xf32>
// CHECK-NOT:     job.argmax

// -----

// Shape ops: transpose takes the inverse permutation, concat's gradient is
// slices, slice's is slice_grad, reshape reshapes back.

job.func @shapes() -> tensor<f32> attributes {job_type = "train"} {
  %a = job.variable {name = "a", initializer = {kind = "constant", value = 0.0}} : tensor<2x3x4xf32>
  %b = job.variable {name = "b", initializer = {kind = "constant", value = 0.0}} : tensor<3x2xf32>
  %t = job.transpose %a {perm = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  %r = job.reshape %t : (tensor<4x2x3xf32>) -> tensor<8x3xf32>
  %bt = job.transpose %b {perm = array<i64: 1, 0>} : (tensor<3x2xf32>) -> tensor<2x3xf32>
  %c = job.concat %r, %bt {axis = 0 : i64} : (tensor<8x3xf32>, tensor<2x3xf32>) -> tensor<10x3xf32>
  %s = job.slice %c {start = array<i64: 1, 0>, stop = array<i64: 10, 3>, step = array<i64: 3, 1>} : (tensor<10x3xf32>) -> tensor<3x3xf32>
  %l = job.reduce_max %s {axes = array<i64: 0, 1>} : (tensor<3x3xf32>) -> tensor<f32>
  job.minimize %l {optimizer = {kind = "sgd", lr = {kind = "piecewise_constant", boundaries = array<i64>, values = array<f64: 0.1>}}} : tensor<f32>
  job.return %l : tensor<f32>
}

// CHECK-LABEL: job.func @shapes
// CHECK:         %s_grad = job.reduce_max_grad %l_grad, %s, %l {axes = array<i64: 0, 1>} : (tensor<f32>, tensor<3x3xf32>, tensor<f32>) -> tensor<3x3xf32>
// CHECK-NEXT:    %c_grad = job.slice_grad %s_grad {start = array<i64: 1, 0>, step = array<i64: 3, 1>, stop = array<i64: 10, 3>} : (tensor<3x3xf32>) -> tensor<10x3xf32>
// CHECK-NEXT:    %r_grad = job.slice %c_grad {start = array<i64: 0, 0>, step = array<i64: 1, 1>, stop = array<i64: 8, 3>} : (tensor<10x3xf32>) -> tensor<8x3xf32>
// CHECK-NEXT:    %bt_grad = job.slice %c_grad {start = array<i64: 8, 0>, step = array<i64: 1, 1>, stop = array<i64: 10, 3>} : (tensor<10x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %b_grad = job.transpose %bt_grad {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
// CHECK-NEXT:    %t_grad = job.reshape %r_grad : (tensor<8x3xf32>) -> tensor<4x2x3xf32>
// CHECK-NEXT:    %a_grad = job.transpose %t_grad {perm = array<i64: 1, 2, 0>} : (tensor<4x2x3xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT:    job.apply_gradients %a, %a_grad, %b, %b_grad

// -----

// reduce_min's gradient is reduce_min_grad of the min itself: ties share dy.

job.func @extrema() -> tensor<f32> attributes {job_type = "train"} {
  %w = job.variable {name = "w", initializer = {kind = "constant", value = 0.0}} : tensor<2x3xf32>
  %m = job.reduce_min %w {axes = array<i64: 1>, keepdims = true} : (tensor<2x3xf32>) -> tensor<2x1xf32>
  %l = job.reduce_sum %m {axes = array<i64: 0, 1>} : (tensor<2x1xf32>) -> tensor<f32>
  job.minimize %l {optimizer = {kind = "sgd", lr = {kind = "piecewise_constant", boundaries = array<i64>, values = array<f64: 0.1>}}} : tensor<f32>
  job.return %l : tensor<f32>
}

// CHECK-LABEL: job.func @extrema
// CHECK:         %m_grad = job.broadcast_to %{{.*}} : (tensor<1x1xf32>) -> tensor<2x1xf32>
// CHECK-NEXT:    %w_grad = job.reduce_min_grad %m_grad, %w, %m {axes = array<i64: 1>, keepdims = true} : (tensor<2x1xf32>, tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    job.apply_gradients %w, %w_grad

// -----

// A small convnet: conv2d -> conv2d_grad_input / conv2d_grad_filter, pooling
// -> its grad op, sparse cross-entropy -> its grad op (no gradient for labels).

job.func @convnet(%img: tensor<2x1x6x6xf32>, %labels: tensor<2xi64>) -> tensor<2xf32> attributes {job_type = "train"} {
  %k = job.variable {name = "k", initializer = {kind = "constant", value = 0.0}} : tensor<4x1x3x3xf32>
  %c = job.conv2d %img, %k {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>} : (tensor<2x1x6x6xf32>, tensor<4x1x3x3xf32>) -> tensor<2x4x6x6xf32>
  %p = job.max_pool2d %c {kernel = array<i64: 3, 3>, strides = array<i64: 3, 3>, pads = array<i64: 0, 0, 0, 0>} : (tensor<2x4x6x6xf32>) -> tensor<2x4x2x2xf32>
  %f = job.reshape %p : (tensor<2x4x2x2xf32>) -> tensor<2x16xf32>
  %xe = job.sparse_softmax_cross_entropy %f, %labels : (tensor<2x16xf32>, tensor<2xi64>) -> tensor<2xf32>
  job.minimize %xe {optimizer = {kind = "sgd", lr = {kind = "piecewise_constant", boundaries = array<i64>, values = array<f64: 0.1>}}} : tensor<2xf32>
  job.return %xe : tensor<2xf32>
}

// CHECK-LABEL: job.func @convnet
// CHECK:         %xe_grad = job.fill {value = 5.000000e-01 : f64} : tensor<2xf32>
// CHECK-NEXT:    %f_grad = job.sparse_softmax_cross_entropy_grad %xe_grad, %f, %labels : (tensor<2xf32>, tensor<2x16xf32>, tensor<2xi64>) -> tensor<2x16xf32>
// CHECK-NEXT:    %p_grad = job.reshape %f_grad : (tensor<2x16xf32>) -> tensor<2x4x2x2xf32>
// CHECK-NEXT:    %c_grad = job.max_pool2d_grad %p_grad, %c, %p {kernel = array<i64: 3, 3>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 3, 3>}
// CHECK-NEXT:    %k_grad = job.conv2d_grad_filter %c_grad, %img {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x6x6xf32>, tensor<2x1x6x6xf32>) -> tensor<4x1x3x3xf32>
// CHECK-NEXT:    job.apply_gradients %k, %k_grad
// CHECK-NOT:     job.conv2d_grad_input

// -----

// job.diff reads a gradient: it becomes the gradient of its operand, or zeros
// when the loss does not depend on it.

job.func @watched(%x: tensor<4x3xf32>) -> (tensor<f32>, tensor<4x2xf32>, tensor<4x3xf32>) attributes {job_type = "train"} {
  %w = job.variable {name = "w", initializer = {kind = "constant", value = 0.0}} : tensor<3x2xf32>
  %y = job.matmul %x, %w : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
  %dy = job.diff %y : (tensor<4x2xf32>) -> tensor<4x2xf32>
  %dx = job.diff %x : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %l = job.reduce_sum %y {axes = array<i64: 0, 1>} : (tensor<4x2xf32>) -> tensor<f32>
  job.minimize %l {optimizer = {kind = "sgd", lr = {kind = "piecewise_constant", boundaries = array<i64>, values = array<f64: 0.1>}}} : tensor<f32>
  job.return %l, %dy, %dx : tensor<f32>, tensor<4x2xf32>, tensor<4x3xf32>
}

// CHECK-LABEL: job.func @watched
// CHECK:         %y_grad = job.broadcast_to
// CHECK:         %[[ZEROS:.*]] = job.fill {value = 0.000000e+00 : f64} : tensor<4x3xf32>
// CHECK-NEXT:    job.apply_gradients %w, %w_grad
// CHECK-NEXT:    job.return %l, %y_grad, %[[ZEROS]] : tensor<f32>, tensor<4x2xf32>, tensor<4x3xf32>
// CHECK-NOT:     job.diff

// -----

// where: the gradient is selected, never multiplied by a mask (an inf in the
// branch not taken would give inf * 0 = NaN); y's is summed over the axes it
// was broadcast along.

job.func @select(%c: tensor<4x1xi8>) -> tensor<f32> attributes {job_type = "train"} {
  %a = job.variable {name = "a", initializer = {kind = "constant", value = 0.0}} : tensor<4x3xf32>
  %b = job.variable {name = "b", initializer = {kind = "constant", value = 0.0}} : tensor<3xf32>
  %w = job.where %c, %a, %b : (tensor<4x1xi8>, tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %l = job.reduce_sum %w {axes = array<i64: 0, 1>} : (tensor<4x3xf32>) -> tensor<f32>
  job.minimize %l {optimizer = {kind = "sgd", lr = {kind = "piecewise_constant", boundaries = array<i64>, values = array<f64: 0.1>}}} : tensor<f32>
  job.return %l : tensor<f32>
}

// CHECK-LABEL: job.func @select
// CHECK:         %[[ZERO:.*]] = job.fill {value = 0.000000e+00 : f64} : tensor<f32>
// CHECK-NEXT:    %a_grad = job.where %c, %w_grad, %[[ZERO]] : (tensor<4x1xi8>, tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
// CHECK-NEXT:    %[[TO_B:.*]] = job.where %c, %[[ZERO]], %w_grad : (tensor<4x1xi8>, tensor<f32>, tensor<4x3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT:    %b_grad = job.reduce_sum %[[TO_B]] {axes = array<i64: 0>} : (tensor<4x3xf32>) -> tensor<3xf32>
// CHECK-NEXT:    job.apply_gradients %a, %a_grad, %b, %b_grad
// CHECK-NOT:     job.mul

// -----

// gather: the gradient into params is gather_grad, a scatter-add of dy at the
// indices (which get none).

job.func @embed(%i: tensor<2x3xi32>) -> tensor<f32> attributes {job_type = "train"} {
  %e = job.variable {name = "e", initializer = {kind = "constant", value = 0.0}} : tensor<5x4xf32>
  %g = job.gather %e, %i : (tensor<5x4xf32>, tensor<2x3xi32>) -> tensor<2x3x4xf32>
  %l = job.reduce_sum %g {axes = array<i64: 0, 1, 2>} : (tensor<2x3x4xf32>) -> tensor<f32>
  job.minimize %l {optimizer = {kind = "sgd", lr = {kind = "piecewise_constant", boundaries = array<i64>, values = array<f64: 0.1>}}} : tensor<f32>
  job.return %l : tensor<f32>
}

// CHECK-LABEL: job.func @embed
// CHECK:         %e_grad = job.gather_grad %g_grad, %i : (tensor<2x3x4xf32>, tensor<2x3xi32>) -> tensor<5x4xf32>
// CHECK-NEXT:    job.apply_gradients %e, %e_grad

// -----

// gather with batch_dims: its gradient scatters within each batch entry, with
// the same axis and batch_dims.

job.func @per_row(%i: tensor<2x3xi32>) -> tensor<f32> attributes {job_type = "train"} {
  %e = job.variable {name = "e", initializer = {kind = "constant", value = 0.0}} : tensor<2x5x4xf32>
  %g = job.gather %e, %i {axis = 1 : i64, batch_dims = 1 : i64} : (tensor<2x5x4xf32>, tensor<2x3xi32>) -> tensor<2x3x4xf32>
  %l = job.reduce_sum %g {axes = array<i64: 0, 1, 2>} : (tensor<2x3x4xf32>) -> tensor<f32>
  job.minimize %l {optimizer = {kind = "sgd", lr = {kind = "piecewise_constant", boundaries = array<i64>, values = array<f64: 0.1>}}} : tensor<f32>
  job.return %l : tensor<f32>
}

// CHECK-LABEL: job.func @per_row
// CHECK:         %e_grad = job.gather_grad %g_grad, %i {axis = 1 : i64, batch_dims = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x3xi32>) -> tensor<2x5x4xf32>
// CHECK-NEXT:    job.apply_gradients %e, %e_grad

// -----

// reduce_prod: its gradient op takes x, not the product, so that zeros need no
// division (the kernel multiplies the other entries).

job.func @product() -> tensor<f32> attributes {job_type = "train"} {
  %a = job.variable {name = "a", initializer = {kind = "constant", value = 0.0}} : tensor<2x3xf32>
  %p = job.reduce_prod %a {axes = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<f32>
  job.minimize %p {optimizer = {kind = "sgd", lr = {kind = "piecewise_constant", boundaries = array<i64>, values = array<f64: 0.1>}}} : tensor<f32>
  job.return %p : tensor<f32>
}

// CHECK-LABEL: job.func @product
// CHECK:         %p_grad = job.fill {value = 1.000000e+00 : f64} : tensor<f32>
// CHECK-NEXT:    %a_grad = job.reduce_prod_grad %p_grad, %a {axes = array<i64: 0, 1>} : (tensor<f32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    job.apply_gradients %a, %a_grad

// -----

// Unary math: sin's gradient multiplies by cos of its input; floor is piecewise
// constant and passes no gradient, so only sin's reaches w.

job.func @sine(%x: tensor<4x3xf32>) -> tensor<f32> attributes {job_type = "train"} {
  %w = job.variable {name = "w", initializer = {kind = "constant", value = 0.0}} : tensor<4x3xf32>
  %s = job.sin %w : (tensor<4x3xf32>) -> tensor<4x3xf32> loc("model.py":3:8)
  %f = job.floor %w : (tensor<4x3xf32>) -> tensor<4x3xf32> loc("model.py":4:8)
  %a = job.add %s, %f : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %l = job.reduce_sum %a {axes = array<i64: 0, 1>} : (tensor<4x3xf32>) -> tensor<f32>
  job.minimize %l {optimizer = {kind = "sgd", lr = {kind = "piecewise_constant", boundaries = array<i64>, values = array<f64: 0.1>}}} : tensor<f32>
  job.return %l : tensor<f32>
}

// CHECK-LABEL: job.func @sine
// CHECK:         %a_grad = job.broadcast_to
// CHECK-NEXT:    %[[COS:.*]] = job.cos %w : (tensor<4x3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT:    %w_grad = job.mul %a_grad, %[[COS]] : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT:    job.apply_gradients %w, %w_grad
// CHECK-NOT:     job.floor

// LOC-LABEL: job.func @sine
// LOC:         job.cos {{.*}} loc("model.py":3:8)
// LOC-NEXT:    %w_grad = job.mul {{.*}} loc("model.py":3:8)

// -----

// asin's gradient divides by sqrt((1 - x)(1 + x)), never 1 - x*x, whose rounding
// loses the digits that matter near |x| = 1.

job.func @arcsine(%x: tensor<4x3xf32>) -> tensor<f32> attributes {job_type = "train"} {
  %w = job.variable {name = "w", initializer = {kind = "constant", value = 0.0}} : tensor<4x3xf32>
  %s = job.asin %w : (tensor<4x3xf32>) -> tensor<4x3xf32> loc("model.py":3:8)
  %l = job.reduce_sum %s {axes = array<i64: 0, 1>} : (tensor<4x3xf32>) -> tensor<f32>
  job.minimize %l {optimizer = {kind = "sgd", lr = {kind = "piecewise_constant", boundaries = array<i64>, values = array<f64: 0.1>}}} : tensor<f32>
  job.return %l : tensor<f32>
}

// CHECK-LABEL: job.func @arcsine
// CHECK:         %s_grad = job.broadcast_to
// CHECK-NEXT:    %[[ONE:.*]] = job.fill {value = 1.000000e+00 : f64} : tensor<f32>
// CHECK-NEXT:    %[[BELOW:.*]] = job.sub %[[ONE]], %w : (tensor<f32>, tensor<4x3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT:    %[[ABOVE:.*]] = job.add %w, %[[ONE]] : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
// CHECK-NEXT:    %[[GAP:.*]] = job.mul %[[BELOW]], %[[ABOVE]] : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT:    %[[ROOT:.*]] = job.rsqrt %[[GAP]] : (tensor<4x3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT:    %w_grad = job.mul %s_grad, %[[ROOT]] : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT:    job.apply_gradients %w, %w_grad

// LOC-LABEL: job.func @arcsine
// LOC:         job.rsqrt {{.*}} loc("model.py":3:8)

// -----

// lgamma's gradient is digamma of its input (OneFlow 0.x's kernel has none).

job.func @log_gamma(%x: tensor<4x3xf32>) -> tensor<f32> attributes {job_type = "train"} {
  %w = job.variable {name = "w", initializer = {kind = "constant", value = 0.5}} : tensor<4x3xf32>
  %g = job.lgamma %w : (tensor<4x3xf32>) -> tensor<4x3xf32> loc("model.py":4:8)
  %l = job.reduce_sum %g {axes = array<i64: 0, 1>} : (tensor<4x3xf32>) -> tensor<f32>
  job.minimize %l {optimizer = {kind = "sgd", lr = {kind = "piecewise_constant", boundaries = array<i64>, values = array<f64: 0.1>}}} : tensor<f32>
  job.return %l : tensor<f32>
}

// CHECK-LABEL: job.func @log_gamma
// CHECK:         %g_grad = job.broadcast_to
// CHECK-NEXT:    %[[PSI:.*]] = job.digamma %w : (tensor<4x3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT:    %w_grad = job.mul %g_grad, %[[PSI]] : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT:    job.apply_gradients %w, %w_grad

// LOC-LABEL: job.func @log_gamma
// LOC:         job.digamma {{.*}} loc("model.py":4:8)

// -----

// floor_mod: x's gradient passes as it is; y's is -dy * floor(x / y), summed over
// the axis y was broadcast along.

job.func @modulo(%x: tensor<4x3xf32>) -> tensor<f32> attributes {job_type = "train"} {
  %w = job.variable {name = "w", initializer = {kind = "constant", value = 1.0}} : tensor<3xf32>
  %m = job.floor_mod %x, %w : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %l = job.reduce_sum %m {axes = array<i64: 0, 1>} : (tensor<4x3xf32>) -> tensor<f32>
  job.minimize %l {optimizer = {kind = "sgd", lr = {kind = "piecewise_constant", boundaries = array<i64>, values = array<f64: 0.1>}}} : tensor<f32>
  job.return %l : tensor<f32>
}

// CHECK-LABEL: job.func @modulo
// CHECK:         %m_grad = job.broadcast_to
// CHECK-NEXT:    %[[Q:.*]] = job.div %x, %w : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT:    %[[FLOOR:.*]] = job.floor %[[Q]] : (tensor<4x3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT:    %[[T:.*]] = job.mul %m_grad, %[[FLOOR]] : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT:    %[[S:.*]] = job.reduce_sum %[[T]] {axes = array<i64: 0>} : (tensor<4x3xf32>) -> tensor<3xf32>
// CHECK-NEXT:    %w_grad = job.neg %[[S]] : (tensor<3xf32>) -> tensor<3xf32>
// CHECK-NEXT:    job.apply_gradients %w, %w_grad

// -----

// dim_gather: the gradient into input is dim_gather_grad at the same index.

job.func @pick(%i: tensor<2x3xi64>) -> tensor<f32> attributes {job_type = "train"} {
  %e = job.variable {name = "e", initializer = {kind = "constant", value = 0.0}} : tensor<2x5xf32>
  %g = job.dim_gather %e, %i {dim = 1 : i64} : (tensor<2x5xf32>, tensor<2x3xi64>) -> tensor<2x3xf32>
  %l = job.reduce_sum %g {axes = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<f32>
  job.minimize %l {optimizer = {kind = "sgd", lr = {kind = "piecewise_constant", boundaries = array<i64>, values = array<f64: 0.1>}}} : tensor<f32>
  job.return %l : tensor<f32>
}

// CHECK-LABEL: job.func @pick
// CHECK:         %e_grad = job.dim_gather_grad %g_grad, %i {dim = 1 : i64} : (tensor<2x3xf32>, tensor<2x3xi64>) -> tensor<2x5xf32>
// CHECK-NEXT:    job.apply_gradients %e, %e_grad

// -----

// gather_nd: the gradient into params is scatter_nd at the same indices.

job.func @pick_nd(%i: tensor<3x2xi32>) -> tensor<f32> attributes {job_type = "train"} {
  %e = job.variable {name = "e", initializer = {kind = "constant", value = 0.0}} : tensor<2x5x4xf32>
  %g = job.gather_nd %e, %i : (tensor<2x5x4xf32>, tensor<3x2xi32>) -> tensor<3x4xf32>
  %l = job.reduce_sum %g {axes = array<i64: 0, 1>} : (tensor<3x4xf32>) -> tensor<f32>
  job.minimize %l {optimizer = {kind = "sgd", lr = {kind = "piecewise_constant", boundaries = array<i64>, values = array<f64: 0.1>}}} : tensor<f32>
  job.return %l : tensor<f32>
}

// CHECK-LABEL: job.func @pick_nd
// CHECK:         %e_grad = job.scatter_nd %g_grad, %i : (tensor<3x4xf32>, tensor<3x2xi32>) -> tensor<2x5x4xf32>
// CHECK-NEXT:    job.apply_gradients %e, %e_grad

// -----

// tensor_scatter_nd_update: the updates' gradient is gather_nd of dy, params' is
// dy with the written slices zeroed (an update of dy with zeros); for _add, dy.

job.func @write_nd(%i: tensor<3x2xi32>) -> tensor<f32> attributes {job_type = "train"} {
  %e = job.variable {name = "e", initializer = {kind = "constant", value = 0.0}} : tensor<2x5x4xf32>
  %u = job.variable {name = "u", initializer = {kind = "constant", value = 1.0}} : tensor<3x4xf32>
  %w = job.tensor_scatter_nd_update %e, %i, %u : (tensor<2x5x4xf32>, tensor<3x2xi32>, tensor<3x4xf32>) -> tensor<2x5x4xf32>
  %l = job.reduce_sum %w {axes = array<i64: 0, 1, 2>} : (tensor<2x5x4xf32>) -> tensor<f32>
  job.minimize %l {optimizer = {kind = "sgd", lr = {kind = "piecewise_constant", boundaries = array<i64>, values = array<f64: 0.1>}}} : tensor<f32>
  job.return %l : tensor<f32>
}

// CHECK-LABEL: job.func @write_nd
// CHECK:         %[[ZERO:.*]] = job.fill {value = 0.000000e+00 : f64} : tensor<3x4xf32>
// CHECK-NEXT:    %e_grad = job.tensor_scatter_nd_update %w_grad, %i, %[[ZERO]] : (tensor<2x5x4xf32>, tensor<3x2xi32>, tensor<3x4xf32>) -> tensor<2x5x4xf32>
// CHECK-NEXT:    %u_grad = job.gather_nd %w_grad, %i : (tensor<2x5x4xf32>, tensor<3x2xi32>) -> tensor<3x4xf32>
