import pytest

from irflow.runtime.kernels import KERNELS, get_kernel, register

EXPECTED = """
add sub mul div maximum minimum pow equal not_equal less less_equal greater greater_equal where
neg exp log sqrt rsqrt square relu sigmoid tanh gelu abs identity cast erf
reduce_sum reduce_mean reduce_max reduce_min reduce_prod argmax top_k arg_sort softmax log_softmax
sparse_softmax_cross_entropy softmax_cross_entropy bias_add fake_quantization ctc_loss ctc_loss_grad ctc_greedy_decode matmul conv2d max_pool2d avg_pool2d
reshape transpose concat slice gather dim_gather gather_nd scatter_nd tensor_scatter_nd_update tensor_scatter_nd_add
broadcast_to fill dropout_mask random_uniform random_permutation bernoulli
relu_grad sigmoid_grad tanh_grad gelu_grad softmax_grad log_softmax_grad
sparse_softmax_cross_entropy_grad softmax_cross_entropy_grad conv2d_grad_input conv2d_grad_filter
max_pool2d_grad avg_pool2d_grad slice_grad gather_grad dim_gather_grad reduce_max_grad reduce_min_grad reduce_prod_grad
sgd_update momentum_update adam_update rmsprop_update centered_rmsprop_update lamb_update lars_update
lazy_adam_update indexed_slices_sgd_update indexed_slices_momentum_update indexed_slices_adam_update
""".split()


def test_every_kernel_is_registered() -> None:
    assert set(EXPECTED) <= set(KERNELS)
    assert all(get_kernel(name) is KERNELS[name] for name in EXPECTED)


def test_unknown_kernel_names_close_matches() -> None:
    with pytest.raises(LookupError, match=r"unknown kernel 'conv2'.*conv2d") as info:
        get_kernel("conv2")
    assert not isinstance(info.value, KeyError)


def test_names_are_registered_once() -> None:
    with pytest.raises(ValueError, match="'add' is registered twice"):
        register("add")(KERNELS["add"])
