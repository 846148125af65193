// RUN: irflow-opt %s -p cse,dce --print-ir-after-all 2>&1 >/dev/null | filecheck %s
// RUN: irflow-opt %s -p cse,dce --print-ir-after-change 2>&1 >/dev/null | filecheck %s --check-prefix=CHANGE

// The IR goes to stderr after every pass (mlir-opt's dump format), or only
// after the passes that changed it.  cse merges the two relus; dce then finds
// nothing left to delete.

job.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = job.relu %x : (tensor<4xf32>) -> tensor<4xf32>
  %b = job.relu %x : (tensor<4xf32>) -> tensor<4xf32>
  %c = job.add %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  job.return %c : tensor<4xf32>
}

// CHECK:       // -----// IR Dump After cse //----- //
// CHECK-NEXT:  builtin.module {
// CHECK-NEXT:    job.func @f
// CHECK-NEXT:      %a = job.relu %x
// CHECK-NEXT:      %c = job.add %a, %a
// CHECK:       // -----// IR Dump After dce //----- //
// CHECK-NEXT:  builtin.module {
// CHECK-NEXT:    job.func @f
// CHECK-NEXT:      %a = job.relu %x
// CHECK-NEXT:      %c = job.add %a, %a

// CHANGE:      // -----// IR Dump After cse //----- //
// CHANGE-NOT:  IR Dump After dce
