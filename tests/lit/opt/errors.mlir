// RUN: not irflow-opt %s 2>&1 | filecheck %s
// RUN: irflow-opt %s --split-input-file --verify-diagnostics
// RUN: not irflow-opt %s --split-input-file 2>&1 | filecheck %s --check-prefix=DIAG
// RUN: not irflow-opt %s -p no-such-pass 2>&1 | filecheck %s --check-prefix=PIPELINE
// RUN: not irflow-opt %s -p 'cse{no-such-option=1}' 2>&1 | filecheck %s --check-prefix=PIPELINE-OPTION
// RUN: not irflow-opt %S/does-not-exist.mlir 2>&1 | filecheck %s --check-prefix=MISSING

// Bad input is one `file:line:col: error: message` on stderr, the source line
// and a caret, and exit status 1; never a traceback.  --split-input-file
// reports every chunk's error and exits 1; --verify-diagnostics checks them
// against the `expected-error` annotations and exits 0.

job.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{use of undefined value %y}}
  %a = job.relu %y : (tensor<4xf32>) -> tensor<4xf32>
  job.return %a : tensor<4xf32>
}

// CHECK:      errors.mlir:[[# @LINE - 4]]:17: error: use of undefined value %y
// CHECK-NEXT:   %a = job.relu %y : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: {{^}}                ^{{$}}
// CHECK-NOT:  Traceback

// DIAG: errors.mlir:[[# @LINE - 9]]:17: error: use of undefined value %y

// PIPELINE: irflow-opt: error: invalid pass pipeline 'no-such-pass': unknown pass 'no-such-pass'
// PIPELINE-OPTION: irflow-opt: error: invalid pass pipeline 'cse{no-such-option=1}'
// MISSING: irflow-opt: error: {{.*}}does-not-exist.mlir

// -----

%a = job.fill {value = 1.0 : f32} : tensor<4xf32>
// expected-error@+1 {{expected ')', got '->'}}
%b = job.relu %a : (tensor<4xf32> -> tensor<4xf32>
// DIAG: errors.mlir:[[# @LINE - 1]]:35: error: expected ')', got '->'

// -----

%a = job.fill {value = 1.0 : f32} : tensor<4xf32>
// expected-error@+1 {{redefinition of value %a}}
%a = job.relu %a : (tensor<4xf32>) -> tensor<4xf32>
// DIAG: errors.mlir:[[# @LINE - 1]]:1: error: redefinition of value %a

// -----

%a = job.fill {value = 1.0 : f32} : tensor<4xf32>
// expected-error@+1 {{value %a has type tensor<4xf32>, but is used as tensor<4xf64>}}
%b = job.relu %a : (tensor<4xf64>) -> tensor<4xf64>
// DIAG: errors.mlir:[[# @LINE - 1]]:15: error: value %a has type tensor<4xf32>, but is used as tensor<4xf64>

// -----

// expected-error@+1 {{unknown operation 'job.frobnicate'}}
%a = job.frobnicate : tensor<4xf32>
// DIAG: errors.mlir:[[# @LINE - 1]]:6: error: unknown operation 'job.frobnicate'

// -----

// expected-error@+1 {{invalid type '!job.tensor<4>': 'job.tensor' is not registered}}
%a = job.fill {value = 1.0 : f32} : !job.tensor<4>
// DIAG: errors.mlir:[[# @LINE - 1]]:37: error: invalid type '!job.tensor<4>': 'job.tensor' is not registered

// -----

// expected-error@+1 {{invalid attribute '#job.sbp_signature<[split(0)]>': 'job.sbp_signature' is not registered}}
%a = job.fill {value = 1.0 : f32, sbp = #job.sbp_signature<[split(0)]>} : tensor<4xf32>
// DIAG: errors.mlir:[[# @LINE - 1]]:41: error: invalid attribute '#job.sbp_signature<[split(0)]>'

// -----

// expected-error@+1 {{0 operands but 1 operand types}}
%a = job.matmul : (tensor<4x8xf32>) -> tensor<4x8xf32>
// DIAG: errors.mlir:[[# @LINE - 1]]:6: error: 0 operands but 1 operand types
