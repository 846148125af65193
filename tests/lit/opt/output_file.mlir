// RUN: echo "an earlier result" > %t
// RUN: not irflow-opt %s --split-input-file -o %t
// RUN: filecheck %s --input-file=%t --check-prefix=KEPT
// RUN: not irflow-opt %s --split-input-file -p plan-memory -o %t
// RUN: filecheck %s --input-file=%t --check-prefix=KEPT
// RUN: irflow-opt %s --split-input-file --verify-diagnostics -o %t
// RUN: filecheck %s --input-file=%t --check-prefix=WRITTEN

// As in mlir-opt, -o is written only by a run that succeeds: a parse error in
// any chunk, or a pass that fails, leaves an existing output file as it was.
// With --verify-diagnostics the expected error is a success, and the file is
// written.

job.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
  %y = job.relu %x : (tensor<2xf32>) -> tensor<2xf32>
  job.return %y : tensor<2xf32>
}

// -----

// expected-error@+1 {{unknown operation 'job.frob'}}
%a = job.frob

// KEPT: an earlier result
// KEPT-NOT: job.func
// WRITTEN-NOT: an earlier result
// WRITTEN: job.func @f
