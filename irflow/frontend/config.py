"""Configuration: `flow.function_config()` per job, `flow.config` per session, `flow.env` per process.

Every OneFlow name exists. A setting irflow acts on is checked and kept
(device counts in the session's `ResourceConfig`, which the distributed work
reads through `resource()`); a setting that means nothing
to irflow (thread pools, RDMA buffers, NCCL fusion) is checked and recorded,
so a program written for OneFlow runs unchanged. An unknown name is an
`AttributeError` that lists the names irflow knows, not a silently ignored
option.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from irflow.errors import ExecutionError
from irflow.frontend import dtypes, optimizer
from irflow.frontend.locations import fail
from irflow.frontend.scope import LogicalView, PlacementScope
from irflow.frontend.session import ResourceConfig, default_session
from irflow.runtime import threads


_NO_CUSTOM_OPS = (
    "irflow cannot load OneFlow kernel libraries; its ops are defined in the job dialect (irflow/dialects/job.py)"
)


# ----------------------------------------------------------------- checks of setting values


def _count(least: int) -> Callable[[str, object], int]:
    def check(name: str, value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{name} expects an int >= {least}, got {value!r}")
        return value

    return check


def _flag(name: str, value: object) -> bool:
    if not isinstance(value, (bool, int)):
        raise ValueError(f"{name} expects True or False, got {value!r}")
    return bool(value)


def _number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"{name} expects a non-negative number, got {value!r}")
    return float(value)


def _choice(*choices: str) -> Callable[[str, object], str]:
    def check(name: str, value: object) -> str:
        if value not in choices:
            raise ValueError(f"{name} expects one of {', '.join(map(repr, choices))}, got {value!r}")
        return str(value)

    return check


def _text(name: str, value: object) -> str:
    if not isinstance(value, (str, os.PathLike)):
        raise ValueError(f"{name} expects a string, got {value!r}")
    return os.fspath(value)


class Settings:
    """A namespace of OneFlow setters (`flow.config.use_rdma(False)`): each checks its value and records it.

    `RECORDED` maps the names that mean nothing to irflow to the check of their
    value; a subclass adds the settings irflow acts on as methods.
    """

    PREFIX = ""
    RECORDED: dict[str, tuple[Callable[[str, object], Any], Any]] = {}  # name -> (check, value when called bare)

    def __init__(self) -> None:
        self.recorded: dict[str, Any] = {}

    def _known(self) -> list[str]:
        own = [n for n in dir(type(self)) if not n.startswith("_") and n not in ("PREFIX", "RECORDED")]
        groups = [n for n, v in vars(self).items() if isinstance(v, Settings)]
        return sorted({*own, *groups, *self.RECORDED})

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in self.RECORDED:
            if name.startswith("__"):
                raise AttributeError(name)
            raise AttributeError(f"{self.PREFIX} has no setting {name!r}; irflow knows {', '.join(self._known())}")
        check, bare = self.RECORDED[name]

        def setter(value: object = bare) -> None:
            self.recorded[name] = check(f"{self.PREFIX}.{name}", value)

        setter.__name__ = name
        setter.__doc__ = f"OneFlow's {self.PREFIX}.{name}: accepted and recorded; irflow has nothing it tunes."
        return setter

    def __dir__(self) -> list[str]:
        return self._known()


# ----------------------------------------------------------------- flow.function_config()


class TrainConfig:
    """OneFlow's older `config.train`: the learning rate and optimizer of `flow.losses.add_loss`."""

    UPDATES = ("naive_conf", "momentum_conf", "adam_conf")
    OPTIONS = ("primary_lr", "model_update_conf", "num_gradient_accumulation_steps")

    def __init__(self) -> None:
        self.lr: float | None = None
        self.update: dict[str, Any] | None = None

    @property
    def configured(self) -> bool:
        return self.lr is not None or self.update is not None

    def primary_lr(self, value: float) -> None:
        """The constant learning rate."""
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ValueError(f"config.train.primary_lr expects a positive number, got {value!r}")
        self.lr = float(value)

    def model_update_conf(self, value: dict[str, Any]) -> None:
        """One of {"naive_conf": {}}, {"momentum_conf": {"beta": 0.9}}, {"adam_conf": {"beta1": ..., ...}}."""
        if not isinstance(value, dict) or len(value) != 1 or next(iter(value)) not in self.UPDATES:
            raise ValueError(f"config.train.model_update_conf expects one of {', '.join(self.UPDATES)} "
                             f"as its only key, got {value!r}")
        (kind, options), = value.items()
        if not isinstance(options, dict):
            raise ValueError(f"config.train.model_update_conf: {kind} must be a dict, got {options!r}")
        known = {"naive_conf": (), "momentum_conf": ("beta",),
                 "adam_conf": ("beta1", "beta2", "epsilon", "do_bias_correction")}[kind]
        extra = sorted(set(options) - set(known))
        if extra:
            raise ValueError(f"config.train.model_update_conf: {kind} has no option(s) {extra}; "
                             f"it takes {', '.join(known) or 'none'}")
        self.update = {kind: dict(options)}

    def num_gradient_accumulation_steps(self, value: int) -> None:
        """1 only, each call one update (what irflow does): accumulating gradients over n calls before
        updating would change what every call computes, and irflow's train jobs do not do it."""
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"config.train.num_gradient_accumulation_steps expects an int >= 1, got {value!r}")
        if value != 1:
            raise ValueError(f"config.train.num_gradient_accumulation_steps({value}) is not supported: "
                             "irflow updates the variables at every call; use a batch that many times larger")

    def optimizer(self) -> Any:
        """The flow.optimizer object these settings describe."""
        if self.lr is None:
            raise ValueError("config.train.primary_lr(...) is not set")
        schedule = optimizer.PiecewiseConstantScheduler([], [self.lr])
        kind, options = next(iter((self.update or {"naive_conf": {}}).items()))
        if kind == "naive_conf":
            return optimizer.SGD(schedule, momentum=0.0)
        if kind == "momentum_conf":
            return optimizer.SGD(schedule, momentum=options.get("beta", 0.9))
        return optimizer.Adam(schedule, **options)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(f"function_config.train has no option {name!r}; irflow knows {', '.join(self.OPTIONS)}")


class FunctionConfig(Settings):
    """OneFlow's FunctionConfig: `config.default_data_type(flow.float)` and friends.

    OneFlow's tuning flags (kernel fusions, memory reuse, cuDNN and NCCL knobs, XLA and TensorRT) change
    how fast a job runs, not what it computes: they are checked and recorded. Those that change what it
    computes, mixed precision and quantization-aware training, are refused when turned on.
    """

    PREFIX = "function_config"
    RECORDED = {
        **{name: (_flag, True) for name in (
            "all_reduce_fp16", "disable_all_reduce_sequence", "do_parallel_cast_before_widening_type_cast",
            "enable_all_reduce_group", "enable_cudnn", "enable_cudnn_conv_pseudo_half",
            "enable_cudnn_fused_normalization_add_relu", "enable_float_compute_for_half_gemm",
            "enable_fuse_add_to_output", "enable_fuse_cast_scale", "enable_fuse_model_update_ops",
            "enable_gradients_stats_aggregation", "enable_inplace", "enable_inplace_in_reduce_struct",
            "enable_keep_header_only", "enable_nccl", "enable_non_distributed_optimizer", "enable_reused_mem",
            "cudnn_conv_enable_pseudo_half", "cudnn_conv_enable_true_half", "cudnn_conv_use_deterministic_algo_only",
            "enable_true_half_config_when_conv", "prune_cast_to_static_shape_ops", "prune_parallel_cast_ops",
            "use_boxing_v2", "use_memory_allocation_algorithm_v2", "use_nccl_inter_node_communication",
            "use_tensorrt", "use_xla_jit",
        )},
        **{name: (_count(0), None) for name in (
            "cudnn_buf_limit_mbyte", "cudnn_conv_force_bwd_data_algo", "cudnn_conv_force_bwd_filter_algo",
            "cudnn_conv_force_fwd_algo", "optimizer_placement_optimization_threshold",
        )},
        **{name: (_count(1), None) for name in ("all_reduce_group_num", "concurrency_width")},
        **{name: (_number, None) for name in (
            "all_reduce_group_min_mbyte", "all_reduce_group_size_warmup", "all_reduce_lazy_ratio",
            "non_distributed_optimizer_group_size_mbyte",
        )},
        "optimizer_placement_optimization_mode": (_choice("non_distributed", "distributed_split"), None),
    }

    def __init__(self) -> None:
        super().__init__()
        self.data_type: dtypes.DType = dtypes.float32
        self.logical_view: LogicalView | None = None
        self.placement_scope: PlacementScope | None = None
        self.check_finite = False
        self.conv_heuristic = True
        self.indexed_slices: tuple[str, ...] = ()
        self.train = TrainConfig()

    def cudnn_conv_heuristic_search_algo(self, value: bool = True) -> None:
        """True (the default): each convolution runs the algorithm irflow's heuristics choose for its shapes.
        False: the job measures the algorithms that can run each convolution, at its first call with each
        CPU thread count, and keeps the fastest (OneFlow asks cuDNN the same; irflow on the CPU, where the
        fastest depends on the machine: kernels/algorithms.py)."""
        if not isinstance(value, bool):
            raise TypeError(f"cudnn_conv_heuristic_search_algo expects True or False, got {value!r}")
        self.conv_heuristic = value

    def default_data_type(self, value: object) -> None:
        """The dtype of variables and constants that give none (flow.float by default)."""
        self.data_type = dtypes.as_dtype(value, "default_data_type")

    def default_logical_view(self, value: LogicalView) -> None:
        """flow.scope.consistent_view() (logical inputs and outputs) or flow.scope.mirrored_view() (one array
        per device): the job's view unless a scope says otherwise."""
        if not isinstance(value, LogicalView):
            raise TypeError(
                f"default_logical_view expects flow.scope.consistent_view() or flow.scope.mirrored_view(), got {value!r}"
            )
        self.logical_view = value

    def default_placement_scope(self, value: PlacementScope) -> None:
        """A flow.scope.placement(...) that encloses the whole job."""
        if not isinstance(value, PlacementScope):
            raise TypeError(f"default_placement_scope expects flow.scope.placement(...), got {value!r}")
        self.placement_scope = value

    def detect_anomaly(self, value: bool = True) -> None:
        """Stop at the first op that produces NaN or inf, naming it and its line (as PyTorch's anomaly mode).

        Off by default: it checks every op's output after every step, and costs nothing when off.
        """
        if not isinstance(value, bool):
            raise TypeError(f"detect_anomaly expects True or False, got {value!r}")
        self.check_finite = value

    def indexed_slices_optimizer_conf(self, value: dict[str, Any]) -> None:
        """{"include_op_names": {"op_name": [variable names]}, "enable": True}: the gradients of these variables
        that are a gather along axis 0 become indexed slices, and SGD, momentum, Adam, AdamW and LazyAdam
        update only the rows gathered (OneFlow's IndexedSlicesOptimizerRewritePass; docs/training.md)."""
        what = "function_config.indexed_slices_optimizer_conf"
        if not isinstance(value, dict) or "include_op_names" not in value or set(value) - {"include_op_names", "enable"}:
            raise ValueError(f"{what} expects {{'include_op_names': {{'op_name': [variable names]}}}} and optionally "
                             f"'enable', got {value!r}")
        names = value["include_op_names"]
        if not isinstance(names, dict) or set(names) != {"op_name"}:
            raise ValueError(f"{what}: include_op_names expects {{'op_name': [variable names]}}, got {names!r}")
        names = [names["op_name"]] if isinstance(names["op_name"], str) else names["op_name"]
        if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) and n for n in names):
            raise ValueError(f"{what}: op_name expects a list of variable names, got {names!r}")
        self.indexed_slices = tuple(dict.fromkeys(names)) if _flag(f"{what} enable", value.get("enable", True)) else ()

    def enable_auto_mixed_precision(self, value: bool = True) -> None:
        """Off only: irflow computes every op in the job's own dtypes, and float16 compute would change results."""
        _off("function_config.enable_auto_mixed_precision", value, "irflow has no float16 compute")

    def enable_quantization_aware_training(self, value: bool = True) -> None:
        """Off only: irflow has no fake-quantization ops to insert."""
        _off("function_config.enable_quantization_aware_training", value, "irflow has no fake-quantization ops")

    enable_qat = enable_quantization_aware_training


def _off(name: str, value: object, why: str) -> None:
    """A flag that would change what a job computes: False is what irflow does, True an error saying why not."""
    if _flag(name, value):
        raise ValueError(f"{name}(True) is not supported: {why}")


def function_config() -> FunctionConfig:
    return FunctionConfig()


class CollectiveBoxing(Settings):
    """`flow.config.collective_boxing.*`: NCCL fusion knobs, recorded (irflow's collectives do not fuse)."""

    PREFIX = "flow.config.collective_boxing"
    RECORDED = {
        "enable_fusion": (_flag, True),
        "num_callback_threads": (_count(1), None),
        "nccl_num_streams": (_count(1), None),
        "nccl_fusion_threshold_mb": (_number, None),
        "nccl_fusion_all_reduce": (_flag, True),
        "nccl_fusion_reduce_scatter": (_flag, True),
        "nccl_fusion_all_gather": (_flag, True),
        "nccl_fusion_reduce": (_flag, True),
        "nccl_fusion_broadcast": (_flag, True),
        "nccl_fusion_all_reduce_use_buffer": (_flag, True),
        "nccl_fusion_max_ops": (_count(1), None),
        "nccl_enable_all_to_all": (_flag, True),
        "nccl_enable_mixed_fusion": (_flag, True),
    }


def resource() -> ResourceConfig:
    """The default session's resources (device counts and the rest that flow.config sets)."""
    return default_session().resource


class SessionConfig(Settings):
    """`flow.config`: the default session's settings (OneFlow's ConfigProto, set before the session starts)."""

    PREFIX = "flow.config"
    RECORDED = {
        "comm_net_worker_num": (_count(1), None),
        "max_mdsave_worker_num": (_count(1), None),
        "compute_thread_pool_size": (_count(1), None),
        "rdma_mem_block_mbyte": (_count(1), None),
        "rdma_recv_msg_buf_mbyte": (_count(1), None),
        "reserved_host_mem_mbyte": (_count(0), None),
        "reserved_device_mem_mbyte": (_count(0), None),
        "use_rdma": (_flag, True),
        "thread_enable_local_message_queue": (_flag, True),
        "enable_mem_chain_merge": (_flag, True),
        "enable_model_io_v2": (_flag, True),
        "enable_fusion": (_flag, True),
        "enable_tensor_float_32_compute": (_flag, True),
        "nccl_use_compute_stream": (_flag, True),
        "disable_group_boxing_by_dst_parallel": (_flag, True),
        "persistence_buf_byte": (_count(0), None),
        "collect_act_event": (_flag, True),
        "save_downloaded_file_to_local_fs": (_flag, True),
    }

    def __init__(self) -> None:
        super().__init__()
        self.collective_boxing = CollectiveBoxing()

    def _set(self, name: str, value: Any, **implied: Any) -> None:
        """Change a resource of the default session (and the `implied` ones with it); fixed once the session started."""
        session = default_session()
        changes = {name: value, **implied}
        if session.started and any(getattr(session.resource, k) != v for k, v in changes.items()):
            raise ExecutionError(
                f"flow.config.{name}({value!r}) comes after the session started with "
                f"{getattr(session.resource, name)!r}; set it before the first job call "
                "(or after flow.clear_default_session())"
            )
        for k, v in changes.items():
            setattr(session.resource, k, v)

    def gpu_device_num(self, value: int) -> None:
        """GPUs per machine; a positive count makes jobs without a placement scope run on them (0: on the CPU).

        Without a usable GPU they run on as many simulated CPU devices, after one warning.
        """
        count = _count(0)("flow.config.gpu_device_num", value)
        self._set("gpu_device_num", count, device_tag="gpu" if count else "cpu")

    def cpu_device_num(self, value: int) -> None:
        """CPU devices per machine: those of jobs without a placement scope, simulated in one process."""
        self._set("cpu_device_num", _count(1)("flow.config.cpu_device_num", value))

    def machine_num(self, value: int) -> None:
        """Machines in the session (one process each)."""
        self._set("machine_num", _count(1)("flow.config.machine_num", value))

    def cpu_thread_num(self, value: int | None) -> None:
        """irflow's own: CPU steps split their kernels over this many threads (None: the default, 1).

        Process-wide and effective at once; docs/runtime.md says why irflow sets it.
        """
        threads.set_cpu_thread_num(value)

    def enable_legacy_model_io(self, value: bool = True) -> None:
        """Recorded only: irflow has one checkpoint format, which both settings read and write."""
        resource().legacy_model_io = _flag("flow.config.enable_legacy_model_io", value)

    def enable_debug_mode(self, value: bool = True) -> None:
        """Recorded only: irflow's errors always carry the user's line."""
        resource().debug_mode = _flag("flow.config.enable_debug_mode", value)

    def max_calls_in_flight(self, value: int) -> None:
        """irflow's own: how many asynchronous calls may be unfinished before the next one waits (1 by default)."""
        resource().max_calls_in_flight = _count(1)("flow.config.max_calls_in_flight", value)

    def load_library(self, path: str | os.PathLike[str]) -> None:
        """OneFlow loads custom C++ ops from a shared library; irflow's ops are defined in its dialect instead."""
        path = _text("flow.config.load_library", path)
        raise ExecutionError(f"flow.config.load_library({path!r}): {_NO_CUSTOM_OPS}")


@dataclass
class EnvState:
    """The process's environment as flow.env set it (one machine runs here; the rest is recorded)."""

    machines: list[dict[str, Any]] = field(default_factory=list)
    ctrl_port: int | None = None
    data_port: int | None = None
    log_dir: str | None = None
    grpc_use_no_signal: bool = True
    initialized: bool = False
    eager_execution: bool = False


class Env(Settings):
    """`flow.env`: the process's environment; OneFlow sets up its cluster here, irflow records it."""

    PREFIX = "flow.env"
    RECORDED = {"log_level": (_count(0), None), "logtostderr": (_count(0), 1), "logbuflevel": (_count(-1), None)}

    def __init__(self) -> None:
        super().__init__()
        self.state = EnvState()

    def init(self) -> bool:
        """Start the environment; OneFlow does it on first need too, so calling it is optional."""
        self.state.initialized = True
        return True

    def machine(self, machines: Sequence[dict[str, Any] | str] | dict[str, Any] | str) -> None:
        """The cluster's machines: {"addr": "192.168.1.1"} dicts or addresses (recorded)."""
        items = [machines] if isinstance(machines, (dict, str)) else list(machines)
        parsed = []
        for item in items:
            entry = {"addr": item} if isinstance(item, str) else item
            if not isinstance(entry, dict) or not isinstance(entry.get("addr"), str):
                raise ValueError(f"flow.env.machine expects {{'addr': '...'}} dicts or address strings, got {item!r}")
            parsed.append(dict(entry))
        self.state.machines = parsed

    def ctrl_port(self, value: int) -> None:
        self.state.ctrl_port = _port("flow.env.ctrl_port", value)

    def data_port(self, value: int) -> None:
        self.state.data_port = _port("flow.env.data_port", value)

    def log_dir(self, value: str | os.PathLike[str]) -> None:
        self.state.log_dir = _text("flow.env.log_dir", value)

    def grpc_use_no_signal(self, value: bool = True) -> None:
        self.state.grpc_use_no_signal = _flag("flow.env.grpc_use_no_signal", value)


def _port(name: str, value: object) -> int:
    port = _count(1)(name, value)
    if port > 65535:
        raise ValueError(f"{name} expects a port in 1..65535, got {value!r}")
    return port


config = SessionConfig()
env = Env()


def enable_eager_execution(val: bool = True) -> None:
    """OneFlow 0.x's eager mode, chosen before any job function is defined (as OneFlow requires).

    irflow traces and compiles every job function, as OneFlow's lazy mode does; a job function built of flow ops
    computes the same values in either mode, so the choice is recorded. What only eager mode allows, reading a
    blob's value inside the job function (`blob.numpy()`), is a TraceError at that line.
    """
    value = _flag("flow.enable_eager_execution", val)
    defined = default_session().jobs
    if defined:
        raise ExecutionError(
            f"flow.enable_eager_execution({value!r}) comes after the job function {next(iter(defined))!r} "
            "was defined; choose the mode before defining any (or after flow.clear_default_session())"
        )
    env.state.eager_execution = value


def eager_execution_enabled() -> bool:
    """Whether flow.enable_eager_execution chose eager mode (recorded; irflow compiles either way)."""
    return env.state.eager_execution


def user_op_builder(op_type_name: str) -> NoReturn:
    """OneFlow's builder of custom ops, whose kernels come from flow.config.load_library: none exist here."""
    fail(f"flow.user_op_builder({op_type_name!r}): a custom op needs its OneFlow kernel library; {_NO_CUSTOM_OPS}")


def custom_op_module(op_module_name: str, module_path: str = "") -> NoReturn:
    """OneFlow's `flow.experimental.custom_op_module`: builds and loads a custom op's C++ and Python kernels."""
    raise ExecutionError(f"flow.experimental.custom_op_module({op_module_name!r}): {_NO_CUSTOM_OPS}")
