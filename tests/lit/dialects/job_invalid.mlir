// RUN: irflow-opt %s --split-input-file --verify-diagnostics | filecheck %s

// One case per verifier message of dialects/job.py and dialects/sbp.py (the
// ones that text can reach): each is reported at its op as file:line:col.
// sbp.py also checks "only split takes an axis" and "takes no reduction kind",
// which its own syntax cannot express, and job.py "must end with job.return",
// which the terminator check reports first.

// Axis out of range.

job.func @f(%x: tensor<4x8xf32>) {
  %r = job.softmax %x {axis = 2 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  job.return
}

// CHECK: error: 'job.softmax' op softmax axis 2 out of range for rank 2

// -----

// Shapes that do not broadcast.

job.func @f(%x: tensor<4x8xf32>, %y: tensor<3xf32>) {
  %r = job.add %x, %y : (tensor<4x8xf32>, tensor<3xf32>) -> tensor<4x8xf32>
  job.return
}

// CHECK: error: 'job.add' op shapes (4, 8) and (3,) do not broadcast

// -----

// Unary ops need floats.

job.func @f(%x: tensor<4xi32>) {
  %r = job.relu %x : (tensor<4xi32>) -> tensor<4xi32>
  job.return
}

// CHECK: error: 'job.relu' op operand must be a floating-point tensor, got tensor<4xi32>

// -----

// Mixed element types.

job.func @f(%x: tensor<4x8xf32>, %y: tensor<4x8xf64>) {
  %r = job.add %x, %y : (tensor<4x8xf32>, tensor<4x8xf64>) -> tensor<4x8xf32>
  job.return
}

// CHECK: error: 'job.add' op operands must share one element type, got tensor<4x8xf32>, tensor<4x8xf64>

// -----

// A result type that is not the inferred one.

job.func @f(%x: tensor<4x8xf32>) {
  %r = job.relu %x : (tensor<4x8xf32>) -> tensor<8x4xf32>
  job.return
}

// CHECK: error: 'job.relu' op result type tensor<8x4xf32> does not match the inferred tensor<4x8xf32>

// -----

// Variables need static shapes.

job.func @f() {
  %v = job.variable {name = "v", initializer = {kind = "zeros"}} : tensor<?x4xf32>
  job.return
}

// CHECK: error: 'job.variable' op result must be a statically shaped tensor

// -----

// Activation gradients take matching operands.

job.func @f(%x: tensor<4x8xf32>, %y: tensor<8x4xf32>) {
  %r = job.relu_grad %x, %y : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x8xf32>
  job.return
}

// CHECK: error: 'job.relu_grad' op gradient and saved value differ: tensor<4x8xf32> vs tensor<8x4xf32>

// -----

// A constant of another type.

job.func @f() {
  %c = job.constant {value = dense<1.0> : tensor<2xf32>} : tensor<3xf32>
  job.return
}

// CHECK: error: 'job.constant' op constant of type tensor<2xf32> cannot produce tensor<3xf32>

// -----

// Dropout rate outside [0, 1).

job.func @f() {
  %m = job.dropout_mask {rate = 1.5 : f64, seed = 1 : i64} : tensor<4x8xf32>
  job.return
}

// CHECK: error: 'job.dropout_mask' op dropout rate must be in [0, 1), got 1.5

// -----

// Cast changes the shape.

job.func @f(%x: tensor<4x8xf32>) {
  %r = job.cast %x : (tensor<4x8xf32>) -> tensor<8x4xf16>
  job.return
}

// CHECK: error: 'job.cast' op cast keeps the shape: tensor<4x8xf32> -> tensor<8x4xf16>

// -----

// Bias of the wrong length.

job.func @f(%x: tensor<4x8xf32>, %b: tensor<4xf32>) {
  %r = job.bias_add %x, %b : (tensor<4x8xf32>, tensor<4xf32>) -> tensor<4x8xf32>
  job.return
}

// CHECK: error: 'job.bias_add' op bias of shape (4,) does not match dimension 1 of input (4, 8)

// -----

// Reshape to another element count.

job.func @f(%x: tensor<4x8xf32>) {
  %r = job.reshape %x : (tensor<4x8xf32>) -> tensor<31xf32>
  job.return
}

// CHECK: error: 'job.reshape' op cannot reshape tensor<4x8xf32> to tensor<31xf32>

// -----

// Perm that is not a permutation.

job.func @f(%x: tensor<4x8xf32>) {
  %r = job.transpose %x {perm = array<i64: 0, 0>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  job.return
}

// CHECK: error: 'job.transpose' op perm [0, 0] is not a permutation of the 2 axes of (4, 8)

// -----

// Broadcast_to a smaller shape.

job.func @f(%x: tensor<4x8xf32>) {
  %r = job.broadcast_to %x : (tensor<4x8xf32>) -> tensor<8xf32>
  job.return
}

// CHECK: error: 'job.broadcast_to' op cannot broadcast tensor<4x8xf32> to tensor<8xf32>

// -----

// Concat of nothing.

job.func @f() {
  %r = job.concat {axis = 0 : i64} : () -> tensor<4x8xf32>
  job.return
}

// CHECK: error: 'job.concat' op concat needs at least one input

// -----

// Concat of shapes that differ off the axis.

job.func @f(%x: tensor<4x8xf32>, %y: tensor<4x2xf32>) {
  %r = job.concat %x, %y {axis = 0 : i64} : (tensor<4x8xf32>, tensor<4x2xf32>) -> tensor<4x8xf32>
  job.return
}

// CHECK: error: 'job.concat' op concat along axis 0: shapes (4, 8) and (4, 2) differ elsewhere

// -----

// Slice bounds of the wrong rank.

job.func @f(%x: tensor<4x8xf32>) {
  %r = job.slice %x {start = array<i64: 0>, stop = array<i64: 2>, step = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<2xf32>
  job.return
}

// CHECK: error: 'job.slice' op slice of rank-2 tensor needs start/stop/step of that length

// -----

// Slice out of range.

job.func @f(%x: tensor<4x8xf32>) {
  %r = job.slice %x {start = array<i64: 0, 0>, stop = array<i64: 5, 8>, step = array<i64: 1, 1>} : (tensor<4x8xf32>) -> tensor<5x8xf32>
  job.return
}

// CHECK: error: 'job.slice' op slice [0:5:1] is out of range for dimension of size 4

// -----

// Slice_grad of the wrong shape.

job.func @f(%dy: tensor<2x8xf32>) {
  %r = job.slice_grad %dy {start = array<i64: 0, 0>, stop = array<i64: 3, 8>, step = array<i64: 1, 1>} : (tensor<2x8xf32>) -> tensor<4x8xf32>
  job.return
}

// CHECK: error: 'job.slice_grad' op slice of tensor<4x8xf32> does not have the gradient's shape tensor<2x8xf32>

// -----

// Matmul of rank 1.

job.func @f(%x: tensor<8xf32>) {
  %r = job.matmul %x, %x : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  job.return
}

// CHECK: error: 'job.matmul' op matmul needs rank >= 2 operands with equal batch dims, got (8,) x (8,)

// -----

// Matmul contraction mismatch.

job.func @f(%x: tensor<4x8xf32>) {
  %r = job.matmul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  job.return
}

// CHECK: error: 'job.matmul' op matmul contraction mismatch: (4, 8) x (4, 8) (8 != 4)

// -----

// Reduce_max_grad with unreduced dy.

job.func @f(%x: tensor<4x8xf32>) {
  %r = job.reduce_max_grad %x, %x, %x {axes = array<i64: 1>} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  job.return
}

// CHECK: error: 'job.reduce_max_grad' op reduce_max_grad: dy and y must have the reduced shape (4,)

// -----

// Logits of rank 3.

job.func @f(%l: tensor<2x4x8xf32>, %y: tensor<2xi32>) {
  %r = job.sparse_softmax_cross_entropy %l, %y : (tensor<2x4x8xf32>, tensor<2xi32>) -> tensor<2xf32>
  job.return
}

// CHECK: error: 'job.sparse_softmax_cross_entropy' op logits must be (batch, classes), got tensor<2x4x8xf32>

// -----

// Float sparse labels.

job.func @f(%l: tensor<4x8xf32>, %y: tensor<4xf32>) {
  %r = job.sparse_softmax_cross_entropy %l, %y : (tensor<4x8xf32>, tensor<4xf32>) -> tensor<4xf32>
  job.return
}

// CHECK: error: 'job.sparse_softmax_cross_entropy' op sparse labels must be int32/int64 of shape (4,), got tensor<4xf32>

// -----

// Dense labels of another shape.

job.func @f(%l: tensor<4x8xf32>, %y: tensor<4x2xf32>) {
  %r = job.softmax_cross_entropy %l, %y : (tensor<4x8xf32>, tensor<4x2xf32>) -> tensor<4xf32>
  job.return
}

// CHECK: error: 'job.softmax_cross_entropy' op dense labels must match logits tensor<4x8xf32>, got tensor<4x2xf32>

// -----

// A loss gradient of the wrong shape.

job.func @f(%d: tensor<3xf32>, %l: tensor<4x8xf32>, %y: tensor<4xi32>) {
  %r = job.sparse_softmax_cross_entropy_grad %d, %l, %y : (tensor<3xf32>, tensor<4x8xf32>, tensor<4xi32>) -> tensor<4x8xf32>
  job.return
}

// CHECK: error: 'job.sparse_softmax_cross_entropy_grad' op loss gradient must be tensor<4xf32>, got tensor<3xf32>

// -----

// Strides of one int.

job.func @f(%x: tensor<1x1x4x4xf32>, %w: tensor<1x1x3x3xf32>) {
  %r = job.conv2d %x, %w {strides = array<i64: 1>, pads = array<i64: 0, 0, 0, 0>} : (tensor<1x1x4x4xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x2x2xf32>
  job.return
}

// CHECK: error: 'job.conv2d' op strides must be two positive ints, got [1]

// -----

// Negative pads.

job.func @f(%x: tensor<1x1x4x4xf32>, %w: tensor<1x1x3x3xf32>) {
  %r = job.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, -1>} : (tensor<1x1x4x4xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x2x2xf32>
  job.return
}

// CHECK: error: 'job.conv2d' op pads must be four non-negative ints (top, bottom, left, right), got [0, 0, 0, -1]

// -----

// Zero dilations.

job.func @f(%x: tensor<1x1x4x4xf32>, %w: tensor<1x1x3x3xf32>) {
  %r = job.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 0, 1>} : (tensor<1x1x4x4xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x2x2xf32>
  job.return
}

// CHECK: error: 'job.conv2d' op dilations must be two positive ints, got [0, 1]

// -----

// Conv input that is not NCHW.

job.func @f(%x: tensor<4x4xf32>, %w: tensor<1x1x3x3xf32>) {
  %r = job.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>} : (tensor<4x4xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x2x2xf32>
  job.return
}

// CHECK: error: 'job.conv2d' op input must be NCHW (rank 4), got tensor<4x4xf32>

// -----

// Channels that do not match the weight.

job.func @f(%x: tensor<1x2x4x4xf32>, %w: tensor<1x3x3x3xf32>) {
  %r = job.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>} : (tensor<1x2x4x4xf32>, tensor<1x3x3x3xf32>) -> tensor<1x1x2x2xf32>
  job.return
}

// CHECK: error: 'job.conv2d' op conv2d: input has 2 channels, weight expects 3 per group x 1 groups (weight (1, 3, 3, 3))

// -----

// A window larger than the input.

job.func @f(%x: tensor<1x1x2x2xf32>, %w: tensor<1x1x3x3xf32>) {
  %r = job.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>} : (tensor<1x1x2x2xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x1x1xf32>
  job.return
}

// CHECK: error: 'job.conv2d' op conv2d window 3x3 does not fit the padded input 2x2

// -----

// Conv2d_grad_input of the wrong shape.

job.func @f(%dy: tensor<1x1x3x3xf32>, %w: tensor<1x1x3x3xf32>) {
  %r = job.conv2d_grad_input %dy, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>} : (tensor<1x1x3x3xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x4x4xf32>
  job.return
}

// CHECK: error: 'job.conv2d_grad_input' op conv2d of tensor<1x1x4x4xf32> does not produce the gradient's shape tensor<1x1x3x3xf32>

// -----

// Conv2d_grad_filter of the wrong shape.

job.func @f(%dy: tensor<1x1x3x3xf32>, %x: tensor<1x1x4x4xf32>) {
  %r = job.conv2d_grad_filter %dy, %x {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>} : (tensor<1x1x3x3xf32>, tensor<1x1x4x4xf32>) -> tensor<1x1x3x3xf32>
  job.return
}

// CHECK: error: 'job.conv2d_grad_filter' op conv2d with weight tensor<1x1x3x3xf32> does not produce the gradient's shape tensor<1x1x3x3xf32>

// -----

// Pool kernel of three ints.

job.func @f(%x: tensor<1x1x4x4xf32>) {
  %r = job.max_pool2d %x {kernel = array<i64: 2, 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>} : (tensor<1x1x4x4xf32>) -> tensor<1x1x2x2xf32>
  job.return
}

// CHECK: error: 'job.max_pool2d' op pool kernel must be two positive ints, got [2, 2, 2]

// -----

// Pool window larger than the input.

job.func @f(%x: tensor<1x1x2x2xf32>) {
  %r = job.avg_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>} : (tensor<1x1x2x2xf32>) -> tensor<1x1x1x1xf32>
  job.return
}

// CHECK: error: 'job.avg_pool2d' op pool window 3x3 does not fit the padded input 2x2

// -----

// Pool padding as large as the window.

job.func @f(%x: tensor<1x1x4x4xf32>) {
  %r = job.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 2, 0, 0, 0>} : (tensor<1x1x4x4xf32>) -> tensor<1x1x3x2xf32>
  job.return
}

// CHECK: error: 'job.max_pool2d' op pool padding [2, 0, 0, 0] must be smaller than the window [2, 2]

// -----

// Max_pool2d_grad with dy of the input shape.

job.func @f(%x: tensor<1x1x4x4xf32>) {
  %r = job.max_pool2d_grad %x, %x, %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>} : (tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  job.return
}

// CHECK: error: 'job.max_pool2d_grad' op max_pool2d_grad: dy and y must have the pooled shape (1, 1, 2, 2)

// -----

// Avg_pool2d_grad of the wrong shape.

job.func @f(%dy: tensor<1x1x3x3xf32>) {
  %r = job.avg_pool2d_grad %dy {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>} : (tensor<1x1x3x3xf32>) -> tensor<1x1x4x4xf32>
  job.return
}

// CHECK: error: 'job.avg_pool2d_grad' op avg_pool2d of tensor<1x1x4x4xf32> does not produce the gradient's shape tensor<1x1x3x3xf32>

// -----

// An update with a gradient of another type.

job.func @f(%g: tensor<2xf32>, %lr: tensor<f32>) {
  %w = job.variable {name = "w", initializer = {kind = "zeros"}} : tensor<3xf32>
  job.sgd_update %w, %g, %lr : tensor<3xf32>, tensor<2xf32>, tensor<f32>
  job.return
}

// CHECK: error: 'job.sgd_update' op job.sgd_update: tensor<2xf32> does not match the variable tensor<3xf32>

// -----

// A learning rate that is not a scalar.

job.func @f(%g: tensor<3xf32>, %lr: tensor<1xf32>) {
  %w = job.variable {name = "w", initializer = {kind = "zeros"}} : tensor<3xf32>
  job.sgd_update %w, %g, %lr : tensor<3xf32>, tensor<3xf32>, tensor<1xf32>
  job.return
}

// CHECK: error: 'job.sgd_update' op job.sgd_update: scalar operands must be rank 0, got tensor<1xf32>

// -----

// Updating a value that is not a variable.

job.func @f(%w: tensor<3xf32>, %g: tensor<3xf32>, %lr: tensor<f32>) {
  job.sgd_update %w, %g, %lr : tensor<3xf32>, tensor<3xf32>, tensor<f32>
  job.return
}

// CHECK: error: 'job.sgd_update' op job.sgd_update: operand #0 must come from job.variable

// -----

// Assigning a value of another type.

job.func @f(%x: tensor<2xf32>) {
  %w = job.variable {name = "w", initializer = {kind = "zeros"}} : tensor<3xf32>
  job.assign %w, %x : tensor<3xf32>, tensor<2xf32>
  job.return
}

// CHECK: error: 'job.assign' op job.assign: value tensor<2xf32> does not match the variable tensor<3xf32>

// -----

// Minimizing an integer loss.

job.func @f(%l: tensor<i32>) {
  job.minimize %l {optimizer = {kind = "sgd"}} : tensor<i32>
  job.return
}

// CHECK: error: 'job.minimize' op loss must be a floating-point tensor, got tensor<i32>

// -----

// Apply_gradients without pairs.

job.func @f(%g: tensor<3xf32>) {
  %w = job.variable {name = "w", initializer = {kind = "zeros"}} : tensor<3xf32>
  job.apply_gradients %w, %g, %g {optimizer = {kind = "sgd"}} : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
  job.return
}

// CHECK: error: 'job.apply_gradients' op apply_gradients takes (variable, gradient) pairs

// -----

// Apply_gradients to a value that is not a variable.

job.func @f(%w: tensor<3xf32>, %g: tensor<3xf32>) {
  job.apply_gradients %w, %g {optimizer = {kind = "sgd"}} : tensor<3xf32>, tensor<3xf32>
  job.return
}

// CHECK: error: 'job.apply_gradients' op apply_gradients: every first operand of a pair must come from job.variable

// -----

// Apply_gradients with a gradient of another type.

job.func @f(%g: tensor<2xf32>) {
  %w = job.variable {name = "w", initializer = {kind = "zeros"}} : tensor<3xf32>
  job.apply_gradients %w, %g {optimizer = {kind = "sgd"}} : tensor<3xf32>, tensor<2xf32>
  job.return
}

// CHECK: error: 'job.apply_gradients' op gradient tensor<2xf32> does not match its variable tensor<3xf32>

// -----

// A job type that is neither train nor predict.

job.func @f() attributes {job_type = "eval"} {
  job.return
}

// CHECK: error: 'job.func' op job_type must be one of train, predict, got 'eval'

// -----

// Block arguments that differ from the function type (only the generic form can say so).

"job.func"() <{sym_name = "f", function_type = (tensor<2xf32>) -> (), job_type = "predict"}> ({
^bb0(%a: tensor<3xf32>):
  "job.return"() : () -> ()
}) : () -> ()

// CHECK: error: 'job.func' op block arguments do not match the function's input types

// -----

// Returned types that differ from the function's results.

job.func @f(%x: tensor<2xf32>) -> tensor<3xf32> {
  job.return %x : tensor<2xf32>
}

// CHECK: error: 'job.func' op job.return types (tensor<2xf32>) do not match the function's results (tensor<3xf32>)

// -----

// A placeholder with an empty dimension.

job.func @f(%x: tensor<0x4xf32>) {
  job.return
}

// CHECK: error: 'job.func' op placeholders need static, non-empty shapes, got tensor<0x4xf32>

// -----

// An unknown SBP kind.

%f = job.fill {value = 0.0 : f32, sbp = #job.nd_sbp<[bogus]>} : tensor<4xf32>

// CHECK: error: invalid attribute '#job.nd_sbp<[bogus]>': unknown SBP kind 'bogus', expected one of split, broadcast, partial_sum

// -----

// An unknown partial reduction.

%f = job.fill {value = 0.0 : f32, sbp = #job.nd_sbp<[partial_sum(avg)]>} : tensor<4xf32>

// CHECK: error: invalid attribute '#job.nd_sbp<[partial_sum(avg)]>': unknown partial reduction 'avg', expected one of sum, max, min

// -----

// An empty nd_sbp.

%f = job.fill {value = 0.0 : f32, sbp = #job.nd_sbp<[]>} : tensor<4xf32>

// CHECK: error: invalid attribute '#job.nd_sbp<[]>': nd_sbp needs at least one component

// -----

// A malformed device range.

%f = job.fill {value = 0.0 : f32, placement = #job.placement<cpu, ["0-3"]>} : tensor<4xf32>

// CHECK: error: invalid attribute '#job.placement<cpu, ["0-3"]>': bad device range '0-3', expected 'machine:first-last' such as '0:0-3'

// -----

// A device range that runs backwards.

%f = job.fill {value = 0.0 : f32, placement = #job.placement<cpu, ["0:3-1"]>} : tensor<4xf32>

// CHECK: error: invalid attribute '#job.placement<cpu, ["0:3-1"]>': bad device range '0:3-1': last device 1 < first 3

// -----

// A device named twice.

%f = job.fill {value = 0.0 : f32, placement = #job.placement<cpu, ["0:0-1", "0:1"]>} : tensor<4xf32>

// CHECK: error: invalid attribute '#job.placement<cpu, ["0:0-1", "0:1"]>': device ranges ['0:0-1', '0:1'] name a device twice

// -----

// An unknown device tag.

%f = job.fill {value = 0.0 : f32, placement = #job.placement<tpu, ["0:0"]>} : tensor<4xf32>

// CHECK: error: invalid attribute '#job.placement<tpu, ["0:0"]>': unknown device tag 'tpu', expected one of cpu, gpu

// -----

// A placement without devices.

%f = job.fill {value = 0.0 : f32, placement = #job.placement<cpu, []>} : tensor<4xf32>

// CHECK: error: invalid attribute '#job.placement<cpu, []>': placement needs at least one device range

// -----

// A hierarchy with a zero axis.

%f = job.fill {value = 0.0 : f32, placement = #job.placement<cpu, ["0:0-1"], hierarchy = [0, 2]>} : tensor<4xf32>

// CHECK: error: invalid attribute '#job.placement<cpu, ["0:0-1"], hierarchy = [0, 2]>': placement hierarchy [0, 2] has a non-positive axis

// -----

// A hierarchy that does not cover the devices.

%f = job.fill {value = 0.0 : f32, placement = #job.placement<cpu, ["0:0-3"], hierarchy = [2, 3]>} : tensor<4xf32>

// CHECK: error: invalid attribute '#job.placement<cpu, ["0:0-3"], hierarchy = [2, 3]>': placement hierarchy [2, 3] covers 6 devices, but the ranges name 4

// -----

%x = "test.op"() {p = #job.placement<cpu, ["0:0-99999999999"]>} : () -> tensor<4xf32>
// CHECK: name more than 65536 devices

// -----

// A reduce_scatter over a dimension the group does not divide (lower-to-physical pads first).

%a = "test.op"() : () -> tensor<5x4xf32>
%b = job.reduce_scatter %a {mesh = array<i64: 2>, mesh_axis = 0 : i64, axis = 0 : i64} : (tensor<5x4xf32>) -> tensor<2x4xf32>
// CHECK: job.reduce_scatter: dimension 0 of tensor<5x4xf32> does not divide into 2 parts

// -----

// A mesh axis the mesh does not have.

%a = "test.op"() : () -> tensor<4xf32>
%b = job.all_reduce %a {mesh = array<i64: 2, 2>, mesh_axis = 2 : i64} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK: job.all_reduce: mesh_axis 2 of the mesh [2, 2] is not a mesh axis

// -----

// shard_embed of a piece that is not the chunk of its result.

%a = "test.op"() : () -> tensor<2x4xf32>
%b = job.shard_embed %a {mesh = array<i64: 4>, mesh_axis = 0 : i64, axis = 0 : i64} : (tensor<2x4xf32>) -> tensor<9x4xf32>
// CHECK: job.shard_embed: the chunk of tensor<9x4xf32> is tensor<3x4xf32>, not tensor<2x4xf32>

// -----

// Partial sums only enter operands an op is linear in (the DTensor bugs: abs, max, x + 1 on a partial).

job.func @f(%x: tensor<4x8xf32>) {
  %r = job.relu %x {sbp_in = [#job.nd_sbp<[partial_sum]>]} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  job.return
}

// CHECK: error: 'job.relu' op job.relu is not linear in operand 0: partial_sum input is not allowed; insert a boxing to broadcast or split

// -----

// add is linear in both operands together: a partial plus a broadcast value counts the latter p times.

job.func @f(%x: tensor<4x8xf32>) {
  %a = job.add %x, %x {sbp_in = [#job.nd_sbp<[broadcast, partial_sum]>, #job.nd_sbp<[broadcast, broadcast]>]} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  job.return
}

// CHECK: error: 'job.add' op job.add is linear in operands 0 and 1 only together: partial_sum input in operand 0 alone is not allowed; insert a boxing to broadcast or split

// -----

// A split beyond the value's rank.

%f = job.fill {value = 0.0 : f32, sbp = #job.nd_sbp<[split(1)]>} : tensor<4xf32>

// CHECK: error: 'job.fill' op sbp [split(1)] splits axis 1 of a rank-1 value

// -----

// One SBP component per hierarchy axis.

%f = job.fill {value = 0.0 : f32, sbp = #job.nd_sbp<[split(0)]>, placement = #job.placement<cpu, ["0:0-3"], hierarchy = [2, 2]>} : tensor<4xf32>

// CHECK: error: 'job.fill' op sbp [split(0)] has 1 components for a placement hierarchy of 2 axes [2, 2]

// -----

// sbp_in: one per operand.

job.func @f(%x: tensor<4x8xf32>) {
  %r = job.neg %x {sbp_in = []} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  job.return
}

// CHECK: error: 'job.neg' op sbp_in needs one #job.nd_sbp per operand (1), got []

// -----

// A boxing names its target.

job.func @f(%x: tensor<4x8xf32>) {
  %b = job.boxing %x {src_sbp = #job.nd_sbp<[split(0)]>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  job.return
}

// CHECK: error: 'job.boxing' op job.boxing needs the target sbp
