// RUN: irflow-opt --list-passes | filecheck %s

// Every registered pass, irflow's and xDSL's, with the first line of its
// docstring and its options (name: type = default).

// CHECK-DAG: autodiff: Builds the backward program
// CHECK-DAG: optimizer: Lowers job.apply_gradients
// CHECK-DAG: convert-job-to-buffer: Lower every job.func to a buffer.program
// CHECK-DAG: canonicalize: Applies all canonicalization patterns.
// CHECK-DAG: {{^}}  cse{{$}}
// CHECK-DAG: {{^}}  dce
