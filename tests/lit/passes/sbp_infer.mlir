// RUN: irflow-opt %s --split-input-file -p sbp-infer | filecheck %s
// RUN: irflow-opt %s --split-input-file -p sbp-infer | irflow-opt --split-input-file | filecheck %s

// One device (the default placement): every value is broadcast and nothing needs converting.

job.func @one_device(%x: tensor<8x4xf32>) -> tensor<8x2xf32> {
  %w = job.variable {name = "w", initializer = {kind = "zeros"}} : tensor<4x2xf32>
  %y = job.matmul %x, %w : (tensor<8x4xf32>, tensor<4x2xf32>) -> tensor<8x2xf32>
  job.return %y : tensor<8x2xf32>
}

// CHECK-LABEL: job.func @one_device
// CHECK-SAME:    attributes {arg_sbp = [#job.nd_sbp<[broadcast]>], job_type = "predict", placement = #job.placement<cpu, ["0:0"]>}
// CHECK-NEXT:    %w = job.variable {{{.*}}, sbp = #job.nd_sbp<[broadcast]>, sbp_origin = "default"}
// CHECK-NEXT:    %y = job.matmul %x, %w {placement = #job.placement<cpu, ["0:0"]>, sbp = #job.nd_sbp<[broadcast]>, sbp_in = [#job.nd_sbp<[broadcast]>, #job.nd_sbp<[broadcast]>], sbp_origin = "rule"}

// -----

// Data parallel on 4 devices: the input is split(0) by default, variables are
// broadcast; the matmul runs (S(0), B) -> S(0); the loss's mean over the split
// batch is gathered once (a mean over a split axis does not become partial).

job.func @data_parallel(%x: tensor<8x4xf32>) -> tensor<f32> attributes {placement = #job.placement<cpu, ["0:0-3"]>} {
  %w = job.variable {name = "w", initializer = {kind = "zeros"}} : tensor<4x2xf32>
  %y = job.matmul %x, %w : (tensor<8x4xf32>, tensor<4x2xf32>) -> tensor<8x2xf32>
  %r = job.relu %y : (tensor<8x2xf32>) -> tensor<8x2xf32>
  %l = job.reduce_mean %r {axes = array<i64: 0, 1>} : (tensor<8x2xf32>) -> tensor<f32>
  job.return %l : tensor<f32>
}

// CHECK-LABEL: job.func @data_parallel
// CHECK-SAME:    arg_sbp = [#job.nd_sbp<[split(0)]>]
// CHECK:         %y = job.matmul %x, %w {{{.*}}, sbp = #job.nd_sbp<[split(0)]>, sbp_in = [#job.nd_sbp<[split(0)]>, #job.nd_sbp<[broadcast]>], sbp_origin = "cost",
// CHECK-NEXT:    %r = job.relu %y {{{.*}}, sbp = #job.nd_sbp<[split(0)]>, sbp_in = [#job.nd_sbp<[split(0)]>], sbp_origin = "cost",
// CHECK-NEXT:    %l = job.reduce_mean %r {{{.*}}, sbp = #job.nd_sbp<[broadcast]>, sbp_in = [#job.nd_sbp<[broadcast]>], sbp_origin = "cost",

// -----

// Model parallel from one hint: the (out, in) weight split over output features
// (dense with transpose_b) gives a result split on its columns, (B, S(0)^T) -> S(1);
// gathering the small result costs less than gathering the weight.

job.func @model_parallel(%x: tensor<2x4xf32>) -> tensor<2x6xf32> attributes {placement = #job.placement<cpu, ["0:0-1"]>, arg_sbp = [#job.nd_sbp<[broadcast]>]} {
  %w = job.variable {name = "w", initializer = {kind = "zeros"}, sbp = #job.nd_sbp<[split(0)]>, sbp_origin = "hint"} : tensor<6x4xf32>
  %y = job.matmul %x, %w {transpose_b = true} : (tensor<2x4xf32>, tensor<6x4xf32>) -> tensor<2x6xf32>
  job.return %y : tensor<2x6xf32>
}

// CHECK-LABEL: job.func @model_parallel
// CHECK:         %w = job.variable {{{.*}}, sbp = #job.nd_sbp<[split(0)]>, sbp_origin = "hint"}
// CHECK-NEXT:    %y = job.matmul %x, %w {{{.*}}, sbp = #job.nd_sbp<[split(1)]>, sbp_in = [#job.nd_sbp<[broadcast]>, #job.nd_sbp<[split(0)]>],

// -----

// Splitting the contraction gives partial sums: x split over columns and w over rows.

job.func @partial(%x: tensor<8x4xf32>) -> tensor<8x2xf32> attributes {placement = #job.placement<cpu, ["0:0-1"]>, arg_sbp = [#job.nd_sbp<[split(1)]>]} {
  %w = job.variable {name = "w", initializer = {kind = "zeros"}, sbp = #job.nd_sbp<[split(0)]>, sbp_origin = "hint"} : tensor<4x2xf32>
  %y = job.matmul %x, %w : (tensor<8x4xf32>, tensor<4x2xf32>) -> tensor<8x2xf32>
  job.return %y : tensor<8x2xf32>
}

// CHECK-LABEL: job.func @partial
// CHECK:         %y = job.matmul %x, %w {{{.*}}, sbp = #job.nd_sbp<[partial_sum]>, sbp_in = [#job.nd_sbp<[split(1)]>, #job.nd_sbp<[split(0)]>], sbp_origin = "cost",

// -----

// A user hint always wins, even where the cost model would choose otherwise.

job.func @hinted(%x: tensor<8x4xf32>) -> tensor<8x4xf32> attributes {placement = #job.placement<cpu, ["0:0-1"]>} {
  %r = job.relu %x {sbp = #job.nd_sbp<[split(1)]>, sbp_origin = "hint"} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  job.return %r : tensor<8x4xf32>
}

// CHECK-LABEL: job.func @hinted
// CHECK-NEXT:    %r = job.relu %x {{{.*}}, sbp = #job.nd_sbp<[split(1)]>, sbp_in = [#job.nd_sbp<[split(1)]>], sbp_origin = "hint"}

// -----

// A 2x2 hierarchy: one SBP per mesh axis, batch split on the first, the weight's
// output features on the second; the small result is gathered, not the inputs.

job.func @hybrid(%x: tensor<8x64xf32>) -> tensor<8x6xf32> attributes {placement = #job.placement<cpu, ["0:0-3"], hierarchy = [2, 2]>, arg_sbp = [#job.nd_sbp<[split(0), broadcast]>]} {
  %w = job.variable {name = "w", initializer = {kind = "zeros"}, sbp = #job.nd_sbp<[broadcast, split(1)]>, sbp_origin = "hint"} : tensor<64x6xf32>
  %y = job.matmul %x, %w : (tensor<8x64xf32>, tensor<64x6xf32>) -> tensor<8x6xf32>
  job.return %y : tensor<8x6xf32>
}

// CHECK-LABEL: job.func @hybrid
// CHECK:         %y = job.matmul %x, %w {{{.*}}, sbp = #job.nd_sbp<[split(0), split(1)]>, sbp_in = [#job.nd_sbp<[split(0), broadcast]>, #job.nd_sbp<[broadcast, split(1)]>],

// -----

// The mirrored view returns each device's part: split(0) instead of broadcast.

job.func @mirrored(%x: tensor<8x4xf32>) -> tensor<8x4xf32> attributes {placement = #job.placement<cpu, ["0:0-1"]>, view = "mirrored"} {
  %r = job.relu %x : (tensor<8x4xf32>) -> tensor<8x4xf32>
  job.return %r : tensor<8x4xf32>
}

// CHECK-LABEL: job.func @mirrored
// CHECK-NEXT:    %r = job.relu %x {{{.*}}, sbp = #job.nd_sbp<[split(0)]>, sbp_in = [#job.nd_sbp<[split(0)]>],

// -----

// A lookup in a table hinted split over its features: gather keeps the split
// (params split off the indexed axis, the ids whole). The returned scatter-add
// must be whole: gathering its 6x8 operand moves less than gathering the 10x8
// table it fills, so it runs broadcast.

job.func @embedding(%ids: tensor<6xi32>) -> tensor<10x8xf32> attributes {placement = #job.placement<cpu, ["0:0-1"]>} {
  %table = job.variable {name = "table", initializer = {kind = "zeros"}, sbp = #job.nd_sbp<[split(1)]>, sbp_origin = "hint"} : tensor<10x8xf32>
  %rows = job.gather %table, %ids : (tensor<10x8xf32>, tensor<6xi32>) -> tensor<6x8xf32>
  %t = job.tanh %rows : (tensor<6x8xf32>) -> tensor<6x8xf32>
  %back = job.gather_grad %t, %ids : (tensor<6x8xf32>, tensor<6xi32>) -> tensor<10x8xf32>
  job.return %back : tensor<10x8xf32>
}

// CHECK-LABEL: job.func @embedding
// CHECK:         %rows = job.gather %table, %ids {{{.*}}, sbp = #job.nd_sbp<[split(1)]>, sbp_in = [#job.nd_sbp<[split(1)]>, #job.nd_sbp<[broadcast]>], sbp_origin = "cost",
// CHECK-NEXT:    %t = job.tanh %rows {{{.*}}, sbp = #job.nd_sbp<[split(1)]>,
// CHECK-NEXT:    %back = job.gather_grad %t, %ids {{{.*}}, sbp = #job.nd_sbp<[broadcast]>, sbp_in = [#job.nd_sbp<[broadcast]>, #job.nd_sbp<[broadcast]>], sbp_origin = "cost",

// -----

// top_k splits along any axis but the one it searches: along rows the batch
// split stays; along the split axis itself the input is moved to a column split.

job.func @top_k_rows(%x: tensor<8x6xf32>) -> tensor<8x2xi32> attributes {placement = #job.placement<cpu, ["0:0-1"]>, arg_sbp = [#job.nd_sbp<[split(0)]>]} {
  %i = job.top_k %x {axis = 1 : i64, k = 2 : i64} : (tensor<8x6xf32>) -> tensor<8x2xi32>
  job.return %i : tensor<8x2xi32>
}

// CHECK-LABEL: job.func @top_k_rows
// CHECK-NEXT:    %i = job.top_k %x {{{.*}}, sbp = #job.nd_sbp<[split(0)]>, sbp_in = [#job.nd_sbp<[split(0)]>],

// -----

job.func @top_k_columns(%x: tensor<8x6xf32>) -> tensor<3x6xi32> attributes {placement = #job.placement<cpu, ["0:0-1"]>, arg_sbp = [#job.nd_sbp<[split(0)]>]} {
  %i = job.top_k %x {axis = 0 : i64, k = 3 : i64} : (tensor<8x6xf32>) -> tensor<3x6xi32>
  job.return %i : tensor<3x6xi32>
}

// CHECK-LABEL: job.func @top_k_columns
// CHECK-NEXT:    %i = job.top_k %x {{{.*}}, sbp = #job.nd_sbp<[split(1)]>, sbp_in = [#job.nd_sbp<[split(1)]>],

// -----

// arg_sort as top_k: the batch split stays for a sort of each row; a sort along
// the split axis needs that axis whole: of the two signatures left (a column
// split, or all of it everywhere) the cost model takes the second here.

job.func @arg_sort_rows(%x: tensor<8x6xf32>) -> tensor<8x6xi32> attributes {placement = #job.placement<cpu, ["0:0-1"]>, arg_sbp = [#job.nd_sbp<[split(0)]>]} {
  %r = job.arg_sort %x {axis = 1 : i64} : (tensor<8x6xf32>) -> tensor<8x6xi32>
  job.return %r : tensor<8x6xi32>
}

// CHECK-LABEL: job.func @arg_sort_rows
// CHECK-NEXT:    %r = job.arg_sort %x {{{.*}}, sbp = #job.nd_sbp<[split(0)]>, sbp_in = [#job.nd_sbp<[split(0)]>],

// -----

job.func @arg_sort_columns(%x: tensor<8x6xf32>) -> tensor<8x6xi32> attributes {placement = #job.placement<cpu, ["0:0-1"]>, arg_sbp = [#job.nd_sbp<[split(0)]>]} {
  %c = job.arg_sort %x {axis = 0 : i64, descending = true} : (tensor<8x6xf32>) -> tensor<8x6xi32>
  job.return %c : tensor<8x6xi32>
}

// CHECK-LABEL: job.func @arg_sort_columns
// CHECK-NEXT:    %c = job.arg_sort %x {{{.*}}, sbp = #job.nd_sbp<[broadcast]>, sbp_in = [#job.nd_sbp<[broadcast]>],

// -----

// A hint its op cannot produce (an argmax's indices are never partial sums) goes to a boxing after it,
// which its readers read: OneFlow's hint names the SBP a blob's consumers take it in.

job.func @boxed_hint(%x: tensor<4x7xf32>) -> tensor<4xi64> attributes {placement = #job.placement<cpu, ["0:0-1"]>} {
  %a = job.argmax %x {axis = 1 : i64, sbp = #job.nd_sbp<[partial_sum]>, sbp_origin = "hint"} : (tensor<4x7xf32>) -> tensor<4xi64> loc("model.py":5:8)
  job.return %a : tensor<4xi64>
}

// CHECK-LABEL: job.func @boxed_hint
// CHECK:         %a = job.argmax %x {{{.*}}sbp = #job.nd_sbp<[split(0)]>{{.*}}sbp_origin = "cost"
// CHECK-NEXT:    %a_hinted = job.boxing %a {{{.*}}sbp = #job.nd_sbp<[partial_sum]>, sbp_in = [#job.nd_sbp<[split(0)]>], sbp_origin = "hint", src_sbp = #job.nd_sbp<[split(0)]>}
// CHECK-NEXT:    job.return %a_hinted

// -----

// So does one whose signatures producing it read partial sums that no boxing gives the op: a sum over an
// unevenly split axis (7 over 2 devices) would add padding, so the sum runs on rows split along axis 0 and
// the boxing makes its result partial (each device's rows in zeros of the whole).

job.func @partial_hint_from_whole(%x: tensor<4x7xf32>) -> tensor<4xf32> attributes {placement = #job.placement<cpu, ["0:0-1"]>, arg_sbp = [#job.nd_sbp<[split(1)]>]} {
  %s = job.reduce_sum %x {axes = array<i64: 1>, sbp = #job.nd_sbp<[partial_sum]>, sbp_origin = "hint"} : (tensor<4x7xf32>) -> tensor<4xf32> loc("model.py":3:8)
  job.return %s : tensor<4xf32>
}

// CHECK-LABEL: job.func @partial_hint_from_whole
// CHECK:         %s = job.reduce_sum %x {{{.*}}sbp = #job.nd_sbp<[split(0)]>, sbp_in = [#job.nd_sbp<[split(0)]>], sbp_origin = "cost"
// CHECK-NEXT:    %s_hinted = job.boxing %s {{{.*}}sbp = #job.nd_sbp<[partial_sum]>, sbp_in = [#job.nd_sbp<[split(0)]>], sbp_origin = "hint"
// CHECK-NEXT:    job.return %s_hinted

// -----

// A mean over a dynamic axis divides each device's sum by the devices' counts all-reduced, and that count
// takes a static axis too: the rows of a mirrored value transposed (axis 1), pinned static by another
// reader, stay split beside each device's own features (axis 0).

job.func @mean_beside_dynamic(%x: tensor<6x3xf32, #job.bounded<[0]>>) -> tensor<f32> attributes {placement = #job.placement<cpu, ["0:0-2"]>, arg_sbp = [#job.nd_sbp<[split(1)]>]} {
  %m = job.reduce_mean %x {axes = array<i64: 0, 1>} : (tensor<6x3xf32, #job.bounded<[0]>>) -> tensor<f32>
  job.return %m : tensor<f32>
}

// CHECK-LABEL: job.func @mean_beside_dynamic
// CHECK:         %m = job.reduce_mean %x {{{.*}}sbp = #job.nd_sbp<[partial_sum]>, sbp_in = [#job.nd_sbp<[split(1)]>]
