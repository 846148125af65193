// RUN: not irflow-opt %s -p sbp-infer 2>&1 | filecheck %s

// A per-device op in a logical job (written by hand: lower-to-physical marks the
// funcs it writes with `mesh`, and sbp-infer leaves those alone) has no SBP
// rules; it is an error at the op, not an internal KeyError.

job.func @moved(%x: tensor<2x4xf32>) -> tensor<5x2xf32> {
  %y = job.transfer %x {logical_shape = array<i64: 5, 4>, src_sbp = #job.nd_sbp<[split(0)]>, src_placement = #job.placement<cpu, ["0:0-3"]>, sbp = #job.nd_sbp<[split(1)]>, placement = #job.placement<cpu, ["0:4-5"]>} : (tensor<2x4xf32>) -> tensor<5x2xf32> loc("model.py":9:4)
  job.return %y : tensor<5x2xf32>
}

// CHECK: model.py:9:4: error: 'job.transfer' is a per-device op (lower-to-physical writes it): sbp-infer runs on the logical job
// CHECK-NOT: internal error
