"""irflow: OneFlow-style job functions compiled through an MLIR-style IR on xDSL.

Programs read as OneFlow's documentation writes them::

    import irflow as flow
    import irflow.typing as tp

    @flow.global_function(type="predict")
    def mlp(images: tp.Numpy.Placeholder((100, 784), dtype=flow.float)) -> tp.Numpy:
        return flow.layers.dense(images, 10, name="dense")

The names here are gathered from the modules that implement them.
"""

import types as _types

from irflow import data, typing
from irflow.checkpoint_store import CheckpointError
from irflow.errors import CompileError, ExecutionError, IrflowError, TraceError
from irflow.frontend import (
    checkpoint, distribute, layers, losses, math, nn, optimizer, quantization, random, regularizers, scope,
)
from irflow.frontend.blob import Blob
from irflow.frontend.checkpoint import CheckPoint as _CheckPoint
from irflow.frontend.checkpoint import get_all_variables, load_variables
from irflow.frontend.config import (
    FunctionConfig,
    config,
    eager_execution_enabled,
    enable_eager_execution,
    env,
    function_config,
    user_op_builder,
)
from irflow.frontend.config import custom_op_module as _custom_op_module
from irflow.frontend.distribute import parallel_cast
from irflow.frontend.dtypes import char, double, float, float16, float32, float64, int8, int32, int64, uint8
from irflow.frontend.function import global_function
from irflow.frontend.initializers import (
    constant_initializer,
    empty_initializer,
    glorot_normal_initializer,
    glorot_uniform_initializer,
    kaiming_initializer,
    ones_initializer,
    random_normal_initializer,
    random_uniform_initializer,
    truncated_normal,
    truncated_normal_initializer,
    variance_scaling_initializer,
    xavier_normal_initializer,
    xavier_uniform_initializer,
    zeros_initializer,
)
from irflow.frontend.ctc import ctc_loss
from irflow.frontend.losses import combined_margin_loss, smooth_l1_loss
from irflow.frontend.math import (
    clip_by_value,
    count_not_finite,
    multi_count_not_finite,
    unsorted_batch_segment_sum,
    unsorted_segment_sum,
    unsorted_segment_sum_like,
)
from irflow.frontend.ops import (
    arange as range,  # noqa: A004  (OneFlow's flow.range)
    argsort,
    argwhere,
    broadcast_to_compatible_with,
    broadcast_like,
    cast,
    cast_to_static_shape,
    concat,
    constant,
    constant_like,
    constant_pad2d,
    constant_scalar,
    diag,
    dim_gather,
    dynamic_reshape,
    elem_cnt,
    expand,
    expand_dims,
    flatten,
    gather,
    gather_nd,
    identity,
    identity_n,
    masked_fill,
    matmul,
    nonzero,
    one_hot,
    ones,
    ones_like,
    pad,
    pad_grad,
    reflection_pad2d,
    replication_pad2d,
    reshape,
    reshape_like,
    reverse,
    scatter_nd,
    slice,
    slice_update,
    slice_v2,
    sort,
    squeeze,
    stack,
    sync_dynamic_resize,
    tensor_scatter_nd_add,
    tensor_scatter_nd_update,
    transpose,
    where,
    zero_pad2d,
    zeros,
    zeros_like,
)
from irflow.frontend.session import clear_default_session, sync_default_session
from irflow.frontend.signature import tensor_def as _tensor_def
from irflow.frontend.variables import assign, get_variable
from irflow.frontend.tensor_buffer import (
    gen_tensor_buffer,
    tensor_buffer_to_list_of_tensors,
    tensor_buffer_to_tensor,
    tensor_to_tensor_buffer,
)
from irflow.frontend.watch import watch, watch_diff
from irflow.runtime.mpi import prepare_rank as _prepare_rank

train = _types.SimpleNamespace(CheckPoint=_CheckPoint)  # OneFlow's older checkpoint API
name_scope = scope.name_scope  # OneFlow's older names for flow.scope.namespace
experimental = _types.SimpleNamespace(name_scope=scope.name_scope, custom_op_module=_custom_op_module)
deprecated = _types.SimpleNamespace(variable_scope=scope.name_scope)
clip = clamp = clip_by_scalar = clip_by_value  # OneFlow's other names for flow.math.clip_by_value
in_top_k = math.in_top_k  # OneFlow exports it at the top too
system = _types.SimpleNamespace(assign=assign)  # OneFlow's flow.system.assign
linalg = _types.SimpleNamespace(matmul=matmul)  # OneFlow's flow.linalg.matmul
FixedTensorDef = _tensor_def("numpy", "FixedTensorDef")  # deprecated: tp.Numpy.Placeholder
MirroredTensorDef = _tensor_def("list_numpy", "MirroredTensorDef")  # deprecated: tp.ListNumpy.Placeholder

_prepare_rank()  # under mpiexec only rank 0 warns, and MPICH yields the core while it waits (docs/mpi.md)

__all__ = [
    "Blob", "CheckpointError", "CompileError", "ExecutionError", "FixedTensorDef", "FunctionConfig", "IrflowError",
    "MirroredTensorDef", "TraceError",
    "cast", "char", "checkpoint", "clamp", "clear_default_session", "clip", "clip_by_scalar", "clip_by_value",
    "concat", "config", "constant", "constant_initializer", "constant_like", "data", "deprecated", "distribute",
    "double", "eager_execution_enabled", "enable_eager_execution", "env", "experimental",
    "expand_dims", "flatten", "float", "float16", "float32", "float64",
    "function_config", "gather", "get_all_variables", "get_variable", "global_function", "glorot_normal_initializer",
    "glorot_uniform_initializer", "identity", "identity_n", "int8", "int32", "int64", "kaiming_initializer", "layers",
    "load_variables", "losses", "math", "matmul", "name_scope", "nn", "one_hot", "ones_initializer", "ones_like",
    "optimizer", "parallel_cast", "quantization", "random",
    "random_normal_initializer", "random_uniform_initializer", "regularizers", "reshape", "scope", "slice", "squeeze",
    "sync_default_session", "train", "transpose", "where",
    "truncated_normal", "truncated_normal_initializer", "typing", "uint8", "unsorted_batch_segment_sum",
    "unsorted_segment_sum", "unsorted_segment_sum_like", "user_op_builder", "variance_scaling_initializer",
    "watch", "watch_diff", "xavier_normal_initializer", "xavier_uniform_initializer", "zeros_initializer", "zeros_like",
    "gen_tensor_buffer", "tensor_buffer_to_list_of_tensors", "tensor_buffer_to_tensor", "tensor_to_tensor_buffer",
]  # fmt: skip
