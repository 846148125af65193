// RUN: irflow-opt %s -p lower-to-physical | filecheck %s
// RUN: irflow-opt %s -p lower-to-physical,convert-job-to-buffer | filecheck %s --check-prefix=BUF

// The mirrored view on 4 devices, each with its own rows (docs/dynamic.md): a max over every
// device's rows needs them gathered. The gather's result is dynamic along axis 0 with bound 4 x 25;
// its actual rows are the devices' rows summed over the mesh axis (buffer.sum_sizes).

job.func @peak(%x: tensor<100x3xf32, #job.bounded<[0]>>) -> tensor<3xf32> attributes {job_type = "predict", placement = #job.placement<cpu, ["0:0-3"]>, arg_sbp = [#job.nd_sbp<[split(0)]>], view = "mirrored"} {
  %g = job.boxing %x {src_sbp = #job.nd_sbp<[split(0)]>, sbp = #job.nd_sbp<[broadcast]>, placement = #job.placement<cpu, ["0:0-3"]>} : (tensor<100x3xf32, #job.bounded<[0]>>) -> tensor<100x3xf32, #job.bounded<[0]>>
  %m = job.reduce_max %g {axes = array<i64: 0>, sbp = #job.nd_sbp<[broadcast]>, placement = #job.placement<cpu, ["0:0-3"]>, sbp_in = [#job.nd_sbp<[broadcast]>]} : (tensor<100x3xf32, #job.bounded<[0]>>) -> tensor<3xf32> loc("model.py":4:9)
  job.return %m : tensor<3xf32>
}

// CHECK-LABEL: job.func @peak(%x: tensor<25x3xf32, #job.bounded<[0]>>) -> tensor<3xf32>
// CHECK-NEXT:    %[[G:.*]] = job.all_gather %x {axis = 0 : i64, mesh = array<i64: 4>, mesh_axis = 0 : i64, {{.*}}sbp = #job.nd_sbp<[broadcast]>} : (tensor<25x3xf32, #job.bounded<[0]>>) -> tensor<100x3xf32, #job.bounded<[0]>>
// CHECK-NEXT:    %{{.*}} = job.reduce_max %[[G]] {{.*}} : (tensor<100x3xf32, #job.bounded<[0]>>) -> tensor<3xf32>

// BUF:         %[[N:.*]] = buffer.input_dim {axis = 0 : i64, index = 0 : i64} : index
// BUF-NEXT:    %[[X:.*]] = buffer.alloc : memref<25x3xf32>
// BUF-NEXT:    %[[XC:.*]] = buffer.cut %[[X]], %[[N]] : (memref<25x3xf32>, index) -> memref<?x3xf32>
// BUF:         %[[S:.*]] = buffer.sum_sizes %[[N]] {mesh = array<i64: 4>, mesh_axis = 0 : i64} : index -> index
// BUF-NEXT:    %[[G:.*]] = buffer.alloc : memref<100x3xf32>
// BUF-NEXT:    %[[GC:.*]] = buffer.cut %[[G]], %[[S]] : (memref<100x3xf32>, index) -> memref<?x3xf32>
// BUF-NEXT:    buffer.all_gather %[[XC]], %[[GC]] {axis = 0 : i64, mesh = array<i64: 4>, mesh_axis = 0 : i64} : memref<?x3xf32>, memref<?x3xf32>
// BUF:         buffer.kernel "reduce_max" ins(%[[GC]] : memref<?x3xf32>)

// On a 2x2 mesh the rows are split over both axes: one gather per axis, the last first. Each row
// of the mesh gathers its two devices' rows (bound 50, their sizes summed over mesh axis 1), then
// the two rows gather theirs (bound 100, those sums summed over mesh axis 0).

job.func @peak_mesh(%x: tensor<100x3xf32, #job.bounded<[0]>>) -> tensor<3xf32> attributes {job_type = "predict", placement = #job.placement<cpu, ["0:0-3"], hierarchy = [2, 2]>, arg_sbp = [#job.nd_sbp<[split(0), split(0)]>], view = "mirrored"} {
  %g = job.boxing %x {src_sbp = #job.nd_sbp<[split(0), split(0)]>, sbp = #job.nd_sbp<[broadcast, broadcast]>, placement = #job.placement<cpu, ["0:0-3"], hierarchy = [2, 2]>} : (tensor<100x3xf32, #job.bounded<[0]>>) -> tensor<100x3xf32, #job.bounded<[0]>>
  %m = job.reduce_max %g {axes = array<i64: 0>, sbp = #job.nd_sbp<[broadcast, broadcast]>, placement = #job.placement<cpu, ["0:0-3"], hierarchy = [2, 2]>, sbp_in = [#job.nd_sbp<[broadcast, broadcast]>]} : (tensor<100x3xf32, #job.bounded<[0]>>) -> tensor<3xf32> loc("model.py":4:9)
  job.return %m : tensor<3xf32>
}

// CHECK-LABEL: job.func @peak_mesh(%x: tensor<25x3xf32, #job.bounded<[0]>>) -> tensor<3xf32>
// CHECK-NEXT:    %[[ROW:.*]] = job.all_gather %x {axis = 0 : i64, mesh = array<i64: 2, 2>, mesh_axis = 1 : i64, {{.*}}sbp = #job.nd_sbp<[split(0), broadcast]>} : (tensor<25x3xf32, #job.bounded<[0]>>) -> tensor<50x3xf32, #job.bounded<[0]>>
// CHECK-NEXT:    %[[G:.*]] = job.all_gather %[[ROW]] {axis = 0 : i64, mesh = array<i64: 2, 2>, mesh_axis = 0 : i64, {{.*}}sbp = #job.nd_sbp<[broadcast, broadcast]>} : (tensor<50x3xf32, #job.bounded<[0]>>) -> tensor<100x3xf32, #job.bounded<[0]>>
// CHECK-NEXT:    %{{.*}} = job.reduce_max %[[G]]

// BUF-LABEL: buffer.program @peak_mesh
// BUF:         %[[N:.*]] = buffer.input_dim {axis = 0 : i64, index = 0 : i64} : index
// BUF:         %[[S1:.*]] = buffer.sum_sizes %[[N]] {mesh = array<i64: 2, 2>, mesh_axis = 1 : i64} : index -> index
// BUF:         buffer.all_gather {{.*}} {axis = 0 : i64, mesh = array<i64: 2, 2>, mesh_axis = 1 : i64}
// BUF-NEXT:    %{{.*}} = buffer.sum_sizes %[[S1]] {mesh = array<i64: 2, 2>, mesh_axis = 0 : i64} : index -> index
// BUF:         buffer.all_gather {{.*}} {axis = 0 : i64, mesh = array<i64: 2, 2>, mesh_axis = 0 : i64}
