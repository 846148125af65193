// RUN: not irflow-opt %s -p lower-to-physical 2>&1 | filecheck %s

// Of the collectives that would move a value that still has a dynamic axis, only the gather of
// each device's own rows (split(0) to broadcast) is done: an all_to_all of them is refused.

job.func @swap(%x: tensor<100x4xf32, #job.bounded<[0]>>) -> tensor<100x4xf32, #job.bounded<[0]>> attributes {placement = #job.placement<cpu, ["0:0-3"]>, arg_sbp = [#job.nd_sbp<[split(0)]>]} {
  %g = job.boxing %x {src_sbp = #job.nd_sbp<[split(0)]>, sbp = #job.nd_sbp<[split(1)]>, placement = #job.placement<cpu, ["0:0-3"]>} : (tensor<100x4xf32, #job.bounded<[0]>>) -> tensor<100x4xf32, #job.bounded<[0]>> loc("model.py":9:5)
  %y = job.relu %g {sbp = #job.nd_sbp<[split(1)]>, placement = #job.placement<cpu, ["0:0-3"]>} : (tensor<100x4xf32, #job.bounded<[0]>>) -> tensor<100x4xf32, #job.bounded<[0]>>
  job.return %y : tensor<100x4xf32, #job.bounded<[0]>>
}

// CHECK: model.py:9:5: error: 'job.relu' needs [split(1)] of a value that is [split(0)] with dynamic axes [0] (<=100, 4): each device holds its own sizes there, and irflow gathers only the rows of a value split along axis 0 to broadcast
