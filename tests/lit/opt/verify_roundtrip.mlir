// RUN: irflow-opt %s -p cse --verify-roundtrip --print-debuginfo | filecheck %s

// After parsing and after every pass the IR is printed (custom and generic,
// with locations), parsed back with the lark parser and compared; any
// difference is an error.  Here everything survives, locations included.

job.func @f(%x: tensor<4xf32> loc("model.py":1:1)) -> tensor<4xf32> {
  %a = job.relu %x {sbp = #job.nd_sbp<[split(0)]>} : (tensor<4xf32>) -> tensor<4xf32> loc("model.py":2:3)
  %b = job.relu %x {sbp = #job.nd_sbp<[split(0)]>} : (tensor<4xf32>) -> tensor<4xf32> loc("model.py":3:3)
  %c = job.add %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> loc("model.py":4:3)
  job.return %c : tensor<4xf32>
}

// CHECK:       job.func @f(%x: tensor<4xf32> loc("model.py":1:1))
// CHECK-NEXT:    %a = job.relu %x {sbp = #job.nd_sbp<[split(0)]>} : (tensor<4xf32>) -> tensor<4xf32> loc("model.py":2:3)
// CHECK-NEXT:    %c = job.add %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> loc("model.py":4:3)
