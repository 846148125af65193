// RUN: not irflow-opt %s -p lower-to-physical 2>&1 | filecheck %s

// What cannot be lowered exactly is an error at the user's line.

job.func @moved(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {placement = #job.placement<cpu, ["0:0-1"]>, arg_sbp = [#job.nd_sbp<[broadcast]>]} {
  %y = job.boxing %x {src_sbp = #job.nd_sbp<[broadcast]>, sbp = #job.nd_sbp<[broadcast]>, src_placement = #job.placement<cpu, ["0:2-3"]>, placement = #job.placement<cpu, ["0:0-1"]>} : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("model.py":12:7)
  job.return %y : tensor<4x8xf32>
}

// CHECK: model.py:12:7: error: 'job.boxing' is placed on #job.placement<cpu, ["0:2-3"]>, outside the job's devices #job.placement<cpu, ["0:0-1"]>
