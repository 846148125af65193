// RUN: irflow-opt %s --split-input-file --verify-diagnostics

// One case per verifier message of dialects/buffer.py: each is reported at
// its op, on the line its `expected-error` annotation names (checked by
// --verify-diagnostics).

// An alloc of dynamic shape.

buffer.program @p on "cpu" {
  // expected-error@+1 {{'buffer.alloc' op alloc must be a statically shaped memref, got memref<?x4xf32>}}
  %a = buffer.alloc : memref<?x4xf32>
}

// -----

// Two arenas in one program.

// expected-error@+1 {{'buffer.program' op a program has one arena per device, found 2}}
buffer.program @p on "cpu" {
  %a = buffer.arena {size = 64 : i64, alignment = 64 : i64} : memref<64xi8>
  %b = buffer.arena {size = 64 : i64, alignment = 64 : i64} : memref<64xi8>
}

// -----

// An arena alignment that is not a power of two.

buffer.program @p on "cpu" {
  // expected-error@+1 {{'buffer.arena' op arena alignment must be a power of two, got 48}}
  %a = buffer.arena {size = 96 : i64, alignment = 48 : i64} : memref<96xi8>
}

// -----

// An arena whose type disagrees with its size.

buffer.program @p on "cpu" {
  // expected-error@+1 {{'buffer.arena' op arena of 64 bytes must have type memref<64xi8>}}
  %a = buffer.arena {size = 64 : i64, alignment = 64 : i64} : memref<32xi8>
}

// -----

// A view of something other than the arena.

buffer.program @p on "cpu" {
  %a = buffer.alloc : memref<64xi8>
  // expected-error@+1 {{'buffer.view' op buffer.view must view a buffer.arena}}
  %v = buffer.view %a {offset = 0 : i64} : memref<64xi8> -> memref<4xf32>
}

// -----

// A view past the end of the arena.

buffer.program @p on "cpu" {
  %a = buffer.arena {size = 64 : i64, alignment = 16 : i64} : memref<64xi8>
  // expected-error@+1 {{'buffer.view' op view [48, 80) is out of the arena's 64 bytes}}
  %v = buffer.view %a {offset = 48 : i64} : memref<64xi8> -> memref<8xf32>
}

// -----

// A misaligned view.

buffer.program @p on "cpu" {
  %a = buffer.arena {size = 64 : i64, alignment = 16 : i64} : memref<64xi8>
  // expected-error@+1 {{'buffer.view' op view offset 4 is not a multiple of the arena alignment 16}}
  %v = buffer.view %a {offset = 4 : i64} : memref<64xi8> -> memref<4xf32>
}

// -----

// A constant that does not fit its buffer.

buffer.program @p on "cpu" {
  // expected-error@+1 {{'buffer.constant' op constant of type tensor<2xi32> cannot fill memref<3xi32>}}
  %c = buffer.constant {value = dense<[1, 2]> : tensor<2xi32>} : memref<3xi32>
}

// -----

// A kernel without outputs.

buffer.program @p on "cpu" {
  %a = buffer.alloc : memref<4x8xf32>
  // expected-error@+1 {{'buffer.kernel' op kernel 'relu' writes no output}}
  buffer.kernel "relu" ins(%a : memref<4x8xf32>) outs()
}

// -----

// A copy between buffers of different sizes.

buffer.program @p on "cpu" {
  %a = buffer.alloc : memref<4x8xf32>
  %b = buffer.alloc : memref<4xf32>
  // expected-error@+1 {{'buffer.copy' op copy between buffers of different sizes: memref<4x8xf32> -> memref<4xf32>}}
  buffer.copy %a, %b : memref<4x8xf32>, memref<4xf32>
}

// -----

// A mesh axis the mesh does not have.

buffer.program @p on "cpu" {
  %a = buffer.alloc : memref<4x8xf32>
  // expected-error@+1 {{'buffer.all_reduce' op mesh_axis 2 out of range for the 2-d mesh [2, 2]}}
  buffer.all_reduce %a, %a {mesh = array<i64: 2, 2>, mesh_axis = 2 : i64, reduction = "sum"} : memref<4x8xf32>, memref<4x8xf32>
}

// -----

// An unknown reduction.

buffer.program @p on "cpu" {
  %a = buffer.alloc : memref<4x8xf32>
  // expected-error@+1 {{'buffer.all_reduce' op unknown reduction 'avg', expected one of sum, max, min}}
  buffer.all_reduce %a, %a {mesh = array<i64: 2>, mesh_axis = 0 : i64, reduction = "avg"} : memref<4x8xf32>, memref<4x8xf32>
}

// -----

// A root beyond the mesh axis.

buffer.program @p on "cpu" {
  %a = buffer.alloc : memref<4x8xf32>
  // expected-error@+1 {{'buffer.broadcast' op root 2 is not a coordinate of mesh axis 0 (size 2)}}
  buffer.broadcast %a, %a {mesh = array<i64: 2>, mesh_axis = 0 : i64, root = 2 : i64} : memref<4x8xf32>, memref<4x8xf32>
}

// -----

// An all_reduce that changes the buffer type.

buffer.program @p on "cpu" {
  %a = buffer.alloc : memref<4x8xf32>
  %b = buffer.alloc : memref<8x4xf32>
  // expected-error@+1 {{'buffer.all_reduce' op buffer.all_reduce keeps the buffer type: memref<4x8xf32> vs memref<8x4xf32>}}
  buffer.all_reduce %a, %b {mesh = array<i64: 2>, mesh_axis = 0 : i64, reduction = "sum"} : memref<4x8xf32>, memref<8x4xf32>
}

// -----

// A gather axis out of range.

buffer.program @p on "cpu" {
  %a = buffer.alloc : memref<4x8xf32>
  // expected-error@+1 {{'buffer.all_gather' op axis 2 out of range for shape (4, 8)}}
  buffer.all_gather %a, %a {mesh = array<i64: 2>, mesh_axis = 0 : i64, axis = 2 : i64} : memref<4x8xf32>, memref<4x8xf32>
}

// -----

// An all_gather into the wrong shape.

buffer.program @p on "cpu" {
  %a = buffer.alloc : memref<4x8xf32>
  // expected-error@+1 {{'buffer.all_gather' op all_gather of memref<4x8xf32> over 2 ranks cannot produce memref<4x8xf32>}}
  buffer.all_gather %a, %a {mesh = array<i64: 2>, mesh_axis = 0 : i64, axis = 0 : i64} : memref<4x8xf32>, memref<4x8xf32>
}

// -----

// A reduce_scatter into the wrong shape.

buffer.program @p on "cpu" {
  %a = buffer.alloc : memref<4x8xf32>
  // expected-error@+1 {{'buffer.reduce_scatter' op reduce_scatter of memref<4x8xf32> over 2 ranks cannot produce memref<4x8xf32>}}
  buffer.reduce_scatter %a, %a {mesh = array<i64: 2>, mesh_axis = 0 : i64, axis = 0 : i64, reduction = "sum"} : memref<4x8xf32>, memref<4x8xf32>
}

// -----

// An all_to_all that cannot split evenly.

buffer.program @p on "cpu" {
  %a = buffer.alloc : memref<4x8xf32>
  %b = buffer.alloc : memref<12x8xf32>
  // expected-error@+1 {{'buffer.all_to_all' op all_to_all cannot split memref<4x8xf32> along 0 into 3 parts}}
  buffer.all_to_all %a, %b {mesh = array<i64: 3>, mesh_axis = 0 : i64, split_axis = 0 : i64, concat_axis = 0 : i64} : memref<4x8xf32>, memref<12x8xf32>
}

// -----

// An all_to_all into the wrong shape.

buffer.program @p on "cpu" {
  %a = buffer.alloc : memref<4x8xf32>
  // expected-error@+1 {{'buffer.all_to_all' op all_to_all of memref<4x8xf32> over 2 ranks cannot produce memref<4x8xf32>}}
  buffer.all_to_all %a, %a {mesh = array<i64: 2>, mesh_axis = 0 : i64, split_axis = 1 : i64, concat_axis = 0 : i64} : memref<4x8xf32>, memref<4x8xf32>
}


// -----

// A transfer's destination is this device's piece of the logical value.

buffer.program @p on "cpu" {
  %a = buffer.alloc : memref<4x8xf32>
  // expected-error@+1 {{'buffer.transfer' op buffer.transfer dst should be the piece [8, 4] of [8, 8], got memref<4x8xf32>}}
  buffer.transfer %a, %a {logical_shape = array<i64: 8, 8>, src_sbp = #job.nd_sbp<[split(0)]>, src_placement = #job.placement<cpu, ["0:0-1"]>, sbp = #job.nd_sbp<[split(1)]>, placement = #job.placement<cpu, ["0:1-2"]>} : memref<4x8xf32>, memref<4x8xf32>
}
