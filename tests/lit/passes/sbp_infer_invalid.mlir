// RUN: irflow-opt %s --split-input-file -p sbp-infer --verify-diagnostics | filecheck %s

// Hints sbp-infer cannot honour: located errors, never a silently different plan.

// A hint that no signature can produce is an error at the user's line: a reduction
// over an unevenly split axis (7 over 2 devices) would sum padding.

job.func @uneven(%x: tensor<4x7xf32>) -> tensor<4xf32> attributes {placement = #job.placement<cpu, ["0:0-1"]>, arg_sbp = [#job.nd_sbp<[split(1)]>]} {
  %s = job.reduce_sum %x {axes = array<i64: 1>, sbp = #job.nd_sbp<[partial_sum]>, sbp_origin = "hint"} : (tensor<4x7xf32>) -> tensor<4xf32> loc("model.py":3:8)
  job.return %s : tensor<4xf32>
}

// CHECK: model.py:3:8: error: job.reduce_sum needs operand 0 as [partial_sum], but it can only be had as [split(1)] here: no boxing makes a value partial (the hinted sbp forces this signature)

// -----

// A hint no signature produces at all.

job.func @impossible(%x: tensor<4x7xf32>) -> tensor<4xi64> attributes {placement = #job.placement<cpu, ["0:0-1"]>} {
  %a = job.argmax %x {axis = 1 : i64, sbp = #job.nd_sbp<[partial_sum]>, sbp_origin = "hint"} : (tensor<4x7xf32>) -> tensor<4xi64> loc("model.py":5:8)
  job.return %a : tensor<4xi64>
}

// CHECK: model.py:5:8: error: job.argmax: no signature produces the hinted sbp [partial_sum] on 1-axis hierarchy [2]; it can produce [broadcast], [split(0)]
