// RUN: not irflow-opt %s --split-input-file -p sbp-infer 2>&1 | filecheck %s

// Hints sbp-infer cannot honour: located errors, never a silently different plan.

// A hint no signature and no boxing can produce is an error at the user's line: zeros are no identity
// of max, so a boxing after the relu cannot make partial maxima of its whole result either.

job.func @partial_max_hint(%x: tensor<4x7xf32>) -> tensor<4x7xf32> attributes {placement = #job.placement<cpu, ["0:0-1"]>, arg_sbp = [#job.nd_sbp<[broadcast]>]} {
  %r = job.relu %x {sbp = #job.nd_sbp<[partial_sum(max)]>, sbp_origin = "hint"} : (tensor<4x7xf32>) -> tensor<4x7xf32> loc("model.py":3:8)
  job.return %r : tensor<4x7xf32>
}

// CHECK: model.py:3:8: error: job.boxing needs operand 0 as [partial_sum(max)], but it can only be had as [broadcast] here: no boxing makes a value partial

// -----

// An SBP with one component per axis of another hierarchy.

job.func @components(%x: tensor<8x4xf32>) -> tensor<8x4xf32> attributes {placement = #job.placement<cpu, ["0:0-3"], hierarchy = [2, 2]>} {
  %r = job.relu %x {sbp = #job.nd_sbp<[split(0)]>, sbp_origin = "hint"} : (tensor<8x4xf32>) -> tensor<8x4xf32> loc("model.py":7:8)
  job.return %r : tensor<8x4xf32>
}

// CHECK: model.py:7:8: error: job.relu sbp [split(0)] has 1 components for a placement hierarchy [2, 2]

// -----

job.func @arguments(%x: tensor<8x4xf32>) -> tensor<8x4xf32> attributes {placement = #job.placement<cpu, ["0:0-1"]>, arg_sbp = [#job.nd_sbp<[split(0), split(1)]>]} {
  job.return %x : tensor<8x4xf32>
}

// CHECK: error: arg_sbp #0 of job 'arguments' [split(0), split(1)] has 2 components for a placement hierarchy [2]

// -----

job.func @rank(%x: tensor<8x4xf32>) -> tensor<8x4xf32> attributes {placement = #job.placement<cpu, ["0:0-1"]>, arg_sbp = [#job.nd_sbp<[split(2)]>]} {
  job.return %x : tensor<8x4xf32>
}

// CHECK: error: arg_sbp #0 of job 'rank' [split(2)] splits an axis a rank-2 value does not have

// -----

// A user's boxing makes partial sums of a broadcast value locally (zeros beside one copy), but zeros are
// no identity of max: a partial max is had no such way.

job.func @to_partial_max(%x: tensor<4x6xf32>) -> tensor<4x6xf32> attributes {placement = #job.placement<cpu, ["0:0-1"]>, arg_sbp = [#job.nd_sbp<[broadcast]>]} {
  %b = job.boxing %x {sbp = #job.nd_sbp<[partial_sum(max)]>, sbp_origin = "hint"} : (tensor<4x6xf32>) -> tensor<4x6xf32> loc("model.py":9:8)
  job.return %b : tensor<4x6xf32>
}

// CHECK: model.py:9:8: error: job.boxing needs operand 0 as [partial_sum(max)], but it can only be had as [broadcast] here: no boxing makes a value partial
