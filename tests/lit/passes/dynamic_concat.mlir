// RUN: irflow-opt %s --verify-roundtrip -p convert-job-to-buffer | filecheck %s
// RUN: irflow-opt %s -p convert-job-to-buffer,plan-memory | filecheck %s --check-prefix=PLAN

// A concatenation along a dynamic axis (docs/dynamic.md): its size there is the inputs' sum,
// buffer.add_sizes of the dynamic ones plus the static ones. Its gradient, job.concat_grad, is
// a buffer.subview of dy from the sizes of the inputs before its own, copied out; the inputs
// give only their sizes, so their buffers need not live on.

job.func @join(%a: tensor<4x3xf32, #job.bounded<[0]>>, %b: tensor<5x3xf32, #job.bounded<[0]>>, %dy: tensor<11x3xf32, #job.bounded<[0]>>) -> (tensor<11x3xf32, #job.bounded<[0]>>, tensor<5x3xf32, #job.bounded<[0]>>) {
  %c = job.fill {shape = array<i64: 2, 3>, value = 1.0 : f64} : tensor<2x3xf32>
  %ab = job.concat %a, %c, %b {axis = 0 : i64} : (tensor<4x3xf32, #job.bounded<[0]>>, tensor<2x3xf32>, tensor<5x3xf32, #job.bounded<[0]>>) -> tensor<11x3xf32, #job.bounded<[0]>>
  %db = job.concat_grad %dy, %a, %c, %b {axis = 0 : i64, index = 2 : i64} : (tensor<11x3xf32, #job.bounded<[0]>>, tensor<4x3xf32, #job.bounded<[0]>>, tensor<2x3xf32>, tensor<5x3xf32, #job.bounded<[0]>>) -> tensor<5x3xf32, #job.bounded<[0]>>
  job.return %ab, %db : tensor<11x3xf32, #job.bounded<[0]>>, tensor<5x3xf32, #job.bounded<[0]>>
}

// CHECK-LABEL: buffer.program @join
// CHECK:         %0 = buffer.input_dim {axis = 0 : i64, index = 0 : i64} : index
// CHECK:         %1 = buffer.input_dim {axis = 0 : i64, index = 1 : i64} : index
// CHECK:         %dy_1 = buffer.cut %dy, %{{[0-9]+}} : (memref<11x3xf32>, index) -> memref<?x3xf32>
// CHECK:         %[[SUM:[0-9]+]] = buffer.add_sizes %0, %1 {constant = 2 : i64} : index, index -> index
// CHECK-NEXT:    %ab = buffer.alloc : memref<11x3xf32>
// CHECK-NEXT:    %ab_1 = buffer.cut %ab, %[[SUM]] : (memref<11x3xf32>, index) -> memref<?x3xf32>
// CHECK-NEXT:    buffer.kernel "concat" ins(%a_1, %c, %b_1 : memref<?x3xf32>, memref<2x3xf32>, memref<?x3xf32>) outs(%ab_1 : memref<?x3xf32>) {axis = 0 : i64}
// CHECK-NEXT:    %[[AT:[0-9]+]] = buffer.add_sizes %0 {constant = 2 : i64} : index -> index
// CHECK-NEXT:    %[[PART:[0-9]+]] = buffer.subview %dy_1, %[[AT]], %1 {axis = 0 : i64} : (memref<?x3xf32>, index, index) -> memref<?x3xf32>
// CHECK-NEXT:    %db = buffer.alloc : memref<5x3xf32>
// CHECK-NEXT:    %db_1 = buffer.cut %db, %1 : (memref<5x3xf32>, index) -> memref<?x3xf32>
// CHECK-NEXT:    buffer.kernel "identity" ins(%[[PART]] : memref<?x3xf32>) outs(%db_1 : memref<?x3xf32>)

// The subview aliases dy: planned, dy stays live until the copy out of it.
// PLAN-LABEL: buffer.program @join
// PLAN:         buffer.subview %dy_1
// PLAN-NOT:     buffer.alloc
