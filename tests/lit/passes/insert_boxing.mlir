// RUN: irflow-opt %s --split-input-file -p sbp-infer,insert-boxing | filecheck %s
// RUN: irflow-opt %s --split-input-file -p sbp-infer,insert-boxing --print-debuginfo | filecheck %s --check-prefix=LOC
// RUN: irflow-opt %s --split-input-file -p sbp-infer,insert-boxing,insert-boxing | filecheck %s

// One device: nothing to convert.

job.func @one_device(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %r = job.relu %x : (tensor<8x4xf32>) -> tensor<8x4xf32>
  job.return %r : tensor<8x4xf32>
}

// CHECK-LABEL: job.func @one_device
// CHECK-NOT:     job.boxing
// CHECK:         job.return %r

// -----

// Data parallel training step: the weight's gradient comes out as partial sums
// ((S(0), S(0)) -> P over the batch) and the update needs it whole: an all_reduce,
// made at the update's line. The result is gathered for job.return (consistent view).

job.func @train(%x: tensor<64x4xf32>, %dy: tensor<64x2xf32>) -> tensor<64x2xf32> attributes {job_type = "train", placement = #job.placement<cpu, ["0:0-3"]>} {
  %w = job.variable {name = "w", initializer = {kind = "zeros"}} : tensor<4x2xf32>
  %y = job.matmul %x, %w : (tensor<64x4xf32>, tensor<4x2xf32>) -> tensor<64x2xf32> loc("model.py":4:8)
  %dw = job.matmul %x, %dy {transpose_a = true} : (tensor<64x4xf32>, tensor<64x2xf32>) -> tensor<4x2xf32> loc("model.py":5:8)
  %lr = job.fill {value = 0.1 : f32} : tensor<f32>
  job.sgd_update %w, %dw, %lr : tensor<4x2xf32>, tensor<4x2xf32>, tensor<f32> loc("model.py":6:4)
  job.return %y : tensor<64x2xf32> loc("model.py":7:4)
}

// CHECK-LABEL: job.func @train
// CHECK:         %y = job.matmul %x, %w {{{.*}}, sbp_in = [#job.nd_sbp<[split(0)]>, #job.nd_sbp<[broadcast]>],
// CHECK-NEXT:    %y_all_gather = job.boxing %y {placement = #job.placement<cpu, ["0:0-3"]>, reason = "job.return needs [broadcast] in the consistent view", sbp = #job.nd_sbp<[broadcast]>, sbp_in = [#job.nd_sbp<[split(0)]>], sbp_origin = "rule", src_sbp = #job.nd_sbp<[split(0)]>}
// CHECK-NEXT:    %dw = job.matmul %x, %dy {{{.*}}, sbp = #job.nd_sbp<[partial_sum]>, sbp_in = [#job.nd_sbp<[split(0)]>, #job.nd_sbp<[split(0)]>],
// CHECK-NEXT:    %dw_all_reduce = job.boxing %dw {placement = #job.placement<cpu, ["0:0-3"]>, reason = "job.sgd_update needs [broadcast] for operand 1", sbp = #job.nd_sbp<[broadcast]>, sbp_in = [#job.nd_sbp<[partial_sum]>], sbp_origin = "rule", src_sbp = #job.nd_sbp<[partial_sum]>}
// CHECK:         job.sgd_update %w, %dw_all_reduce, %lr
// CHECK-NEXT:    job.return %y_all_gather
// CHECK-NOT:     job.boxing

// LOC-LABEL: job.func @train
// LOC:         %y_all_gather = job.boxing {{.*}} loc("model.py":7:4)
// LOC:         %dw_all_reduce = job.boxing {{.*}} loc("model.py":6:4)

// -----

// One boxing per (value, target) serves every consumer that needs that form.

job.func @shared(%x: tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>) attributes {placement = #job.placement<cpu, ["0:0-1"]>} {
  %a = job.relu %x {sbp = #job.nd_sbp<[split(1)]>, sbp_origin = "hint"} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %b = job.tanh %a {sbp = #job.nd_sbp<[split(0)]>, sbp_origin = "hint"} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %c = job.exp %a {sbp = #job.nd_sbp<[split(0)]>, sbp_origin = "hint"} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  job.return %b, %c : tensor<8x4xf32>, tensor<8x4xf32>
}

// CHECK-LABEL: job.func @shared
// CHECK:         %a = job.relu
// CHECK-NEXT:    %a_all_to_all = job.boxing %a {{{.*}}, sbp = #job.nd_sbp<[split(0)]>, {{.*}}, src_sbp = #job.nd_sbp<[split(1)]>}
// CHECK-NEXT:    %b = job.tanh %a_all_to_all
// CHECK:         %c = job.exp %a_all_to_all

// -----

// Ops under another placement: the value changes devices through a boxing with a src_placement.

job.func @placements(%x: tensor<8x4xf32>) -> tensor<8x4xf32> attributes {placement = #job.placement<cpu, ["0:0-3"]>} {
  %a = job.relu %x : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %b = job.tanh %a {placement = #job.placement<cpu, ["0:4-5"]>} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  job.return %b : tensor<8x4xf32>
}

// CHECK-LABEL: job.func @placements
// CHECK:         %a = job.relu %x {placement = #job.placement<cpu, ["0:0-3"]>,
// CHECK-NEXT:    %a_transfer = job.boxing %a {placement = #job.placement<cpu, ["0:4-5"]>, reason = "job.tanh needs [{{.*}}] for operand 0", {{.*}}, src_placement = #job.placement<cpu, ["0:0-3"]>, src_sbp
// CHECK-NEXT:    %b = job.tanh %a_transfer
// CHECK:         %b_transfer = job.boxing %b {{.*}}src_placement = #job.placement<cpu, ["0:4-5"]>
// CHECK-NEXT:    job.return %b_transfer

// -----

// flow.parallel_cast traces a hinted job.boxing: it is the conversion itself
// (sbp-infer fills its src_sbp), so no second boxing is added before it.

job.func @parallel_cast(%x: tensor<8x4xf32>) -> tensor<8x4xf32> attributes {placement = #job.placement<cpu, ["0:0-1"]>} {
  %b = job.boxing %x {sbp = #job.nd_sbp<[broadcast]>, sbp_origin = "hint"} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %r = job.relu %b : (tensor<8x4xf32>) -> tensor<8x4xf32>
  job.return %r : tensor<8x4xf32>
}

// CHECK-LABEL: job.func @parallel_cast
// CHECK-NEXT:    %b = job.boxing %x {{{.*}}, sbp = #job.nd_sbp<[broadcast]>, sbp_in = [#job.nd_sbp<[split(0)]>], sbp_origin = "hint", src_sbp = #job.nd_sbp<[split(0)]>}
// CHECK-NEXT:    %r = job.relu %b {{{.*}}, sbp_in = [#job.nd_sbp<[broadcast]>],
// CHECK-NEXT:    job.return %r

// -----

// Bernoulli samples of a split input: the uniform draws are a source, whole on
// every device (each draws the same tensor from one seed), and the boxing to the
// split is a local slice. The samples are the one-device ones, with no communication.

job.func @bernoulli(%p: tensor<8x4xf32>) -> tensor<8x4xf32> attributes {placement = #job.placement<cpu, ["0:0-1"]>} {
  %u = job.random_uniform {seed = 3 : i64} : tensor<8x4xf32>
  %b = job.bernoulli %u, %p : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %r = job.relu %b : (tensor<8x4xf32>) -> tensor<8x4xf32>
  job.return %r : tensor<8x4xf32>
}

// CHECK-LABEL: job.func @bernoulli
// CHECK-NEXT:    %u = job.random_uniform {{{.*}}, sbp = #job.nd_sbp<[broadcast]>, {{.*}}}
// CHECK-NEXT:    %u_slice = job.boxing %u {{{.*}}, reason = "job.bernoulli needs [split(0)] for operand 0", sbp = #job.nd_sbp<[split(0)]>, {{.*}}, src_sbp = #job.nd_sbp<[broadcast]>}
// CHECK-NEXT:    %b = job.bernoulli %u_slice, %p {{{.*}}, sbp = #job.nd_sbp<[split(0)]>, sbp_in = [#job.nd_sbp<[split(0)]>, #job.nd_sbp<[split(0)]>],
// CHECK-NEXT:    %r = job.relu %b
