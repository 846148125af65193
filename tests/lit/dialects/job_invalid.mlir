// RUN: irflow-opt %s --split-input-file --verify-diagnostics

// One case per verifier message of dialects/job.py and dialects/sbp.py (the
// ones that text can reach): each is reported at its op, on the line its
// `expected-error` annotation names (checked by --verify-diagnostics).
// sbp.py also checks "only split takes an axis" and "takes no reduction kind",
// which its own syntax cannot express, and job.py "must end with job.return",
// which the terminator check reports first.

// Axis out of range.

job.func @f(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'job.softmax' op softmax axis 2 out of range for rank 2}}
  %r = job.softmax %x {axis = 2 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  job.return
}

// -----

// Shapes that do not broadcast.

job.func @f(%x: tensor<4x8xf32>, %y: tensor<3xf32>) {
  // expected-error@+1 {{'job.add' op shapes (4, 8) and (3,) do not broadcast}}
  %r = job.add %x, %y : (tensor<4x8xf32>, tensor<3xf32>) -> tensor<4x8xf32>
  job.return
}

// -----

// Unary ops need floats.

job.func @f(%x: tensor<4xi32>) {
  // expected-error@+1 {{'job.relu' op operand must be a floating-point tensor, got tensor<4xi32>}}
  %r = job.relu %x : (tensor<4xi32>) -> tensor<4xi32>
  job.return
}

// -----

// atan2 needs floats (floor_mod takes integers too).

job.func @f(%x: tensor<4xi32>, %y: tensor<4xi32>) {
  // expected-error@+1 {{'job.atan2' op operand must be a floating-point tensor, got tensor<4xi32>}}
  %r = job.atan2 %x, %y : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  job.return
}

// -----

// top_k's k within its axis.

job.func @f(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'job.top_k' op top_k needs 1 <= k <= 8, the size of axis 1, got k = 9}}
  %r = job.top_k %x {axis = 1 : i64, k = 9 : i64} : (tensor<4x8xf32>) -> tensor<4x9xi32>
  job.return
}

// -----

// arg_sort's indices are int32, one per entry.

job.func @f(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'job.arg_sort' op}}
  %r = job.arg_sort %x {axis = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xi64>
  job.return
}

// -----

// fake_quantization's scale: one value, or one per entry of axis 0.

job.func @f(%x: tensor<4x8xf32>, %s: tensor<8xf32>) {
  // expected-error@+1 {{'job.fake_quantization' op fake_quantization's scale tensor<8xf32> and zero_point tensor<8xf32> must both hold one value or one per entry of axis 0 of x tensor<4x8xf32>}}
  %r = job.fake_quantization %x, %s, %s : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  job.return
}

// -----

// ctc_loss's blank is one of the classes.

job.func @f(%lp: tensor<6x2x4xf32>, %t: tensor<2x3xi64>, %n: tensor<2xi64>) {
  // expected-error@+1 {{'job.ctc_loss' op job.ctc_loss's blank 4 is not one of the 4 classes}}
  %r = job.ctc_loss %lp, %t, %n, %n {blank = 4 : i64} : (tensor<6x2x4xf32>, tensor<2x3xi64>, tensor<2xi64>, tensor<2xi64>) -> tensor<2xf32>
  job.return
}

// -----

// Mixed element types.

job.func @f(%x: tensor<4x8xf32>, %y: tensor<4x8xf64>) {
  // expected-error@+1 {{'job.add' op operands must share one element type, got tensor<4x8xf32>, tensor<4x8xf64>}}
  %r = job.add %x, %y : (tensor<4x8xf32>, tensor<4x8xf64>) -> tensor<4x8xf32>
  job.return
}

// -----

// A result type that is not the inferred one.

job.func @f(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'job.relu' op result type tensor<8x4xf32> does not match the inferred tensor<4x8xf32>}}
  %r = job.relu %x : (tensor<4x8xf32>) -> tensor<8x4xf32>
  job.return
}

// -----

// Variables need static shapes.

job.func @f() {
  // expected-error@+1 {{'job.variable' op result must be a statically shaped tensor without empty dimensions, got tensor<?x4xf32>}}
  %v = job.variable {name = "v", initializer = {kind = "zeros"}} : tensor<?x4xf32>
  job.return
}

// -----

// Activation gradients take matching operands.

job.func @f(%x: tensor<4x8xf32>, %y: tensor<8x4xf32>) {
  // expected-error@+1 {{'job.relu_grad' op gradient and saved value differ: tensor<4x8xf32> vs tensor<8x4xf32>}}
  %r = job.relu_grad %x, %y : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x8xf32>
  job.return
}

// -----

// A constant of another type.

job.func @f() {
  // expected-error@+1 {{'job.constant' op constant of type tensor<2xf32> cannot produce tensor<3xf32>}}
  %c = job.constant {value = dense<1.0> : tensor<2xf32>} : tensor<3xf32>
  job.return
}

// -----

// Dropout rate outside [0, 1).

job.func @f() {
  // expected-error@+1 {{'job.dropout_mask' op dropout rate must be in [0, 1), got 1.5}}
  %m = job.dropout_mask {rate = 1.5 : f64, seed = 1 : i64} : tensor<4x8xf32>
  job.return
}

// -----

// Uniform draws are float32 or float64.

job.func @f() {
  // expected-error@+1 {{'job.random_uniform' op uniform draws are float32 or float64, got tensor<4xf16>}}
  %u = job.random_uniform {seed = 1 : i64} : tensor<4xf16>
  job.return
}

// -----

// A permutation is rank 1 and int32.

job.func @f() {
  // expected-error@+1 {{'job.random_permutation' op a permutation is a rank-1 int32 tensor, got tensor<4xi64>}}
  %p = job.random_permutation {seed = 1 : i64} : tensor<4xi64>
  job.return
}

// -----

// Bernoulli's draws, probabilities and samples share one shape.

job.func @f(%u: tensor<4xf32>, %p: tensor<5xf32>) {
  // expected-error@+1 {{'job.bernoulli' op draws, probabilities and samples differ in shape: tensor<4xf32>, tensor<5xf32> -> tensor<5xi8>}}
  %b = job.bernoulli %u, %p : (tensor<4xf32>, tensor<5xf32>) -> tensor<5xi8>
  job.return
}

// -----

// Bernoulli's probabilities are floats.

job.func @f(%u: tensor<4xf32>, %p: tensor<4xi32>) {
  // expected-error@+1 {{'job.bernoulli' op probability must be a floating-point tensor, got tensor<4xi32>}}
  %b = job.bernoulli %u, %p : (tensor<4xf32>, tensor<4xi32>) -> tensor<4xi32>
  job.return
}

// -----

// Cast changes the shape.

job.func @f(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'job.cast' op cast keeps the shape: tensor<4x8xf32> -> tensor<8x4xf16>}}
  %r = job.cast %x : (tensor<4x8xf32>) -> tensor<8x4xf16>
  job.return
}

// -----

// Bias of the wrong length.

job.func @f(%x: tensor<4x8xf32>, %b: tensor<4xf32>) {
  // expected-error@+1 {{'job.bias_add' op bias of shape (4,) does not match dimension 1 of input (4, 8)}}
  %r = job.bias_add %x, %b : (tensor<4x8xf32>, tensor<4xf32>) -> tensor<4x8xf32>
  job.return
}

// -----

// Reshape to another element count.

job.func @f(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'job.reshape' op cannot reshape tensor<4x8xf32> to tensor<31xf32>}}
  %r = job.reshape %x : (tensor<4x8xf32>) -> tensor<31xf32>
  job.return
}

// -----

// Perm that is not a permutation.

job.func @f(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'job.transpose' op perm [0, 0] is not a permutation of the 2 axes of (4, 8)}}
  %r = job.transpose %x {perm = array<i64: 0, 0>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  job.return
}

// -----

// Broadcast_to a smaller shape.

job.func @f(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'job.broadcast_to' op cannot broadcast tensor<4x8xf32> to tensor<8xf32>}}
  %r = job.broadcast_to %x : (tensor<4x8xf32>) -> tensor<8xf32>
  job.return
}

// -----

// Concat of nothing.

job.func @f() {
  // expected-error@+1 {{'job.concat' op concat needs at least one input}}
  %r = job.concat {axis = 0 : i64} : () -> tensor<4x8xf32>
  job.return
}

// -----

// Concat of shapes that differ off the axis.

job.func @f(%x: tensor<4x8xf32>, %y: tensor<4x2xf32>) {
  // expected-error@+1 {{'job.concat' op concat along axis 0: shapes (4, 8) and (4, 2) differ elsewhere}}
  %r = job.concat %x, %y {axis = 0 : i64} : (tensor<4x8xf32>, tensor<4x2xf32>) -> tensor<4x8xf32>
  job.return
}

// -----

// Slice bounds of the wrong rank.

job.func @f(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'job.slice' op slice of rank-2 tensor needs start/stop/step of that length}}
  %r = job.slice %x {start = array<i64: 0>, stop = array<i64: 2>, step = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<2xf32>
  job.return
}

// -----

// Slice out of range.

job.func @f(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'job.slice' op slice [0:5:1] is out of range for dimension of size 4}}
  %r = job.slice %x {start = array<i64: 0, 0>, stop = array<i64: 5, 8>, step = array<i64: 1, 1>} : (tensor<4x8xf32>) -> tensor<5x8xf32>
  job.return
}

// -----

// Slice_grad of the wrong shape.

job.func @f(%dy: tensor<2x8xf32>) {
  // expected-error@+1 {{'job.slice_grad' op slice of tensor<4x8xf32> does not have the gradient's shape tensor<2x8xf32>}}
  %r = job.slice_grad %dy {start = array<i64: 0, 0>, stop = array<i64: 3, 8>, step = array<i64: 1, 1>} : (tensor<2x8xf32>) -> tensor<4x8xf32>
  job.return
}

// -----

// Matmul of rank 1.

job.func @f(%x: tensor<8xf32>) {
  // expected-error@+1 {{'job.matmul' op matmul needs rank >= 2 operands with equal batch dims, got (8,) x (8,)}}
  %r = job.matmul %x, %x : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  job.return
}

// -----

// Matmul contraction mismatch.

job.func @f(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'job.matmul' op matmul contraction mismatch: (4, 8) x (4, 8) (8 != 4)}}
  %r = job.matmul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  job.return
}

// -----

// Reduce_max_grad with unreduced dy.

job.func @f(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'job.reduce_max_grad' op reduce_max_grad: dy and y must have the reduced shape (4,)}}
  %r = job.reduce_max_grad %x, %x, %x {axes = array<i64: 1>} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  job.return
}

// -----

// Reduce_min_grad with a y of the wrong shape.

job.func @f(%x: tensor<4x8xf32>, %y: tensor<4xf32>) {
  // expected-error@+1 {{'job.reduce_min_grad' op reduce_min_grad: dy and y must have the reduced shape (8,)}}
  %r = job.reduce_min_grad %x, %x, %y {axes = array<i64: 0>} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<4x8xf32>
  job.return
}

// -----

// Logits of rank 3.

job.func @f(%l: tensor<2x4x8xf32>, %y: tensor<2xi32>) {
  // expected-error@+1 {{'job.sparse_softmax_cross_entropy' op logits must be (batch, classes), got tensor<2x4x8xf32>}}
  %r = job.sparse_softmax_cross_entropy %l, %y : (tensor<2x4x8xf32>, tensor<2xi32>) -> tensor<2xf32>
  job.return
}

// -----

// Float sparse labels.

job.func @f(%l: tensor<4x8xf32>, %y: tensor<4xf32>) {
  // expected-error@+1 {{'job.sparse_softmax_cross_entropy' op sparse labels must be int32/int64 of shape (4,), got tensor<4xf32>}}
  %r = job.sparse_softmax_cross_entropy %l, %y : (tensor<4x8xf32>, tensor<4xf32>) -> tensor<4xf32>
  job.return
}

// -----

// Dense labels of another shape.

job.func @f(%l: tensor<4x8xf32>, %y: tensor<4x2xf32>) {
  // expected-error@+1 {{'job.softmax_cross_entropy' op dense labels must match logits tensor<4x8xf32>, got tensor<4x2xf32>}}
  %r = job.softmax_cross_entropy %l, %y : (tensor<4x8xf32>, tensor<4x2xf32>) -> tensor<4xf32>
  job.return
}

// -----

// A loss gradient of the wrong shape.

job.func @f(%d: tensor<3xf32>, %l: tensor<4x8xf32>, %y: tensor<4xi32>) {
  // expected-error@+1 {{'job.sparse_softmax_cross_entropy_grad' op loss gradient must be tensor<4xf32>, got tensor<3xf32>}}
  %r = job.sparse_softmax_cross_entropy_grad %d, %l, %y : (tensor<3xf32>, tensor<4x8xf32>, tensor<4xi32>) -> tensor<4x8xf32>
  job.return
}

// -----

// Strides of one int.

job.func @f(%x: tensor<1x1x4x4xf32>, %w: tensor<1x1x3x3xf32>) {
  // expected-error@+1 {{'job.conv2d' op strides must be two positive ints, got [1]}}
  %r = job.conv2d %x, %w {strides = array<i64: 1>, pads = array<i64: 0, 0, 0, 0>} : (tensor<1x1x4x4xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x2x2xf32>
  job.return
}

// -----

// Negative pads.

job.func @f(%x: tensor<1x1x4x4xf32>, %w: tensor<1x1x3x3xf32>) {
  // expected-error@+1 {{'job.conv2d' op pads must be four non-negative ints (top, bottom, left, right), got [0, 0, 0, -1]}}
  %r = job.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, -1>} : (tensor<1x1x4x4xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x2x2xf32>
  job.return
}

// -----

// Zero dilations.

job.func @f(%x: tensor<1x1x4x4xf32>, %w: tensor<1x1x3x3xf32>) {
  // expected-error@+1 {{'job.conv2d' op dilations must be two positive ints, got [0, 1]}}
  %r = job.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 0, 1>} : (tensor<1x1x4x4xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x2x2xf32>
  job.return
}

// -----

// Conv input that is not NCHW.

job.func @f(%x: tensor<4x4xf32>, %w: tensor<1x1x3x3xf32>) {
  // expected-error@+1 {{'job.conv2d' op input must be NCHW (rank 4), got tensor<4x4xf32>}}
  %r = job.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>} : (tensor<4x4xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x2x2xf32>
  job.return
}

// -----

// Channels that do not match the weight.

job.func @f(%x: tensor<1x2x4x4xf32>, %w: tensor<1x3x3x3xf32>) {
  // expected-error@+1 {{'job.conv2d' op conv2d: input has 2 channels, weight expects 3 per group x 1 groups (weight (1, 3, 3, 3))}}
  %r = job.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>} : (tensor<1x2x4x4xf32>, tensor<1x3x3x3xf32>) -> tensor<1x1x2x2xf32>
  job.return
}

// -----

// A window larger than the input.

job.func @f(%x: tensor<1x1x2x2xf32>, %w: tensor<1x1x3x3xf32>) {
  // expected-error@+1 {{'job.conv2d' op conv2d window 3x3 does not fit the padded input 2x2}}
  %r = job.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>} : (tensor<1x1x2x2xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x1x1xf32>
  job.return
}

// -----

// Conv2d_grad_input of the wrong shape.

job.func @f(%dy: tensor<1x1x3x3xf32>, %w: tensor<1x1x3x3xf32>) {
  // expected-error@+1 {{'job.conv2d_grad_input' op conv2d of tensor<1x1x4x4xf32> does not produce the gradient's shape tensor<1x1x3x3xf32>}}
  %r = job.conv2d_grad_input %dy, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>} : (tensor<1x1x3x3xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x4x4xf32>
  job.return
}

// -----

// Conv2d_grad_input (flow.nn.conv2d_transpose) of mixed element types.

job.func @f(%dy: tensor<1x1x3x3xf32>, %w: tensor<1x1x3x3xf64>) {
  // expected-error@+1 {{'job.conv2d_grad_input' op conv2d_grad_input operands and result must share one element type, got tensor<1x1x3x3xf32>, tensor<1x1x3x3xf64>, tensor<1x1x5x5xf32>}}
  %r = job.conv2d_grad_input %dy, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>} : (tensor<1x1x3x3xf32>, tensor<1x1x3x3xf64>) -> tensor<1x1x5x5xf32>
  job.return
}

// -----

// Conv2d_grad_filter of the wrong shape.

job.func @f(%dy: tensor<1x1x3x3xf32>, %x: tensor<1x1x4x4xf32>) {
  // expected-error@+1 {{'job.conv2d_grad_filter' op conv2d with weight tensor<1x1x3x3xf32> does not produce the gradient's shape tensor<1x1x3x3xf32>}}
  %r = job.conv2d_grad_filter %dy, %x {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>} : (tensor<1x1x3x3xf32>, tensor<1x1x4x4xf32>) -> tensor<1x1x3x3xf32>
  job.return
}

// -----

// Pool kernel of three ints.

job.func @f(%x: tensor<1x1x4x4xf32>) {
  // expected-error@+1 {{'job.max_pool2d' op pool kernel must be two positive ints, got [2, 2, 2]}}
  %r = job.max_pool2d %x {kernel = array<i64: 2, 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>} : (tensor<1x1x4x4xf32>) -> tensor<1x1x2x2xf32>
  job.return
}

// -----

// Pool window larger than the input.

job.func @f(%x: tensor<1x1x2x2xf32>) {
  // expected-error@+1 {{'job.avg_pool2d' op pool window 3x3 does not fit the padded input 2x2}}
  %r = job.avg_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>} : (tensor<1x1x2x2xf32>) -> tensor<1x1x1x1xf32>
  job.return
}

// -----

// Pool padding as large as the window.

job.func @f(%x: tensor<1x1x4x4xf32>) {
  // expected-error@+1 {{'job.max_pool2d' op pool padding [2, 0, 0, 0] must be smaller than the window [2, 2]}}
  %r = job.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 2, 0, 0, 0>} : (tensor<1x1x4x4xf32>) -> tensor<1x1x3x2xf32>
  job.return
}

// -----

// Max_pool2d_grad with dy of the input shape.

job.func @f(%x: tensor<1x1x4x4xf32>) {
  // expected-error@+1 {{'job.max_pool2d_grad' op max_pool2d_grad: dy and y must have the pooled shape (1, 1, 2, 2)}}
  %r = job.max_pool2d_grad %x, %x, %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>} : (tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  job.return
}

// -----

// Avg_pool2d_grad of the wrong shape.

job.func @f(%dy: tensor<1x1x3x3xf32>) {
  // expected-error@+1 {{'job.avg_pool2d_grad' op avg_pool2d of tensor<1x1x4x4xf32> does not produce the gradient's shape tensor<1x1x3x3xf32>}}
  %r = job.avg_pool2d_grad %dy {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>} : (tensor<1x1x3x3xf32>) -> tensor<1x1x4x4xf32>
  job.return
}

// -----

// An update with a gradient of another type.

job.func @f(%g: tensor<2xf32>, %lr: tensor<f32>) {
  %w = job.variable {name = "w", initializer = {kind = "zeros"}} : tensor<3xf32>
  // expected-error@+1 {{'job.sgd_update' op job.sgd_update: tensor<2xf32> does not match the variable tensor<3xf32>}}
  job.sgd_update %w, %g, %lr : tensor<3xf32>, tensor<2xf32>, tensor<f32>
  job.return
}

// -----

// A sparse update whose mask of present elements is not int8 of the variable's shape.

job.func @f(%g: tensor<3xf32>, %present: tensor<3xf32>, %lr: tensor<f32>) {
  %w = job.variable {name = "w", initializer = {kind = "zeros"}} : tensor<3xf32>
  // expected-error@+1 {{'job.indexed_slices_sgd_update' op job.indexed_slices_sgd_update: present must be int8 of the variable's shape tensor<3xf32>, got tensor<3xf32>}}
  job.indexed_slices_sgd_update %w, %g, %present, %lr : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>
  job.return
}

// -----

// A learning rate that is not a scalar.

job.func @f(%g: tensor<3xf32>, %lr: tensor<1xf32>) {
  %w = job.variable {name = "w", initializer = {kind = "zeros"}} : tensor<3xf32>
  // expected-error@+1 {{'job.sgd_update' op job.sgd_update: scalar operands must be rank 0, got tensor<1xf32>}}
  job.sgd_update %w, %g, %lr : tensor<3xf32>, tensor<3xf32>, tensor<1xf32>
  job.return
}

// -----

// Updating a value that is not a variable.

job.func @f(%w: tensor<3xf32>, %g: tensor<3xf32>, %lr: tensor<f32>) {
  // expected-error@+1 {{'job.sgd_update' op job.sgd_update: operand #0 must come from job.variable}}
  job.sgd_update %w, %g, %lr : tensor<3xf32>, tensor<3xf32>, tensor<f32>
  job.return
}

// -----

// Assigning a value of another type.

job.func @f(%x: tensor<2xf32>) {
  %w = job.variable {name = "w", initializer = {kind = "zeros"}} : tensor<3xf32>
  // expected-error@+1 {{'job.assign' op job.assign: value tensor<2xf32> does not match the variable tensor<3xf32>}}
  job.assign %w, %x : tensor<3xf32>, tensor<2xf32>
  job.return
}

// -----

// Minimizing an integer loss.

job.func @f(%l: tensor<i32>) {
  // expected-error@+1 {{'job.minimize' op loss must be a floating-point tensor, got tensor<i32>}}
  job.minimize %l {optimizer = {kind = "sgd"}} : tensor<i32>
  job.return
}

// -----

// Apply_gradients without pairs.

job.func @f(%g: tensor<3xf32>) {
  %w = job.variable {name = "w", initializer = {kind = "zeros"}} : tensor<3xf32>
  // expected-error@+1 {{'job.apply_gradients' op apply_gradients takes (variable, gradient) pairs}}
  job.apply_gradients %w, %g, %g {optimizer = {kind = "sgd"}} : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
  job.return
}

// -----

// Apply_gradients to a value that is not a variable.

job.func @f(%w: tensor<3xf32>, %g: tensor<3xf32>) {
  // expected-error@+1 {{'job.apply_gradients' op apply_gradients: every first operand of a pair must come from job.variable}}
  job.apply_gradients %w, %g {optimizer = {kind = "sgd"}} : tensor<3xf32>, tensor<3xf32>
  job.return
}

// -----

// Apply_gradients with a gradient of another type.

job.func @f(%g: tensor<2xf32>) {
  %w = job.variable {name = "w", initializer = {kind = "zeros"}} : tensor<3xf32>
  // expected-error@+1 {{'job.apply_gradients' op gradient tensor<2xf32> does not match its variable tensor<3xf32>}}
  job.apply_gradients %w, %g {optimizer = {kind = "sgd"}} : tensor<3xf32>, tensor<2xf32>
  job.return
}

// -----

// A job type that is neither train nor predict.

// expected-error@+1 {{'job.func' op job_type must be one of train, predict, got 'eval'}}
job.func @f() attributes {job_type = "eval"} {
  job.return
}

// -----

// Block arguments that differ from the function type (only the generic form can say so).

// expected-error@+1 {{'job.func' op block arguments do not match the function's input types}}
"job.func"() <{sym_name = "f", function_type = (tensor<2xf32>) -> (), job_type = "predict"}> ({
^bb0(%a: tensor<3xf32>):
  "job.return"() : () -> ()
}) : () -> ()

// -----

// Returned types that differ from the function's results.

// expected-error@+1 {{'job.func' op job.return types (tensor<2xf32>) do not match the function's results (tensor<3xf32>)}}
job.func @f(%x: tensor<2xf32>) -> tensor<3xf32> {
  job.return %x : tensor<2xf32>
}

// -----

// A placeholder with an empty dimension.

// expected-error@+1 {{'job.func' op placeholders need static, non-empty shapes, got tensor<0x4xf32>}}
job.func @f(%x: tensor<0x4xf32>) {
  job.return
}

// -----

// An unknown SBP kind.

// expected-error@+1 {{invalid attribute '#job.nd_sbp<[bogus]>': unknown SBP kind 'bogus', expected one of split, broadcast, partial_sum}}
%f = job.fill {value = 0.0 : f32, sbp = #job.nd_sbp<[bogus]>} : tensor<4xf32>

// -----

// An unknown partial reduction.

// expected-error@+1 {{invalid attribute '#job.nd_sbp<[partial_sum(avg)]>': unknown partial reduction 'avg', expected one of sum, max, min}}
%f = job.fill {value = 0.0 : f32, sbp = #job.nd_sbp<[partial_sum(avg)]>} : tensor<4xf32>

// -----

// An empty nd_sbp.

// expected-error@+1 {{invalid attribute '#job.nd_sbp<[]>': nd_sbp needs at least one component}}
%f = job.fill {value = 0.0 : f32, sbp = #job.nd_sbp<[]>} : tensor<4xf32>

// -----

// A malformed device range.

// expected-error@+1 {{invalid attribute '#job.placement<cpu, ["0-3"]>': bad device range '0-3', expected 'machine:first-last' such as '0:0-3'}}
%f = job.fill {value = 0.0 : f32, placement = #job.placement<cpu, ["0-3"]>} : tensor<4xf32>

// -----

// A device range that runs backwards.

// expected-error@+1 {{invalid attribute '#job.placement<cpu, ["0:3-1"]>': bad device range '0:3-1': last device 1 < first 3}}
%f = job.fill {value = 0.0 : f32, placement = #job.placement<cpu, ["0:3-1"]>} : tensor<4xf32>

// -----

// A device named twice.

// expected-error@+1 {{invalid attribute '#job.placement<cpu, ["0:0-1", "0:1"]>': device ranges ['0:0-1', '0:1'] name a device twice}}
%f = job.fill {value = 0.0 : f32, placement = #job.placement<cpu, ["0:0-1", "0:1"]>} : tensor<4xf32>

// -----

// An unknown device tag.

// expected-error@+1 {{invalid attribute '#job.placement<tpu, ["0:0"]>': unknown device tag 'tpu', expected one of cpu, gpu}}
%f = job.fill {value = 0.0 : f32, placement = #job.placement<tpu, ["0:0"]>} : tensor<4xf32>

// -----

// A placement without devices.

// expected-error@+1 {{invalid attribute '#job.placement<cpu, []>': placement needs at least one device range}}
%f = job.fill {value = 0.0 : f32, placement = #job.placement<cpu, []>} : tensor<4xf32>

// -----

// A hierarchy with a zero axis.

// expected-error@+1 {{invalid attribute '#job.placement<cpu, ["0:0-1"], hierarchy = [0, 2]>': placement hierarchy [0, 2] has a non-positive axis}}
%f = job.fill {value = 0.0 : f32, placement = #job.placement<cpu, ["0:0-1"], hierarchy = [0, 2]>} : tensor<4xf32>

// -----

// A hierarchy that does not cover the devices.

// expected-error@+1 {{invalid attribute '#job.placement<cpu, ["0:0-3"], hierarchy = [2, 3]>': placement hierarchy [2, 3] covers 6 devices, but the ranges name 4}}
%f = job.fill {value = 0.0 : f32, placement = #job.placement<cpu, ["0:0-3"], hierarchy = [2, 3]>} : tensor<4xf32>

// -----

// expected-error@+1 {{invalid attribute '#job.placement<cpu, ["0:0-99999999999"]>': device ranges ['0:0-99999999999'] name more than 65536 devices}}
%x = "test.op"() {p = #job.placement<cpu, ["0:0-99999999999"]>} : () -> tensor<4xf32>
// CHECK: name more than 65536 devices

// -----

// A reduce_scatter over a dimension the group does not divide (lower-to-physical pads first).

%a = "test.op"() : () -> tensor<5x4xf32>
// expected-error@+1 {{'job.reduce_scatter' op job.reduce_scatter: dimension 0 of tensor<5x4xf32> does not divide into 2 parts}}
%b = job.reduce_scatter %a {mesh = array<i64: 2>, mesh_axis = 0 : i64, axis = 0 : i64} : (tensor<5x4xf32>) -> tensor<2x4xf32>

// -----

// A mesh axis the mesh does not have.

%a = "test.op"() : () -> tensor<4xf32>
// expected-error@+1 {{'job.all_reduce' op job.all_reduce: mesh_axis 2 of the mesh [2, 2] is not a mesh axis}}
%b = job.all_reduce %a {mesh = array<i64: 2, 2>, mesh_axis = 2 : i64} : (tensor<4xf32>) -> tensor<4xf32>

// -----

// shard_embed of a piece that is not the chunk of its result.

%a = "test.op"() : () -> tensor<2x4xf32>
// expected-error@+1 {{'job.shard_embed' op job.shard_embed: the chunk of tensor<9x4xf32> is tensor<3x4xf32>, not tensor<2x4xf32>}}
%b = job.shard_embed %a {mesh = array<i64: 4>, mesh_axis = 0 : i64, axis = 0 : i64} : (tensor<2x4xf32>) -> tensor<9x4xf32>

// -----

// Partial sums only enter operands an op is linear in (the DTensor bugs: abs, max, x + 1 on a partial).

job.func @f(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'job.relu' op job.relu is not linear in operand 0: partial_sum input is not allowed; insert a boxing to broadcast or split}}
  %r = job.relu %x {sbp_in = [#job.nd_sbp<[partial_sum]>]} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  job.return
}

// -----

// add is linear in both operands together: a partial plus a broadcast value counts the latter p times.

job.func @f(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'job.add' op job.add is linear in operands 0 and 1 only together: partial_sum input in operand 0 alone is not allowed; insert a boxing to broadcast or split}}
  %a = job.add %x, %x {sbp_in = [#job.nd_sbp<[broadcast, partial_sum]>, #job.nd_sbp<[broadcast, broadcast]>]} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  job.return
}

// -----

// A split beyond the value's rank.

// expected-error@+1 {{'job.fill' op sbp [split(1)] splits axis 1 of a rank-1 value}}
%f = job.fill {value = 0.0 : f32, sbp = #job.nd_sbp<[split(1)]>} : tensor<4xf32>

// -----

// One SBP component per hierarchy axis.

// expected-error@+1 {{'job.fill' op sbp [split(0)] has 1 components for a placement hierarchy of 2 axes [2, 2]}}
%f = job.fill {value = 0.0 : f32, sbp = #job.nd_sbp<[split(0)]>, placement = #job.placement<cpu, ["0:0-3"], hierarchy = [2, 2]>} : tensor<4xf32>

// -----

// sbp_in: one per operand.

job.func @f(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'job.neg' op sbp_in needs one #job.nd_sbp per operand (1), got []}}
  %r = job.neg %x {sbp_in = []} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  job.return
}

// -----

// A boxing names its target.

job.func @f(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'job.boxing' op job.boxing needs the target sbp}}
  %b = job.boxing %x {src_sbp = #job.nd_sbp<[split(0)]>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  job.return
}

// -----

// A transfer's operand is the source piece of its logical value.

job.func @f(%x: tensor<5x4xf32>) {
  // expected-error@+1 {{'job.transfer' op job.transfer: its operand should be the source piece tensor<2x4xf32>, got tensor<5x4xf32>}}
  %y = job.transfer %x {logical_shape = array<i64: 5, 4>, src_sbp = #job.nd_sbp<[split(0)]>, src_placement = #job.placement<cpu, ["0:0-3"]>, sbp = #job.nd_sbp<[broadcast]>, placement = #job.placement<cpu, ["0:4-5"]>} : (tensor<5x4xf32>) -> tensor<5x4xf32>
  job.return
}

// -----

// Partial sums are reduced or made before a transfer, never carried by it.

job.func @f(%x: tensor<5x4xf32>) {
  // expected-error@+1 {{'job.transfer' op a transfer moves whole or split values, not sbp #job.nd_sbp<[partial_sum]>}}
  %y = job.transfer %x {logical_shape = array<i64: 5, 4>, src_sbp = #job.nd_sbp<[broadcast]>, src_placement = #job.placement<cpu, ["0:0-3"]>, sbp = #job.nd_sbp<[partial_sum]>, placement = #job.placement<cpu, ["0:4-5"]>} : (tensor<5x4xf32>) -> tensor<5x4xf32>
  job.return
}

// -----

// A class-split stage's logits are one device's chunk of the classes.

job.func @f(%x: tensor<6x2xf32>) {
  // expected-error@+1 {{'job.class_split_max' op job.class_split_max: logits tensor<6x2xf32> are not a chunk of 10 classes over 4 devices}}
  %m = job.class_split_max %x {mesh = array<i64: 4>, mesh_axis = 0 : i64, classes = 10 : i64} : (tensor<6x2xf32>) -> tensor<6xf32>
  job.return
}

// -----

// where selects by an integer condition, between branches of one element type.

job.func @f(%c: tensor<4xf32>, %x: tensor<4xf32>, %y: tensor<4xf64>) {
  // expected-error@+1 {{'job.where' op where's condition must be an integer tensor (nonzero selects x), got tensor<4xf32>}}
  %r = job.where %c, %x, %x : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  job.return
}

// -----

job.func @f(%c: tensor<4xi8>, %x: tensor<4xf32>, %y: tensor<4xf64>) {
  // expected-error@+1 {{'job.where' op where's x and y must share one element type, got tensor<4xf32>, tensor<4xf64>}}
  %r = job.where %c, %x, %y : (tensor<4xi8>, tensor<4xf32>, tensor<4xf64>) -> tensor<4xf32>
  job.return
}

// -----

// gather indexes with int32/int64 only, and its gradient has the type of params.

job.func @f(%x: tensor<4x8xf32>, %i: tensor<3xi8>) {
  // expected-error@+1 {{'job.gather' op gather indices must be int32/int64, got tensor<3xi8>}}
  %r = job.gather %x, %i : (tensor<4x8xf32>, tensor<3xi8>) -> tensor<3x8xf32>
  job.return
}

// -----

job.func @f(%dy: tensor<3x8xf32>, %i: tensor<3xi32>) {
  // expected-error@+1 {{'job.gather_grad' op gather of tensor<4x8xf32> at indices tensor<3xi32> does not have the gradient's type tensor<3x8xf32>}}
  %r = job.gather_grad %dy, %i {axis = 1 : i64} : (tensor<3x8xf32>, tensor<3xi32>) -> tensor<4x8xf32>
  job.return
}

// -----

// batch_dims: the batch axes come before the gathered one and are equal in params and indices.

job.func @f(%x: tensor<4x8xf32>, %i: tensor<3x2xi32>) {
  // expected-error@+1 {{'job.gather' op gather with batch_dims 1 needs that many leading axes of params tensor<4x8xf32> and indices tensor<3x2xi32> equal, before the gathered axis 1}}
  %r = job.gather %x, %i {axis = 1 : i64, batch_dims = 1 : i64} : (tensor<4x8xf32>, tensor<3x2xi32>) -> tensor<4x2xf32>
  job.return
}

// -----

job.func @f(%x: tensor<4x8xf32>, %i: tensor<4x2xi32>) {
  // expected-error@+1 {{'job.gather' op gather with batch_dims 1 needs that many leading axes of params tensor<4x8xf32> and indices tensor<4x2xi32> equal, before the gathered axis 0}}
  %r = job.gather %x, %i {batch_dims = 1 : i64} : (tensor<4x8xf32>, tensor<4x2xi32>) -> tensor<2x8xf32>
  job.return
}

// -----

// reduce_prod's gradient takes dy of the reduced shape.

job.func @f(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'job.reduce_prod_grad' op reduce_prod_grad: dy must be tensor<4xf32>, got tensor<4x8xf32>}}
  %r = job.reduce_prod_grad %x, %x {axes = array<i64: 1>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  job.return
}

// -----

// dim_gather's index has input's shape but along dim.

job.func @f(%x: tensor<4x8xf32>, %i: tensor<3x2xi32>) {
  // expected-error@+1 {{'job.dim_gather' op dim_gather index tensor<3x2xi32> must have the shape of input tensor<4x8xf32> but along dim 1}}
  %r = job.dim_gather %x, %i {dim = 1 : i64} : (tensor<4x8xf32>, tensor<3x2xi32>) -> tensor<3x2xf32>
  job.return
}

// -----

// gather_nd's indices end in an axis of 1 to rank(params) coordinates.

job.func @f(%x: tensor<4x8xf32>, %i: tensor<3x3xi32>) {
  // expected-error@+1 {{'job.gather_nd' op gather_nd indices tensor<3x3xi32> need a last axis of 1 to 2 coordinates of params tensor<4x8xf32>}}
  %r = job.gather_nd %x, %i : (tensor<4x8xf32>, tensor<3x3xi32>) -> tensor<3xf32>
  job.return
}

// -----

// An OFRecord field decodes to one of the raw decoder's dtypes.

job.func @f() {
  // expected-error@+1 {{'job.ofrecord_decode' op ofrecord_decode gives float32, float64, int8, int32, int64 or uint8, got tensor<4xf16>}}
  %bad = job.ofrecord_decode {reader = "r", data_dir = "/d", data_part_num = 1 : i64, part_name_prefix = "part-", part_name_suffix_length = -1 : i64, random_shuffle = false, shuffle_buffer_size = 1024 : i64, shuffle_after_epoch = false, field = "x", truncate = false} : tensor<4xf16>
  job.return
}

// -----

// tensor_scatter_nd's updates are the slices gather_nd would take from params there.

job.func @f(%x: tensor<4x8xf32>, %i: tensor<3x1xi32>, %u: tensor<3x4xf32>) {
  // expected-error@+1 {{'job.tensor_scatter_nd_add' op gather_nd of params tensor<4x8xf32> at indices tensor<3x1xi32> does not have the updates' type tensor<3x4xf32>}}
  %r = job.tensor_scatter_nd_add %x, %i, %u : (tensor<4x8xf32>, tensor<3x1xi32>, tensor<3x4xf32>) -> tensor<4x8xf32>
  job.return
}

// -----

// A piece's norms are of the piece its layout gives: 5 rows over 2 devices are pieces of 3.

job.func @f(%w: tensor<2x4xf32>, %g: tensor<2x4xf32>) {
  // expected-error@+1 {{'job.lars_norms' op job.lars_norms: tensor<2x4xf32> is not the piece (3, 4) of the variable's layout}}
  %n = job.lars_norms %w, %g {layout = #job.nd_sbp<[split(0)]>, logical_shape = array<i64: 5, 4>, mesh = array<i64: 2>} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2xf32>
  job.return
}

// -----

// A piece's norms read the variable's moments at its type and the step as a scalar, as the update does.

job.func @f(%w: tensor<3x4xf32>, %g: tensor<3x4xf32>, %m: tensor<3x5xf32>, %s: tensor<i64>) {
  // expected-error@+1 {{'job.lamb_norms' op job.lamb_norms: tensor<3x5xf32> does not match the variable tensor<3x4xf32>}}
  %n = job.lamb_norms %w, %g, %m, %g, %s {layout = #job.nd_sbp<[split(0)]>, logical_shape = array<i64: 5, 4>, mesh = array<i64: 2>, beta1 = 0.9 : f64, beta2 = 0.99 : f64, epsilon = 1.0e-3 : f64} : (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x5xf32>, tensor<3x4xf32>, tensor<i64>) -> tensor<2xf32>
  job.return
}

// -----

job.func @f(%w: tensor<3x4xf32>, %g: tensor<3x4xf32>, %s: tensor<1xi64>) {
  // expected-error@+1 {{'job.lamb_norms' op job.lamb_norms: scalar operands must be rank 0, got tensor<1xi64>}}
  %n = job.lamb_norms %w, %g, %g, %g, %s {layout = #job.nd_sbp<[split(0)]>, logical_shape = array<i64: 5, 4>, mesh = array<i64: 2>, beta1 = 0.9 : f64, beta2 = 0.99 : f64, epsilon = 1.0e-3 : f64} : (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<1xi64>) -> tensor<2xf32>
  job.return
}

// -----

// A LARS update's norms are the two squared norms, in the variable's element type.

job.func @f(%g: tensor<3xf32>, %lr: tensor<f32>, %n: tensor<2xf64>) {
  %w = job.variable {name = "w", initializer = {kind = "zeros"}} : tensor<3xf32>
  %m = job.variable {name = "w-momentum", initializer = {kind = "zeros"}, trainable = false} : tensor<3xf32>
  // expected-error@+1 {{'job.lars_update' op job.lars_update: norms must be tensor<2xf32>, got tensor<2xf64>}}
  job.lars_update %w, %g, %m, %lr, %n {momentum_beta = 0.9 : f64, epsilon = 1.0e-09 : f64, lars_coefficient = 1.0e-04 : f64} : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<2xf64>
  job.return
}
