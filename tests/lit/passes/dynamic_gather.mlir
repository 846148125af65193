// RUN: irflow-opt %s --verify-roundtrip -p convert-job-to-buffer | filecheck %s

// A gather of dynamic ids (docs/dynamic.md): the result has the ids' actual count, and params'
// indexed axis relates to nothing (the kernel checks every index against its actual size). The
// gradient of a gather from dynamic params takes them as `like`, for their sizes only: the
// kernel reads dy and the ids.

job.func @embed(%table: tensor<10x4xf32>, %h: tensor<6x4xf32, #job.bounded<[0]>>, %ids: tensor<8xi32, #job.bounded<[0]>>) -> (tensor<8x4xf32, #job.bounded<[0]>>, tensor<6x4xf32, #job.bounded<[0]>>) {
  %e = job.gather %table, %ids {axis = 0 : i64} : (tensor<10x4xf32>, tensor<8xi32, #job.bounded<[0]>>) -> tensor<8x4xf32, #job.bounded<[0]>>
  %dh = job.gather_grad %e, %ids, %h {axis = 0 : i64} : (tensor<8x4xf32, #job.bounded<[0]>>, tensor<8xi32, #job.bounded<[0]>>, tensor<6x4xf32, #job.bounded<[0]>>) -> tensor<6x4xf32, #job.bounded<[0]>>
  job.return %e, %dh : tensor<8x4xf32, #job.bounded<[0]>>, tensor<6x4xf32, #job.bounded<[0]>>
}

// CHECK-LABEL: buffer.program @embed
// CHECK:         %[[ROWS:[0-9]+]] = buffer.input_dim {axis = 0 : i64, index = 1 : i64} : index
// CHECK:         %[[IDS:[0-9]+]] = buffer.input_dim {axis = 0 : i64, index = 2 : i64} : index
// CHECK:         %e = buffer.alloc : memref<8x4xf32>
// CHECK-NEXT:    %e_1 = buffer.cut %e, %[[IDS]] : (memref<8x4xf32>, index) -> memref<?x4xf32>
// CHECK-NEXT:    buffer.kernel "gather" ins(%table, %ids_1 : memref<10x4xf32>, memref<?xi32>) outs(%e_1 : memref<?x4xf32>) {axis = 0 : i64}
// CHECK-NEXT:    %dh = buffer.alloc : memref<6x4xf32>
// CHECK-NEXT:    %dh_1 = buffer.cut %dh, %[[ROWS]] : (memref<6x4xf32>, index) -> memref<?x4xf32>
// CHECK-NEXT:    buffer.kernel "gather_grad" ins(%e_1, %ids_1 : memref<?x4xf32>, memref<?xi32>) outs(%dh_1 : memref<?x4xf32>) {axis = 0 : i64}
