// RUN: irflow-opt %s --split-input-file -p fuse-batch-norm | filecheck %s
// RUN: irflow-opt %s --split-input-file -p fuse-batch-norm | filecheck %s --check-prefix=GONE

// A train step's batch normalization (flow.layers.batch_normalization, then a
// relu) after a convolution, as convert-job-to-buffer leaves it: about eight
// kernels forward and fourteen backward. They become batch_norm_stats where the
// first reduce_mean stood, batch_norm (with the relu) where the relu stood, and
// batch_norm_grad (with the relu_grad) where the first backward kernel stood.
// The moving averages keep reading the mean and variance buffers.

buffer.program @bn on "cpu" attributes {job_type = "train"} {
  %x = buffer.alloc : memref<2x1x2x2xf32>
  buffer.input %x {index = 0 : i64} : memref<2x1x2x2xf32>
  %conv-weight = buffer.variable {initializer = {data_format = "channels_first", distribution = "random_uniform", kind = "variance_scaling", mode = "fan_avg", scale = 1.000000e+00 : f64}, name = "conv-weight", trainable = true} : memref<2x1x1x1xf32>
  %conv = buffer.alloc : memref<2x2x2x2xf32>
  buffer.kernel "conv2d" ins(%x, %conv-weight : memref<2x1x2x2xf32>, memref<2x1x1x1xf32>) outs(%conv : memref<2x2x2x2xf32>) {dilations = array<i64: 1, 1>, groups = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>}
  %bn-moving_mean = buffer.variable {initializer = {kind = "constant", value = 0.000000e+00 : f64}, name = "bn-moving_mean", trainable = false} : memref<2xf32>
  %0 = buffer.alloc : memref<1x2x1x1xf32>
  buffer.kernel "reshape" ins(%bn-moving_mean : memref<2xf32>) outs(%0 : memref<1x2x1x1xf32>)
  %bn-moving_variance = buffer.variable {initializer = {kind = "constant", value = 1.000000e+00 : f64}, name = "bn-moving_variance", trainable = false} : memref<2xf32>
  %1 = buffer.alloc : memref<1x2x1x1xf32>
  buffer.kernel "reshape" ins(%bn-moving_variance : memref<2xf32>) outs(%1 : memref<1x2x1x1xf32>)
  %2 = buffer.alloc : memref<1x2x1x1xf32>
  buffer.kernel "reduce_mean" ins(%conv : memref<2x2x2x2xf32>) outs(%2 : memref<1x2x1x1xf32>) {axes = array<i64: 0, 2, 3>, keepdims = true}
  %3 = buffer.alloc : memref<2x2x2x2xf32>
  buffer.kernel "sub" ins(%conv, %2 : memref<2x2x2x2xf32>, memref<1x2x1x1xf32>) outs(%3 : memref<2x2x2x2xf32>)
  %4 = buffer.alloc : memref<2x2x2x2xf32>
  buffer.kernel "square" ins(%3 : memref<2x2x2x2xf32>) outs(%4 : memref<2x2x2x2xf32>)
  %5 = buffer.alloc : memref<1x2x1x1xf32>
  buffer.kernel "reduce_mean" ins(%4 : memref<2x2x2x2xf32>) outs(%5 : memref<1x2x1x1xf32>) {axes = array<i64: 0, 2, 3>, keepdims = true}
  %6 = buffer.alloc : memref<f32>
  buffer.kernel "fill" outs(%6 : memref<f32>) {value = 1.1428571428571428 : f64}
  %7 = buffer.alloc : memref<1x2x1x1xf32>
  buffer.kernel "mul" ins(%5, %6 : memref<1x2x1x1xf32>, memref<f32>) outs(%7 : memref<1x2x1x1xf32>)
  %8 = buffer.alloc : memref<f32>
  buffer.kernel "fill" outs(%8 : memref<f32>) {value = 9.000000e-01 : f64}
  %9 = buffer.alloc : memref<1x2x1x1xf32>
  buffer.kernel "mul" ins(%0, %8 : memref<1x2x1x1xf32>, memref<f32>) outs(%9 : memref<1x2x1x1xf32>)
  %10 = buffer.alloc : memref<f32>
  buffer.kernel "fill" outs(%10 : memref<f32>) {value = 0.099999999999999978 : f64}
  %11 = buffer.alloc : memref<1x2x1x1xf32>
  buffer.kernel "mul" ins(%2, %10 : memref<1x2x1x1xf32>, memref<f32>) outs(%11 : memref<1x2x1x1xf32>)
  %12 = buffer.alloc : memref<1x2x1x1xf32>
  buffer.kernel "add" ins(%9, %11 : memref<1x2x1x1xf32>, memref<1x2x1x1xf32>) outs(%12 : memref<1x2x1x1xf32>)
  %13 = buffer.alloc : memref<2xf32>
  buffer.kernel "reshape" ins(%12 : memref<1x2x1x1xf32>) outs(%13 : memref<2xf32>)
  buffer.copy %13, %bn-moving_mean : memref<2xf32>, memref<2xf32>
  %14 = buffer.alloc : memref<1x2x1x1xf32>
  buffer.kernel "mul" ins(%1, %8 : memref<1x2x1x1xf32>, memref<f32>) outs(%14 : memref<1x2x1x1xf32>)
  %15 = buffer.alloc : memref<1x2x1x1xf32>
  buffer.kernel "mul" ins(%7, %10 : memref<1x2x1x1xf32>, memref<f32>) outs(%15 : memref<1x2x1x1xf32>)
  %16 = buffer.alloc : memref<1x2x1x1xf32>
  buffer.kernel "add" ins(%14, %15 : memref<1x2x1x1xf32>, memref<1x2x1x1xf32>) outs(%16 : memref<1x2x1x1xf32>)
  %17 = buffer.alloc : memref<2xf32>
  buffer.kernel "reshape" ins(%16 : memref<1x2x1x1xf32>) outs(%17 : memref<2xf32>)
  buffer.copy %17, %bn-moving_variance : memref<2xf32>, memref<2xf32>
  %18 = buffer.alloc : memref<f32>
  buffer.kernel "fill" outs(%18 : memref<f32>) {value = 1.000000e-05 : f64}
  %19 = buffer.alloc : memref<1x2x1x1xf32>
  buffer.kernel "add" ins(%5, %18 : memref<1x2x1x1xf32>, memref<f32>) outs(%19 : memref<1x2x1x1xf32>)
  %20 = buffer.alloc : memref<1x2x1x1xf32>
  buffer.kernel "rsqrt" ins(%19 : memref<1x2x1x1xf32>) outs(%20 : memref<1x2x1x1xf32>)
  %21 = buffer.alloc : memref<2x2x2x2xf32>
  buffer.kernel "mul" ins(%3, %20 : memref<2x2x2x2xf32>, memref<1x2x1x1xf32>) outs(%21 : memref<2x2x2x2xf32>)
  %bn-gamma = buffer.variable {initializer = {kind = "constant", value = 1.000000e+00 : f64}, name = "bn-gamma", trainable = true} : memref<2xf32>
  %22 = buffer.alloc : memref<1x2x1x1xf32>
  buffer.kernel "reshape" ins(%bn-gamma : memref<2xf32>) outs(%22 : memref<1x2x1x1xf32>)
  %23 = buffer.alloc : memref<2x2x2x2xf32>
  buffer.kernel "mul" ins(%21, %22 : memref<2x2x2x2xf32>, memref<1x2x1x1xf32>) outs(%23 : memref<2x2x2x2xf32>)
  %bn-beta = buffer.variable {initializer = {kind = "constant", value = 0.000000e+00 : f64}, name = "bn-beta", trainable = true} : memref<2xf32>
  %24 = buffer.alloc : memref<1x2x1x1xf32>
  buffer.kernel "reshape" ins(%bn-beta : memref<2xf32>) outs(%24 : memref<1x2x1x1xf32>)
  %25 = buffer.alloc : memref<2x2x2x2xf32>
  buffer.kernel "add" ins(%23, %24 : memref<2x2x2x2xf32>, memref<1x2x1x1xf32>) outs(%25 : memref<2x2x2x2xf32>)
  %26 = buffer.alloc : memref<2x2x2x2xf32>
  buffer.kernel "relu" ins(%25 : memref<2x2x2x2xf32>) outs(%26 : memref<2x2x2x2xf32>)
  %27 = buffer.alloc : memref<2x2x2x2xf32>
  buffer.kernel "square" ins(%26 : memref<2x2x2x2xf32>) outs(%27 : memref<2x2x2x2xf32>)
  %28 = buffer.alloc : memref<f32>
  buffer.kernel "reduce_mean" ins(%27 : memref<2x2x2x2xf32>) outs(%28 : memref<f32>) {axes = array<i64: 0, 1, 2, 3>, keepdims = false}
  %29 = buffer.alloc : memref<f32>
  buffer.kernel "fill" outs(%29 : memref<f32>) {value = 1.000000e+00 : f64}
  %30 = buffer.alloc : memref<f32>
  buffer.kernel "fill" outs(%30 : memref<f32>) {value = 6.250000e-02 : f64}
  %31 = buffer.alloc : memref<f32>
  buffer.kernel "mul" ins(%29, %30 : memref<f32>, memref<f32>) outs(%31 : memref<f32>)
  %32 = buffer.alloc : memref<1x1x1x1xf32>
  buffer.kernel "reshape" ins(%31 : memref<f32>) outs(%32 : memref<1x1x1x1xf32>)
  %33 = buffer.alloc : memref<2x2x2x2xf32>
  buffer.kernel "broadcast_to" ins(%32 : memref<1x1x1x1xf32>) outs(%33 : memref<2x2x2x2xf32>)
  %34 = buffer.alloc : memref<2x2x2x2xf32>
  buffer.kernel "mul" ins(%33, %26 : memref<2x2x2x2xf32>, memref<2x2x2x2xf32>) outs(%34 : memref<2x2x2x2xf32>)
  %35 = buffer.alloc : memref<f32>
  buffer.kernel "fill" outs(%35 : memref<f32>) {value = 2.000000e+00 : f64}
  %36 = buffer.alloc : memref<2x2x2x2xf32>
  buffer.kernel "mul" ins(%34, %35 : memref<2x2x2x2xf32>, memref<f32>) outs(%36 : memref<2x2x2x2xf32>)
  %37 = buffer.alloc : memref<2x2x2x2xf32>
  buffer.kernel "relu_grad" ins(%36, %26 : memref<2x2x2x2xf32>, memref<2x2x2x2xf32>) outs(%37 : memref<2x2x2x2xf32>)
  %38 = buffer.alloc : memref<2xf32>
  buffer.kernel "reduce_sum" ins(%37 : memref<2x2x2x2xf32>) outs(%38 : memref<2xf32>) {axes = array<i64: 0, 2, 3>, keepdims = false}
  %39 = buffer.alloc : memref<1x2x1x1xf32>
  buffer.kernel "reshape" ins(%38 : memref<2xf32>) outs(%39 : memref<1x2x1x1xf32>)
  %bn-beta_grad = buffer.alloc : memref<2xf32>
  buffer.kernel "reshape" ins(%39 : memref<1x2x1x1xf32>) outs(%bn-beta_grad : memref<2xf32>)
  %40 = buffer.alloc : memref<2x2x2x2xf32>
  buffer.kernel "mul" ins(%37, %22 : memref<2x2x2x2xf32>, memref<1x2x1x1xf32>) outs(%40 : memref<2x2x2x2xf32>)
  %41 = buffer.alloc : memref<2x2x2x2xf32>
  buffer.kernel "mul" ins(%37, %21 : memref<2x2x2x2xf32>, memref<2x2x2x2xf32>) outs(%41 : memref<2x2x2x2xf32>)
  %42 = buffer.alloc : memref<2xf32>
  buffer.kernel "reduce_sum" ins(%41 : memref<2x2x2x2xf32>) outs(%42 : memref<2xf32>) {axes = array<i64: 0, 2, 3>, keepdims = false}
  %43 = buffer.alloc : memref<1x2x1x1xf32>
  buffer.kernel "reshape" ins(%42 : memref<2xf32>) outs(%43 : memref<1x2x1x1xf32>)
  %bn-gamma_grad = buffer.alloc : memref<2xf32>
  buffer.kernel "reshape" ins(%43 : memref<1x2x1x1xf32>) outs(%bn-gamma_grad : memref<2xf32>)
  %44 = buffer.alloc : memref<2x2x2x2xf32>
  buffer.kernel "mul" ins(%40, %20 : memref<2x2x2x2xf32>, memref<1x2x1x1xf32>) outs(%44 : memref<2x2x2x2xf32>)
  %45 = buffer.alloc : memref<2x2x2x2xf32>
  buffer.kernel "mul" ins(%40, %3 : memref<2x2x2x2xf32>, memref<2x2x2x2xf32>) outs(%45 : memref<2x2x2x2xf32>)
  %46 = buffer.alloc : memref<2xf32>
  buffer.kernel "reduce_sum" ins(%45 : memref<2x2x2x2xf32>) outs(%46 : memref<2xf32>) {axes = array<i64: 0, 2, 3>, keepdims = false}
  %47 = buffer.alloc : memref<1x2x1x1xf32>
  buffer.kernel "reshape" ins(%46 : memref<2xf32>) outs(%47 : memref<1x2x1x1xf32>)
  %48 = buffer.alloc : memref<1x2x1x1xf32>
  buffer.kernel "square" ins(%20 : memref<1x2x1x1xf32>) outs(%48 : memref<1x2x1x1xf32>)
  %49 = buffer.alloc : memref<1x2x1x1xf32>
  buffer.kernel "mul" ins(%48, %20 : memref<1x2x1x1xf32>, memref<1x2x1x1xf32>) outs(%49 : memref<1x2x1x1xf32>)
  %50 = buffer.alloc : memref<1x2x1x1xf32>
  buffer.kernel "mul" ins(%47, %49 : memref<1x2x1x1xf32>, memref<1x2x1x1xf32>) outs(%50 : memref<1x2x1x1xf32>)
  %51 = buffer.alloc : memref<f32>
  buffer.kernel "fill" outs(%51 : memref<f32>) {value = -5.000000e-01 : f64}
  %52 = buffer.alloc : memref<1x2x1x1xf32>
  buffer.kernel "mul" ins(%50, %51 : memref<1x2x1x1xf32>, memref<f32>) outs(%52 : memref<1x2x1x1xf32>)
  %53 = buffer.alloc : memref<f32>
  buffer.kernel "fill" outs(%53 : memref<f32>) {value = 1.250000e-01 : f64}
  %54 = buffer.alloc : memref<1x2x1x1xf32>
  buffer.kernel "mul" ins(%52, %53 : memref<1x2x1x1xf32>, memref<f32>) outs(%54 : memref<1x2x1x1xf32>)
  %55 = buffer.alloc : memref<2x2x2x2xf32>
  buffer.kernel "broadcast_to" ins(%54 : memref<1x2x1x1xf32>) outs(%55 : memref<2x2x2x2xf32>)
  %56 = buffer.alloc : memref<2x2x2x2xf32>
  buffer.kernel "mul" ins(%55, %3 : memref<2x2x2x2xf32>, memref<2x2x2x2xf32>) outs(%56 : memref<2x2x2x2xf32>)
  %57 = buffer.alloc : memref<2x2x2x2xf32>
  buffer.kernel "mul" ins(%56, %35 : memref<2x2x2x2xf32>, memref<f32>) outs(%57 : memref<2x2x2x2xf32>)
  %conv_grad = buffer.alloc : memref<2x2x2x2xf32>
  buffer.kernel "add" ins(%44, %57 : memref<2x2x2x2xf32>, memref<2x2x2x2xf32>) outs(%conv_grad : memref<2x2x2x2xf32>)
  %58 = buffer.alloc : memref<2xf32>
  buffer.kernel "reduce_sum" ins(%conv_grad : memref<2x2x2x2xf32>) outs(%58 : memref<2xf32>) {axes = array<i64: 0, 2, 3>, keepdims = false}
  %59 = buffer.alloc : memref<1x2x1x1xf32>
  buffer.kernel "reshape" ins(%58 : memref<2xf32>) outs(%59 : memref<1x2x1x1xf32>)
  %60 = buffer.alloc : memref<1x2x1x1xf32>
  buffer.kernel "neg" ins(%59 : memref<1x2x1x1xf32>) outs(%60 : memref<1x2x1x1xf32>)
  %61 = buffer.alloc : memref<1x2x1x1xf32>
  buffer.kernel "mul" ins(%60, %53 : memref<1x2x1x1xf32>, memref<f32>) outs(%61 : memref<1x2x1x1xf32>)
  %62 = buffer.alloc : memref<2x2x2x2xf32>
  buffer.kernel "broadcast_to" ins(%61 : memref<1x2x1x1xf32>) outs(%62 : memref<2x2x2x2xf32>)
  %conv_grad_1 = buffer.alloc : memref<2x2x2x2xf32>
  buffer.kernel "add" ins(%conv_grad, %62 : memref<2x2x2x2xf32>, memref<2x2x2x2xf32>) outs(%conv_grad_1 : memref<2x2x2x2xf32>)
  %conv-weight_grad = buffer.alloc : memref<2x1x1x1xf32>
  buffer.kernel "conv2d_grad_filter" ins(%conv_grad_1, %x : memref<2x2x2x2xf32>, memref<2x1x2x2xf32>) outs(%conv-weight_grad : memref<2x1x1x1xf32>) {dilations = array<i64: 1, 1>, groups = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>}
  %train_step = buffer.variable {initializer = {kind = "constant", value = 0.000000e+00 : f64}, name = "System-Train-TrainStep", trainable = false} : memref<i64>
  %lr = buffer.alloc : memref<f32>
  buffer.kernel "learning_rate" ins(%train_step : memref<i64>) outs(%lr : memref<f32>) {schedule = {boundaries = array<i64>, kind = "piecewise_constant", values = array<f64: 1.000000e-01>}}
  %63 = buffer.constant {value = dense<1> : tensor<i64>} : memref<i64>
  %next_step = buffer.alloc : memref<i64>
  buffer.kernel "add" ins(%train_step, %63 : memref<i64>, memref<i64>) outs(%next_step : memref<i64>)
  %conv-weight-momentum = buffer.variable {initializer = {kind = "constant", value = 0.000000e+00 : f64}, name = "conv-weight-momentum", trainable = false} : memref<2x1x1x1xf32>
  buffer.kernel "momentum_update" ins(%conv-weight, %conv-weight_grad, %conv-weight-momentum, %lr : memref<2x1x1x1xf32>, memref<2x1x1x1xf32>, memref<2x1x1x1xf32>, memref<f32>) outs(%conv-weight, %conv-weight-momentum : memref<2x1x1x1xf32>, memref<2x1x1x1xf32>) {beta = 9.000000e-01 : f64, weight_decay = 0.000000e+00 : f64}
  %bn-gamma-momentum = buffer.variable {initializer = {kind = "constant", value = 0.000000e+00 : f64}, name = "bn-gamma-momentum", trainable = false} : memref<2xf32>
  buffer.kernel "momentum_update" ins(%bn-gamma, %bn-gamma_grad, %bn-gamma-momentum, %lr : memref<2xf32>, memref<2xf32>, memref<2xf32>, memref<f32>) outs(%bn-gamma, %bn-gamma-momentum : memref<2xf32>, memref<2xf32>) {beta = 9.000000e-01 : f64, weight_decay = 0.000000e+00 : f64}
  %bn-beta-momentum = buffer.variable {initializer = {kind = "constant", value = 0.000000e+00 : f64}, name = "bn-beta-momentum", trainable = false} : memref<2xf32>
  buffer.kernel "momentum_update" ins(%bn-beta, %bn-beta_grad, %bn-beta-momentum, %lr : memref<2xf32>, memref<2xf32>, memref<2xf32>, memref<f32>) outs(%bn-beta, %bn-beta-momentum : memref<2xf32>, memref<2xf32>) {beta = 9.000000e-01 : f64, weight_decay = 0.000000e+00 : f64}
  buffer.copy %next_step, %train_step : memref<i64>, memref<i64>
  buffer.output %28 {index = 0 : i64} : memref<f32>
}
// CHECK-LABEL: buffer.program @bn
// CHECK:       buffer.kernel "batch_norm_stats" ins(%conv : memref<2x2x2x2xf32>) outs([[MEAN:%[0-9]+]], [[VAR:%[0-9]+]] : memref<1x2x1x1xf32>, memref<1x2x1x1xf32>) {axis = 1 : i64}
// CHECK:       buffer.kernel "mul" ins([[VAR]], {{%[0-9]+}} : memref<1x2x1x1xf32>, memref<f32>)
// CHECK:       buffer.copy {{%[0-9]+}}, %bn-moving_mean
// CHECK:       buffer.copy {{%[0-9]+}}, %bn-moving_variance
// CHECK:       [[GAMMA:%[0-9]+]] = buffer.alloc : memref<1x2x1x1xf32>
// CHECK-NEXT:  buffer.kernel "reshape" ins(%bn-gamma : memref<2xf32>) outs([[GAMMA]] : memref<1x2x1x1xf32>)
// CHECK:       [[BETA:%[0-9]+]] = buffer.alloc : memref<1x2x1x1xf32>
// CHECK-NEXT:  buffer.kernel "reshape" ins(%bn-beta : memref<2xf32>) outs([[BETA]] : memref<1x2x1x1xf32>)
// CHECK-NEXT:  [[Y:%[0-9]+]] = buffer.alloc : memref<2x2x2x2xf32>
// CHECK-NEXT:  buffer.kernel "batch_norm" ins(%conv, [[MEAN]], [[VAR]], [[GAMMA]], [[BETA]] : {{.*}}) outs([[Y]] : memref<2x2x2x2xf32>) {axis = 1 : i64, epsilon = 1.000000e-05 : f64, relu = true}
// CHECK:       buffer.kernel "mul" ins({{%[0-9]+}}, [[Y]] : memref<2x2x2x2xf32>, memref<2x2x2x2xf32>) outs([[DY0:%[0-9]+]] : memref<2x2x2x2xf32>)
// CHECK:       buffer.kernel "mul" ins([[DY0]], {{%[0-9]+}} : memref<2x2x2x2xf32>, memref<f32>) outs([[DY:%[0-9]+]] : memref<2x2x2x2xf32>)
// CHECK-NEXT:  %conv_grad = buffer.alloc : memref<2x2x2x2xf32>
// CHECK-NEXT:  [[DGAMMA:%[0-9]+]] = buffer.alloc : memref<2xf32>
// CHECK-NEXT:  [[DBETA:%[0-9]+]] = buffer.alloc : memref<2xf32>
// CHECK-NEXT:  buffer.kernel "batch_norm_grad" ins([[DY]], %conv, [[MEAN]], [[VAR]], [[GAMMA]], [[Y]] : {{.*}}) outs(%conv_grad, [[DGAMMA]], [[DBETA]] : memref<2x2x2x2xf32>, memref<2xf32>, memref<2xf32>) {axis = 1 : i64, epsilon = 1.000000e-05 : f64, relu = true}
// CHECK:       buffer.kernel "reshape" ins([[DBETA]] : memref<2xf32>)
// CHECK:       buffer.kernel "reshape" ins([[DGAMMA]] : memref<2xf32>)
// CHECK:       buffer.kernel "conv2d_grad_filter" ins(%conv_grad, %x

// The composite's kernels and its fills (epsilon, -0.5, 1/M, 2) are gone.
// GONE-LABEL:  buffer.program @bn
// GONE-NOT:    "sub"
// GONE-NOT:    "rsqrt"
// GONE-NOT:    "relu_grad"
// GONE-NOT:    "reduce_sum"
// GONE-NOT:    "neg"
// GONE-NOT:    value = 1.000000e-05
// GONE-NOT:    value = -5.000000e-01
// GONE:        buffer.output

// -----

// Normalizing a job input: nothing needs the input's gradient, so the
// backward is not the one the pass knows (no dx), and every op stays.

buffer.program @bn on "cpu" attributes {job_type = "train"} {
  %x = buffer.alloc : memref<2x1x2x2xf32>
  buffer.input %x {index = 0 : i64} : memref<2x1x2x2xf32>
  %bn-moving_mean = buffer.variable {initializer = {kind = "constant", value = 0.000000e+00 : f64}, name = "bn-moving_mean", trainable = false} : memref<1xf32>
  %0 = buffer.alloc : memref<1x1x1x1xf32>
  buffer.kernel "reshape" ins(%bn-moving_mean : memref<1xf32>) outs(%0 : memref<1x1x1x1xf32>)
  %bn-moving_variance = buffer.variable {initializer = {kind = "constant", value = 1.000000e+00 : f64}, name = "bn-moving_variance", trainable = false} : memref<1xf32>
  %1 = buffer.alloc : memref<1x1x1x1xf32>
  buffer.kernel "reshape" ins(%bn-moving_variance : memref<1xf32>) outs(%1 : memref<1x1x1x1xf32>)
  %2 = buffer.alloc : memref<1x1x1x1xf32>
  buffer.kernel "reduce_mean" ins(%x : memref<2x1x2x2xf32>) outs(%2 : memref<1x1x1x1xf32>) {axes = array<i64: 0, 2, 3>, keepdims = true}
  %3 = buffer.alloc : memref<2x1x2x2xf32>
  buffer.kernel "sub" ins(%x, %2 : memref<2x1x2x2xf32>, memref<1x1x1x1xf32>) outs(%3 : memref<2x1x2x2xf32>)
  %4 = buffer.alloc : memref<2x1x2x2xf32>
  buffer.kernel "square" ins(%3 : memref<2x1x2x2xf32>) outs(%4 : memref<2x1x2x2xf32>)
  %5 = buffer.alloc : memref<1x1x1x1xf32>
  buffer.kernel "reduce_mean" ins(%4 : memref<2x1x2x2xf32>) outs(%5 : memref<1x1x1x1xf32>) {axes = array<i64: 0, 2, 3>, keepdims = true}
  %6 = buffer.alloc : memref<f32>
  buffer.kernel "fill" outs(%6 : memref<f32>) {value = 1.1428571428571428 : f64}
  %7 = buffer.alloc : memref<1x1x1x1xf32>
  buffer.kernel "mul" ins(%5, %6 : memref<1x1x1x1xf32>, memref<f32>) outs(%7 : memref<1x1x1x1xf32>)
  %8 = buffer.alloc : memref<f32>
  buffer.kernel "fill" outs(%8 : memref<f32>) {value = 9.000000e-01 : f64}
  %9 = buffer.alloc : memref<1x1x1x1xf32>
  buffer.kernel "mul" ins(%0, %8 : memref<1x1x1x1xf32>, memref<f32>) outs(%9 : memref<1x1x1x1xf32>)
  %10 = buffer.alloc : memref<f32>
  buffer.kernel "fill" outs(%10 : memref<f32>) {value = 0.099999999999999978 : f64}
  %11 = buffer.alloc : memref<1x1x1x1xf32>
  buffer.kernel "mul" ins(%2, %10 : memref<1x1x1x1xf32>, memref<f32>) outs(%11 : memref<1x1x1x1xf32>)
  %12 = buffer.alloc : memref<1x1x1x1xf32>
  buffer.kernel "add" ins(%9, %11 : memref<1x1x1x1xf32>, memref<1x1x1x1xf32>) outs(%12 : memref<1x1x1x1xf32>)
  %13 = buffer.alloc : memref<1xf32>
  buffer.kernel "reshape" ins(%12 : memref<1x1x1x1xf32>) outs(%13 : memref<1xf32>)
  buffer.copy %13, %bn-moving_mean : memref<1xf32>, memref<1xf32>
  %14 = buffer.alloc : memref<1x1x1x1xf32>
  buffer.kernel "mul" ins(%1, %8 : memref<1x1x1x1xf32>, memref<f32>) outs(%14 : memref<1x1x1x1xf32>)
  %15 = buffer.alloc : memref<1x1x1x1xf32>
  buffer.kernel "mul" ins(%7, %10 : memref<1x1x1x1xf32>, memref<f32>) outs(%15 : memref<1x1x1x1xf32>)
  %16 = buffer.alloc : memref<1x1x1x1xf32>
  buffer.kernel "add" ins(%14, %15 : memref<1x1x1x1xf32>, memref<1x1x1x1xf32>) outs(%16 : memref<1x1x1x1xf32>)
  %17 = buffer.alloc : memref<1xf32>
  buffer.kernel "reshape" ins(%16 : memref<1x1x1x1xf32>) outs(%17 : memref<1xf32>)
  buffer.copy %17, %bn-moving_variance : memref<1xf32>, memref<1xf32>
  %18 = buffer.alloc : memref<f32>
  buffer.kernel "fill" outs(%18 : memref<f32>) {value = 1.000000e-05 : f64}
  %19 = buffer.alloc : memref<1x1x1x1xf32>
  buffer.kernel "add" ins(%5, %18 : memref<1x1x1x1xf32>, memref<f32>) outs(%19 : memref<1x1x1x1xf32>)
  %20 = buffer.alloc : memref<1x1x1x1xf32>
  buffer.kernel "rsqrt" ins(%19 : memref<1x1x1x1xf32>) outs(%20 : memref<1x1x1x1xf32>)
  %21 = buffer.alloc : memref<2x1x2x2xf32>
  buffer.kernel "mul" ins(%3, %20 : memref<2x1x2x2xf32>, memref<1x1x1x1xf32>) outs(%21 : memref<2x1x2x2xf32>)
  %bn-gamma = buffer.variable {initializer = {kind = "constant", value = 1.000000e+00 : f64}, name = "bn-gamma", trainable = true} : memref<1xf32>
  %22 = buffer.alloc : memref<1x1x1x1xf32>
  buffer.kernel "reshape" ins(%bn-gamma : memref<1xf32>) outs(%22 : memref<1x1x1x1xf32>)
  %23 = buffer.alloc : memref<2x1x2x2xf32>
  buffer.kernel "mul" ins(%21, %22 : memref<2x1x2x2xf32>, memref<1x1x1x1xf32>) outs(%23 : memref<2x1x2x2xf32>)
  %bn-beta = buffer.variable {initializer = {kind = "constant", value = 0.000000e+00 : f64}, name = "bn-beta", trainable = true} : memref<1xf32>
  %24 = buffer.alloc : memref<1x1x1x1xf32>
  buffer.kernel "reshape" ins(%bn-beta : memref<1xf32>) outs(%24 : memref<1x1x1x1xf32>)
  %25 = buffer.alloc : memref<2x1x2x2xf32>
  buffer.kernel "add" ins(%23, %24 : memref<2x1x2x2xf32>, memref<1x1x1x1xf32>) outs(%25 : memref<2x1x2x2xf32>)
  %26 = buffer.alloc : memref<2x1x2x2xf32>
  buffer.kernel "relu" ins(%25 : memref<2x1x2x2xf32>) outs(%26 : memref<2x1x2x2xf32>)
  %27 = buffer.alloc : memref<2x1x2x2xf32>
  buffer.kernel "square" ins(%26 : memref<2x1x2x2xf32>) outs(%27 : memref<2x1x2x2xf32>)
  %28 = buffer.alloc : memref<f32>
  buffer.kernel "reduce_mean" ins(%27 : memref<2x1x2x2xf32>) outs(%28 : memref<f32>) {axes = array<i64: 0, 1, 2, 3>, keepdims = false}
  %29 = buffer.alloc : memref<f32>
  buffer.kernel "fill" outs(%29 : memref<f32>) {value = 1.000000e+00 : f64}
  %30 = buffer.alloc : memref<f32>
  buffer.kernel "fill" outs(%30 : memref<f32>) {value = 1.250000e-01 : f64}
  %31 = buffer.alloc : memref<f32>
  buffer.kernel "mul" ins(%29, %30 : memref<f32>, memref<f32>) outs(%31 : memref<f32>)
  %32 = buffer.alloc : memref<1x1x1x1xf32>
  buffer.kernel "reshape" ins(%31 : memref<f32>) outs(%32 : memref<1x1x1x1xf32>)
  %33 = buffer.alloc : memref<2x1x2x2xf32>
  buffer.kernel "broadcast_to" ins(%32 : memref<1x1x1x1xf32>) outs(%33 : memref<2x1x2x2xf32>)
  %34 = buffer.alloc : memref<2x1x2x2xf32>
  buffer.kernel "mul" ins(%33, %26 : memref<2x1x2x2xf32>, memref<2x1x2x2xf32>) outs(%34 : memref<2x1x2x2xf32>)
  %35 = buffer.alloc : memref<f32>
  buffer.kernel "fill" outs(%35 : memref<f32>) {value = 2.000000e+00 : f64}
  %36 = buffer.alloc : memref<2x1x2x2xf32>
  buffer.kernel "mul" ins(%34, %35 : memref<2x1x2x2xf32>, memref<f32>) outs(%36 : memref<2x1x2x2xf32>)
  %37 = buffer.alloc : memref<2x1x2x2xf32>
  buffer.kernel "relu_grad" ins(%36, %26 : memref<2x1x2x2xf32>, memref<2x1x2x2xf32>) outs(%37 : memref<2x1x2x2xf32>)
  %38 = buffer.alloc : memref<1xf32>
  buffer.kernel "reduce_sum" ins(%37 : memref<2x1x2x2xf32>) outs(%38 : memref<1xf32>) {axes = array<i64: 0, 2, 3>, keepdims = false}
  %39 = buffer.alloc : memref<1x1x1x1xf32>
  buffer.kernel "reshape" ins(%38 : memref<1xf32>) outs(%39 : memref<1x1x1x1xf32>)
  %bn-beta_grad = buffer.alloc : memref<1xf32>
  buffer.kernel "reshape" ins(%39 : memref<1x1x1x1xf32>) outs(%bn-beta_grad : memref<1xf32>)
  %40 = buffer.alloc : memref<2x1x2x2xf32>
  buffer.kernel "mul" ins(%37, %21 : memref<2x1x2x2xf32>, memref<2x1x2x2xf32>) outs(%40 : memref<2x1x2x2xf32>)
  %41 = buffer.alloc : memref<1xf32>
  buffer.kernel "reduce_sum" ins(%40 : memref<2x1x2x2xf32>) outs(%41 : memref<1xf32>) {axes = array<i64: 0, 2, 3>, keepdims = false}
  %42 = buffer.alloc : memref<1x1x1x1xf32>
  buffer.kernel "reshape" ins(%41 : memref<1xf32>) outs(%42 : memref<1x1x1x1xf32>)
  %bn-gamma_grad = buffer.alloc : memref<1xf32>
  buffer.kernel "reshape" ins(%42 : memref<1x1x1x1xf32>) outs(%bn-gamma_grad : memref<1xf32>)
  %train_step = buffer.variable {initializer = {kind = "constant", value = 0.000000e+00 : f64}, name = "System-Train-TrainStep", trainable = false} : memref<i64>
  %lr = buffer.alloc : memref<f32>
  buffer.kernel "learning_rate" ins(%train_step : memref<i64>) outs(%lr : memref<f32>) {schedule = {boundaries = array<i64>, kind = "piecewise_constant", values = array<f64: 1.000000e-01>}}
  %43 = buffer.constant {value = dense<1> : tensor<i64>} : memref<i64>
  %next_step = buffer.alloc : memref<i64>
  buffer.kernel "add" ins(%train_step, %43 : memref<i64>, memref<i64>) outs(%next_step : memref<i64>)
  %bn-gamma-momentum = buffer.variable {initializer = {kind = "constant", value = 0.000000e+00 : f64}, name = "bn-gamma-momentum", trainable = false} : memref<1xf32>
  buffer.kernel "momentum_update" ins(%bn-gamma, %bn-gamma_grad, %bn-gamma-momentum, %lr : memref<1xf32>, memref<1xf32>, memref<1xf32>, memref<f32>) outs(%bn-gamma, %bn-gamma-momentum : memref<1xf32>, memref<1xf32>) {beta = 9.000000e-01 : f64, weight_decay = 0.000000e+00 : f64}
  %bn-beta-momentum = buffer.variable {initializer = {kind = "constant", value = 0.000000e+00 : f64}, name = "bn-beta-momentum", trainable = false} : memref<1xf32>
  buffer.kernel "momentum_update" ins(%bn-beta, %bn-beta_grad, %bn-beta-momentum, %lr : memref<1xf32>, memref<1xf32>, memref<1xf32>, memref<f32>) outs(%bn-beta, %bn-beta-momentum : memref<1xf32>, memref<1xf32>) {beta = 9.000000e-01 : f64, weight_decay = 0.000000e+00 : f64}
  buffer.copy %next_step, %train_step : memref<i64>, memref<i64>
  buffer.output %28 {index = 0 : i64} : memref<f32>
}
// CHECK-LABEL: buffer.program @bn
// CHECK-NOT:   batch_norm
// CHECK:       buffer.kernel "reduce_mean" ins(%x : memref<2x1x2x2xf32>)
// CHECK:       buffer.kernel "rsqrt"
// CHECK:       buffer.kernel "relu_grad"
// CHECK-NOT:   batch_norm
