// RUN: irflow-opt %s -p sbp-infer,insert-boxing --emit=sbp-report | filecheck %s
// RUN: not irflow-opt %s --emit=sbp-report 2>&1 | filecheck %s --check-prefix=UNINFERRED

// A hidden layer split over its output features (the user's hint) on 4 devices.

job.func @mlp(%x: tensor<8x16xf32>) -> tensor<8x4xf32> attributes {job_type = "predict", placement = #job.placement<cpu, ["0:0-3"]>} {
  %w1 = job.variable {name = "d1-weight", initializer = {kind = "constant", value = 0.5}, sbp = #job.nd_sbp<[split(0)]>, sbp_origin = "hint"} : tensor<32x16xf32>
  %h = job.matmul %x, %w1 {transpose_b = true} : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
  %r = job.relu %h : (tensor<8x32xf32>) -> tensor<8x32xf32>
  %w2 = job.variable {name = "d2-weight", initializer = {kind = "constant", value = 0.5}} : tensor<4x32xf32>
  %o = job.matmul %r, %w2 {transpose_b = true} : (tensor<8x32xf32>, tensor<4x32xf32>) -> tensor<8x4xf32>
  job.return %o : tensor<8x4xf32>
}

// CHECK:      job @mlp on #job.placement<cpu, ["0:0-3"]> (4 devices)
// CHECK-NEXT:   boxing %{{[a-z0-9_]+}} [split(0)] -> [broadcast]: all_gather, 1536 bytes/step; job.matmul needs [broadcast] for operand 0
// CHECK:        boxing %{{[a-z0-9_]+}} [partial_sum] -> [broadcast]: all_reduce, 768 bytes/step; job.return needs [broadcast] in the consistent view
// CHECK-NEXT:   3 boxing ops, 2304 bytes/step
// CHECK-NEXT:   hint job.variable %w1 [split(0)]
// CHECK-NEXT:   sbp origins: cost {{[0-9]+}}, default {{[0-9]+}}, hint 1, rule {{[0-9]+}}

// UNINFERRED: error: --emit=sbp-report needs every value's SBP: run sbp-infer,insert-boxing first
