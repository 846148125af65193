// RUN: irflow-opt %s -p 'plan-memory{effort=1 alignment=128}' | filecheck %s
// RUN: irflow-opt %s --pass-pipeline='builtin.module(plan-memory{effort=0.5 alignment=128})' | filecheck %s
// RUN: not irflow-opt %s -p 'plan-memory{effort=fast}' 2>&1 | filecheck %s --check-prefix=BAD

// A float option takes an integer, as mlir-opt reads a double option
// (`effort=1` is 1.0 seconds); a value that is no number is still refused.

buffer.program @p on "cpu" {
  %x = buffer.alloc : memref<4xf32>
  buffer.input %x {index = 0 : i64} : memref<4xf32>
  buffer.output %x {index = 0 : i64} : memref<4xf32>
}

// CHECK: buffer.arena {alignment = 128 : i64, size = 128 : i64}
// BAD: irflow-opt: error: invalid pass pipeline 'plan-memory{effort=fast}': option 'effort' of pass 'plan-memory'
