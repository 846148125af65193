// RUN: irflow-opt %s -p lower-to-physical | filecheck %s

// Sparse cross-entropy with the logits split over classes (10 classes on 4
// devices: chunks of 3, the last one padded). The op becomes its stages: each
// row's max over the device's classes, all-reduced (max); its sum of exps,
// all-reduced (sum); then each device's part of the loss, a partial sum.

job.func @ce(%x: tensor<8x10xf32>, %y: tensor<8xi32>) -> tensor<8xf32> attributes {placement = #job.placement<cpu, ["0:0-3"]>, arg_sbp = [#job.nd_sbp<[split(1)]>, #job.nd_sbp<[broadcast]>]} {
  %l = job.sparse_softmax_cross_entropy %x, %y {sbp = #job.nd_sbp<[partial_sum]>, placement = #job.placement<cpu, ["0:0-3"]>, sbp_in = [#job.nd_sbp<[split(1)]>, #job.nd_sbp<[broadcast]>]} : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<8xf32>
  %b = job.boxing %l {src_sbp = #job.nd_sbp<[partial_sum]>, sbp = #job.nd_sbp<[broadcast]>, placement = #job.placement<cpu, ["0:0-3"]>} : (tensor<8xf32>) -> tensor<8xf32>
  job.return %b : tensor<8xf32>
}

// CHECK-LABEL: job.func @ce(%x: tensor<8x3xf32>, %y: tensor<8xi32>) -> tensor<8xf32>
// CHECK-NEXT:    %0 = job.class_split_max %x {classes = 10 : i64, mesh = array<i64: 4>, mesh_axis = 0 : i64, placement = #job.placement<cpu, ["0:0-3"]>, sbp = #job.nd_sbp<[partial_sum(max)]>} : (tensor<8x3xf32>) -> tensor<8xf32>
// CHECK-NEXT:    %1 = job.all_reduce %0 {mesh = array<i64: 4>, mesh_axis = 0 : i64, placement = #job.placement<cpu, ["0:0-3"]>, reduction = "max", sbp = #job.nd_sbp<[broadcast]>} : (tensor<8xf32>) -> tensor<8xf32>
// CHECK-NEXT:    %2 = job.class_split_sum_exp %x, %1 {classes = 10 : i64, {{.*}}, sbp = #job.nd_sbp<[partial_sum]>} : (tensor<8x3xf32>, tensor<8xf32>) -> tensor<8xf32>
// CHECK-NEXT:    %3 = job.all_reduce %2 {{.*}}sbp = #job.nd_sbp<[broadcast]>} : (tensor<8xf32>) -> tensor<8xf32>
// CHECK-NEXT:    %l = job.class_split_cross_entropy %x, %1, %3, %y {classes = 10 : i64, {{.*}}, sbp = #job.nd_sbp<[partial_sum]>} : (tensor<8x3xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xi32>) -> tensor<8xf32>
// CHECK-NEXT:    %b = job.all_reduce %l
// CHECK-NEXT:    job.return
