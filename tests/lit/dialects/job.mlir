// RUN: IRFLOW_ROUNDTRIP
// RUN: irflow-opt %s --split-input-file --verify-roundtrip | filecheck %s
// RUN: irflow-opt %s --split-input-file --print-debuginfo | filecheck %s --check-prefix=LOC
// RUN: IRFLOW_GENERIC_ROUNDTRIP

// Every job op and attribute in its custom form: printed, parsed back (from the
// generic form too) and printed again to the same text.

// Sources: variables (with SBP and placement), constants, fills, dropout masks.

job.func @sources() -> (tensor<4x8xf32>, tensor<1x2xf32>, tensor<4x8xf32>, tensor<4x8xf32>) attributes {job_type = "predict"} {
  %w = job.variable {name = "w", initializer = {kind = "normal", mean = 0.0, std = 0.01}, trainable = false, sbp = #job.nd_sbp<[split(0)]>, placement = #job.placement<cpu, ["0:0-1"]>} : tensor<4x8xf32>
  %c = job.constant {value = dense<[[1.0, 2.0]]> : tensor<1x2xf32>} : tensor<1x2xf32>
  %f = job.fill {value = 0.5 : f32, sbp = #job.nd_sbp<[broadcast, partial_sum]>, placement = #job.placement<gpu, ["0:0-1", "1:0-1"], hierarchy = [2, 2]>} : tensor<4x8xf32>
  %d = job.dropout_mask {rate = 0.25 : f64, seed = 7 : i64} : tensor<4x8xf32>
  job.return %w, %c, %f, %d : tensor<4x8xf32>, tensor<1x2xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// CHECK-LABEL: job.func @sources() -> (tensor<4x8xf32>, tensor<1x2xf32>, tensor<4x8xf32>, tensor<4x8xf32>) attributes {job_type = "predict"} {
// CHECK-NEXT:    %w = job.variable {initializer = {kind = "normal", mean = 0.000000e+00 : f64, std = 1.000000e-02 : f64}, name = "w", placement = #job.placement<cpu, ["0:0-1"]>, sbp = #job.nd_sbp<[split(0)]>, trainable = false} : tensor<4x8xf32>
// CHECK-NEXT:    %c = job.constant {value = dense<{{\[\[}}1.000000e+00, 2.000000e+00{{\]\]}}> : tensor<1x2xf32>} : tensor<1x2xf32>
// CHECK-NEXT:    %f = job.fill {placement = #job.placement<gpu, ["0:0-1", "1:0-1"], hierarchy = [2, 2]>, sbp = #job.nd_sbp<[broadcast, partial_sum]>, value = 5.000000e-01 : f32} : tensor<4x8xf32>
// CHECK-NEXT:    %d = job.dropout_mask {rate = 2.500000e-01 : f64, seed = 7 : i64} : tensor<4x8xf32>
// CHECK-NEXT:    job.return %w, %c, %f, %d : tensor<4x8xf32>, tensor<1x2xf32>, tensor<4x8xf32>, tensor<4x8xf32>
// CHECK-NEXT:  }

// -----

// Random sources and Bernoulli samples: the draws are an operand, so bernoulli is elementwise.

job.func @random(%p: tensor<4x8xf16>) -> (tensor<4x8xi8>, tensor<4xi32>) attributes {job_type = "predict"} {
  %u = job.random_uniform {seed = -5 : i64} : tensor<4x8xf32>
  %b = job.bernoulli %u, %p : (tensor<4x8xf32>, tensor<4x8xf16>) -> tensor<4x8xi8>
  %perm = job.random_permutation {seed = 9 : i64, sbp = #job.nd_sbp<[broadcast]>} : tensor<4xi32>
  job.return %b, %perm : tensor<4x8xi8>, tensor<4xi32>
}

// CHECK-LABEL: job.func @random(%p: tensor<4x8xf16>) -> (tensor<4x8xi8>, tensor<4xi32>) attributes {job_type = "predict"} {
// CHECK-NEXT:    %u = job.random_uniform {seed = -5 : i64} : tensor<4x8xf32>
// CHECK-NEXT:    %b = job.bernoulli %u, %p : (tensor<4x8xf32>, tensor<4x8xf16>) -> tensor<4x8xi8>
// CHECK-NEXT:    %perm = job.random_permutation {sbp = #job.nd_sbp<[broadcast]>, seed = 9 : i64} : tensor<4xi32>
// CHECK-NEXT:    job.return %b, %perm : tensor<4x8xi8>, tensor<4xi32>
// CHECK-NEXT:  }

// -----

// A field of the records an OFRecord reader gives each step (lift-host-inputs makes it an argument).

job.func @records() -> tensor<16x784xf32> attributes {job_type = "predict"} {
  %images = job.ofrecord_decode {reader = "OFRecord_Reader_0", data_dir = "mnist/train", data_part_num = 4 : i64, part_name_prefix = "part-", part_name_suffix_length = 5 : i64, random_shuffle = true, shuffle_buffer_size = 1024 : i64, shuffle_after_epoch = true, field = "images", truncate = false} : tensor<16x784xf32>
  job.return %images : tensor<16x784xf32>
}

// CHECK-LABEL: job.func @records() -> tensor<16x784xf32> attributes {job_type = "predict"} {
// CHECK-NEXT:    %images = job.ofrecord_decode {data_dir = "mnist/train", data_part_num = 4 : i64, field = "images", part_name_prefix = "part-", part_name_suffix_length = 5 : i64, random_shuffle = true, reader = "OFRecord_Reader_0", shuffle_after_epoch = true, shuffle_buffer_size = 1024 : i64, truncate = false} : tensor<16x784xf32>
// CHECK-NEXT:    job.return %images : tensor<16x784xf32>
// CHECK-NEXT:  }

// -----

// Elementwise: unary, binary with broadcasting, comparisons, activation gradients.

job.func @elementwise(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = job.neg %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = job.exp %0 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = job.log %1 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %3 = job.sqrt %2 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %4 = job.rsqrt %3 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %5 = job.square %4 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %6 = job.relu %5 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %7 = job.sigmoid %6 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %8 = job.tanh %7 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %9 = job.gelu %8 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %10 = job.abs %9 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %add = job.add %10, %b {sbp = #job.nd_sbp<[split(1)]>} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %sub = job.sub %add, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %mul = job.mul %sub, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %div = job.div %mul, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %max = job.maximum %div, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %min = job.minimum %max, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %pow = job.pow %min, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %eq = job.equal %pow, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi8>
  %ne = job.not_equal %pow, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi8>
  %lt = job.less %pow, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi8>
  %le = job.less_equal %pow, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi8>
  %gt = job.greater %pow, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi8>
  %ge = job.greater_equal %pow, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi8>
  %rg = job.relu_grad %pow, %6 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %sg = job.sigmoid_grad %rg, %7 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %tg = job.tanh_grad %sg, %8 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %gg = job.gelu_grad %tg, %8 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  job.return %gg : tensor<4x8xf32>
}

// CHECK-LABEL: job.func @elementwise(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> attributes {job_type = "predict"} {
// CHECK-NEXT:    %0 = job.neg %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %1 = job.exp %0 : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %2 = job.log %1 : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %3 = job.sqrt %2 : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %4 = job.rsqrt %3 : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %5 = job.square %4 : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %6 = job.relu %5 : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %7 = job.sigmoid %6 : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %8 = job.tanh %7 : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %9 = job.gelu %8 : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %10 = job.abs %9 : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %add = job.add %10, %b {sbp = #job.nd_sbp<[split(1)]>} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %sub = job.sub %add, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %mul = job.mul %sub, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %div = job.div %mul, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %max = job.maximum %div, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %min = job.minimum %max, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %pow = job.pow %min, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %eq = job.equal %pow, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi8>
// CHECK-NEXT:    %ne = job.not_equal %pow, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi8>
// CHECK-NEXT:    %lt = job.less %pow, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi8>
// CHECK-NEXT:    %le = job.less_equal %pow, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi8>
// CHECK-NEXT:    %gt = job.greater %pow, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi8>
// CHECK-NEXT:    %ge = job.greater_equal %pow, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi8>
// CHECK-NEXT:    %rg = job.relu_grad %pow, %6 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %sg = job.sigmoid_grad %rg, %7 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %tg = job.tanh_grad %sg, %8 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %gg = job.gelu_grad %tg, %8 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    job.return %gg : tensor<4x8xf32>
// CHECK-NEXT:  }

// -----

// The unary math of OneFlow's flow.math: sin ... erfc.

job.func @unary_math(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %sin = job.sin %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %cos = job.cos %sin : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %floor = job.floor %cos : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %ceil = job.ceil %floor : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %round = job.round %ceil : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %sign = job.sign %round : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %log1p = job.log1p %sign : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %expm1 = job.expm1 %log1p : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %erf = job.erf %expm1 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %erfc = job.erfc %erf : (tensor<4x8xf32>) -> tensor<4x8xf32>
  job.return %erfc : tensor<4x8xf32>
}

// CHECK-LABEL: job.func @unary_math(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {job_type = "predict"} {
// CHECK-NEXT:    %sin = job.sin %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %cos = job.cos %sin : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %floor = job.floor %cos : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %ceil = job.ceil %floor : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %round = job.round %ceil : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %sign = job.sign %round : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %log1p = job.log1p %sign : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %expm1 = job.expm1 %log1p : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %erf = job.erf %expm1 : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %erfc = job.erfc %erf : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    job.return %erfc : tensor<4x8xf32>
// CHECK-NEXT:  }

// -----

// The inverse and hyperbolic trigonometry of OneFlow's flow.math: tan ... atanh;
// lgamma and digamma (its derivative).

job.func @trigonometry(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %tan = job.tan %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %asin = job.asin %tan : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %acos = job.acos %asin : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %atan = job.atan %acos : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %sinh = job.sinh %atan : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %cosh = job.cosh %sinh : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %asinh = job.asinh %cosh : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %acosh = job.acosh %asinh : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %atanh = job.atanh %acosh : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %lgamma = job.lgamma %atanh : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %digamma = job.digamma %lgamma : (tensor<4x8xf32>) -> tensor<4x8xf32>
  job.return %digamma : tensor<4x8xf32>
}

// CHECK-LABEL: job.func @trigonometry(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {job_type = "predict"} {
// CHECK-NEXT:    %tan = job.tan %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %asin = job.asin %tan : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %acos = job.acos %asin : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %atan = job.atan %acos : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %sinh = job.sinh %atan : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %cosh = job.cosh %sinh : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %asinh = job.asinh %cosh : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %acosh = job.acosh %asinh : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %atanh = job.atanh %acosh : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %lgamma = job.lgamma %atanh : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %digamma = job.digamma %lgamma : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    job.return %digamma : tensor<4x8xf32>
// CHECK-NEXT:  }

// -----

// OneFlow's flow.math.mod (floor_mod, the divisor's sign) and atan2, broadcasting.

job.func @mod_and_atan2(%x: tensor<4x8xf32>, %y: tensor<8xf32>, %i: tensor<4xi32>, %j: tensor<i32>) -> tensor<4xi32> {
  %m = job.floor_mod %x, %y : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %a = job.atan2 %m, %y : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %k = job.floor_mod %i, %j : (tensor<4xi32>, tensor<i32>) -> tensor<4xi32>
  job.return %k : tensor<4xi32>
}

// CHECK-LABEL: job.func @mod_and_atan2
// CHECK-NEXT:    %m = job.floor_mod %x, %y : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %a = job.atan2 %m, %y : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %k = job.floor_mod %i, %j : (tensor<4xi32>, tensor<i32>) -> tensor<4xi32>
// CHECK-NEXT:    job.return %k : tensor<4xi32>

// -----

// OneFlow's flow.math.top_k: the int32 indices of the k largest along an axis.

job.func @top_k(%x: tensor<4x8xf32>) -> tensor<4x3xi32> {
  %i = job.top_k %x {axis = 1 : i64, k = 3 : i64} : (tensor<4x8xf32>) -> tensor<4x3xi32>
  job.return %i : tensor<4x3xi32>
}

// CHECK-LABEL: job.func @top_k
// CHECK-NEXT:    %i = job.top_k %x {axis = 1 : i64, k = 3 : i64} : (tensor<4x8xf32>) -> tensor<4x3xi32>

// -----

// OneFlow's flow.argsort: the int32 indices that sort an axis; ascending unless descending.

job.func @arg_sort(%x: tensor<4x8xf32>) -> (tensor<4x8xi32>, tensor<4x8xi32>) {
  %up = job.arg_sort %x {axis = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xi32>
  %down = job.arg_sort %x {axis = 1 : i64, descending = true} : (tensor<4x8xf32>) -> tensor<4x8xi32>
  job.return %up, %down : tensor<4x8xi32>, tensor<4x8xi32>
}

// CHECK-LABEL: job.func @arg_sort
// CHECK-NEXT:    %up = job.arg_sort %x {axis = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xi32>
// CHECK-NEXT:    %down = job.arg_sort %x {axis = 1 : i64, descending = true} : (tensor<4x8xf32>) -> tensor<4x8xi32>

// -----

// OneFlow's fake_quantization: per layer (one scale) or per channel (one per entry of axis 0).

job.func @fake_quantization(%x: tensor<4x8xf32>, %s: tensor<1xf32>, %c: tensor<4xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %layer = job.fake_quantization %x, %s, %s : (tensor<4x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x8xf32>
  %channel = job.fake_quantization %x, %c, %c {affine = true, quantization_bit = 4 : i64} : (tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4x8xf32>
  job.return %layer, %channel : tensor<4x8xf32>, tensor<4x8xf32>
}

// CHECK-LABEL: job.func @fake_quantization
// CHECK-NEXT:    %layer = job.fake_quantization %x, %s, %s : (tensor<4x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %channel = job.fake_quantization %x, %c, %c {affine = true, quantization_bit = 4 : i64} : (tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4x8xf32>

// -----

// Connectionist temporal classification: the loss per sequence, its gradient, greedy decoding.

job.func @ctc(%lp: tensor<6x2x4xf32>, %t: tensor<2x3xi64>, %il: tensor<2xi64>, %tl: tensor<2xi32>, %d: tensor<2xf32>) -> (tensor<2xf32>, tensor<6x2x4xf32>, tensor<2x6xi64>) {
  %loss = job.ctc_loss %lp, %t, %il, %tl {blank = 3 : i64, zero_infinity = true} : (tensor<6x2x4xf32>, tensor<2x3xi64>, tensor<2xi64>, tensor<2xi32>) -> tensor<2xf32>
  %grad = job.ctc_loss_grad %d, %lp, %t, %il, %tl : (tensor<2xf32>, tensor<6x2x4xf32>, tensor<2x3xi64>, tensor<2xi64>, tensor<2xi32>) -> tensor<6x2x4xf32>
  %best = job.ctc_greedy_decode %lp, %il {merge_repeated = false} : (tensor<6x2x4xf32>, tensor<2xi64>) -> tensor<2x6xi64>
  job.return %loss, %grad, %best : tensor<2xf32>, tensor<6x2x4xf32>, tensor<2x6xi64>
}

// CHECK-LABEL: job.func @ctc
// CHECK-NEXT:    %loss = job.ctc_loss %lp, %t, %il, %tl {blank = 3 : i64, zero_infinity = true} : (tensor<6x2x4xf32>, tensor<2x3xi64>, tensor<2xi64>, tensor<2xi32>) -> tensor<2xf32>
// CHECK-NEXT:    %grad = job.ctc_loss_grad %d, %lp, %t, %il, %tl : (tensor<2xf32>, tensor<6x2x4xf32>, tensor<2x3xi64>, tensor<2xi64>, tensor<2xi32>) -> tensor<6x2x4xf32>
// CHECK-NEXT:    %best = job.ctc_greedy_decode %lp, %il {merge_repeated = false} : (tensor<6x2x4xf32>, tensor<2xi64>) -> tensor<2x6xi64>

// -----

// Casts and shape ops.

job.func @shapes(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %h = job.cast %x : (tensor<4x8xf32>) -> tensor<4x8xf16>
  %ba = job.bias_add %x, %b {axis = 1 : i64} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %r = job.reshape %ba : (tensor<4x8xf32>) -> tensor<32xf32>
  %t = job.transpose %x {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %bc = job.broadcast_to %b : (tensor<8xf32>) -> tensor<4x8xf32>
  %cat = job.concat %x, %bc {axis = 0 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %s = job.slice %x {start = array<i64: 0, 0>, stop = array<i64: 2, 8>, step = array<i64: 1, 2>} : (tensor<4x8xf32>) -> tensor<2x4xf32>
  %sg = job.slice_grad %s {start = array<i64: 0, 0>, stop = array<i64: 2, 8>, step = array<i64: 1, 2>} : (tensor<2x4xf32>) -> tensor<4x8xf32>
  job.return %sg : tensor<4x8xf32>
}

// CHECK-LABEL: job.func @shapes(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> attributes {job_type = "predict"} {
// CHECK-NEXT:    %h = job.cast %x : (tensor<4x8xf32>) -> tensor<4x8xf16>
// CHECK-NEXT:    %ba = job.bias_add %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %r = job.reshape %ba : (tensor<4x8xf32>) -> tensor<32xf32>
// CHECK-NEXT:    %t = job.transpose %x {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
// CHECK-NEXT:    %bc = job.broadcast_to %b : (tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %cat = job.concat %x, %bc {axis = 0 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
// CHECK-NEXT:    %s = job.slice %x {start = array<i64: 0, 0>, step = array<i64: 1, 2>, stop = array<i64: 2, 8>} : (tensor<4x8xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:    %sg = job.slice_grad %s {start = array<i64: 0, 0>, step = array<i64: 1, 2>, stop = array<i64: 2, 8>} : (tensor<2x4xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    job.return %sg : tensor<4x8xf32>
// CHECK-NEXT:  }

// -----

// Matmul, reductions (min of integers too) and arg-max.

job.func @linalg(%a: tensor<4x8xf32>, %b: tensor<16x8xf32>) -> (tensor<4x16xf32>, tensor<4xi64>) {
  %mm = job.matmul %a, %b {transpose_b = true, sbp = #job.nd_sbp<[split(0), broadcast]>} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %sum = job.reduce_sum %a {axes = array<i64: 1>, keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %mean = job.reduce_mean %a {axes = array<i64: 0, 1>} : (tensor<4x8xf32>) -> tensor<f32>
  %max = job.reduce_max %a {axes = array<i64: 1>, keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %mg = job.reduce_max_grad %sum, %a, %max {axes = array<i64: 1>, keepdims = true} : (tensor<4x1xf32>, tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %min = job.reduce_min %a {axes = array<i64: 0>} : (tensor<4x8xf32>) -> tensor<8xf32>
  %ng = job.reduce_min_grad %min, %a, %min {axes = array<i64: 0>} : (tensor<8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %i = job.cast %a : (tensor<4x8xf32>) -> tensor<4x8xi32>
  %imin = job.reduce_min %i {axes = array<i64: 0, 1>, keepdims = true} : (tensor<4x8xi32>) -> tensor<1x1xi32>
  %am = job.argmax %a {axis = 1 : i64} : (tensor<4x8xf32>) -> tensor<4xi64>
  job.return %mm, %am : tensor<4x16xf32>, tensor<4xi64>
}

// CHECK-LABEL: job.func @linalg(%a: tensor<4x8xf32>, %b: tensor<16x8xf32>) -> (tensor<4x16xf32>, tensor<4xi64>) attributes {job_type = "predict"} {
// CHECK-NEXT:    %mm = job.matmul %a, %b {sbp = #job.nd_sbp<[split(0), broadcast]>, transpose_b = true} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
// CHECK-NEXT:    %sum = job.reduce_sum %a {axes = array<i64: 1>, keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
// CHECK-NEXT:    %mean = job.reduce_mean %a {axes = array<i64: 0, 1>} : (tensor<4x8xf32>) -> tensor<f32>
// CHECK-NEXT:    %max = job.reduce_max %a {axes = array<i64: 1>, keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
// CHECK-NEXT:    %mg = job.reduce_max_grad %sum, %a, %max {axes = array<i64: 1>, keepdims = true} : (tensor<4x1xf32>, tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %min = job.reduce_min %a {axes = array<i64: 0>} : (tensor<4x8xf32>) -> tensor<8xf32>
// CHECK-NEXT:    %ng = job.reduce_min_grad %min, %a, %min {axes = array<i64: 0>} : (tensor<8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %i = job.cast %a : (tensor<4x8xf32>) -> tensor<4x8xi32>
// CHECK-NEXT:    %imin = job.reduce_min %i {axes = array<i64: 0, 1>, keepdims = true} : (tensor<4x8xi32>) -> tensor<1x1xi32>
// CHECK-NEXT:    %am = job.argmax %a {axis = 1 : i64} : (tensor<4x8xf32>) -> tensor<4xi64>
// CHECK-NEXT:    job.return %mm, %am : tensor<4x16xf32>, tensor<4xi64>
// CHECK-NEXT:  }
// Properties left at their default are elided in the custom form, explicit in the generic one.
// CHECK-GENERIC: "job.matmul"(%a, %b) <{sbp = #job.nd_sbp<[split(0), broadcast]>, transpose_a = false, transpose_b = true}> : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>

// -----

// Softmax family and cross-entropy losses with their gradients.

job.func @losses(%logits: tensor<4x10xf32>, %labels: tensor<4xi32>, %dense: tensor<4x10xf32>) -> tensor<4x10xf32> {
  %sm = job.softmax %logits : (tensor<4x10xf32>) -> tensor<4x10xf32>
  %lsm = job.log_softmax %logits {axis = 1 : i64} : (tensor<4x10xf32>) -> tensor<4x10xf32>
  %smg = job.softmax_grad %logits, %sm : (tensor<4x10xf32>, tensor<4x10xf32>) -> tensor<4x10xf32>
  %lsmg = job.log_softmax_grad %logits, %lsm : (tensor<4x10xf32>, tensor<4x10xf32>) -> tensor<4x10xf32>
  %l = job.sparse_softmax_cross_entropy %logits, %labels : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<4xf32>
  %ld = job.softmax_cross_entropy %logits, %dense : (tensor<4x10xf32>, tensor<4x10xf32>) -> tensor<4xf32>
  %g = job.sparse_softmax_cross_entropy_grad %l, %logits, %labels : (tensor<4xf32>, tensor<4x10xf32>, tensor<4xi32>) -> tensor<4x10xf32>
  %gd = job.softmax_cross_entropy_grad %ld, %logits, %dense : (tensor<4xf32>, tensor<4x10xf32>, tensor<4x10xf32>) -> tensor<4x10xf32>
  job.return %gd : tensor<4x10xf32>
}

// CHECK-LABEL: job.func @losses(%logits: tensor<4x10xf32>, %labels: tensor<4xi32>, %dense: tensor<4x10xf32>) -> tensor<4x10xf32> attributes {job_type = "predict"} {
// CHECK-NEXT:    %sm = job.softmax %logits : (tensor<4x10xf32>) -> tensor<4x10xf32>
// CHECK-NEXT:    %lsm = job.log_softmax %logits {axis = 1 : i64} : (tensor<4x10xf32>) -> tensor<4x10xf32>
// CHECK-NEXT:    %smg = job.softmax_grad %logits, %sm : (tensor<4x10xf32>, tensor<4x10xf32>) -> tensor<4x10xf32>
// CHECK-NEXT:    %lsmg = job.log_softmax_grad %logits, %lsm : (tensor<4x10xf32>, tensor<4x10xf32>) -> tensor<4x10xf32>
// CHECK-NEXT:    %l = job.sparse_softmax_cross_entropy %logits, %labels : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<4xf32>
// CHECK-NEXT:    %ld = job.softmax_cross_entropy %logits, %dense : (tensor<4x10xf32>, tensor<4x10xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %g = job.sparse_softmax_cross_entropy_grad %l, %logits, %labels : (tensor<4xf32>, tensor<4x10xf32>, tensor<4xi32>) -> tensor<4x10xf32>
// CHECK-NEXT:    %gd = job.softmax_cross_entropy_grad %ld, %logits, %dense : (tensor<4xf32>, tensor<4x10xf32>, tensor<4x10xf32>) -> tensor<4x10xf32>
// CHECK-NEXT:    job.return %gd : tensor<4x10xf32>
// CHECK-NEXT:  }

// -----

// Convolution and pooling with their gradients.

job.func @conv(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32> {
  %y = job.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  %dx = job.conv2d_grad_input %y, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x4x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x8x8xf32>
  %dw = job.conv2d_grad_filter %y, %x {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>} : (tensor<2x4x8x8xf32>, tensor<2x3x8x8xf32>) -> tensor<4x3x3x3xf32>
  %mp = job.max_pool2d %y {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>} : (tensor<2x4x8x8xf32>) -> tensor<2x4x4x4xf32>
  %ap = job.avg_pool2d %y {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>} : (tensor<2x4x8x8xf32>) -> tensor<2x4x4x4xf32>
  %mpg = job.max_pool2d_grad %mp, %y, %mp {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>} : (tensor<2x4x4x4xf32>, tensor<2x4x8x8xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x8x8xf32>
  %apg = job.avg_pool2d_grad %ap {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>} : (tensor<2x4x4x4xf32>) -> tensor<2x4x8x8xf32>
  job.return %apg : tensor<2x4x8x8xf32>
}

// CHECK-LABEL: job.func @conv(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32> attributes {job_type = "predict"} {
// CHECK-NEXT:    %y = job.conv2d %x, %w {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
// CHECK-NEXT:    %dx = job.conv2d_grad_input %y, %w {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x8x8xf32>
// CHECK-NEXT:    %dw = job.conv2d_grad_filter %y, %x {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x8x8xf32>, tensor<2x3x8x8xf32>) -> tensor<4x3x3x3xf32>
// CHECK-NEXT:    %mp = job.max_pool2d %y {kernel = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<2x4x8x8xf32>) -> tensor<2x4x4x4xf32>
// CHECK-NEXT:    %ap = job.avg_pool2d %y {kernel = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<2x4x8x8xf32>) -> tensor<2x4x4x4xf32>
// CHECK-NEXT:    %mpg = job.max_pool2d_grad %mp, %y, %mp {kernel = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<2x4x4x4xf32>, tensor<2x4x8x8xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x8x8xf32>
// CHECK-NEXT:    %apg = job.avg_pool2d_grad %ap {kernel = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<2x4x4x4xf32>) -> tensor<2x4x8x8xf32>
// CHECK-NEXT:    job.return %apg : tensor<2x4x8x8xf32>
// CHECK-NEXT:  }

// -----

// Training state: learning rate, assignments, optimizer updates, minimize and apply_gradients.

job.func @train(%g: tensor<3xf32>, %loss: tensor<f32>, %present: tensor<3xi8>) attributes {job_type = "train"} {
  %w = job.variable {name = "w", initializer = {kind = "zeros"}} : tensor<3xf32>
  %m = job.variable {name = "w-momentum", initializer = {kind = "zeros"}, trainable = false} : tensor<3xf32>
  %v = job.variable {name = "w-velocity", initializer = {kind = "zeros"}, trainable = false} : tensor<3xf32>
  %step = job.variable {name = "step", initializer = {kind = "constant", value = 0.0}, trainable = false} : tensor<i64>
  %lr = job.learning_rate %step {schedule = {kind = "piecewise_constant", boundaries = array<i64: 100>, values = array<f64: 0.1, 0.01>}} : (tensor<i64>) -> tensor<f32>
  %one = job.fill {value = 1.0 : f64} : tensor<i64>
  %next = job.add %step, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
  job.assign %step, %next : tensor<i64>, tensor<i64>
  job.sgd_update %w, %g, %lr {weight_decay = 0.01 : f64} : tensor<3xf32>, tensor<3xf32>, tensor<f32>
  job.momentum_update %w, %g, %m, %lr {beta = 0.9 : f64} : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>
  job.adam_update %w, %g, %m, %v, %lr, %step {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-08 : f64, do_bias_correction = false} : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>
  job.rmsprop_update %w, %g, %m, %lr {decay_rate = 0.99 : f64, epsilon = 1.0e-08 : f64} : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>
  job.centered_rmsprop_update %w, %g, %m, %v, %lr {decay_rate = 0.9 : f64, epsilon = 1.0e-06 : f64} : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>
  job.lamb_update %w, %g, %m, %v, %lr, %step {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-06 : f64} : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>
  job.lars_update %w, %g, %m, %lr {momentum_beta = 0.9 : f64, epsilon = 1.0e-09 : f64, lars_coefficient = 1.0e-04 : f64} : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>
  job.lazy_adam_update %w, %g, %present, %m, %v, %lr, %step {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-08 : f64} : tensor<3xf32>, tensor<3xf32>, tensor<3xi8>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>
  job.indexed_slices_sgd_update %w, %g, %present, %lr : tensor<3xf32>, tensor<3xf32>, tensor<3xi8>, tensor<f32>
  job.indexed_slices_momentum_update %w, %g, %present, %m, %lr {beta = 0.9 : f64, weight_decay = 0.1 : f64} : tensor<3xf32>, tensor<3xf32>, tensor<3xi8>, tensor<3xf32>, tensor<f32>
  job.indexed_slices_adam_update %w, %g, %present, %m, %v, %lr, %step {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-08 : f64} : tensor<3xf32>, tensor<3xf32>, tensor<3xi8>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>
  job.minimize %loss {optimizer = {kind = "sgd", lr = 0.1}} : tensor<f32>
  job.apply_gradients %w, %g {optimizer = {kind = "sgd", lr = 0.1}} : tensor<3xf32>, tensor<3xf32>
  job.return
}

// CHECK-LABEL: job.func @train(%g: tensor<3xf32>, %loss: tensor<f32>, %present: tensor<3xi8>) attributes {job_type = "train"} {
// CHECK-NEXT:    %w = job.variable {initializer = {kind = "zeros"}, name = "w"} : tensor<3xf32>
// CHECK-NEXT:    %m = job.variable {initializer = {kind = "zeros"}, name = "w-momentum", trainable = false} : tensor<3xf32>
// CHECK-NEXT:    %v = job.variable {initializer = {kind = "zeros"}, name = "w-velocity", trainable = false} : tensor<3xf32>
// CHECK-NEXT:    %step = job.variable {initializer = {kind = "constant", value = 0.000000e+00 : f64}, name = "step", trainable = false} : tensor<i64>
// CHECK-NEXT:    %lr = job.learning_rate %step {schedule = {boundaries = array<i64: 100>, kind = "piecewise_constant", values = array<f64: 1.000000e-01, 1.000000e-02>}} : (tensor<i64>) -> tensor<f32>
// CHECK-NEXT:    %one = job.fill {value = 1.000000e+00 : f64} : tensor<i64>
// CHECK-NEXT:    %next = job.add %step, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
// CHECK-NEXT:    job.assign %step, %next : tensor<i64>, tensor<i64>
// CHECK-NEXT:    job.sgd_update %w, %g, %lr {weight_decay = 1.000000e-02 : f64} : tensor<3xf32>, tensor<3xf32>, tensor<f32>
// CHECK-NEXT:    job.momentum_update %w, %g, %m, %lr {beta = 9.000000e-01 : f64} : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>
// CHECK-NEXT:    job.adam_update %w, %g, %m, %v, %lr, %step {beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, do_bias_correction = false, epsilon = 1.000000e-08 : f64} : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>
// CHECK-NEXT:    job.rmsprop_update %w, %g, %m, %lr {decay_rate = 9.900000e-01 : f64, epsilon = 1.000000e-08 : f64} : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>
// CHECK-NEXT:    job.centered_rmsprop_update %w, %g, %m, %v, %lr {decay_rate = 9.000000e-01 : f64, epsilon = 1.000000e-06 : f64} : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>
// CHECK-NEXT:    job.lamb_update %w, %g, %m, %v, %lr, %step {beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, epsilon = 1.000000e-06 : f64} : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>
// CHECK-NEXT:    job.lars_update %w, %g, %m, %lr {epsilon = 1.000000e-09 : f64, lars_coefficient = 1.000000e-04 : f64, momentum_beta = 9.000000e-01 : f64} : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>
// CHECK-NEXT:    job.lazy_adam_update %w, %g, %present, %m, %v, %lr, %step {beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, epsilon = 1.000000e-08 : f64} : tensor<3xf32>, tensor<3xf32>, tensor<3xi8>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>
// CHECK-NEXT:    job.indexed_slices_sgd_update %w, %g, %present, %lr : tensor<3xf32>, tensor<3xf32>, tensor<3xi8>, tensor<f32>
// CHECK-NEXT:    job.indexed_slices_momentum_update %w, %g, %present, %m, %lr {beta = 9.000000e-01 : f64, weight_decay = 1.000000e-01 : f64} : tensor<3xf32>, tensor<3xf32>, tensor<3xi8>, tensor<3xf32>, tensor<f32>
// CHECK-NEXT:    job.indexed_slices_adam_update %w, %g, %present, %m, %v, %lr, %step {beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, epsilon = 1.000000e-08 : f64} : tensor<3xf32>, tensor<3xf32>, tensor<3xi8>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>
// CHECK-NEXT:    job.minimize %loss {optimizer = {kind = "sgd", lr = 1.000000e-01 : f64}} : tensor<f32>
// CHECK-NEXT:    job.apply_gradients %w, %g {optimizer = {kind = "sgd", lr = 1.000000e-01 : f64}} : tensor<3xf32>, tensor<3xf32>
// CHECK-NEXT:    job.return
// CHECK-NEXT:  }
// CHECK-GENERIC:      "job.func"() <{function_type = (tensor<3xf32>, tensor<f32>, tensor<3xi8>) -> (), job_type = "train", sym_name = "train"}> ({
// CHECK-GENERIC-NEXT: ^bb0(%g: tensor<3xf32>, %loss: tensor<f32>, %present: tensor<3xi8>):
// CHECK-GENERIC-NEXT:   %w = "job.variable"() <{initializer = {kind = "zeros"}, name = "w", trainable = true}> : () -> tensor<3xf32>
// CHECK-GENERIC:        "job.adam_update"(%w, %g, %m, %v, %lr, %step) <{beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, do_bias_correction = false, epsilon = 1.000000e-08 : f64, weight_decay = 0.000000e+00 : f64}>

// -----

// Locations on ops and on arguments; every SBP component form.

job.func @located(%x: tensor<4x8xf32> loc("model.py":3:1)) -> tensor<4x8xf32> {
  %a = job.relu %x {sbp = #job.nd_sbp<[split(1), partial_sum(max)]>, placement = #job.placement<cpu, ["0:0-3"], hierarchy = [2, 2]>} : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("model.py":4:8)
  %b = job.tanh %a {sbp = #job.nd_sbp<[partial_sum(min)]>, preferred = #job.sbp<split(0)>} : (tensor<4x8xf32>) -> tensor<4x8xf32> loc(unknown)
  job.return %b : tensor<4x8xf32> loc("model.py":5:4)
}

// CHECK-LABEL: job.func @located(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {job_type = "predict"} {
// CHECK-NEXT:    %a = job.relu %x {placement = #job.placement<cpu, ["0:0-3"], hierarchy = [2, 2]>, sbp = #job.nd_sbp<[split(1), partial_sum(max)]>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %b = job.tanh %a {preferred = #job.sbp<split(0)>, sbp = #job.nd_sbp<[partial_sum(min)]>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    job.return %b : tensor<4x8xf32>
// CHECK-NEXT:  }
// LOC-LABEL: job.func @located(%x: tensor<4x8xf32> loc("model.py":3:1))
// LOC-NEXT:    %a = job.relu %x {{.*}} : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("model.py":4:8)
// LOC-NEXT:    %b = job.tanh %a {{.*}} loc(unknown)
// LOC-NEXT:    job.return %b : tensor<4x8xf32> loc("model.py":5:4)
// LOC-NEXT:  } loc(unknown)

// -----

// Reading a gradient: job.diff (flow.watch_diff), which the autodiff pass replaces.

job.func @diff(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {job_type = "train"} {
  %d = job.diff %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  job.return %d : tensor<4x8xf32>
}

// CHECK-LABEL: job.func @diff(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {job_type = "train"} {
// CHECK-NEXT:    %d = job.diff %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    job.return %d : tensor<4x8xf32>
// CHECK-NEXT:  }

// -----

// Per-device ops (what lower-to-physical writes for job.boxing): a 2x2 mesh, uneven sizes padded.

job.func @physical(%x: tensor<5x4xf32>) -> tensor<6x2xf32> {
  %a = job.shard_slice %x {mesh = array<i64: 2, 2>, mesh_axis = 1 : i64, axis = 0 : i64} : (tensor<5x4xf32>) -> tensor<3x4xf32>
  %b = job.all_gather %a {mesh = array<i64: 2, 2>, mesh_axis = 1 : i64, axis = 0 : i64} : (tensor<3x4xf32>) -> tensor<6x4xf32>
  %c = job.all_reduce %b {mesh = array<i64: 2, 2>, mesh_axis = 0 : i64, reduction = "max"} : (tensor<6x4xf32>) -> tensor<6x4xf32>
  %d = job.all_to_all %c {mesh = array<i64: 2, 2>, mesh_axis = 0 : i64, split_axis = 1 : i64, concat_axis = 0 : i64} : (tensor<6x4xf32>) -> tensor<12x2xf32>
  %e = job.reduce_scatter %d {mesh = array<i64: 2, 2>, mesh_axis = 0 : i64, axis = 0 : i64} : (tensor<12x2xf32>) -> tensor<6x2xf32>
  %f = job.shard_embed %e {mesh = array<i64: 2, 2>, mesh_axis = 1 : i64, axis = 0 : i64} : (tensor<6x2xf32>) -> tensor<11x2xf32>
  %g = job.pad %f : (tensor<11x2xf32>) -> tensor<12x2xf32>
  %h = job.broadcast_to_partial %e {mesh = array<i64: 2, 2>, mesh_axis = 0 : i64} : (tensor<6x2xf32>) -> tensor<6x2xf32>
  job.return %h : tensor<6x2xf32>
}

// CHECK-LABEL: job.func @physical(%x: tensor<5x4xf32>) -> tensor<6x2xf32> attributes {job_type = "predict"} {
// CHECK-NEXT:    %a = job.shard_slice %x {axis = 0 : i64, mesh = array<i64: 2, 2>, mesh_axis = 1 : i64} : (tensor<5x4xf32>) -> tensor<3x4xf32>
// CHECK-NEXT:    %b = job.all_gather %a {axis = 0 : i64, mesh = array<i64: 2, 2>, mesh_axis = 1 : i64} : (tensor<3x4xf32>) -> tensor<6x4xf32>
// CHECK-NEXT:    %c = job.all_reduce %b {mesh = array<i64: 2, 2>, mesh_axis = 0 : i64, reduction = "max"} : (tensor<6x4xf32>) -> tensor<6x4xf32>
// CHECK-NEXT:    %d = job.all_to_all %c {concat_axis = 0 : i64, mesh = array<i64: 2, 2>, mesh_axis = 0 : i64, split_axis = 1 : i64} : (tensor<6x4xf32>) -> tensor<12x2xf32>
// CHECK-NEXT:    %e = job.reduce_scatter %d {axis = 0 : i64, mesh = array<i64: 2, 2>, mesh_axis = 0 : i64} : (tensor<12x2xf32>) -> tensor<6x2xf32>
// CHECK-NEXT:    %f = job.shard_embed %e {axis = 0 : i64, mesh = array<i64: 2, 2>, mesh_axis = 1 : i64} : (tensor<6x2xf32>) -> tensor<11x2xf32>
// CHECK-NEXT:    %g = job.pad %f : (tensor<11x2xf32>) -> tensor<12x2xf32>
// CHECK-NEXT:    %h = job.broadcast_to_partial %e {mesh = array<i64: 2, 2>, mesh_axis = 0 : i64} : (tensor<6x2xf32>) -> tensor<6x2xf32>
// CHECK-NEXT:    job.return %h : tensor<6x2xf32>
// CHECK-NEXT:  }

// -----

// Distribution: a boxing (logically the identity) between SBPs and placements,
// with the discardable attributes sbp-infer and insert-boxing write.

job.func @boxing(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {placement = #job.placement<cpu, ["0:0-3"]>, arg_sbp = [#job.nd_sbp<[split(0)]>]} {
  %r = job.relu %x {sbp = #job.nd_sbp<[split(0)]>, sbp_in = [#job.nd_sbp<[split(0)]>], sbp_origin = "rule"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %b = job.boxing %r {src_sbp = #job.nd_sbp<[split(0)]>, sbp = #job.nd_sbp<[broadcast]>, placement = #job.placement<cpu, ["0:0-1"]>, src_placement = #job.placement<cpu, ["0:0-3"]>, reason = "job.return needs [broadcast]"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  job.return %b : tensor<4x8xf32>
}

// CHECK-LABEL: job.func @boxing
// CHECK-NEXT:    %r = job.relu %x {sbp = #job.nd_sbp<[split(0)]>, sbp_in = [#job.nd_sbp<[split(0)]>], sbp_origin = "rule"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %b = job.boxing %r {placement = #job.placement<cpu, ["0:0-1"]>, reason = "job.return needs [broadcast]", sbp = #job.nd_sbp<[broadcast]>, src_placement = #job.placement<cpu, ["0:0-3"]>, src_sbp = #job.nd_sbp<[split(0)]>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-GENERIC:      "job.boxing"(%r) <{placement = #job.placement<cpu, ["0:0-1"]>, sbp = #job.nd_sbp<[broadcast]>, src_placement = #job.placement<cpu, ["0:0-3"]>, src_sbp = #job.nd_sbp<[split(0)]>}> {reason = "job.return needs [broadcast]"}

// -----

// A value moving between device sets (placement n -> m): split(0) pieces of
// a 5x4 value on 4 devices become split(1) pieces on 2 other devices.

job.func @moved(%x: tensor<2x4xf32>) -> tensor<5x2xf32> {
  %y = job.transfer %x {logical_shape = array<i64: 5, 4>, src_sbp = #job.nd_sbp<[split(0)]>, src_placement = #job.placement<cpu, ["0:0-3"]>, sbp = #job.nd_sbp<[split(1)]>, placement = #job.placement<cpu, ["0:4-5"]>} : (tensor<2x4xf32>) -> tensor<5x2xf32>
  job.return %y : tensor<5x2xf32>
}

// CHECK-LABEL: job.func @moved(%x: tensor<2x4xf32>) -> tensor<5x2xf32> attributes {job_type = "predict"} {
// CHECK-NEXT:    %y = job.transfer %x {logical_shape = array<i64: 5, 4>, placement = #job.placement<cpu, ["0:4-5"]>, sbp = #job.nd_sbp<[split(1)]>, src_placement = #job.placement<cpu, ["0:0-3"]>, src_sbp = #job.nd_sbp<[split(0)]>} : (tensor<2x4xf32>) -> tensor<5x2xf32>
// CHECK-NEXT:    job.return %y : tensor<5x2xf32>
// CHECK-NEXT:  }

// -----

// Dynamic sizes within a bound (docs/dynamic.md): the shape is the bound, `#job.bounded` lists the dynamic axes.
// A concatenation along a dynamic axis is dynamic at the sum of the bounds; its gradient takes each input's part.

job.func @dynamic(%x: tensor<100x8xf32, #job.bounded<[0]>>, %b: tensor<8xf32>) -> tensor<100x8xf32, #job.bounded<[0]>> {
  %n = job.size_of %x {axes = array<i64: 0>} : (tensor<100x8xf32, #job.bounded<[0]>>) -> tensor<f32>
  %s = job.div %b, %n : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %y = job.broadcast_like %s, %x : (tensor<8xf32>, tensor<100x8xf32, #job.bounded<[0]>>) -> tensor<100x8xf32, #job.bounded<[0]>>
  %xx = job.concat %x, %y {axis = 0 : i64} : (tensor<100x8xf32, #job.bounded<[0]>>, tensor<100x8xf32, #job.bounded<[0]>>) -> tensor<200x8xf32, #job.bounded<[0]>>
  %dy = job.concat_grad %xx, %x, %y {axis = 0 : i64, index = 1 : i64} : (tensor<200x8xf32, #job.bounded<[0]>>, tensor<100x8xf32, #job.bounded<[0]>>, tensor<100x8xf32, #job.bounded<[0]>>) -> tensor<100x8xf32, #job.bounded<[0]>>
  job.return %dy : tensor<100x8xf32, #job.bounded<[0]>>
}

// CHECK-LABEL: job.func @dynamic(%x: tensor<100x8xf32, #job.bounded<[0]>>, %b: tensor<8xf32>) -> tensor<100x8xf32, #job.bounded<[0]>> attributes {job_type = "predict"} {
// CHECK-NEXT:    %n = job.size_of %x {axes = array<i64: 0>} : (tensor<100x8xf32, #job.bounded<[0]>>) -> tensor<f32>
// CHECK-NEXT:    %s = job.div %b, %n : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
// CHECK-NEXT:    %y = job.broadcast_like %s, %x : (tensor<8xf32>, tensor<100x8xf32, #job.bounded<[0]>>) -> tensor<100x8xf32, #job.bounded<[0]>>
// CHECK-NEXT:    %xx = job.concat %x, %y {axis = 0 : i64} : (tensor<100x8xf32, #job.bounded<[0]>>, tensor<100x8xf32, #job.bounded<[0]>>) -> tensor<200x8xf32, #job.bounded<[0]>>
// CHECK-NEXT:    %dy = job.concat_grad %xx, %x, %y {axis = 0 : i64, index = 1 : i64} : (tensor<200x8xf32, #job.bounded<[0]>>, tensor<100x8xf32, #job.bounded<[0]>>, tensor<100x8xf32, #job.bounded<[0]>>) -> tensor<100x8xf32, #job.bounded<[0]>>
// CHECK-NEXT:    job.return %dy : tensor<100x8xf32, #job.bounded<[0]>>
// CHECK-NEXT:  }

// -----

// A pin makes dynamic axes static at their bound (checked at run time): for an op that takes only axis 0 dynamic.
// An unpin (a pin's gradient) makes them dynamic again at the sizes of its second operand.

job.func @pinned(%x: tensor<100x8xf32, #job.bounded<[0, 1]>>) -> tensor<100x8xf32, #job.bounded<[0, 1]>> {
  %p = job.pin_size %x {axes = array<i64: 1>} : (tensor<100x8xf32, #job.bounded<[0, 1]>>) -> tensor<100x8xf32, #job.bounded<[0]>>
  %u = job.unpin_size %p, %x {axes = array<i64: 1>} : (tensor<100x8xf32, #job.bounded<[0]>>, tensor<100x8xf32, #job.bounded<[0, 1]>>) -> tensor<100x8xf32, #job.bounded<[0, 1]>>
  job.return %u : tensor<100x8xf32, #job.bounded<[0, 1]>>
}

// CHECK-LABEL: job.func @pinned(%x: tensor<100x8xf32, #job.bounded<[0, 1]>>) -> tensor<100x8xf32, #job.bounded<[0, 1]>> attributes {job_type = "predict"} {
// CHECK-NEXT:    %p = job.pin_size %x {axes = array<i64: 1>} : (tensor<100x8xf32, #job.bounded<[0, 1]>>) -> tensor<100x8xf32, #job.bounded<[0]>>
// CHECK-NEXT:    %u = job.unpin_size %p, %x {axes = array<i64: 1>} : (tensor<100x8xf32, #job.bounded<[0]>>, tensor<100x8xf32, #job.bounded<[0, 1]>>) -> tensor<100x8xf32, #job.bounded<[0, 1]>>
// CHECK-NEXT:    job.return %u : tensor<100x8xf32, #job.bounded<[0, 1]>>
// CHECK-NEXT:  }

// -----

// The stages of a sparse cross-entropy and a softmax whose 10 classes are
// split over 4 devices (chunks of 3; all_reduce ops run between the stages).

job.func @class_split(%x: tensor<6x3xf32>, %y: tensor<6xi32>, %d: tensor<6xf32>) -> (tensor<6xf32>, tensor<6x3xf32>) {
  %m = job.class_split_max %x {mesh = array<i64: 4>, mesh_axis = 0 : i64, classes = 10 : i64} : (tensor<6x3xf32>) -> tensor<6xf32>
  %s = job.class_split_sum_exp %x, %m {mesh = array<i64: 4>, mesh_axis = 0 : i64, classes = 10 : i64} : (tensor<6x3xf32>, tensor<6xf32>) -> tensor<6xf32>
  %l = job.class_split_cross_entropy %x, %m, %s, %y {mesh = array<i64: 4>, mesh_axis = 0 : i64, classes = 10 : i64} : (tensor<6x3xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xi32>) -> tensor<6xf32>
  %g = job.class_split_cross_entropy_grad %d, %x, %m, %s, %y {mesh = array<i64: 4>, mesh_axis = 0 : i64, classes = 10 : i64} : (tensor<6xf32>, tensor<6x3xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xi32>) -> tensor<6x3xf32>
  %p = job.class_split_softmax %x, %m, %s {mesh = array<i64: 4>, mesh_axis = 0 : i64, classes = 10 : i64} : (tensor<6x3xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<6x3xf32>
  %t = job.class_split_dot %g, %p {mesh = array<i64: 4>, mesh_axis = 0 : i64, classes = 10 : i64} : (tensor<6x3xf32>, tensor<6x3xf32>) -> tensor<6xf32>
  %q = job.class_split_softmax_grad %g, %p, %t {mesh = array<i64: 4>, mesh_axis = 0 : i64, classes = 10 : i64} : (tensor<6x3xf32>, tensor<6x3xf32>, tensor<6xf32>) -> tensor<6x3xf32>
  job.return %l, %q : tensor<6xf32>, tensor<6x3xf32>
}

// CHECK-LABEL: job.func @class_split
// CHECK-NEXT:    %m = job.class_split_max %x {classes = 10 : i64, mesh = array<i64: 4>, mesh_axis = 0 : i64} : (tensor<6x3xf32>) -> tensor<6xf32>
// CHECK-NEXT:    %s = job.class_split_sum_exp %x, %m {classes = 10 : i64, mesh = array<i64: 4>, mesh_axis = 0 : i64} : (tensor<6x3xf32>, tensor<6xf32>) -> tensor<6xf32>
// CHECK-NEXT:    %l = job.class_split_cross_entropy %x, %m, %s, %y {classes = 10 : i64, mesh = array<i64: 4>, mesh_axis = 0 : i64} : (tensor<6x3xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xi32>) -> tensor<6xf32>
// CHECK-NEXT:    %g = job.class_split_cross_entropy_grad %d, %x, %m, %s, %y {classes = 10 : i64, mesh = array<i64: 4>, mesh_axis = 0 : i64} : (tensor<6xf32>, tensor<6x3xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xi32>) -> tensor<6x3xf32>
// CHECK-NEXT:    %p = job.class_split_softmax %x, %m, %s {classes = 10 : i64, mesh = array<i64: 4>, mesh_axis = 0 : i64} : (tensor<6x3xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<6x3xf32>
// CHECK-NEXT:    %t = job.class_split_dot %g, %p {classes = 10 : i64, mesh = array<i64: 4>, mesh_axis = 0 : i64} : (tensor<6x3xf32>, tensor<6x3xf32>) -> tensor<6xf32>
// CHECK-NEXT:    %q = job.class_split_softmax_grad %g, %p, %t {classes = 10 : i64, mesh = array<i64: 4>, mesh_axis = 0 : i64} : (tensor<6x3xf32>, tensor<6x3xf32>, tensor<6xf32>) -> tensor<6x3xf32>
// CHECK-NEXT:    job.return %l, %q : tensor<6xf32>, tensor<6x3xf32>
// CHECK-NEXT:  }

// -----

// A LAMB and a LARS update of a variable of 5 rows split over 2 devices (pieces
// of 3, the second padded): the squared norms of each piece (all_reduce ops sum
// them) become the updates' last operand.

job.func @piece_norms(%g: tensor<3x4xf32>, %lr: tensor<f32>, %step: tensor<i64>) attributes {job_type = "train"} {
  %w = job.variable {name = "w", initializer = {kind = "zeros"}} : tensor<3x4xf32>
  %m = job.variable {name = "w-m", initializer = {kind = "zeros"}, trainable = false} : tensor<3x4xf32>
  %v = job.variable {name = "w-v", initializer = {kind = "zeros"}, trainable = false} : tensor<3x4xf32>
  %a = job.lamb_norms %w, %g, %m, %v, %step {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-06 : f64, layout = #job.nd_sbp<[split(0)]>, logical_shape = array<i64: 5, 4>, mesh = array<i64: 2>} : (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<i64>) -> tensor<2xf32>
  %b = job.lars_norms %w, %g {layout = #job.nd_sbp<[split(0)]>, logical_shape = array<i64: 5, 4>, mesh = array<i64: 2>} : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<2xf32>
  job.lamb_update %w, %g, %m, %v, %lr, %step, %a {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-06 : f64} : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<f32>, tensor<i64>, tensor<2xf32>
  job.lars_update %w, %g, %m, %lr, %b {momentum_beta = 0.9 : f64, epsilon = 1.0e-09 : f64, lars_coefficient = 1.0e-04 : f64} : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<f32>, tensor<2xf32>
  job.return
}

// CHECK-LABEL: job.func @piece_norms
// CHECK-NEXT:    %w = job.variable
// CHECK-NEXT:    %m = job.variable
// CHECK-NEXT:    %v = job.variable
// CHECK-NEXT:    %a = job.lamb_norms %w, %g, %m, %v, %step {beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, epsilon = 1.000000e-06 : f64, layout = #job.nd_sbp<[split(0)]>, logical_shape = array<i64: 5, 4>, mesh = array<i64: 2>} : (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<i64>) -> tensor<2xf32>
// CHECK-NEXT:    %b = job.lars_norms %w, %g {layout = #job.nd_sbp<[split(0)]>, logical_shape = array<i64: 5, 4>, mesh = array<i64: 2>} : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<2xf32>
// CHECK-NEXT:    job.lamb_update %w, %g, %m, %v, %lr, %step, %a {beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, epsilon = 1.000000e-06 : f64} : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<f32>, tensor<i64>, tensor<2xf32>
// CHECK-NEXT:    job.lars_update %w, %g, %m, %lr, %b {epsilon = 1.000000e-09 : f64, lars_coefficient = 1.000000e-04 : f64, momentum_beta = 9.000000e-01 : f64} : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<f32>, tensor<2xf32>
// CHECK-NEXT:    job.return
// CHECK-NEXT:  }

// -----

// TensorBuffers (docs/dynamic.md): element shapes in the type, elements dense at their own shape within the bound.

job.func @tensor_buffers(%x: tensor<3x4xf32>) -> (tensor<3x4xf64>, tensor<100x100xf32, #job.bounded<[0, 1]>>, tensor<4xf32>) {
  %b = job.tensor_to_tensor_buffer %x {instance_dims = 1 : i64} : (tensor<3x4xf32>) -> tensor<3x4xf32, #job.tensor_buffer<[4]>>
  %t = job.tensor_buffer_to_tensor %b {instance_shape = array<i64: 4>} : (tensor<3x4xf32, #job.tensor_buffer<[4]>>) -> tensor<3x4xf64>
  %g = job.gen_tensor_buffer {values = array<f64: 0.0, 1.0>} : tensor<2x2x2xf32, #job.tensor_buffer<[2, 1], [1, 2]>>
  %e = job.tensor_buffer_get %g {index = 1 : i64, out_shape = array<i64: 100, 100>, dynamic_out = true} : (tensor<2x2x2xf32, #job.tensor_buffer<[2, 1], [1, 2]>>) -> tensor<100x100xf32, #job.bounded<[0, 1]>>
  %r = job.tensor_buffer_get %b {index = 2 : i64, out_shape = array<i64: 4>} : (tensor<3x4xf32, #job.tensor_buffer<[4]>>) -> tensor<4xf32>
  job.return %t, %e, %r : tensor<3x4xf64>, tensor<100x100xf32, #job.bounded<[0, 1]>>, tensor<4xf32>
}

// CHECK-LABEL: job.func @tensor_buffers(%x: tensor<3x4xf32>) -> (tensor<3x4xf64>, tensor<100x100xf32, #job.bounded<[0, 1]>>, tensor<4xf32>) attributes {job_type = "predict"} {
// CHECK-NEXT:    %b = job.tensor_to_tensor_buffer %x {instance_dims = 1 : i64} : (tensor<3x4xf32>) -> tensor<3x4xf32, #job.tensor_buffer<[4]>>
// CHECK-NEXT:    %t = job.tensor_buffer_to_tensor %b {instance_shape = array<i64: 4>} : (tensor<3x4xf32, #job.tensor_buffer<[4]>>) -> tensor<3x4xf64>
// CHECK-NEXT:    %g = job.gen_tensor_buffer {values = array<f64: 0.000000e+00, 1.000000e+00>} : tensor<2x2x2xf32, #job.tensor_buffer<[2, 1], [1, 2]>>
// CHECK-NEXT:    %e = job.tensor_buffer_get %g {dynamic_out = true, index = 1 : i64, out_shape = array<i64: 100, 100>} : (tensor<2x2x2xf32, #job.tensor_buffer<[2, 1], [1, 2]>>) -> tensor<100x100xf32, #job.bounded<[0, 1]>>
// CHECK-NEXT:    %r = job.tensor_buffer_get %b {index = 2 : i64, out_shape = array<i64: 4>} : (tensor<3x4xf32, #job.tensor_buffer<[4]>>) -> tensor<4xf32>
// CHECK-NEXT:    job.return %t, %e, %r : tensor<3x4xf64>, tensor<100x100xf32, #job.bounded<[0, 1]>>, tensor<4xf32>
// CHECK-NEXT:  }

// -----

// A TensorBuffer of a dynamic input: its element count and element shape are sizes of the step.

job.func @run_time_tensor_buffer(%x: tensor<3x5xf32, #job.bounded<[0, 1]>>) -> (tensor<5xf32, #job.bounded<[0]>>, tensor<3x5xf32, #job.bounded<[0]>>) {
  %b = job.tensor_to_tensor_buffer %x {instance_dims = 1 : i64} : (tensor<3x5xf32, #job.bounded<[0, 1]>>) -> tensor<3x5xf32, #job.tensor_buffer<[5] dynamic [0, 1]>>
  %e = job.tensor_buffer_get %b {index = 0 : i64, out_shape = array<i64: 5>, dynamic_out = true} : (tensor<3x5xf32, #job.tensor_buffer<[5] dynamic [0, 1]>>) -> tensor<5xf32, #job.bounded<[0]>>
  %t = job.tensor_buffer_to_tensor %b {instance_shape = array<i64: 5>} : (tensor<3x5xf32, #job.tensor_buffer<[5] dynamic [0, 1]>>) -> tensor<3x5xf32, #job.bounded<[0]>>
  job.return %e, %t : tensor<5xf32, #job.bounded<[0]>>, tensor<3x5xf32, #job.bounded<[0]>>
}

// CHECK-LABEL: job.func @run_time_tensor_buffer(%x: tensor<3x5xf32, #job.bounded<[0, 1]>>) -> (tensor<5xf32, #job.bounded<[0]>>, tensor<3x5xf32, #job.bounded<[0]>>) attributes {job_type = "predict"} {
// CHECK-NEXT:    %b = job.tensor_to_tensor_buffer %x {instance_dims = 1 : i64} : (tensor<3x5xf32, #job.bounded<[0, 1]>>) -> tensor<3x5xf32, #job.tensor_buffer<[5] dynamic [0, 1]>>
// CHECK-NEXT:    %e = job.tensor_buffer_get %b {dynamic_out = true, index = 0 : i64, out_shape = array<i64: 5>} : (tensor<3x5xf32, #job.tensor_buffer<[5] dynamic [0, 1]>>) -> tensor<5xf32, #job.bounded<[0]>>
// CHECK-NEXT:    %t = job.tensor_buffer_to_tensor %b {instance_shape = array<i64: 5>} : (tensor<3x5xf32, #job.tensor_buffer<[5] dynamic [0, 1]>>) -> tensor<3x5xf32, #job.bounded<[0]>>
// CHECK-NEXT:    job.return %e, %t : tensor<5xf32, #job.bounded<[0]>>, tensor<3x5xf32, #job.bounded<[0]>>
// CHECK-NEXT:  }

// -----

// Selection and indexing: where broadcasts its condition and both branches;
// gather replaces the indexed axis by the indices' shape (axis 0 by default),
// and its gradient scatters back into params' shape; with batch_dims the
// indices' leading axes are params' and replace none of them; dim_gather
// takes its index's shape; gather_nd picks by the indices' last axis of
// coordinates and scatter_nd adds back; tensor_scatter_nd_update and _add
// write the slices into params' type; a product reduction and its gradient.

job.func @select(%c: tensor<4x1xi8>, %x: tensor<4x8xf32>, %y: tensor<8xf32>, %i: tensor<2x3xi32>, %i3: tensor<2x3x5xi32>) -> tensor<4x8xf32> {
  %w = job.where %c, %x, %y : (tensor<4x1xi8>, tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %rows = job.gather %w, %i : (tensor<4x8xf32>, tensor<2x3xi32>) -> tensor<2x3x8xf32>
  %cols = job.gather %w, %i {axis = 1 : i64} : (tensor<4x8xf32>, tensor<2x3xi32>) -> tensor<4x2x3xf32>
  %back = job.gather_grad %cols, %i {axis = -1 : i64} : (tensor<4x2x3xf32>, tensor<2x3xi32>) -> tensor<4x8xf32>
  %per = job.gather %rows, %i {axis = 2 : i64, batch_dims = 2 : i64} : (tensor<2x3x8xf32>, tensor<2x3xi32>) -> tensor<2x3xf32>
  %perg = job.gather_grad %per, %i {axis = 2 : i64, batch_dims = 2 : i64} : (tensor<2x3xf32>, tensor<2x3xi32>) -> tensor<2x3x8xf32>
  %dg = job.dim_gather %perg, %i3 {dim = 2 : i64} : (tensor<2x3x8xf32>, tensor<2x3x5xi32>) -> tensor<2x3x5xf32>
  %dgg = job.dim_gather_grad %dg, %i3 {dim = 2 : i64} : (tensor<2x3x5xf32>, tensor<2x3x5xi32>) -> tensor<2x3x8xf32>
  %nd = job.gather_nd %dgg, %i : (tensor<2x3x8xf32>, tensor<2x3xi32>) -> tensor<2xf32>
  %snd = job.scatter_nd %nd, %i : (tensor<2xf32>, tensor<2x3xi32>) -> tensor<2x3x8xf32>
  %tsu = job.tensor_scatter_nd_update %snd, %i, %nd : (tensor<2x3x8xf32>, tensor<2x3xi32>, tensor<2xf32>) -> tensor<2x3x8xf32>
  %tsa = job.tensor_scatter_nd_add %tsu, %i, %nd : (tensor<2x3x8xf32>, tensor<2x3xi32>, tensor<2xf32>) -> tensor<2x3x8xf32>
  %prod = job.reduce_prod %back {axes = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4xf32>
  %pg = job.reduce_prod_grad %prod, %back {axes = array<i64: 1>} : (tensor<4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  job.return %pg : tensor<4x8xf32>
}

// CHECK-LABEL: job.func @select(%c: tensor<4x1xi8>, %x: tensor<4x8xf32>, %y: tensor<8xf32>, %i: tensor<2x3xi32>, %i3: tensor<2x3x5xi32>) -> tensor<4x8xf32> attributes {job_type = "predict"} {
// CHECK-NEXT:    %w = job.where %c, %x, %y : (tensor<4x1xi8>, tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %rows = job.gather %w, %i : (tensor<4x8xf32>, tensor<2x3xi32>) -> tensor<2x3x8xf32>
// CHECK-NEXT:    %cols = job.gather %w, %i {axis = 1 : i64} : (tensor<4x8xf32>, tensor<2x3xi32>) -> tensor<4x2x3xf32>
// CHECK-NEXT:    %back = job.gather_grad %cols, %i {axis = -1 : i64} : (tensor<4x2x3xf32>, tensor<2x3xi32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %per = job.gather %rows, %i {axis = 2 : i64, batch_dims = 2 : i64} : (tensor<2x3x8xf32>, tensor<2x3xi32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %perg = job.gather_grad %per, %i {axis = 2 : i64, batch_dims = 2 : i64} : (tensor<2x3xf32>, tensor<2x3xi32>) -> tensor<2x3x8xf32>
// CHECK-NEXT:    %dg = job.dim_gather %perg, %i3 {dim = 2 : i64} : (tensor<2x3x8xf32>, tensor<2x3x5xi32>) -> tensor<2x3x5xf32>
// CHECK-NEXT:    %dgg = job.dim_gather_grad %dg, %i3 {dim = 2 : i64} : (tensor<2x3x5xf32>, tensor<2x3x5xi32>) -> tensor<2x3x8xf32>
// CHECK-NEXT:    %nd = job.gather_nd %dgg, %i : (tensor<2x3x8xf32>, tensor<2x3xi32>) -> tensor<2xf32>
// CHECK-NEXT:    %snd = job.scatter_nd %nd, %i : (tensor<2xf32>, tensor<2x3xi32>) -> tensor<2x3x8xf32>
// CHECK-NEXT:    %tsu = job.tensor_scatter_nd_update %snd, %i, %nd : (tensor<2x3x8xf32>, tensor<2x3xi32>, tensor<2xf32>) -> tensor<2x3x8xf32>
// CHECK-NEXT:    %tsa = job.tensor_scatter_nd_add %tsu, %i, %nd : (tensor<2x3x8xf32>, tensor<2x3xi32>, tensor<2xf32>) -> tensor<2x3x8xf32>
// CHECK-NEXT:    %prod = job.reduce_prod %back {axes = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %pg = job.reduce_prod_grad %prod, %back {axes = array<i64: 1>} : (tensor<4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    job.return %pg : tensor<4x8xf32>
// CHECK-NEXT:  }
// CHECK-GENERIC: "job.gather"(%w, %i) <{axis = 0 : i64}> : (tensor<4x8xf32>, tensor<2x3xi32>) -> tensor<2x3x8xf32>
