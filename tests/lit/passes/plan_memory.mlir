// RUN: irflow-opt %s -p plan-memory | filecheck %s
// RUN: irflow-opt %s -p 'plan-memory{in-place=false}' | filecheck %s --check-prefix=NOINPLACE
// RUN: irflow-opt %s -p plan-memory,plan-memory | filecheck %s

// %x dies at exp, so exp writes %a in place (same offset); %c is read again
// after sigmoid, so %d needs bytes of its own, but can take the bytes of %x/%a,
// dead by then; add writes %e over %c, which dies there. Lifetimes are
// inclusive spans of schedule indices, merged across in-place partners.
// Run twice, the pass leaves the planned program (it has its arena) as it is.

buffer.program @chain on "cpu" {
  %x = buffer.alloc : memref<16x16xf32>
  buffer.input %x {index = 0 : i64} : memref<16x16xf32>
  %a = buffer.alloc : memref<16x16xf32>
  buffer.kernel "exp" ins(%x : memref<16x16xf32>) outs(%a : memref<16x16xf32>)
  %c = buffer.alloc : memref<16x16xf32>
  buffer.kernel "matmul" ins(%a, %a : memref<16x16xf32>, memref<16x16xf32>) outs(%c : memref<16x16xf32>)
  %d = buffer.alloc : memref<16x16xf32>
  buffer.kernel "sigmoid" ins(%c : memref<16x16xf32>) outs(%d : memref<16x16xf32>)
  %e = buffer.alloc : memref<16x16xf32>
  buffer.kernel "add" ins(%c, %d : memref<16x16xf32>, memref<16x16xf32>) outs(%e : memref<16x16xf32>)
  buffer.output %e {index = 0 : i64} : memref<16x16xf32>
}

// CHECK-LABEL: buffer.program @chain on "cpu" attributes {arena_size = 2048 : i64, lower_bound = 2048 : i64} {
// CHECK-NEXT:    %0 = buffer.arena {alignment = 64 : i64, size = 2048 : i64} : memref<2048xi8>
// CHECK-NEXT:    %x = buffer.view %0 {lifetime = array<i64: 1, 5>, offset = [[X:[0-9]+]] : i64}
// CHECK:         %a = buffer.view %0 {lifetime = array<i64: 1, 5>, offset = [[X]] : i64}
// CHECK:         %c = buffer.view %0 {lifetime = array<i64: 5, 10>, offset = [[C:[0-9]+]] : i64}
// CHECK:         %d = buffer.view %0 {lifetime = array<i64: 7, 9>, offset = [[X]] : i64}
// CHECK:         %e = buffer.view %0 {lifetime = array<i64: 5, 10>, offset = [[C]] : i64}

// NOINPLACE:     arena_size = 3072 : i64
