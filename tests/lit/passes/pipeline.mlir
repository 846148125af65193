// The whole train pipeline on the smallest job: one dense layer, cross-entropy, SGD.
// RUN: irflow-opt %s -p 'autodiff,optimizer,cse,convert-job-to-buffer,plan-memory' | filecheck %s
// RUN: irflow-opt %s -p 'autodiff,optimizer,cse,convert-job-to-buffer,plan-memory' --verify-roundtrip > /dev/null

job.func @tiny(%x: tensor<4x3xf32>, %y: tensor<4xi32>) -> tensor<4xf32> attributes {job_type = "train"} {
  %w = job.variable {name = "fc-weight", initializer = {kind = "constant", value = 0.0 : f64}} : tensor<2x3xf32>
  %mm = job.matmul %x, %w {transpose_b = true} : (tensor<4x3xf32>, tensor<2x3xf32>) -> tensor<4x2xf32>
  %b = job.variable {name = "fc-bias", initializer = {kind = "constant", value = 0.0 : f64}} : tensor<2xf32>
  %logits = job.bias_add %mm, %b : (tensor<4x2xf32>, tensor<2xf32>) -> tensor<4x2xf32>
  %loss = job.sparse_softmax_cross_entropy %logits, %y : (tensor<4x2xf32>, tensor<4xi32>) -> tensor<4xf32>
  job.minimize %loss {optimizer = {kind = "sgd", momentum = 0.0 : f64, lr = {kind = "piecewise_constant", boundaries = array<i64>, values = array<f64: 0.1>}}} : tensor<4xf32>
  job.return %loss : tensor<4xf32>
}

// One arena, planned against its lower bound; inputs copied in.
// CHECK:       buffer.program @tiny on "cpu" attributes {arena_size = [[SIZE:[0-9]+]] : i64, job_type = "train", lower_bound = {{[0-9]+}} : i64} {
// CHECK-NEXT:    %{{.*}} = buffer.arena {alignment = 64 : i64, size = [[SIZE]] : i64}
// CHECK:         buffer.input %x {index = 0 : i64}
// Forward, then the backward of cross-entropy, bias_add and matmul (autodiff) ...
// CHECK:         buffer.kernel "sparse_softmax_cross_entropy"
// CHECK:         buffer.kernel "sparse_softmax_cross_entropy_grad"
// CHECK:         buffer.kernel "reduce_sum"
// CHECK:         buffer.kernel "matmul" ins(%{{.*}}, %x : {{.*}}) outs(%{{.*}} : memref<2x3xf32>) {transpose_a = true
// ... then the learning rate at the current step and the updates (optimizer) ...
// CHECK:         buffer.kernel "learning_rate"
// CHECK:         buffer.kernel "sgd_update" ins(%w, {{.*}}) outs(%w : memref<2x3xf32>)
// CHECK:         buffer.kernel "sgd_update" ins(%b, {{.*}}) outs(%b : memref<2xf32>)
// ... and the step counter moves on.
// CHECK:         buffer.copy
// CHECK:         buffer.output %loss {index = 0 : i64}
// CHECK-NOT:     job.
