// RUN: not irflow-opt %s --split-input-file -p insert-boxing 2>&1 | filecheck %s

// A hand-written arg_sbp that does not fit the job's placement or its argument
// is an error that names it (insert-boxing trusts what sbp-infer wrote, and no
// verifier checks a func's arg_sbp; these were internal errors).

job.func @components(%x: tensor<8x4xf32>) -> tensor<8x4xf32> attributes {placement = #job.placement<cpu, ["0:0-1"]>, arg_sbp = [#job.nd_sbp<[split(0), split(1)]>]} {
  job.return %x : tensor<8x4xf32>
}

// CHECK: error: arg_sbp #0 of job 'components' [split(0), split(1)] has 2 components for a placement hierarchy of 1 axes [2]

// -----

job.func @rank(%x: tensor<8x4xf32>) -> tensor<8x4xf32> attributes {placement = #job.placement<cpu, ["0:0-1"]>, arg_sbp = [#job.nd_sbp<[split(5)]>]} {
  job.return %x : tensor<8x4xf32>
}

// CHECK: error: arg_sbp #0 of job 'rank' [split(5)] splits axis 5 of a rank-2 value

// -----

job.func @missing(%x: tensor<8x4xf32>) -> tensor<8x4xf32> attributes {placement = #job.placement<cpu, ["0:0-1"]>, arg_sbp = []} {
  job.return %x : tensor<8x4xf32>
}

// CHECK: error: arg_sbp #0 of job 'missing' is missing or not a #job.nd_sbp: run sbp-infer first
// CHECK-NOT: internal error
