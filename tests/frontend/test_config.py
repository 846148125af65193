"""flow.config, flow.env and the logical-view scopes: OneFlow's names, checked values, clear errors."""

import pytest

import irflow as flow
import irflow.typing as tp
from irflow.frontend.config import resource


def test_the_documentations_config_lines_are_accepted():
    flow.config.enable_legacy_model_io(False)
    flow.config.enable_debug_mode(True)
    flow.config.gpu_device_num(2)
    flow.config.cpu_device_num(4)
    flow.config.machine_num(1)
    flow.config.collective_boxing.nccl_fusion_threshold_mb(16)
    flow.config.collective_boxing.nccl_fusion_all_reduce_use_buffer(False)
    flow.config.collective_boxing.enable_fusion()
    flow.config.use_rdma(False)
    state = resource()
    assert (state.gpu_device_num, state.cpu_device_num, state.machine_num) == (2, 4, 1)
    assert state.legacy_model_io is False and state.debug_mode is True
    assert flow.config.collective_boxing.recorded["nccl_fusion_threshold_mb"] == 16.0
    assert flow.config.collective_boxing.recorded["enable_fusion"] is True


def test_device_counts_belong_to_the_session():
    flow.config.gpu_device_num(3)
    flow.clear_default_session()
    assert resource().gpu_device_num == 1


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: flow.config.gpu_device_num(-1), r"gpu_device_num expects an int >= 0, got -1"),
        (lambda: flow.config.cpu_device_num("2"), r"cpu_device_num expects an int >= 1, got '2'"),
        (lambda: flow.config.machine_num(0), r"machine_num expects an int >= 1"),
        (lambda: flow.config.enable_debug_mode("yes"), r"enable_debug_mode expects True or False"),
        (lambda: flow.config.collective_boxing.nccl_num_streams(0), r"nccl_num_streams expects an int >= 1"),
        (lambda: flow.env.ctrl_port(70000), r"ctrl_port expects a port in 1..65535"),
        (lambda: flow.env.machine([{"host": "a"}]), r"flow.env.machine expects \{'addr'"),
    ],
)
def test_bad_values_name_the_setting(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize(
    "namespace, name, listed",
    [
        (lambda: flow.config, "gpu_num", "gpu_device_num"),
        (lambda: flow.config.collective_boxing, "nccl_fusion", "nccl_fusion_threshold_mb"),
        (lambda: flow.env, "port", "ctrl_port"),
    ],
)
def test_unknown_names_list_the_known_ones(namespace, name, listed):
    with pytest.raises(AttributeError, match=rf"has no setting '{name}'; irflow knows .*{listed}"):
        getattr(namespace(), name)


def test_env_records_the_cluster():
    assert flow.env.init() is True
    flow.env.machine([{"addr": "192.168.1.1"}, "192.168.1.2"])
    flow.env.ctrl_port(9988)
    flow.env.data_port(9989)
    flow.env.log_dir("./log")
    flow.env.grpc_use_no_signal()
    state = flow.env.state
    assert [m["addr"] for m in state.machines] == ["192.168.1.1", "192.168.1.2"]
    assert (state.ctrl_port, state.data_port, state.log_dir, state.grpc_use_no_signal) == (9988, 9989, "./log", True)


def test_load_library_says_why_it_cannot():
    with pytest.raises(flow.ExecutionError, match="cannot load OneFlow kernel libraries"):
        flow.config.load_library("./libuser_op.so")
    with pytest.raises(flow.ExecutionError, match=r"custom_op_module\('user_relu'\): irflow cannot load"):
        flow.experimental.custom_op_module("user_relu", "./user_relu")


def test_a_custom_op_in_a_job_is_a_trace_error_at_its_line():
    """The custom-op pages' jobs build their op with flow.user_op_builder, which needs the op's kernel library."""
    with pytest.raises(flow.TraceError, match=r"user_op_builder\('myrelu'\): a custom op needs") as err:

        @flow.global_function()
        def f(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
            return flow.user_op_builder("myrelu").Op("relu").Input("in", [x]).Output("out").Build()

    assert "test_config.py" in str(err.value)


def test_device_counts_are_fixed_once_the_session_started():
    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return x

    flow.config.gpu_device_num(1)
    flow.sync_default_session()
    flow.config.gpu_device_num(1)  # the same value is fine
    with pytest.raises(flow.ExecutionError, match=r"gpu_device_num\(2\) comes after the session started"):
        flow.config.gpu_device_num(2)
    assert resource().gpu_device_num == 1


def test_views_as_scopes_and_as_the_jobs_default():
    assert flow.scope.consistent_view_enabled() and not flow.scope.mirrored_view_enabled()
    seen = {}
    config = flow.function_config()
    config.default_logical_view(flow.scope.mirrored_view())

    @flow.global_function(function_config=config)
    def f(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        seen["default"] = flow.scope.mirrored_view_enabled()
        with flow.scope.consistent_view():
            seen["inner"] = flow.scope.consistent_view_enabled()
            with flow.scope.mirrored_view():
                seen["innermost"] = flow.scope.mirrored_view_enabled()
            y = x + 1
        seen["after"] = flow.scope.mirrored_view_enabled()
        return y

    assert seen == {"default": True, "inner": True, "innermost": True, "after": True}
    assert flow.scope.consistent_view_enabled()  # nothing leaks out of the definition

    with flow.scope.mirrored_view():
        assert flow.scope.mirrored_view_enabled()
    assert not flow.scope.mirrored_view_enabled()


def test_gradient_accumulation_of_one_step_is_what_every_job_does():
    """BERT's GetFunctionConfig sets config.train.num_gradient_accumulation_steps(n): 1 is accepted (and leaves
    the config an ordinary one, not the older train API); more would update once per n calls."""
    config = flow.function_config()
    config.train.num_gradient_accumulation_steps(1)
    assert not config.train.configured
    with pytest.raises(ValueError, match=r"num_gradient_accumulation_steps\(4\) is not supported"):
        config.train.num_gradient_accumulation_steps(4)
    with pytest.raises(ValueError, match="expects an int >= 1"):
        config.train.num_gradient_accumulation_steps(0)
