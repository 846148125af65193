// RUN: irflow-opt %s -p lower-to-physical --split-input-file | filecheck %s
// RUN: irflow-opt %s -p lower-to-physical,lower-to-physical --split-input-file | filecheck %s

// Run twice, it changes nothing the second time: a func with `mesh` is per-device
// already (lowering it again would split its pieces once more).

// Data parallel: the weight gradient of a batch-split matmul is partial on
// 4 devices; the boxing to broadcast becomes one all_reduce. Every type is
// the per-device type; the func records the logical signature for the runtime.

job.func @grad(%x: tensor<8x6xf32>, %dy: tensor<8x4xf32>) -> tensor<6x4xf32> attributes {job_type = "predict", placement = #job.placement<cpu, ["0:0-3"]>, arg_sbp = [#job.nd_sbp<[split(0)]>, #job.nd_sbp<[split(0)]>]} {
  %dw = job.matmul %x, %dy {transpose_a = true, sbp = #job.nd_sbp<[partial_sum]>, placement = #job.placement<cpu, ["0:0-3"]>, sbp_in = [#job.nd_sbp<[split(0)]>, #job.nd_sbp<[split(0)]>]} : (tensor<8x6xf32>, tensor<8x4xf32>) -> tensor<6x4xf32>
  %b = job.boxing %dw {src_sbp = #job.nd_sbp<[partial_sum]>, sbp = #job.nd_sbp<[broadcast]>, placement = #job.placement<cpu, ["0:0-3"]>, reason = "job.return needs broadcast"} : (tensor<6x4xf32>) -> tensor<6x4xf32>
  job.return %b : tensor<6x4xf32>
}

// CHECK-LABEL: job.func @grad(%x: tensor<2x6xf32>, %dy: tensor<2x4xf32>) -> tensor<6x4xf32>
// CHECK-SAME:    arg_shapes = [array<i64: 8, 6>, array<i64: 8, 4>], job_type = "predict", mesh = array<i64: 4>, {{.*}}, result_sbp = [#job.nd_sbp<[broadcast]>], result_shapes = [array<i64: 6, 4>]
// CHECK-NEXT:    %dw = job.matmul %x, %dy {{.*}} : (tensor<2x6xf32>, tensor<2x4xf32>) -> tensor<6x4xf32>
// CHECK-NEXT:    %{{.*}} = job.all_reduce %dw {mesh = array<i64: 4>, mesh_axis = 0 : i64, {{.*}}, reason = "job.return needs broadcast", sbp = #job.nd_sbp<[broadcast]>} : (tensor<6x4xf32>) -> tensor<6x4xf32>
// CHECK-NEXT:    job.return

// -----

// Uneven: 5 rows on 2 devices are chunks of 3, the last padded. A gather
// collects the padded chunks and cuts them back to 5; a reduce_scatter pads
// to 6 first; B->S is a local slice that reads the device's coordinate.

job.func @uneven(%x: tensor<5x4xf32>, %p: tensor<5x4xf32>) -> (tensor<5x4xf32>, tensor<5x4xf32>, tensor<5x4xf32>) attributes {placement = #job.placement<cpu, ["0:0-1"]>, arg_sbp = [#job.nd_sbp<[split(0)]>, #job.nd_sbp<[partial_sum]>]} {
  %g = job.boxing %x {src_sbp = #job.nd_sbp<[split(0)]>, sbp = #job.nd_sbp<[broadcast]>} : (tensor<5x4xf32>) -> tensor<5x4xf32>
  %s = job.boxing %p {src_sbp = #job.nd_sbp<[partial_sum]>, sbp = #job.nd_sbp<[split(0)]>} : (tensor<5x4xf32>) -> tensor<5x4xf32>
  %c = job.boxing %g {src_sbp = #job.nd_sbp<[broadcast]>, sbp = #job.nd_sbp<[split(0)]>} : (tensor<5x4xf32>) -> tensor<5x4xf32>
  job.return %g, %s, %c : tensor<5x4xf32>, tensor<5x4xf32>, tensor<5x4xf32>
}

// CHECK-LABEL: job.func @uneven(%x: tensor<3x4xf32>, %p: tensor<5x4xf32>) -> (tensor<5x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>)
// CHECK-NEXT:    %[[G:.*]] = job.all_gather %x {axis = 0 : i64, mesh = array<i64: 2>, mesh_axis = 0 : i64, {{.*}}} : (tensor<3x4xf32>) -> tensor<6x4xf32>
// CHECK-NEXT:    %g = job.slice %[[G]] {{{.*}}, start = array<i64: 0, 0>, step = array<i64: 1, 1>, stop = array<i64: 5, 4>} : (tensor<6x4xf32>) -> tensor<5x4xf32>
// CHECK-NEXT:    %[[P:.*]] = job.pad %p {{.*}} : (tensor<5x4xf32>) -> tensor<6x4xf32>
// CHECK-NEXT:    %s = job.reduce_scatter %[[P]] {axis = 0 : i64, mesh = array<i64: 2>, mesh_axis = 0 : i64, {{.*}}, sbp = #job.nd_sbp<[split(0)]>} : (tensor<6x4xf32>) -> tensor<3x4xf32>
// CHECK-NEXT:    %c = job.shard_slice %g {axis = 0 : i64, mesh = array<i64: 2>, mesh_axis = 0 : i64, {{.*}}} : (tensor<5x4xf32>) -> tensor<3x4xf32>
// CHECK-NEXT:    job.return %g, %s, %c

// -----

// A 2x2 mesh, one mesh axis at a time: [split(0), partial_sum] -> [split(1), broadcast]
// is an all_reduce over mesh axis 1, then an all_to_all over mesh axis 0.

job.func @hybrid(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {placement = #job.placement<cpu, ["0:0-3"], hierarchy = [2, 2]>, arg_sbp = [#job.nd_sbp<[split(0), partial_sum]>]} {
  %y = job.boxing %x {src_sbp = #job.nd_sbp<[split(0), partial_sum]>, sbp = #job.nd_sbp<[split(1), broadcast]>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  job.return %y : tensor<4x8xf32>
}

// CHECK-LABEL: job.func @hybrid(%x: tensor<2x8xf32>) -> tensor<4x4xf32>
// CHECK-NEXT:    %[[R:.*]] = job.all_reduce %x {mesh = array<i64: 2, 2>, mesh_axis = 1 : i64, {{.*}}, sbp = #job.nd_sbp<[split(0), broadcast]>} : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT:    %y = job.all_to_all %[[R]] {concat_axis = 0 : i64, mesh = array<i64: 2, 2>, mesh_axis = 0 : i64, {{.*}}, sbp = #job.nd_sbp<[split(1), broadcast]>, split_axis = 1 : i64} : (tensor<2x8xf32>) -> tensor<4x4xf32>
// CHECK-NEXT:    job.return %y

// -----

// On one device a boxing is the identity, and the job stays as it was.

job.func @single(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = job.boxing %x {src_sbp = #job.nd_sbp<[split(0)]>, sbp = #job.nd_sbp<[broadcast]>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  job.return %y : tensor<4x8xf32>
}

// CHECK-LABEL: job.func @single(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {job_type = "predict"} {
// CHECK-NEXT:    job.return %x : tensor<4x8xf32>
