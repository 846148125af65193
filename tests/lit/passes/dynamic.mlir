// RUN: irflow-opt %s -p convert-job-to-buffer | filecheck %s
// RUN: irflow-opt %s -p convert-job-to-buffer,plan-memory | filecheck %s --check-prefix=PLAN

// Dynamic sizes (docs/dynamic.md): every dynamic tensor gets a buffer at its bound and a
// buffer.cut at its actual sizes, index values read from the inputs. Where an op needs two
// sizes equal (the rows of logits and labels from two inputs), a run-time check; a mean's
// count over a dynamic axis is written by buffer.store_size. plan-memory plans at the bound.

job.func @loss(%x: tensor<100x8xf32, #job.bounded<[0]>>, %labels: tensor<100xi32, #job.bounded<[0]>>) -> tensor<f32> {
  %w = job.variable {name = "w", initializer = {kind = "zeros"}} : tensor<3x8xf32>
  %logits = job.matmul %x, %w {transpose_b = true} : (tensor<100x8xf32, #job.bounded<[0]>>, tensor<3x8xf32>) -> tensor<100x3xf32, #job.bounded<[0]>>
  %ce = job.sparse_softmax_cross_entropy %logits, %labels : (tensor<100x3xf32, #job.bounded<[0]>>, tensor<100xi32, #job.bounded<[0]>>) -> tensor<100xf32, #job.bounded<[0]>>
  %sum = job.reduce_sum %ce {axes = array<i64: 0>} : (tensor<100xf32, #job.bounded<[0]>>) -> tensor<f32>
  %n = job.size_of %ce {axes = array<i64: 0>} : (tensor<100xf32, #job.bounded<[0]>>) -> tensor<f32>
  %mean = job.div %sum, %n : (tensor<f32>, tensor<f32>) -> tensor<f32>
  job.return %mean : tensor<f32>
}

// CHECK-LABEL: buffer.program @loss on "cpu" attributes {job_type = "predict"} {
// CHECK-NEXT:    %0 = buffer.input_dim {axis = 0 : i64, index = 0 : i64} : index
// CHECK-NEXT:    %x = buffer.alloc : memref<100x8xf32>
// CHECK-NEXT:    %x_1 = buffer.cut %x, %0 : (memref<100x8xf32>, index) -> memref<?x8xf32>
// CHECK-NEXT:    buffer.input %x_1 {index = 0 : i64} : memref<?x8xf32>
// CHECK-NEXT:    %1 = buffer.input_dim {axis = 0 : i64, index = 1 : i64} : index
// CHECK-NEXT:    %labels = buffer.alloc : memref<100xi32>
// CHECK-NEXT:    %labels_1 = buffer.cut %labels, %1 : (memref<100xi32>, index) -> memref<?xi32>
// CHECK-NEXT:    buffer.input %labels_1 {index = 1 : i64} : memref<?xi32>
// CHECK:         buffer.kernel "matmul" ins(%x_1, %w : memref<?x8xf32>, memref<3x8xf32>) outs(%logits_1 : memref<?x3xf32>)
// CHECK-NEXT:    buffer.assert_same_size %0, %1 {what = "job.sparse_softmax_cross_entropy: operand #0 axis 0 (argument 'x' axis 0) and operand #1 axis 0 (argument 'labels' axis 0)"} : index, index
// CHECK-NEXT:    %ce = buffer.alloc : memref<100xf32>
// CHECK-NEXT:    %ce_1 = buffer.cut %ce, %0 : (memref<100xf32>, index) -> memref<?xf32>
// CHECK-NEXT:    buffer.kernel "sparse_softmax_cross_entropy" ins(%logits_1, %labels_1 : memref<?x3xf32>, memref<?xi32>) outs(%ce_1 : memref<?xf32>)
// CHECK-NEXT:    %sum = buffer.alloc : memref<f32>
// CHECK-NEXT:    buffer.kernel "reduce_sum" ins(%ce_1 : memref<?xf32>) outs(%sum : memref<f32>)
// CHECK-NEXT:    %n = buffer.alloc : memref<f32>
// CHECK-NEXT:    buffer.store_size %n, %0 {factor = 1 : i64} : memref<f32>, index

// PLAN-LABEL: buffer.program @loss
// PLAN:         %x = buffer.view %{{.*}} : memref<{{[0-9]+}}xi8> -> memref<100x8xf32>
// PLAN-NEXT:    %x_1 = buffer.cut %x, %{{[0-9]+}} : (memref<100x8xf32>, index) -> memref<?x8xf32>
// PLAN-NOT:     buffer.alloc
