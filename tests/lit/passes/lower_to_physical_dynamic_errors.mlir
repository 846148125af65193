// RUN: not irflow-opt %s -p lower-to-physical 2>&1 | filecheck %s

// No collective moves a value that still has a dynamic axis: each device holds its own rows.

job.func @gather(%x: tensor<100x3xf32, #job.bounded<[0]>>) -> tensor<100x3xf32, #job.bounded<[0]>> attributes {placement = #job.placement<cpu, ["0:0-3"]>, arg_sbp = [#job.nd_sbp<[split(0)]>]} {
  %g = job.boxing %x {src_sbp = #job.nd_sbp<[split(0)]>, sbp = #job.nd_sbp<[broadcast]>, placement = #job.placement<cpu, ["0:0-3"]>} : (tensor<100x3xf32, #job.bounded<[0]>>) -> tensor<100x3xf32, #job.bounded<[0]>> loc("model.py":9:5)
  %y = job.relu %g {sbp = #job.nd_sbp<[broadcast]>, placement = #job.placement<cpu, ["0:0-3"]>} : (tensor<100x3xf32, #job.bounded<[0]>>) -> tensor<100x3xf32, #job.bounded<[0]>>
  job.return %y : tensor<100x3xf32, #job.bounded<[0]>>
}

// CHECK: model.py:9:5: error: 'job.relu' needs [broadcast] of a value that is [split(0)] with dynamic axes [0] (<=100, 3): each device holds its own sizes there
