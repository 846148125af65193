// RUN: irflow-opt %s -p lower-to-physical | filecheck %s
// RUN: irflow-opt %s -p lower-to-physical,convert-job-to-buffer | filecheck %s --check-prefix=BUF

// A feature extractor on 4 devices and a head on 2 of them (placement n -> m).
// One program over the job's 4 devices: the head's ops keep their placement
// (per-device types on its 2 devices, its all_reduce over those 2 only), and
// each change of placement is one job.transfer that carries split or whole
// pieces; the head's partial sum is reduce-scattered on its own devices first.

job.func @head(%x: tensor<8x6xf32>, %w: tensor<6x4xf32>) -> tensor<8x4xf32> attributes {placement = #job.placement<cpu, ["0:0-3"]>, arg_sbp = [#job.nd_sbp<[split(0)]>, #job.nd_sbp<[broadcast]>]} {
  %h = job.tanh %x {sbp = #job.nd_sbp<[split(0)]>, placement = #job.placement<cpu, ["0:0-3"]>} : (tensor<8x6xf32>) -> tensor<8x6xf32>
  %hh = job.boxing %h {src_sbp = #job.nd_sbp<[split(0)]>, sbp = #job.nd_sbp<[split(1)]>, src_placement = #job.placement<cpu, ["0:0-3"]>, placement = #job.placement<cpu, ["0:2-3"]>, reason = "job.matmul needs [split(1)] for operand 0"} : (tensor<8x6xf32>) -> tensor<8x6xf32>
  %ww = job.boxing %w {src_sbp = #job.nd_sbp<[broadcast]>, sbp = #job.nd_sbp<[split(0)]>, src_placement = #job.placement<cpu, ["0:0-3"]>, placement = #job.placement<cpu, ["0:2-3"]>} : (tensor<6x4xf32>) -> tensor<6x4xf32>
  %y = job.matmul %hh, %ww {sbp = #job.nd_sbp<[partial_sum]>, placement = #job.placement<cpu, ["0:2-3"]>, sbp_in = [#job.nd_sbp<[split(1)]>, #job.nd_sbp<[split(0)]>]} : (tensor<8x6xf32>, tensor<6x4xf32>) -> tensor<8x4xf32>
  %b = job.boxing %y {src_sbp = #job.nd_sbp<[partial_sum]>, sbp = #job.nd_sbp<[broadcast]>, src_placement = #job.placement<cpu, ["0:2-3"]>, placement = #job.placement<cpu, ["0:0-3"]>, reason = "job.return needs [broadcast]"} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  job.return %b : tensor<8x4xf32>
}

// CHECK-LABEL: job.func @head(%x: tensor<2x6xf32>, %w: tensor<6x4xf32>) -> tensor<8x4xf32>
// CHECK-SAME:    mesh = array<i64: 4>
// CHECK-NEXT:    %h = job.tanh %x {{.*}} : (tensor<2x6xf32>) -> tensor<2x6xf32>
// CHECK-NEXT:    %{{.*}} = job.transfer %h {logical_shape = array<i64: 8, 6>, placement = #job.placement<cpu, ["0:2-3"]>, reason = "job.matmul needs [split(1)] for operand 0", sbp = #job.nd_sbp<[split(1)]>, src_placement = #job.placement<cpu, ["0:0-3"]>, src_sbp = #job.nd_sbp<[split(0)]>} : (tensor<2x6xf32>) -> tensor<8x3xf32>
// CHECK-NEXT:    %{{.*}} = job.transfer %w {{.*}}sbp = #job.nd_sbp<[split(0)]>, src_placement = #job.placement<cpu, ["0:0-3"]>, src_sbp = #job.nd_sbp<[broadcast]>} : (tensor<6x4xf32>) -> tensor<3x4xf32>
// CHECK-NEXT:    %y = job.matmul {{.*}} : (tensor<8x3xf32>, tensor<3x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT:    %{{.*}} = job.reduce_scatter %y {axis = 0 : i64, mesh = array<i64: 2>, mesh_axis = 0 : i64, placement = #job.placement<cpu, ["0:2-3"]>, {{.*}}} : (tensor<8x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT:    %{{.*}} = job.transfer %{{.*}} {logical_shape = array<i64: 8, 4>, placement = #job.placement<cpu, ["0:0-3"]>, {{.*}}sbp = #job.nd_sbp<[broadcast]>, src_placement = #job.placement<cpu, ["0:2-3"]>, src_sbp = #job.nd_sbp<[split(0)]>} : (tensor<4x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT:    job.return
// CHECK-NOT:     job.all_gather

// The buffer program: the head's ops are marked with their placement (the other devices skip them).
// BUF:      buffer.program @head on "cpu" attributes {{.*}}placement = #job.placement<cpu, ["0:0-3"]>
// BUF:        buffer.transfer %h, %{{.*}} {{.*}}placement = #job.placement<cpu, ["0:2-3"]>{{.*}}src_placement = #job.placement<cpu, ["0:0-3"]>
// BUF:        buffer.kernel "matmul" {{.*}} attributes {placement = #job.placement<cpu, ["0:2-3"]>}
// BUF-NEXT:   %{{.*}} = buffer.alloc
// BUF-NEXT:   buffer.reduce_scatter {{.*}}mesh = array<i64: 2>, mesh_axis = 0 : i64, placement = #job.placement<cpu, ["0:2-3"]>
// BUF:        buffer.transfer {{.*}}placement = #job.placement<cpu, ["0:0-3"]>{{.*}}src_placement = #job.placement<cpu, ["0:2-3"]>
