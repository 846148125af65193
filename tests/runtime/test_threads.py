"""flow.config.cpu_thread_num: irflow's kernel threads, with numpy's BLAS held at one (read back through threadpoolctl)."""

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

import irflow as flow
from irflow.compiler import compile_job
from irflow.runtime import VariableStore, threads


def blas_threads() -> set[int]:
    return {info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"}


@pytest.fixture(autouse=True)
def default_afterwards():
    yield
    flow.config.cpu_thread_num(None)


def test_setting_applies_at_once_and_none_restores_the_default_of_one():
    threadpool_limits(2, user_api="blas")
    flow.config.cpu_thread_num(2)
    assert threads.cpu_thread_num() == 2 and blas_threads() == {1}
    flow.config.cpu_thread_num(None)
    assert threads.cpu_thread_num() == threads.DEFAULT_CPU_THREADS == 1 and blas_threads() == {1}


@pytest.mark.parametrize("count", [1, 2])
def test_each_step_puts_blas_back_on_one_thread_if_user_code_changed_it(mlp_module, count):
    flow.config.cpu_thread_num(count)
    exe = compile_job(mlp_module, "mlp", VariableStore())
    threadpool_limits(2, user_api="blas")  # as user code between steps might
    assert blas_threads() == {2}
    exe([np.zeros((8, 16), np.float32)])
    assert blas_threads() == {1}


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "2"])
def test_bad_counts_are_refused_and_change_nothing(bad):
    flow.config.cpu_thread_num(1)
    with pytest.raises(ValueError, match=r"cpu_thread_num expects a positive int.*" + repr(bad).replace(".", r"\.")):
        flow.config.cpu_thread_num(bad)
    assert threads.cpu_thread_num() == 1 and blas_threads() == {1}


def test_blas_info_reports_each_blas_with_its_thread_count():
    flow.config.cpu_thread_num(1)
    infos = threads.blas_info()
    assert infos and all(info["user_api"] == "blas" and info["num_threads"] == 1 for info in infos)
