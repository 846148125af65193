// RUN: irflow-opt %s --split-input-file -p lower-to-physical | filecheck %s

// LAMB on a variable of 5 rows split over 3 devices (pieces of 2, the last
// one holding a padding row): each device takes the squared norms of w and
// of LAMB's direction over its piece's real rows (a partial sum), an
// all_reduce sums them, and the update reads them as its last operand.

job.func @lamb(%g: tensor<5x4xf32>, %lr: tensor<f32>, %step: tensor<i64>) attributes {job_type = "train", placement = #job.placement<cpu, ["0:0-2"]>, arg_sbp = [#job.nd_sbp<[split(0)]>, #job.nd_sbp<[broadcast]>, #job.nd_sbp<[broadcast]>]} {
  %w = job.variable {name = "w", initializer = {kind = "zeros"}, sbp = #job.nd_sbp<[split(0)]>, placement = #job.placement<cpu, ["0:0-2"]>} : tensor<5x4xf32>
  %m = job.variable {name = "w-m", initializer = {kind = "zeros"}, trainable = false, sbp = #job.nd_sbp<[split(0)]>, placement = #job.placement<cpu, ["0:0-2"]>} : tensor<5x4xf32>
  %v = job.variable {name = "w-v", initializer = {kind = "zeros"}, trainable = false, sbp = #job.nd_sbp<[split(0)]>, placement = #job.placement<cpu, ["0:0-2"]>} : tensor<5x4xf32>
  job.lamb_update %w, %g, %m, %v, %lr, %step {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-06 : f64, weight_decay = 0.01 : f64, placement = #job.placement<cpu, ["0:0-2"]>, sbp_in = [#job.nd_sbp<[split(0)]>, #job.nd_sbp<[split(0)]>, #job.nd_sbp<[split(0)]>, #job.nd_sbp<[split(0)]>, #job.nd_sbp<[broadcast]>, #job.nd_sbp<[broadcast]>]} : tensor<5x4xf32>, tensor<5x4xf32>, tensor<5x4xf32>, tensor<5x4xf32>, tensor<f32>, tensor<i64>
  job.return
}

// CHECK-LABEL: job.func @lamb(%g: tensor<2x4xf32>, %lr: tensor<f32>, %step: tensor<i64>)
// CHECK:         %w = job.variable {{.*}} : tensor<2x4xf32>
// CHECK:         %v = job.variable {{.*}} : tensor<2x4xf32>
// CHECK-NEXT:    %0 = job.lamb_norms %w, %g, %m, %v, %step {beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, epsilon = 1.000000e-06 : f64, layout = #job.nd_sbp<[split(0)]>, logical_shape = array<i64: 5, 4>, mesh = array<i64: 3>, placement = #job.placement<cpu, ["0:0-2"]>, sbp = #job.nd_sbp<[partial_sum]>} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<i64>) -> tensor<2xf32>
// CHECK-NEXT:    %1 = job.all_reduce %0 {mesh = array<i64: 3>, mesh_axis = 0 : i64, placement = #job.placement<cpu, ["0:0-2"]>, sbp = #job.nd_sbp<[broadcast]>} : (tensor<2xf32>) -> tensor<2xf32>
// CHECK-NEXT:    job.lamb_update %w, %g, %m, %v, %lr, %step, %1 {{{.*}}weight_decay = 1.000000e-02 : f64} : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<f32>, tensor<i64>, tensor<2xf32>
// CHECK-NEXT:    job.return

// -----

// LARS on a 2x2 mesh, the variable split on both mesh axes ([split(1), split(0)]):
// the partial sums of its four pieces are all-reduced along each axis in turn.

job.func @lars(%g: tensor<6x4xf32>, %lr: tensor<f32>) attributes {job_type = "train", placement = #job.placement<cpu, ["0:0-3"], hierarchy = [2, 2]>, arg_sbp = [#job.nd_sbp<[split(1), split(0)]>, #job.nd_sbp<[broadcast, broadcast]>]} {
  %w = job.variable {name = "w", initializer = {kind = "zeros"}, sbp = #job.nd_sbp<[split(1), split(0)]>, placement = #job.placement<cpu, ["0:0-3"], hierarchy = [2, 2]>} : tensor<6x4xf32>
  %m = job.variable {name = "w-momentum", initializer = {kind = "zeros"}, trainable = false, sbp = #job.nd_sbp<[split(1), split(0)]>, placement = #job.placement<cpu, ["0:0-3"], hierarchy = [2, 2]>} : tensor<6x4xf32>
  job.lars_update %w, %g, %m, %lr {momentum_beta = 0.9 : f64, epsilon = 1.0e-09 : f64, lars_coefficient = 1.0e-04 : f64, placement = #job.placement<cpu, ["0:0-3"], hierarchy = [2, 2]>, sbp_in = [#job.nd_sbp<[split(1), split(0)]>, #job.nd_sbp<[split(1), split(0)]>, #job.nd_sbp<[split(1), split(0)]>, #job.nd_sbp<[broadcast, broadcast]>]} : tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<f32>
  job.return
}

// CHECK-LABEL: job.func @lars(%g: tensor<3x2xf32>, %lr: tensor<f32>)
// CHECK:         %0 = job.lars_norms %w, %g {layout = #job.nd_sbp<[split(1), split(0)]>, logical_shape = array<i64: 6, 4>, mesh = array<i64: 2, 2>, {{.*}}sbp = #job.nd_sbp<[partial_sum, partial_sum]>} : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<2xf32>
// CHECK-NEXT:    %1 = job.all_reduce %0 {mesh = array<i64: 2, 2>, mesh_axis = 0 : i64, {{.*}}sbp = #job.nd_sbp<[broadcast, partial_sum]>}
// CHECK-NEXT:    %2 = job.all_reduce %1 {mesh = array<i64: 2, 2>, mesh_axis = 1 : i64, {{.*}}sbp = #job.nd_sbp<[broadcast, broadcast]>}
// CHECK-NEXT:    job.lars_update %w, %g, %m, %lr, %2 {{.*}} : tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>, tensor<f32>, tensor<2xf32>
// CHECK-NEXT:    job.return

// -----

// A broadcast variable's update takes the norms of what it holds, all of it: nothing is added.

job.func @whole(%g: tensor<5x4xf32>, %lr: tensor<f32>) attributes {job_type = "train", placement = #job.placement<cpu, ["0:0-1"]>, arg_sbp = [#job.nd_sbp<[broadcast]>, #job.nd_sbp<[broadcast]>]} {
  %w = job.variable {name = "w", initializer = {kind = "zeros"}, sbp = #job.nd_sbp<[broadcast]>, placement = #job.placement<cpu, ["0:0-1"]>} : tensor<5x4xf32>
  %m = job.variable {name = "w-momentum", initializer = {kind = "zeros"}, trainable = false, sbp = #job.nd_sbp<[broadcast]>, placement = #job.placement<cpu, ["0:0-1"]>} : tensor<5x4xf32>
  job.lars_update %w, %g, %m, %lr {momentum_beta = 0.9 : f64, epsilon = 1.0e-09 : f64, lars_coefficient = 1.0e-04 : f64, placement = #job.placement<cpu, ["0:0-1"]>, sbp_in = [#job.nd_sbp<[broadcast]>, #job.nd_sbp<[broadcast]>, #job.nd_sbp<[broadcast]>, #job.nd_sbp<[broadcast]>]} : tensor<5x4xf32>, tensor<5x4xf32>, tensor<5x4xf32>, tensor<f32>
  job.return
}

// CHECK-LABEL: job.func @whole
// CHECK:         %m = job.variable
// CHECK-NEXT:    job.lars_update %w, %g, %m, %lr {{.*}} : tensor<5x4xf32>, tensor<5x4xf32>, tensor<5x4xf32>, tensor<f32>
// CHECK-NEXT:    job.return
