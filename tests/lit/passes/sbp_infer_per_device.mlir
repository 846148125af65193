// RUN: irflow-opt %s -p lower-to-physical,sbp-infer,insert-boxing | filecheck %s
// RUN: irflow-opt %s -p lower-to-physical | filecheck %s

// A func that lower-to-physical made per-device (it has `mesh`) keeps the SBP
// decided on the logical job: sbp-infer and insert-boxing leave it as it is
// (sbp-infer used to fail on its collectives, which have no SBP rules).

job.func @grad(%x: tensor<8x6xf32>, %dy: tensor<8x4xf32>) -> tensor<6x4xf32> attributes {job_type = "predict", placement = #job.placement<cpu, ["0:0-3"]>, arg_sbp = [#job.nd_sbp<[split(0)]>, #job.nd_sbp<[split(0)]>]} {
  %dw = job.matmul %x, %dy {transpose_a = true, sbp = #job.nd_sbp<[partial_sum]>, placement = #job.placement<cpu, ["0:0-3"]>, sbp_in = [#job.nd_sbp<[split(0)]>, #job.nd_sbp<[split(0)]>]} : (tensor<8x6xf32>, tensor<8x4xf32>) -> tensor<6x4xf32>
  %b = job.boxing %dw {src_sbp = #job.nd_sbp<[partial_sum]>, sbp = #job.nd_sbp<[broadcast]>, placement = #job.placement<cpu, ["0:0-3"]>, reason = "job.return needs broadcast"} : (tensor<6x4xf32>) -> tensor<6x4xf32>
  job.return %b : tensor<6x4xf32>
}

// CHECK:      job.func @grad(%x: tensor<2x6xf32>, %dy: tensor<2x4xf32>) -> tensor<6x4xf32> attributes {arg_sbp = [#job.nd_sbp<[split(0)]>, #job.nd_sbp<[split(0)]>], arg_shapes = [array<i64: 8, 6>, array<i64: 8, 4>], job_type = "predict", mesh = array<i64: 4>, placement = #job.placement<cpu, ["0:0-3"]>, result_sbp = [#job.nd_sbp<[broadcast]>], result_shapes = [array<i64: 6, 4>]} {
// CHECK-NEXT:   %dw = job.matmul %x, %dy {placement = #job.placement<cpu, ["0:0-3"]>, sbp = #job.nd_sbp<[partial_sum]>, sbp_in = [#job.nd_sbp<[split(0)]>, #job.nd_sbp<[split(0)]>], transpose_a = true} : (tensor<2x6xf32>, tensor<2x4xf32>) -> tensor<6x4xf32>
// CHECK-NEXT:   %b = job.all_reduce %dw {mesh = array<i64: 4>, mesh_axis = 0 : i64, placement = #job.placement<cpu, ["0:0-3"]>, reason = "job.return needs broadcast", sbp = #job.nd_sbp<[broadcast]>} : (tensor<6x4xf32>) -> tensor<6x4xf32>
// CHECK-NEXT:   job.return %b : tensor<6x4xf32>
// CHECK-NEXT: }
