"""Data sets for examples and tests, as OneFlow's `flow.data` offers them."""

from irflow.data.mnist import load_mnist

__all__ = ["load_mnist"]
