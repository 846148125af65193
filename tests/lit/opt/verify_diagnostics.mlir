// RUN: not irflow-opt %s --split-input-file --verify-diagnostics 2>&1 | filecheck %s

// --verify-diagnostics fails, as mlir-opt's does, on an expected diagnostic
// that did not occur, on an unexpected one and on a different message; it
// goes on through every chunk and exits 1.

job.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{use of undefined value %z}}
  %a = job.relu %y : (tensor<4xf32>) -> tensor<4xf32>
  job.return %a : tensor<4xf32>
}
// CHECK: verify_diagnostics.mlir:[[# @LINE - 3]]:17: error: error "use of undefined value %y" was emitted, but the expected one differs: "use of undefined value %z" (line [[# @LINE - 4]])

// -----

job.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = job.relu %y : (tensor<4xf32>) -> tensor<4xf32>
  job.return %a : tensor<4xf32>
}
// CHECK: verify_diagnostics.mlir:[[# @LINE - 3]]:17: error: unexpected error: use of undefined value %y

// -----

// expected-error@below {{this never happens}}
job.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  job.return %x : tensor<4xf32>
}
// CHECK: verify_diagnostics.mlir:[[# @LINE - 4]]: error: expected error "this never happens" was not produced (at line [[# @LINE - 3]])

// -----

job.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = job.relu %y : (tensor<4xf32>) -> tensor<4xf32>
  // expected-error@above {{use of undefined value %y}}
  job.return %a : tensor<4xf32>
}
// CHECK-NOT: error
