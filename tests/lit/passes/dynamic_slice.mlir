// RUN: irflow-opt %s --verify-roundtrip -p convert-job-to-buffer | filecheck %s
// RUN: irflow-opt %s -p convert-job-to-buffer,plan-memory | filecheck %s --check-prefix=PLAN

// A slice that cuts a dynamic axis (docs/dynamic.md) keeps the rows it reaches of the actual
// size, as numpy's x[1:6:2] does: buffer.slice_size. Its gradient, job.slice_grad, takes the
// sliced input as `like` for its actual sizes only, so x's buffer need not live on. A top_k
// along a dynamic axis keeps min(k, its actual size) entries, a slice from 0 to k.

job.func @rows(%x: tensor<8x3xf32, #job.bounded<[0]>>, %dy: tensor<3x3xf32, #job.bounded<[0]>>) -> (tensor<3x3xf32, #job.bounded<[0]>>, tensor<8x3xf32, #job.bounded<[0]>>) {
  %h = job.relu %x : (tensor<8x3xf32, #job.bounded<[0]>>) -> tensor<8x3xf32, #job.bounded<[0]>>
  %s = job.slice %h {start = array<i64: 1, 0>, stop = array<i64: 6, 3>, step = array<i64: 2, 1>} : (tensor<8x3xf32, #job.bounded<[0]>>) -> tensor<3x3xf32, #job.bounded<[0]>>
  %dx = job.slice_grad %dy, %h {start = array<i64: 1, 0>, stop = array<i64: 6, 3>, step = array<i64: 2, 1>} : (tensor<3x3xf32, #job.bounded<[0]>>, tensor<8x3xf32, #job.bounded<[0]>>) -> tensor<8x3xf32, #job.bounded<[0]>>
  job.return %s, %dx : tensor<3x3xf32, #job.bounded<[0]>>, tensor<8x3xf32, #job.bounded<[0]>>
}

job.func @largest(%x: tensor<8x3xf32, #job.bounded<[0]>>) -> tensor<4x3xi32, #job.bounded<[0]>> {
  %i = job.top_k %x {axis = 0 : i64, k = 4 : i64} : (tensor<8x3xf32, #job.bounded<[0]>>) -> tensor<4x3xi32, #job.bounded<[0]>>
  job.return %i : tensor<4x3xi32, #job.bounded<[0]>>
}

// CHECK-LABEL: buffer.program @rows
// CHECK:         %[[N:[0-9]+]] = buffer.input_dim {axis = 0 : i64, index = 0 : i64} : index
// CHECK:         buffer.kernel "relu"
// CHECK-NEXT:    %[[M:[0-9]+]] = buffer.slice_size %[[N]] {start = 1 : i64, step = 2 : i64, stop = 6 : i64} : index -> index
// CHECK-NEXT:    %s = buffer.alloc : memref<3x3xf32>
// CHECK-NEXT:    %s_1 = buffer.cut %s, %[[M]] : (memref<3x3xf32>, index) -> memref<?x3xf32>
// CHECK-NEXT:    buffer.kernel "slice" ins(%h_1 : memref<?x3xf32>) outs(%s_1 : memref<?x3xf32>)
// CHECK:         %dx = buffer.alloc : memref<8x3xf32>
// CHECK-NEXT:    %dx_1 = buffer.cut %dx, %[[N]] : (memref<8x3xf32>, index) -> memref<?x3xf32>
// CHECK-NEXT:    buffer.kernel "slice_grad" ins(%dy_1 : memref<?x3xf32>) outs(%dx_1 : memref<?x3xf32>)

// CHECK-LABEL: buffer.program @largest
// CHECK:         %[[N:[0-9]+]] = buffer.input_dim {axis = 0 : i64, index = 0 : i64} : index
// CHECK:         %[[K:[0-9]+]] = buffer.slice_size %[[N]] {start = 0 : i64, step = 1 : i64, stop = 4 : i64} : index -> index
// CHECK-NEXT:    %i = buffer.alloc : memref<4x3xi32>
// CHECK-NEXT:    %i_1 = buffer.cut %i, %[[K]] : (memref<4x3xi32>, index) -> memref<?x3xi32>
// CHECK-NEXT:    buffer.kernel "top_k" ins(%x_1 : memref<?x3xf32>) outs(%i_1 : memref<?x3xi32>) {axis = 0 : i64, k = 4 : i64}

// h's last use is the slice: the gradient's buffer may take its place.
// PLAN-LABEL: buffer.program @rows
// PLAN:         %h = buffer.view %{{[0-9]+}} {lifetime = array<i64: [[B:[0-9]+]], [[E:[0-9]+]]>, offset = [[AT:[0-9]+]] : i64}
// PLAN:         %dx = buffer.view %{{[0-9]+}} {lifetime = array<i64: {{[0-9]+}}, {{[0-9]+}}>, offset = [[AT]] : i64}
