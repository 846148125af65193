// xDSL's generic passes work on job IR: job compute ops are Pure, so cse merges
// repeats and dce / canonicalize drop what nothing uses; variables and updates
// have effects and stay.
// RUN: irflow-opt %s -p cse --split-input-file | filecheck %s --check-prefix=CSE
// RUN: irflow-opt %s -p dce --split-input-file | filecheck %s --check-prefix=DCE
// RUN: irflow-opt %s -p canonicalize --split-input-file | filecheck %s --check-prefix=DCE

job.func @repeats(%x: tensor<4xf32>) -> tensor<4xf32> attributes {job_type = "predict"} {
  %a = job.exp %x : (tensor<4xf32>) -> tensor<4xf32>
  %b = job.exp %x : (tensor<4xf32>) -> tensor<4xf32>
  %c = job.add %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  job.return %c : tensor<4xf32>
}

// CSE-LABEL: job.func @repeats
// CSE-NEXT:    %a = job.exp %x
// CSE-NEXT:    %c = job.add %a, %a
// CSE-NEXT:    job.return %c

// -----

job.func @dead(%x: tensor<4xf32>, %g: tensor<4xf32>) -> tensor<4xf32> attributes {job_type = "train"} {
  %unused = job.tanh %x : (tensor<4xf32>) -> tensor<4xf32>
  %w = job.variable {name = "w", initializer = {kind = "zeros"}} : tensor<4xf32>
  %lr = job.fill {value = 0.1 : f64} : tensor<f32>
  job.sgd_update %w, %g, %lr : tensor<4xf32>, tensor<4xf32>, tensor<f32>
  job.return %x : tensor<4xf32>
}

// DCE-LABEL: job.func @dead
// DCE-NOT:     job.tanh
// DCE:         %w = job.variable
// DCE-NEXT:    %lr = job.fill
// DCE-NEXT:    job.sgd_update %w, %g, %lr
