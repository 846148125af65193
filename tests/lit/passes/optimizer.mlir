// RUN: irflow-opt %s --split-input-file -p optimizer | filecheck %s
// RUN: irflow-opt %s --split-input-file -p optimizer | irflow-opt --split-input-file | filecheck %s

// Plain SGD (momentum = 0): the train-step counter feeds the learning-rate
// schedule, each variable gets job.sgd_update, and the counter moves last.

job.func @sgd(%g: tensor<3xf32>) attributes {job_type = "train"} {
  %w = job.variable {name = "w", initializer = {kind = "constant", value = 0.0}} : tensor<3xf32>
  job.apply_gradients %w, %g {optimizer = {kind = "sgd", momentum = 0.0, weight_decay = 0.01, lr = {kind = "piecewise_constant", boundaries = array<i64: 100>, values = array<f64: 0.1, 0.01>}}} : tensor<3xf32>, tensor<3xf32>
  job.return
}

// CHECK-LABEL: job.func @sgd
// CHECK-NEXT:    %w = job.variable
// CHECK-NEXT:    %train_step = job.variable {initializer = {kind = "constant", value = 0.000000e+00 : f64}, name = "System-Train-TrainStep", trainable = false} : tensor<i64>
// CHECK-NEXT:    %lr = job.learning_rate %train_step {schedule = {boundaries = array<i64: 100>, kind = "piecewise_constant", values = array<f64: 1.000000e-01, 1.000000e-02>}} : (tensor<i64>) -> tensor<f32>
// CHECK-NEXT:    %[[ONE:.*]] = job.constant {value = dense<1> : tensor<i64>} : tensor<i64>
// CHECK-NEXT:    %next_step = job.add %train_step, %[[ONE]] : (tensor<i64>, tensor<i64>) -> tensor<i64>
// CHECK-NEXT:    job.sgd_update %w, %g, %lr {weight_decay = 1.000000e-02 : f64} : tensor<3xf32>, tensor<3xf32>, tensor<f32>
// CHECK-NEXT:    job.assign %train_step, %next_step : tensor<i64>, tensor<i64>
// CHECK-NEXT:    job.return
// CHECK-NOT:     job.apply_gradients

// -----

// Momentum: the buffer is a non-trainable variable initialized to zeros, named
// <var>-momentum, so checkpoints save it.

job.func @momentum(%g: tensor<3xf32>) attributes {job_type = "train"} {
  %w = job.variable {name = "fc-weight", initializer = {kind = "constant", value = 0.0}} : tensor<3xf32>
  job.apply_gradients %w, %g {optimizer = {kind = "sgd", momentum = 0.9, lr = {kind = "piecewise_constant", boundaries = array<i64>, values = array<f64: 0.1>}}} : tensor<3xf32>, tensor<3xf32>
  job.return
}

// CHECK-LABEL: job.func @momentum
// CHECK:         %[[M:.*]] = job.variable {initializer = {kind = "constant", value = 0.000000e+00 : f64}, name = "fc-weight-momentum", trainable = false} : tensor<3xf32>
// CHECK-NEXT:    job.momentum_update %w, %g, %[[M]], %lr {beta = 9.000000e-01 : f64} : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>
// CHECK-NEXT:    job.assign %train_step, %next_step

// -----

// Adam: m and v variables; the step operand is the 1-based current step.
// AdamW keeps its decay on the update op (decoupled); Adam's weight decay is
// L2 regularization added to the gradient.  Cosine decay with a linear warmup.

job.func @adam(%g: tensor<2x2xf32>, %h: tensor<2x2xf32>) attributes {job_type = "train"} {
  %w = job.variable {name = "w", initializer = {kind = "constant", value = 0.0}} : tensor<2x2xf32>
  job.apply_gradients %w, %g {optimizer = {kind = "adamw", beta1 = 0.9, beta2 = 0.999, epsilon = 1.0e-08, weight_decay = 0.05, lr = {kind = "cosine", base_lr = 0.001, steps = 1000, alpha = 0.1}, warmup = {kind = "linear", steps = 100, multiplier = 0.0}}} : tensor<2x2xf32>, tensor<2x2xf32>
  job.return
}

// CHECK-LABEL: job.func @adam
// CHECK:         %lr = job.learning_rate %train_step {schedule = {alpha = 1.000000e-01 : f64, base_lr = 1.000000e-03 : f64, kind = "cosine", steps = 1000 : i64, warmup = {kind = "linear", multiplier = 0.000000e+00 : f64, steps = 100 : i64}}}
// CHECK:         %next_step = job.add %train_step
// CHECK-NEXT:    %w-m = job.variable {initializer = {kind = "constant", value = 0.000000e+00 : f64}, name = "w-m", trainable = false} : tensor<2x2xf32>
// CHECK-NEXT:    %w-v = job.variable {initializer = {kind = "constant", value = 0.000000e+00 : f64}, name = "w-v", trainable = false} : tensor<2x2xf32>
// CHECK-NEXT:    job.adam_update %w, %g, %w-m, %w-v, %lr, %next_step {beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, epsilon = 1.000000e-08 : f64, weight_decay = 5.000000e-02 : f64}
// CHECK-NEXT:    job.assign %train_step, %next_step

// -----

job.func @adam_l2(%g: tensor<2xf32>) attributes {job_type = "train"} {
  %w = job.variable {name = "w", initializer = {kind = "constant", value = 0.0}} : tensor<2xf32>
  job.apply_gradients %w, %g {optimizer = {kind = "adam", weight_decay = 0.05, do_bias_correction = false, lr = {kind = "piecewise_constant", boundaries = array<i64>, values = array<f64: 0.1>}}} : tensor<2xf32>, tensor<2xf32>
  job.return
}

// CHECK-LABEL: job.func @adam_l2
// CHECK:         %[[WD:.*]] = job.fill {value = 5.000000e-02 : f64} : tensor<f32>
// CHECK-NEXT:    %[[DECAY:.*]] = job.mul %w, %[[WD]] : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
// CHECK-NEXT:    %[[G:.*]] = job.add %g, %[[DECAY]] : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
// CHECK:         job.adam_update %w, %[[G]], %w-m, %w-v, %lr, %next_step {beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, do_bias_correction = false, epsilon = 1.000000e-08 : f64}

// -----

// Clipping by global norm: g * clip / max(sqrt(sum of squares), clip), from job ops.

job.func @clip(%g1: tensor<2x3xf32>, %g2: tensor<3xf32>) attributes {job_type = "train"} {
  %w1 = job.variable {name = "w1", initializer = {kind = "constant", value = 0.0}} : tensor<2x3xf32>
  %w2 = job.variable {name = "w2", initializer = {kind = "constant", value = 0.0}} : tensor<3xf32>
  job.apply_gradients %w1, %g1, %w2, %g2 {optimizer = {kind = "sgd", momentum = 0.0, clip_norm = 5.0, lr = {kind = "piecewise_constant", boundaries = array<i64>, values = array<f64: 0.1>}}} : tensor<2x3xf32>, tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>
  job.return
}

// CHECK-LABEL: job.func @clip
// CHECK:         %[[SQ1:.*]] = job.square %g1
// CHECK-NEXT:    %[[S1:.*]] = job.reduce_sum %[[SQ1]] {axes = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<f32>
// CHECK-NEXT:    %[[SQ2:.*]] = job.square %g2
// CHECK-NEXT:    %[[S2:.*]] = job.reduce_sum %[[SQ2]] {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
// CHECK-NEXT:    %[[TOTAL:.*]] = job.add %[[S1]], %[[S2]]
// CHECK-NEXT:    %[[NORM:.*]] = job.sqrt %[[TOTAL]]
// CHECK-NEXT:    %[[CLIP:.*]] = job.fill {value = 5.000000e+00 : f64} : tensor<f32>
// CHECK-NEXT:    %[[MAX:.*]] = job.maximum %[[NORM]], %[[CLIP]]
// CHECK-NEXT:    %clip_factor = job.div %[[CLIP]], %[[MAX]]
// CHECK-NEXT:    %[[C1:.*]] = job.mul %g1, %clip_factor : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %[[C2:.*]] = job.mul %g2, %clip_factor : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
// CHECK-NEXT:    job.sgd_update %w1, %[[C1]], %lr
// CHECK-NEXT:    job.sgd_update %w2, %[[C2]], %lr

// -----

// The decay schedules (OneFlow's polynomial, exponential, ...) are job.learning_rate
// like the others, with the keys a program leaves out filled in with OneFlow's
// defaults: a polynomial decay ends at 1e-4, with power 1 and no cycle.

job.func @polynomial(%g: tensor<3xf32>) attributes {job_type = "train"} {
  %w = job.variable {name = "w", initializer = {kind = "constant", value = 0.0}} : tensor<3xf32>
  job.apply_gradients %w, %g {optimizer = {kind = "sgd", momentum = 0.0, lr = {kind = "polynomial", base_lr = 0.1, steps = 100}, warmup = {kind = "constant", steps = 10, multiplier = 0.5}}} : tensor<3xf32>, tensor<3xf32>
  job.return
}

// CHECK-LABEL: job.func @polynomial
// CHECK:         %lr = job.learning_rate %train_step {schedule = {base_lr = 1.000000e-01 : f64, cycle = false, end_learning_rate = 1.000000e-04 : f64, kind = "polynomial", power = 1.000000e+00 : f64, steps = 100 : i64, warmup = {kind = "constant", multiplier = 5.000000e-01 : f64, steps = 10 : i64}}} : (tensor<i64>) -> tensor<f32>
// CHECK:         job.sgd_update %w, %g, %lr

// -----

job.func @exponential(%g: tensor<3xf32>) attributes {job_type = "train"} {
  %w = job.variable {name = "w", initializer = {kind = "constant", value = 0.0}} : tensor<3xf32>
  job.apply_gradients %w, %g {optimizer = {kind = "sgd", momentum = 0.0, lr = {kind = "exponential", base_lr = 0.1, steps = 10, decay_rate = 0.5, staircase = true}}} : tensor<3xf32>, tensor<3xf32>
  job.return
}

// CHECK-LABEL: job.func @exponential
// CHECK:         %lr = job.learning_rate %train_step {schedule = {base_lr = 1.000000e-01 : f64, decay_rate = 5.000000e-01 : f64, kind = "exponential", staircase = true, steps = 10 : i64}} : (tensor<i64>) -> tensor<f32>

// -----

// RMSProp keeps OneFlow's <var>-mean_square; centered, also <var>-mean_gradient
// and job.centered_rmsprop_update.

job.func @rmsprop(%g: tensor<3xf32>) attributes {job_type = "train"} {
  %w = job.variable {name = "w", initializer = {kind = "constant", value = 0.0}} : tensor<3xf32>
  job.apply_gradients %w, %g {optimizer = {kind = "rmsprop", lr = {kind = "piecewise_constant", boundaries = array<i64>, values = array<f64: 0.1>}}} : tensor<3xf32>, tensor<3xf32>
  job.return
}

// CHECK-LABEL: job.func @rmsprop
// CHECK:         %w-mean_square = job.variable {initializer = {kind = "constant", value = 0.000000e+00 : f64}, name = "w-mean_square", trainable = false} : tensor<3xf32>
// CHECK-NEXT:    job.rmsprop_update %w, %g, %w-mean_square, %lr {decay_rate = 9.900000e-01 : f64, epsilon = 1.000000e-08 : f64} : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>

// -----

job.func @centered_rmsprop(%g: tensor<3xf32>) attributes {job_type = "train"} {
  %w = job.variable {name = "w", initializer = {kind = "constant", value = 0.0}} : tensor<3xf32>
  job.apply_gradients %w, %g {optimizer = {kind = "rmsprop", decay_rate = 0.9, epsilon = 1.0e-06, centered = true, lr = {kind = "piecewise_constant", boundaries = array<i64>, values = array<f64: 0.1>}}} : tensor<3xf32>, tensor<3xf32>
  job.return
}

// CHECK-LABEL: job.func @centered_rmsprop
// CHECK:         %w-mean_square = job.variable
// CHECK-NEXT:    %w-mean_gradient = job.variable {initializer = {kind = "constant", value = 0.000000e+00 : f64}, name = "w-mean_gradient", trainable = false} : tensor<3xf32>
// CHECK-NEXT:    job.centered_rmsprop_update %w, %g, %w-mean_square, %w-mean_gradient, %lr {decay_rate = 9.000000e-01 : f64, epsilon = 1.000000e-06 : f64} : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>

// -----

// LAMB: Adam's <var>-m and <var>-v and the 1-based step; OneFlow's epsilon 1e-6.

job.func @lamb(%g: tensor<3xf32>) attributes {job_type = "train"} {
  %w = job.variable {name = "w", initializer = {kind = "constant", value = 0.0}} : tensor<3xf32>
  job.apply_gradients %w, %g {optimizer = {kind = "lamb", lr = {kind = "piecewise_constant", boundaries = array<i64>, values = array<f64: 0.1>}}} : tensor<3xf32>, tensor<3xf32>
  job.return
}

// CHECK-LABEL: job.func @lamb
// CHECK:         %w-m = job.variable
// CHECK-NEXT:    %w-v = job.variable
// CHECK-NEXT:    job.lamb_update %w, %g, %w-m, %w-v, %lr, %next_step {beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, epsilon = 1.000000e-06 : f64} : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>
// CHECK-NEXT:    job.assign %train_step, %next_step

// -----

// Weight decay with OneFlow's excludes (regular expressions searched in the
// variable's name, as BERT's ["bias", "LayerNorm"]): the weight decays, the
// bias does not, so its update carries no weight_decay.

job.func @lamb_decay(%gw: tensor<3xf32>, %gb: tensor<3xf32>) attributes {job_type = "train"} {
  %w = job.variable {name = "dense-weight", initializer = {kind = "constant", value = 0.0}} : tensor<3xf32>
  %b = job.variable {name = "dense-bias", initializer = {kind = "constant", value = 0.0}} : tensor<3xf32>
  job.apply_gradients %w, %gw, %b, %gb {optimizer = {kind = "lamb", weight_decay = 0.01, weight_decay_excludes = ["bias", "LayerNorm"], lr = {kind = "piecewise_constant", boundaries = array<i64>, values = array<f64: 0.1>}}} : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
  job.return
}

// CHECK-LABEL: job.func @lamb_decay
// CHECK:         job.lamb_update %w, %gw, {{.*}} {beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, epsilon = 1.000000e-06 : f64, weight_decay = 1.000000e-02 : f64}
// CHECK:         job.lamb_update %b, %gb, {{.*}} {beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, epsilon = 1.000000e-06 : f64} :

// -----

// LARS: OneFlow's <var>-momentum and defaults (momentum_beta 0.9, epsilon 1e-9, lars_coefficient 1e-4); no step.

job.func @lars(%g: tensor<3xf32>) attributes {job_type = "train"} {
  %w = job.variable {name = "w", initializer = {kind = "constant", value = 0.0}} : tensor<3xf32>
  job.apply_gradients %w, %g {optimizer = {kind = "lars", lr = {kind = "piecewise_constant", boundaries = array<i64>, values = array<f64: 0.1>}}} : tensor<3xf32>, tensor<3xf32>
  job.return
}

// CHECK-LABEL: job.func @lars
// CHECK:         %w-momentum = job.variable {initializer = {kind = "constant", value = 0.000000e+00 : f64}, name = "w-momentum", trainable = false} : tensor<3xf32>
// CHECK-NEXT:    job.lars_update %w, %g, %w-momentum, %lr {epsilon = 1.000000e-09 : f64, lars_coefficient = 1.000000e-04 : f64, momentum_beta = 9.000000e-01 : f64} : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>
// CHECK-NEXT:    job.assign %train_step, %next_step

// -----

// LazyAdam (OneFlow's lazy_adam): only the elements whose gradient is not 0
// (|g| >= 1e-12, the kernel's test) are updated; the mask %emb-present is
// built from ordinary job ops, and the others keep w, m and v.

job.func @lazy_adam(%g: tensor<4x2xf32>) attributes {job_type = "train"} {
  %w = job.variable {name = "emb", initializer = {kind = "constant", value = 0.0}} : tensor<4x2xf32>
  job.apply_gradients %w, %g {optimizer = {kind = "lazy_adam", beta1 = 0.9, beta2 = 0.999, epsilon = 1.0e-08, lr = {kind = "piecewise_constant", boundaries = array<i64>, values = array<f64: 0.1>}}} : tensor<4x2xf32>, tensor<4x2xf32>
  job.return
}

// CHECK-LABEL: job.func @lazy_adam
// CHECK:         %next_step = job.add %train_step
// CHECK-NEXT:    %[[ABS:.*]] = job.abs %g : (tensor<4x2xf32>) -> tensor<4x2xf32>
// CHECK-NEXT:    %[[ZERO:.*]] = job.fill {value = 1.000000e-12 : f64} : tensor<f32>
// CHECK-NEXT:    %emb-present = job.greater_equal %[[ABS]], %[[ZERO]] : (tensor<4x2xf32>, tensor<f32>) -> tensor<4x2xi8>
// CHECK-NEXT:    %emb-m = job.variable
// CHECK-NEXT:    %emb-v = job.variable
// CHECK-NEXT:    job.lazy_adam_update %w, %g, %emb-present, %emb-m, %emb-v, %lr, %next_step {beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, epsilon = 1.000000e-08 : f64} : tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xi8>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<f32>, tensor<i64>
// CHECK-NEXT:    job.assign %train_step, %next_step

// -----

// indexed_slices (function_config.indexed_slices_optimizer_conf): the gradient
// of "emb" is the gather_grad of a gather along axis 0 and feeds only the
// update, so Adam updates the rows a gather_grad of ones counts (%emb-rows).
// "dense", not named, keeps job.adam_update.

job.func @indexed_slices(%dy: tensor<3x2xf32>, %i: tensor<3xi32>) attributes {job_type = "train"} {
  %w = job.variable {name = "emb", initializer = {kind = "constant", value = 0.0}} : tensor<4x2xf32>
  %g = job.gather_grad %dy, %i : (tensor<3x2xf32>, tensor<3xi32>) -> tensor<4x2xf32>
  %v = job.variable {name = "dense", initializer = {kind = "constant", value = 0.0}} : tensor<4x2xf32>
  %h = job.gather_grad %dy, %i : (tensor<3x2xf32>, tensor<3xi32>) -> tensor<4x2xf32>
  job.apply_gradients %w, %g, %v, %h {optimizer = {kind = "adam", beta1 = 0.9, beta2 = 0.999, epsilon = 1.0e-08, do_bias_correction = false, indexed_slices = ["emb"], lr = {kind = "piecewise_constant", boundaries = array<i64>, values = array<f64: 0.1>}}} : tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>
  job.return
}

// CHECK-LABEL: job.func @indexed_slices
// CHECK:         %g = job.gather_grad %dy, %i
// CHECK-NEXT:    %[[ONES:.*]] = job.fill {value = 1.000000e+00 : f64} : tensor<3x2xf32>
// CHECK-NEXT:    %emb-rows = job.gather_grad %[[ONES]], %i : (tensor<3x2xf32>, tensor<3xi32>) -> tensor<4x2xf32>
// CHECK:         %emb-present = job.greater %emb-rows, %{{.*}} : (tensor<4x2xf32>, tensor<f32>) -> tensor<4x2xi8>
// CHECK:         job.indexed_slices_adam_update %w, %g, %emb-present, %emb-m, %emb-v, %lr, %next_step {beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, do_bias_correction = false, epsilon = 1.000000e-08 : f64} : tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xi8>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<f32>, tensor<i64>
// CHECK:         job.adam_update %v, %h, %dense-m, %dense-v, %lr, %next_step

// -----

// SGD and momentum take the indexed-slices form too; clipping reads the
// gradient, so it is no longer the update's alone and stays dense (as in
// OneFlow's rewrite pass).

job.func @indexed_sgd(%dy: tensor<3x2xf32>, %i: tensor<3xi32>) attributes {job_type = "train"} {
  %w = job.variable {name = "emb", initializer = {kind = "constant", value = 0.0}} : tensor<4x2xf32>
  %g = job.gather_grad %dy, %i : (tensor<3x2xf32>, tensor<3xi32>) -> tensor<4x2xf32>
  job.apply_gradients %w, %g {optimizer = {kind = "sgd", momentum = 0.0, indexed_slices = ["emb"], lr = {kind = "piecewise_constant", boundaries = array<i64>, values = array<f64: 0.1>}}} : tensor<4x2xf32>, tensor<4x2xf32>
  job.return
}

job.func @indexed_momentum(%dy: tensor<3x2xf32>, %i: tensor<3xi32>) attributes {job_type = "train"} {
  %w = job.variable {name = "emb", initializer = {kind = "constant", value = 0.0}} : tensor<4x2xf32>
  %g = job.gather_grad %dy, %i : (tensor<3x2xf32>, tensor<3xi32>) -> tensor<4x2xf32>
  job.apply_gradients %w, %g {optimizer = {kind = "sgd", momentum = 0.9, indexed_slices = ["emb"], lr = {kind = "piecewise_constant", boundaries = array<i64>, values = array<f64: 0.1>}}} : tensor<4x2xf32>, tensor<4x2xf32>
  job.return
}

job.func @indexed_clipped(%dy: tensor<3x2xf32>, %i: tensor<3xi32>) attributes {job_type = "train"} {
  %w = job.variable {name = "emb", initializer = {kind = "constant", value = 0.0}} : tensor<4x2xf32>
  %g = job.gather_grad %dy, %i : (tensor<3x2xf32>, tensor<3xi32>) -> tensor<4x2xf32>
  job.apply_gradients %w, %g {optimizer = {kind = "sgd", momentum = 0.0, clip_norm = 1.0, indexed_slices = ["emb"], lr = {kind = "piecewise_constant", boundaries = array<i64>, values = array<f64: 0.1>}}} : tensor<4x2xf32>, tensor<4x2xf32>
  job.return
}

// CHECK-LABEL: job.func @indexed_sgd
// CHECK:         job.indexed_slices_sgd_update %w, %g, %emb-present, %lr : tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xi8>, tensor<f32>
// CHECK-LABEL: job.func @indexed_momentum
// CHECK:         job.indexed_slices_momentum_update %w, %g, %emb-present, %emb-momentum, %lr {beta = 9.000000e-01 : f64} : tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xi8>, tensor<4x2xf32>, tensor<f32>
// CHECK-LABEL: job.func @indexed_clipped
// CHECK-NOT:     indexed_slices_
// CHECK:         job.sgd_update %w, %{{.*}}, %lr
