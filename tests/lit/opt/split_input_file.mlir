// RUN: irflow-opt %s --split-input-file | filecheck %s
// RUN: not irflow-opt %s 2>&1 | filecheck %s --check-prefix=WHOLE

// Each chunk between separator lines is parsed, transformed and printed on its
// own; the outputs are separated the same way.  Without the flag the second
// definition of @f is just more text: both land in one module.

job.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
  %y = job.relu %x : (tensor<2xf32>) -> tensor<2xf32>
  job.return %y : tensor<2xf32>
}

// -----

job.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
  %y = job.tanh %x : (tensor<2xf32>) -> tensor<2xf32>
  job.return %y : tensor<2xf32>
}

// CHECK:       builtin.module {
// CHECK-NEXT:    job.func @f
// CHECK-NEXT:      %y = job.relu %x
// CHECK:       // -----
// CHECK-NEXT:  builtin.module {
// CHECK-NEXT:    job.func @f
// CHECK-NEXT:      %y = job.tanh %x

// WHOLE: split_input_file.mlir:1:1: error: 'builtin.module' op Redefinition of symbol "f"
