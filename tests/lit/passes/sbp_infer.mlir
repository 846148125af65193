// RUN: irflow-opt %s --split-input-file -p sbp-infer | filecheck %s
// RUN: irflow-opt %s --split-input-file -p sbp-infer | irflow-opt --split-input-file | filecheck %s

// One device (the default placement): every value is broadcast and nothing needs converting.

job.func @one_device(%x: tensor<8x4xf32>) -> tensor<8x2xf32> {
  %w = job.variable {name = "w", initializer = {kind = "zeros"}} : tensor<4x2xf32>
  %y = job.matmul %x, %w : (tensor<8x4xf32>, tensor<4x2xf32>) -> tensor<8x2xf32>
  job.return %y : tensor<8x2xf32>
}

// CHECK-LABEL: job.func @one_device
// CHECK-SAME:    placement = #job.placement<cpu, ["0:0"]>, arg_sbp = [#job.nd_sbp<[broadcast]>]
// CHECK-NEXT:    %w = job.variable {sbp_origin = "default", {{.*}}sbp = #job.nd_sbp<[broadcast]>}
// CHECK-NEXT:    %y = job.matmul %x, %w {sbp_in = [#job.nd_sbp<[broadcast]>, #job.nd_sbp<[broadcast]>], sbp_origin = "rule", placement = #job.placement<cpu, ["0:0"]>, sbp = #job.nd_sbp<[broadcast]>}

// -----

// Data parallel on 4 devices: the input is split(0) by default, variables are
// broadcast; the matmul runs (S(0), B) -> S(0); the loss's mean over the split
// batch is gathered once (a mean over a split axis does not become partial).

job.func @data_parallel(%x: tensor<8x4xf32>) -> tensor<f32> attributes {placement = #job.placement<cpu, ["0:0-3"]>} {
  %w = job.variable {name = "w", initializer = {kind = "zeros"}} : tensor<4x2xf32>
  %y = job.matmul %x, %w : (tensor<8x4xf32>, tensor<4x2xf32>) -> tensor<8x2xf32>
  %r = job.relu %y : (tensor<8x2xf32>) -> tensor<8x2xf32>
  %l = job.reduce_mean %r {axes = array<i64: 0, 1>} : (tensor<8x2xf32>) -> tensor<f32>
  job.return %l : tensor<f32>
}

// CHECK-LABEL: job.func @data_parallel
// CHECK-SAME:    arg_sbp = [#job.nd_sbp<[split(0)]>]
// CHECK:         %y = job.matmul %x, %w {sbp_in = [#job.nd_sbp<[split(0)]>, #job.nd_sbp<[broadcast]>], sbp_origin = "cost", {{.*}}sbp = #job.nd_sbp<[split(0)]>}
// CHECK-NEXT:    %r = job.relu %y {sbp_in = [#job.nd_sbp<[split(0)]>], sbp_origin = "cost", {{.*}}sbp = #job.nd_sbp<[split(0)]>}
// CHECK-NEXT:    %l = job.reduce_mean %r {sbp_in = [#job.nd_sbp<[broadcast]>], sbp_origin = "cost", {{.*}}sbp = #job.nd_sbp<[broadcast]>}

// -----

// Model parallel from one hint: the (out, in) weight split over output features
// (dense with transpose_b) gives a result split on its columns, (B, S(0)^T) -> S(1);
// gathering the small result costs less than gathering the weight.

job.func @model_parallel(%x: tensor<2x4xf32>) -> tensor<2x6xf32> attributes {placement = #job.placement<cpu, ["0:0-1"]>, arg_sbp = [#job.nd_sbp<[broadcast]>]} {
  %w = job.variable {name = "w", initializer = {kind = "zeros"}, sbp = #job.nd_sbp<[split(0)]>, sbp_origin = "hint"} : tensor<6x4xf32>
  %y = job.matmul %x, %w {transpose_b = true} : (tensor<2x4xf32>, tensor<6x4xf32>) -> tensor<2x6xf32>
  job.return %y : tensor<2x6xf32>
}

// CHECK-LABEL: job.func @model_parallel
// CHECK:         %w = job.variable {sbp_origin = "hint", {{.*}}sbp = #job.nd_sbp<[split(0)]>
// CHECK-NEXT:    %y = job.matmul %x, %w {sbp_in = [#job.nd_sbp<[broadcast]>, #job.nd_sbp<[split(0)]>], {{.*}}sbp = #job.nd_sbp<[split(1)]>}

// -----

// Splitting the contraction gives partial sums: x split over columns and w over rows.

job.func @partial(%x: tensor<8x4xf32>) -> tensor<8x2xf32> attributes {placement = #job.placement<cpu, ["0:0-1"]>, arg_sbp = [#job.nd_sbp<[split(1)]>]} {
  %w = job.variable {name = "w", initializer = {kind = "zeros"}, sbp = #job.nd_sbp<[split(0)]>, sbp_origin = "hint"} : tensor<4x2xf32>
  %y = job.matmul %x, %w : (tensor<8x4xf32>, tensor<4x2xf32>) -> tensor<8x2xf32>
  job.return %y : tensor<8x2xf32>
}

// CHECK-LABEL: job.func @partial
// CHECK:         %y = job.matmul %x, %w {sbp_in = [#job.nd_sbp<[split(1)]>, #job.nd_sbp<[split(0)]>], sbp_origin = "cost", {{.*}}sbp = #job.nd_sbp<[partial_sum]>}

// -----

// A user hint always wins, even where the cost model would choose otherwise.

job.func @hinted(%x: tensor<8x4xf32>) -> tensor<8x4xf32> attributes {placement = #job.placement<cpu, ["0:0-1"]>} {
  %r = job.relu %x {sbp = #job.nd_sbp<[split(1)]>, sbp_origin = "hint"} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  job.return %r : tensor<8x4xf32>
}

// CHECK-LABEL: job.func @hinted
// CHECK-NEXT:    %r = job.relu %x {sbp_origin = "hint", sbp_in = [#job.nd_sbp<[split(1)]>], sbp = #job.nd_sbp<[split(1)]>

// -----

// A 2x2 hierarchy: one SBP per mesh axis, batch split on the first, the weight's
// output features on the second.

job.func @hybrid(%x: tensor<8x4xf32>) -> tensor<8x6xf32> attributes {placement = #job.placement<cpu, ["0:0-3"], hierarchy = [2, 2]>, arg_sbp = [#job.nd_sbp<[split(0), broadcast]>]} {
  %w = job.variable {name = "w", initializer = {kind = "zeros"}, sbp = #job.nd_sbp<[broadcast, split(1)]>, sbp_origin = "hint"} : tensor<4x6xf32>
  %y = job.matmul %x, %w : (tensor<8x4xf32>, tensor<4x6xf32>) -> tensor<8x6xf32>
  job.return %y : tensor<8x6xf32>
}

// CHECK-LABEL: job.func @hybrid
// CHECK:         %y = job.matmul %x, %w {sbp_in = [#job.nd_sbp<[split(0), broadcast]>, #job.nd_sbp<[broadcast, split(1)]>], {{.*}}sbp = #job.nd_sbp<[split(0), split(1)]>}

// -----

// The mirrored view returns each device's part: split(0) instead of broadcast.

job.func @mirrored(%x: tensor<8x4xf32>) -> tensor<8x4xf32> attributes {placement = #job.placement<cpu, ["0:0-1"]>, view = "mirrored"} {
  %r = job.relu %x : (tensor<8x4xf32>) -> tensor<8x4xf32>
  job.return %r : tensor<8x4xf32>
}

// CHECK-LABEL: job.func @mirrored
// CHECK-NEXT:    %r = job.relu %x {sbp_in = [#job.nd_sbp<[split(0)]>], {{.*}}sbp = #job.nd_sbp<[split(0)]>}
