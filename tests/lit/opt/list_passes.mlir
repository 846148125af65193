// RUN: irflow-opt --list-passes | filecheck %s
// RUN: irflow-opt --list-passes | filecheck %s --check-prefix=ONLY

// irflow's passes and the xDSL passes tested on its dialects (canonicalize,
// cse, dce), with the first line of the docstring and the options
// (name: type = default); none of xDSL's other passes.
// ONLY-NOT: {{^  (arith|memref|linalg|riscv|x86|stencil|lower-(affine|csl|hls|mpi|riscv|snitch)|mlir-opt|printf)}}

// CHECK-DAG: autodiff: Builds the backward program
// CHECK-DAG: optimizer: Lowers job.apply_gradients
// CHECK-DAG: convert-job-to-buffer: Lower every job.func to a buffer.program
// CHECK-DAG: sbp-infer:
// CHECK-DAG: insert-boxing:
// CHECK-DAG: lower-to-physical: Rewrite each distributed job.func
// CHECK-DAG: lift-host-inputs: Make each job.ofrecord_decode an argument
// CHECK-DAG: canonicalize: Applies all canonicalization patterns.
// CHECK-DAG: {{^}}  cse{{$}}
// CHECK-DAG: {{^}}  dce
