// lift-host-inputs: each job.ofrecord_decode (a field of an OFRecord reader's records) becomes an argument of
// its job.func after the placeholders, in op order and with the op's name; `host_inputs` records what feeds it.
// RUN: irflow-opt %s -p lift-host-inputs --split-input-file | filecheck %s
// RUN: irflow-opt %s -p lift-host-inputs,sbp-infer,insert-boxing,lower-to-physical,convert-job-to-buffer --split-input-file | filecheck %s --check-prefix=BUF

job.func @train(%scale: tensor<f32>) -> tensor<8xf32> attributes {job_type = "predict"} {
  %images = job.ofrecord_decode {reader = "OFRecord_Reader_0", data_dir = "/data/mnist", data_part_num = 2 : i64, part_name_prefix = "part-", part_name_suffix_length = -1 : i64, random_shuffle = false, shuffle_buffer_size = 1024 : i64, shuffle_after_epoch = false, field = "images", truncate = false} : tensor<8x4xf32>
  %labels = job.ofrecord_decode {reader = "OFRecord_Reader_0", data_dir = "/data/mnist", data_part_num = 2 : i64, part_name_prefix = "part-", part_name_suffix_length = -1 : i64, random_shuffle = false, shuffle_buffer_size = 1024 : i64, shuffle_after_epoch = false, field = "labels", truncate = false} : tensor<8xi32>
  %s = job.reduce_sum %images {axes = array<i64: 1>, keepdims = false} : (tensor<8x4xf32>) -> tensor<8xf32>
  %l = job.cast %labels : (tensor<8xi32>) -> tensor<8xf32>
  %m = job.mul %s, %l : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %r = job.mul %m, %scale : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  job.return %r : tensor<8xf32>
}

// CHECK-LABEL: job.func @train(%scale: tensor<f32>, %images: tensor<8x4xf32>, %labels: tensor<8xi32>) -> tensor<8xf32>
// CHECK-SAME:    host_inputs = [{data_dir = "/data/mnist", {{.*}}field = "images", index = 1 : i64, {{.*}}reader = "OFRecord_Reader_0"{{.*}}}, {{{.*}}field = "labels", index = 2 : i64
// CHECK-NOT:     job.ofrecord_decode
// CHECK:         job.reduce_sum %images

// BUF-LABEL: buffer.program @train
// BUF:         buffer.input %scale {index = 0 : i64}
// BUF:         buffer.input %images {index = 1 : i64}
// BUF:         buffer.input %labels {index = 2 : i64}

// -----

// On two devices the fed batch is split along its rows, as a placeholder's.
job.func @two(%x: tensor<4xf32>) -> tensor<4xf32> attributes {job_type = "predict", placement = #job.placement<cpu, ["0:0-1"]>, arg_sbp = [#job.nd_sbp<[split(0)]>]} {
  %y = job.ofrecord_decode {reader = "r", data_dir = "/d", data_part_num = 2 : i64, part_name_prefix = "part-", part_name_suffix_length = -1 : i64, random_shuffle = false, shuffle_buffer_size = 1024 : i64, shuffle_after_epoch = false, field = "y", truncate = false} : tensor<4xf32>
  %z = job.add %x, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  job.return %z : tensor<4xf32>
}

// CHECK-LABEL: job.func @two(%x: tensor<4xf32>, %y: tensor<4xf32>)
// CHECK-SAME:    arg_sbp = [#job.nd_sbp<[split(0)]>, #job.nd_sbp<[split(0)]>]

// BUF-LABEL: buffer.program @two
// BUF:         buffer.input %y {index = 1 : i64{{.*}}sbp = #job.nd_sbp<[split(0)]>} : memref<2xf32>

// -----

// A job without host inputs is left as it is.
job.func @plain(%x: tensor<4xf32>) -> tensor<4xf32> attributes {job_type = "predict"} {
  job.return %x : tensor<4xf32>
}

// CHECK-LABEL: job.func @plain(%x: tensor<4xf32>) -> tensor<4xf32> attributes {job_type = "predict"} {
// CHECK-NEXT:    job.return %x
