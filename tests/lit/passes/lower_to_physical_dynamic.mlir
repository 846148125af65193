// RUN: irflow-opt %s -p lower-to-physical | filecheck %s

// The mirrored view on 4 devices with each device's own rows (docs/dynamic.md): the
// input's dynamic axis 0 is split, so each device's piece is dynamic within 25 rows.
// A mean over them sums each device's rows and divides by the devices' counts,
// all-reduced; the sum is a partial sum, as a static one would be.

job.func @mean(%x: tensor<100x3xf32, #job.bounded<[0]>>) -> tensor<1x3xf32> attributes {job_type = "predict", placement = #job.placement<cpu, ["0:0-3"]>, arg_sbp = [#job.nd_sbp<[split(0)]>], view = "mirrored"} {
  %m = job.reduce_mean %x {axes = array<i64: 0>, keepdims = true, sbp = #job.nd_sbp<[partial_sum]>, placement = #job.placement<cpu, ["0:0-3"]>, sbp_in = [#job.nd_sbp<[split(0)]>]} : (tensor<100x3xf32, #job.bounded<[0]>>) -> tensor<1x3xf32> loc("model.py":4:9)
  %b = job.boxing %m {src_sbp = #job.nd_sbp<[partial_sum]>, sbp = #job.nd_sbp<[broadcast]>, placement = #job.placement<cpu, ["0:0-3"]>} : (tensor<1x3xf32>) -> tensor<1x3xf32>
  job.return %b : tensor<1x3xf32>
}

// CHECK-LABEL: job.func @mean(%x: tensor<25x3xf32, #job.bounded<[0]>>) -> tensor<1x3xf32>
// CHECK-SAME:    arg_shapes = [array<i64: 100, 3>]
// CHECK-NEXT:    %0 = job.reduce_sum %x {axes = array<i64: 0>, keepdims = true, {{.*}}sbp = #job.nd_sbp<[partial_sum]>{{.*}}} : (tensor<25x3xf32, #job.bounded<[0]>>) -> tensor<1x3xf32>
// CHECK-NEXT:    %1 = job.size_of %x {axes = array<i64: 0>, {{.*}}sbp = #job.nd_sbp<[partial_sum]>} : (tensor<25x3xf32, #job.bounded<[0]>>) -> tensor<f32>
// CHECK-NEXT:    %2 = job.all_reduce %1 {mesh = array<i64: 4>, mesh_axis = 0 : i64, {{.*}}sbp = #job.nd_sbp<[broadcast]>} : (tensor<f32>) -> tensor<f32>
// CHECK-NEXT:    %[[MEAN:.*]] = job.div %0, %2 {{.*}} : (tensor<1x3xf32>, tensor<f32>) -> tensor<1x3xf32>
// CHECK-NEXT:    %{{.*}} = job.all_reduce %[[MEAN]]

// Each device's own rows times a variable of all the devices' rows: the variable's static rows fix the
// rows of x in the logical op. Its one-row pieces would pass for broadcasting on a device, so x is
// pinned at its piece's bound, the same check per device.

job.func @row_scale(%x: tensor<2x4xf64, #job.bounded<[0]>>) -> tensor<2x4xf64> attributes {job_type = "predict", placement = #job.placement<cpu, ["0:0-1"]>, arg_sbp = [#job.nd_sbp<[split(0)]>], view = "mirrored"} {
  %v = job.variable {initializer = {kind = "zeros"}, name = "v", placement = #job.placement<cpu, ["0:0-1"]>, sbp = #job.nd_sbp<[split(0)]>} : tensor<2x4xf64>
  %y = job.mul %x, %v {placement = #job.placement<cpu, ["0:0-1"]>, sbp = #job.nd_sbp<[split(0)]>, sbp_in = [#job.nd_sbp<[split(0)]>, #job.nd_sbp<[split(0)]>]} : (tensor<2x4xf64, #job.bounded<[0]>>, tensor<2x4xf64>) -> tensor<2x4xf64> loc("model.py":7:9)
  job.return %y : tensor<2x4xf64>
}

// CHECK-LABEL: job.func @row_scale(%x: tensor<1x4xf64, #job.bounded<[0]>>) -> tensor<1x4xf64>
// CHECK:         %[[PINNED:.*]] = job.pin_size %x {axes = array<i64: 0>, {{.*}}} : (tensor<1x4xf64, #job.bounded<[0]>>) -> tensor<1x4xf64>
// CHECK-NEXT:    %y = job.mul %[[PINNED]], %v {{.*}} : (tensor<1x4xf64>, tensor<1x4xf64>) -> tensor<1x4xf64>
