// RUN: irflow-opt %s -p convert-job-to-buffer,plan-memory --emit=memory-plan | filecheck %s
// RUN: not irflow-opt %s --emit=memory-plan 2>&1 | filecheck %s --check-prefix=UNPLANNED

job.func @chain(%x: tensor<16x16xf32>) -> tensor<16x16xf32> attributes {job_type = "predict"} {
  %a = job.exp %x : (tensor<16x16xf32>) -> tensor<16x16xf32>
  %b = job.matmul %a, %a : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  job.return %b : tensor<16x16xf32>
}

// CHECK:      memory plan of @chain: arena 2048 bytes, lower bound 2048 bytes, ratio 1.0000
// CHECK-NEXT: buffer {{ +}}bytes{{ +}}offset{{ +}}lifetime
// CHECK-NEXT: input 0 %x{{ +}}1024{{ +}}[[X:[0-9]+]]{{ +}}[1, 5]
// CHECK-NEXT: a{{ +}}1024{{ +}}[[X]]{{ +}}[1, 5]
// CHECK-NEXT: b{{ +}}1024{{ +}}{{[0-9]+}}{{ +}}[5, 6]

// UNPLANNED: error: --emit=memory-plan needs buffer.program ops
