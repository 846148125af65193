"""Fixtures shared across the test tree: small job modules as IR text, and the devices to run jobs on."""

import pytest
from xdsl.parser import Parser

from irflow.context import make_context
from irflow.runtime import backend


@pytest.fixture(
    params=[
        "cpu",
        pytest.param("gpu", marks=pytest.mark.skipif(backend.gpu_module() is None, reason="needs cupy and a GPU")),
    ]
)
def device(request: pytest.FixtureRequest) -> str:
    """Each device kind an end-to-end test runs on: "gpu" runs on cupy, and is skipped where no GPU is usable
    (irflow would fall back to the CPU, which "cpu" already covers)."""
    return request.param


MLP = """
job.func @mlp(%x: tensor<8x16xf32>) -> (tensor<8x4xf32>, tensor<8xi64>) attributes {job_type = "predict"} {
  %w1 = job.variable {name = "d1-weight", initializer = {kind = "random_normal", mean = 0.0, stddev = 0.5}} : tensor<32x16xf32>
  %b1 = job.variable {name = "d1-bias", initializer = {kind = "constant", value = 0.1}} : tensor<32xf32>
  %h = job.matmul %x, %w1 {transpose_b = true} : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
  %hb = job.bias_add %h, %b1 : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %r = job.relu %hb : (tensor<8x32xf32>) -> tensor<8x32xf32>
  %w2 = job.variable {name = "d2-weight", initializer = {kind = "random_normal", mean = 0.0, stddev = 0.5}} : tensor<4x32xf32>
  %o = job.matmul %r, %w2 {transpose_b = true} : (tensor<8x32xf32>, tensor<4x32xf32>) -> tensor<8x4xf32>
  %s = job.softmax %o : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %a = job.argmax %o : (tensor<8x4xf32>) -> tensor<8xi64>
  job.return %s, %a : tensor<8x4xf32>, tensor<8xi64>
}
"""


def parse(text: str):
    return Parser(make_context(), text).parse_module()


@pytest.fixture
def parse_ir():
    """Parse IR text with xDSL's parser (an oracle independent of irflow's own)."""
    return parse


@pytest.fixture
def mlp_text():
    return MLP


@pytest.fixture
def mlp_module():
    return parse(MLP)
