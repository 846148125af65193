"""The two models of OneFlow's quick start, shared by the example scripts.

A train script and the predict script that loads its checkpoint must build
the very same layers (variables are found by name: `dense1-weight`, ...), so
each model is defined once, here. Scripts run as `python examples/<name>.py`,
which puts this directory on sys.path, and import it as `models`.
"""

import irflow as flow


def mlp(images: flow.Blob) -> flow.Blob:
    """Flatten, dense(512, relu), dense(10): the MLP of "Define and call job function"."""
    initializer = flow.truncated_normal(0.1)
    reshape = flow.reshape(images, [images.shape[0], -1])
    hidden = flow.layers.dense(reshape, 512, activation=flow.nn.relu, kernel_initializer=initializer, name="dense1")
    return flow.layers.dense(hidden, 10, kernel_initializer=initializer, name="dense2")


def lenet(images: flow.Blob, train: bool = False) -> flow.Blob:
    """The quick start's LeNet: conv(5x5, relu) + max-pool twice, dense(512, relu), dropout in training, dense(10)."""
    initializer = flow.truncated_normal(0.1)
    conv1 = flow.layers.conv2d(
        images, 32, 5, padding="SAME", activation=flow.nn.relu, name="conv1", kernel_initializer=initializer
    )
    pool1 = flow.nn.max_pool2d(conv1, ksize=2, strides=2, padding="SAME", name="pool1", data_format="NCHW")
    conv2 = flow.layers.conv2d(
        pool1, 64, 5, padding="SAME", activation=flow.nn.relu, name="conv2", kernel_initializer=initializer
    )
    pool2 = flow.nn.max_pool2d(conv2, ksize=2, strides=2, padding="SAME", name="pool2", data_format="NCHW")
    reshape = flow.reshape(pool2, [pool2.shape[0], -1])
    hidden = flow.layers.dense(reshape, 512, activation=flow.nn.relu, kernel_initializer=initializer, name="dense1")
    if train:
        hidden = flow.nn.dropout(hidden, rate=0.5, name="dropout")
    return flow.layers.dense(hidden, 10, kernel_initializer=initializer, name="dense2")
