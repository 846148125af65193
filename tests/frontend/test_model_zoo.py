"""OneFlow-Benchmark's models at toy sizes, written with the very calls and argument forms of its
Classification/cnns, LanguageModeling/BERT and ClickThroughRate/WideDeepLearning scripts
(`import irflow as flow` the only change): each trains a few steps and predicts.

The benchmark reads OFRecord files; irflow has no OFRecord reader, so these feed numpy arrays through
placeholders. The numbers of each piece are checked against PyTorch in test_zoo_arguments.py,
test_batch_norm.py and test_optimizer_api.py; here the programs must run, learn and keep their names.
"""

import math

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp
from irflow.compiler import run_pipeline
from irflow.dialects import job

rng = np.random.default_rng(2020)


def zoo_config() -> flow.FunctionConfig:
    """job_function_util.py's settings (fp16 and XLA off)."""
    config = flow.function_config()
    config.default_logical_view(flow.scope.consistent_view())
    config.default_data_type(flow.float)
    config.enable_fuse_add_to_output(True)
    return config


def train_config() -> flow.FunctionConfig:
    config = zoo_config()
    config.cudnn_conv_heuristic_search_algo(False)  # one node: measured, as the zoo sets it
    config.prune_parallel_cast_ops(True)
    config.enable_inplace(True)
    config.enable_fuse_model_update_ops(True)
    return config


def regularizer() -> object:
    return flow.regularizers.l2(0.00005)


def conv2d_layer(name, input, filters, kernel_size=3, strides=1, padding="SAME", data_format="NCHW",
                 dilation_rate=1, bn=False):
    """The CNN zoo's own conv layer: get_variable weight and bias, flow.nn.conv2d with OneFlow's positional bias."""
    kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else kernel_size
    shape = (filters, input.shape[1], kh, kw) if data_format == "NCHW" else (filters, kh, kw, input.shape[3])
    weight = flow.get_variable(name + "-weight", shape=shape, dtype=input.dtype,
                               initializer=flow.variance_scaling_initializer(distribution="random_normal",
                                                                             data_format=data_format),
                               regularizer=regularizer())
    output = flow.nn.conv2d(input, weight, strides, padding, None, data_format, dilation_rate, name=name)
    bias = flow.get_variable(name + "-bias", shape=(filters,), dtype=input.dtype, initializer=flow.zeros_initializer(),
                             regularizer=regularizer())
    output = flow.nn.relu(flow.nn.bias_add(output, bias, data_format))
    if bn:  # vgg16bn and inception's batch norm
        output = flow.layers.batch_normalization(inputs=output, axis=1 if data_format == "NCHW" else 3,
                                                 momentum=0.997, epsilon=1.001e-5, center=True, scale=True,
                                                 trainable=True, training=True, name=name + "_bn")
    return output


def set_up_optimizer(loss, kind: str, decay: str, steps: int = 8) -> None:
    """optimizer_util.set_up_optimizer: a schedule with linear warmup, then SGD / AdamW / RMSProp."""
    warmup = flow.optimizer.warmup.linear(1, 0)
    lr = {"cosine": lambda: flow.optimizer.CosineScheduler(base_lr=0.05, steps=steps, warmup=warmup),
          "step": lambda: flow.optimizer.PiecewiseScalingScheduler(base_lr=0.05, boundaries=[30, 60, 80],
                                                                   scale=[0.1, 0.01, 0.001], warmup=warmup),
          "polynomial": lambda: flow.optimizer.PolynomialScheduler(base_lr=0.05, steps=steps,
                                                                   end_learning_rate=0.00001, power=1.0,
                                                                   cycle=False, warmup=warmup),
          "exponential": lambda: flow.optimizer.ExponentialScheduler(base_lr=0.05, steps=steps, decay_rate=0.94,
                                                                     staircase=False, warmup=warmup)}[decay]()
    clipping = flow.optimizer.grad_clipping.by_global_norm(5.0)
    if kind == "sgd":
        flow.optimizer.SGD(lr, momentum=0.875, grad_clipping=clipping, loss_scale_policy=None).minimize(loss)
    elif kind == "adamw":
        flow.optimizer.AdamW(lr_scheduler=lr, weight_decay=1.0 / 32768, weight_decay_excludes="_bn-",
                             grad_clipping=clipping, epsilon=1, loss_scale_policy=None).minimize(loss)
    else:
        flow.optimizer.RMSProp(lr_scheduler=lr, decay_rate=0.9, epsilon=1, loss_scale_policy=None).minimize(loss)


def classifier_jobs(model, shape, classes=10, optimizer="sgd", decay="cosine", smoothing=0.1):
    """of_cnn_train_val.py's TrainNet / InferenceNet around `model`, with label smoothing."""
    batch = shape[0]

    @flow.global_function("train", train_config())
    def TrainNet(images: tp.Numpy.Placeholder(shape), labels: tp.Numpy.Placeholder((batch,), dtype=flow.int32)):
        logits = model(images)
        if smoothing > 0:
            one_hot = flow.one_hot(labels, depth=classes, dtype=logits.dtype, on_value=1 - smoothing + smoothing / classes,
                                   off_value=smoothing / classes)
            loss = flow.nn.softmax_cross_entropy_with_logits(one_hot, logits, name="softmax_loss")
        else:
            loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits, name="softmax_loss")
        loss = flow.math.reduce_mean(loss)
        set_up_optimizer(loss, optimizer, decay)
        return {"loss": loss, "predictions": flow.nn.softmax(logits), "labels": labels}

    @flow.global_function("predict", zoo_config())
    def InferenceNet(images: tp.Numpy.Placeholder(shape)):
        return {"predictions": flow.nn.softmax(model(images))}

    return TrainNet, InferenceNet


def train_and_predict(model, shape, steps=4, **kw) -> list[float]:
    TrainNet, InferenceNet = classifier_jobs(model, shape, **kw)
    images = rng.random(shape).astype(np.float32)
    labels = (np.arange(shape[0]) % 10).astype(np.int32)
    losses = []
    for _ in range(steps):
        out = TrainNet(images, labels).get()
        losses.append(float(out["loss"].numpy()))
        np.testing.assert_allclose(out["predictions"].numpy().sum(axis=1), 1.0, rtol=1e-5)
    predictions = InferenceNet(images).get()["predictions"].numpy()
    assert predictions.shape == (shape[0], 10) and np.all(np.isfinite(predictions))
    assert all(math.isfinite(v) for v in losses)
    return losses


# ----------------------------------------------------------------- Classification/cnns


def alexnet(data_format):
    def model(images):
        conv1 = conv2d_layer("conv1", images, filters=8, kernel_size=3, strides=2, padding="VALID",
                             data_format=data_format)
        pool1 = flow.nn.avg_pool2d(conv1, 3, 2, "VALID", data_format, name="pool1")
        conv2 = conv2d_layer("conv2", pool1, filters=8, kernel_size=3, data_format=data_format)
        pool5 = flow.nn.avg_pool2d(conv2, 3, 2, "VALID", data_format, name="pool5")
        if len(pool5.shape) > 2:
            pool5 = flow.reshape(pool5, shape=(pool5.shape[0], -1))
        init = flow.variance_scaling_initializer(distribution="random_normal", data_format="NCHW")
        fc1 = flow.layers.dense(inputs=pool5, units=16, activation=flow.nn.relu, use_bias=True,
                                kernel_initializer=init, bias_initializer=flow.zeros_initializer(),
                                kernel_regularizer=regularizer(), bias_regularizer=regularizer(), trainable=True,
                                name="fc1")
        dropout1 = flow.nn.dropout(fc1, rate=0.5)
        return flow.layers.dense(inputs=dropout1, units=10, activation=None, use_bias=False, kernel_initializer=init,
                                 kernel_regularizer=regularizer(), bias_initializer=False, trainable=True, name="fc3")

    return model


@pytest.mark.parametrize("data_format", ["NCHW", "NHWC"])
def test_alexnet_trains_predicts_and_reloads_its_snapshot(data_format, tmp_path):
    shape = (4, 3, 19, 19) if data_format == "NCHW" else (4, 19, 19, 3)
    train_and_predict(alexnet(data_format), shape, steps=3)
    images = rng.random(shape).astype(np.float32)
    _, InferenceNet = classifier_jobs(alexnet(data_format), shape)  # the same layers: the same variables
    before = InferenceNet(images).get()["predictions"].numpy()
    flow.checkpoint.save(str(tmp_path / "snapshot_epoch_last"))  # util.Snapshot.save
    flow.clear_default_session()
    _, InferenceNet = classifier_jobs(alexnet(data_format), shape)
    flow.load_variables(flow.checkpoint.get(str(tmp_path / "snapshot_epoch_last")))  # Snapshot(model_load_dir)
    np.testing.assert_array_equal(InferenceNet(images).get()["predictions"].numpy(), before)
    assert {"conv1-weight", "conv1-bias", "fc1-weight", "fc3-weight"} <= set(flow.get_all_variables())


def vgg16bn(images):
    x = images
    for index, filters in enumerate((8, 8)):
        x = conv2d_layer("conv{}".format(index), x, filters=filters, bn=True)
        x = flow.nn.max_pool2d(x, 2, 2, "VALID", "NCHW", name="pool{}".format(index + 1))
    x = flow.reshape(x, [x.shape[0], -1])
    x = flow.layers.dense(inputs=x, units=16, activation=flow.nn.relu, use_bias=True,
                          kernel_initializer=flow.random_normal_initializer(stddev=0.01),
                          bias_initializer=flow.zeros_initializer(), kernel_regularizer=regularizer(),
                          bias_regularizer=regularizer(), trainable=True, name="dense0")
    x = flow.nn.dropout(x, rate=0.5)
    return flow.layers.dense(inputs=x, units=10, use_bias=True, kernel_initializer=flow.random_normal_initializer(stddev=0.01),
                             bias_initializer=flow.zeros_initializer(), trainable=True, name="dense2")


def test_vgg16bn_trains_with_adamw_sparing_its_batch_norms():
    train_and_predict(vgg16bn, (4, 3, 8, 8), optimizer="adamw", decay="step")
    names = set(flow.get_all_variables())
    assert {"conv0_bn-gamma", "conv0_bn-moving_mean", "conv1_bn-moving_variance", "dense0-weight"} <= names


class ResnetBuilder:
    """resnet_model.py's builder: fused (batch_normalization_relu / _add_relu) or composed batch norms."""

    def __init__(self, data_format, fuse):
        self.data_format, self.fuse = data_format, fuse
        self.init = flow.variance_scaling_initializer(2, "fan_in", "random_normal", data_format=data_format)
        self.reg = flow.regularizers.l2(1.0 / 32768)

    def conv(self, name, input, filters, kernel_size, strides=1, padding="SAME"):
        channels = input.shape[3] if self.data_format == "NHWC" else input.shape[1]
        shape = ((filters, kernel_size, kernel_size, channels) if self.data_format == "NHWC"
                 else (filters, channels, kernel_size, kernel_size))
        weight = flow.get_variable(name + "-weight", shape=shape, dtype=input.dtype, initializer=self.init,
                                   regularizer=self.reg, model_name="weight", trainable=True)
        return flow.nn.conv2d(input, weight, strides, padding, None, self.data_format, 1, name=name)

    def bn_args(self, last=False):
        init = flow.zeros_initializer() if last else flow.ones_initializer()
        return dict(axis=3 if self.data_format == "NHWC" else 1, momentum=0.9, epsilon=1e-5, center=True,
                    scale=True, trainable=True, training=True, gamma_initializer=init,
                    moving_variance_initializer=init, gamma_regularizer=self.reg, beta_regularizer=self.reg)

    def bn(self, inputs, name, last=False):
        return flow.layers.batch_normalization(inputs=inputs, name=name, **self.bn_args(last))

    def bn_relu(self, inputs, name):
        if self.fuse:
            return flow.layers.batch_normalization_relu(inputs=inputs, name=name + "_bn_relu", **self.bn_args())
        return flow.nn.relu(self.bn(inputs, name + "_bn"))

    def bn_add_relu(self, inputs, addend, name):
        if self.fuse:
            return flow.layers.batch_normalization_add_relu(inputs=inputs, addend=addend, name=name + "_bn_add_relu",
                                                            **self.bn_args(last=True))
        return flow.nn.relu(self.bn(inputs, name + "_bn", last=True) + addend)

    def block(self, input, name, filters, inner, strides):
        shortcut = self.bn(self.conv(name + "_branch1", input, filters, 1, strides), name + "_branch1_bn")
        a = self.bn_relu(self.conv(name + "_branch2a", input, inner, 1, 1, "VALID"), name + "_branch2a")
        b = self.bn_relu(self.conv(name + "_branch2b", a, inner, 3, strides), name + "_branch2b")
        c = self.conv(name + "_branch2c", b, filters, 1, 1, "VALID")
        return self.bn_add_relu(c, shortcut, name + "_branch2c")

    def __call__(self, images):
        with flow.scope.namespace("Resnet"):
            x = self.bn_relu(self.conv("conv1", images, 4, 3, 2), "conv1")
            x = flow.nn.max_pool2d(x, ksize=3, strides=2, padding="SAME", data_format=self.data_format, name="pool1")
            x = self.block(x, "res2_0", 8, 4, 1)
            x = self.block(x, "res3_0", 8, 4, 2)
            size = x.shape[1] if self.data_format == "NHWC" else x.shape[2]
            x = flow.nn.avg_pool2d(x, ksize=size, strides=1, padding="VALID", data_format=self.data_format,
                                   name="pool5")
            return flow.layers.dense(flow.reshape(x, (x.shape[0], -1)), units=10, use_bias=True,
                                     kernel_initializer=flow.variance_scaling_initializer(2, "fan_in", "random_normal"),
                                     bias_initializer=flow.zeros_initializer(), kernel_regularizer=self.reg,
                                     bias_regularizer=self.reg, trainable=True, name="fc1001")


@pytest.mark.parametrize("data_format, fuse", [("NCHW", True), ("NHWC", False)])
def test_resnet50_blocks_learn(data_format, fuse):
    shape = (8, 3, 16, 16) if data_format == "NCHW" else (8, 16, 16, 3)
    losses = train_and_predict(ResnetBuilder(data_format, fuse), shape, steps=5, smoothing=0.0)
    assert losses[-1] < losses[1]  # step 0's warmup rate is 0
    suffix = "_bn_add_relu" if fuse else "_bn"
    assert f"Resnet-res2_0_branch2c{suffix}-moving_mean" in flow.get_all_variables()


def mobilenet_unit(data, num_filter=1, kernel=(1, 1), stride=(1, 1), pad=(0, 0), num_group=1, if_act=True, prefix=""):
    conv = flow.layers.conv2d(inputs=data, filters=num_filter, kernel_size=kernel, strides=stride, padding=pad,
                              data_format="NCHW", dilation_rate=1, groups=num_group, activation=None, use_bias=False,
                              kernel_initializer=flow.variance_scaling_initializer(
                                  2.0, mode="fan_out", distribution="random_normal", data_format="NCHW"),
                              bias_initializer=flow.zeros_initializer(), kernel_regularizer=flow.regularizers.l2(0.00004),
                              bias_regularizer=flow.regularizers.l2(0.00004), name=prefix)
    bn = flow.layers.batch_normalization(inputs=conv, axis=1, momentum=0.9, epsilon=1e-5, center=True, scale=True,
                                         beta_initializer=flow.zeros_initializer(),
                                         gamma_initializer=flow.ones_initializer(),
                                         beta_regularizer=flow.regularizers.l2(0.00004),
                                         gamma_regularizer=flow.regularizers.l2(0.00004), trainable=True,
                                         training=True, name="%s-BatchNorm" % prefix)
    return flow.clip_by_value(bn, 0, 6, name="%s-relu6" % prefix) if if_act else bn


def mobilenet_v2(images):
    first = mobilenet_unit(images, num_filter=8, kernel=(3, 3), stride=(2, 2), pad="same", prefix="MobilenetV2-Conv")
    expand = mobilenet_unit(first, num_filter=24, pad="valid", prefix="MobilenetV2-expanded_conv_1-expand")
    depthwise = mobilenet_unit(expand, num_filter=24, kernel=(3, 3), pad="same", num_group=24,
                               prefix="MobilenetV2-expanded_conv_1-depthwise")
    project = mobilenet_unit(depthwise, num_filter=8, pad="valid", if_act=False,
                             prefix="MobilenetV2-expanded_conv_1-project")
    out = flow.math.add(first, project)
    pool = flow.nn.avg_pool2d(out, ksize=out.shape[2], strides=1, padding="VALID", data_format="NCHW", name="pool5")
    return flow.layers.dense(flow.reshape(pool, (pool.shape[0], -1)), units=10, use_bias=False,
                             kernel_initializer=flow.random_normal_initializer(0, 0.01),
                             bias_initializer=flow.zeros_initializer(),
                             kernel_regularizer=flow.regularizers.l2(0.00004),
                             bias_regularizer=flow.regularizers.l2(0.00004), trainable=True, name="MobilenetV2-fc")


def test_mobilenet_v2_with_depthwise_convolutions_learns():
    losses = train_and_predict(mobilenet_v2, (8, 3, 16, 16), steps=5, optimizer="rmsprop", decay="exponential",
                               smoothing=0.0)
    assert losses[-1] < losses[1]
    weight = flow.get_all_variables()["MobilenetV2-expanded_conv_1-depthwise-weight"].numpy()
    assert weight.shape == (24, 1, 3, 3)  # groups == channels: one 3x3 filter per channel


def inception_v3(images):
    with flow.scope.namespace("InceptionV3"):
        conv0 = conv2d_layer("conv0", images, filters=8, kernel_size=3, strides=2, padding="VALID", bn=True)
        with flow.scope.namespace("mixed_0"):
            with flow.scope.namespace("branch1x1"):
                branch1x1 = conv2d_layer("conv0", conv0, filters=4, kernel_size=1, strides=1, padding="SAME", bn=True)
            with flow.scope.namespace("branch7x7"):
                b7 = conv2d_layer("conv0", conv0, filters=4, kernel_size=[1, 7], strides=1, padding="SAME", bn=True)
                b7 = conv2d_layer("conv1", b7, filters=4, kernel_size=[7, 1], strides=1, padding="SAME", bn=True)
            with flow.scope.namespace("branch_pool"):
                pool = flow.nn.avg_pool2d(conv0, ksize=3, strides=1, padding="SAME", data_format="NCHW", name="pool")
                pool = conv2d_layer("conv", pool, filters=4, kernel_size=1, strides=1, padding="SAME", bn=True)
            mixed = flow.concat(values=[branch1x1, b7, pool], axis=1, name="concat")
        pool3 = flow.nn.max_pool2d(mixed, ksize=3, strides=2, padding="VALID", data_format="NCHW", name="pool1")
        pool3 = flow.nn.avg_pool2d(pool3, ksize=pool3.shape[2], strides=1, padding="VALID", data_format="NCHW",
                                   name="pool3")
        return flow.layers.dense(inputs=flow.reshape(pool3, [pool3.shape[0], -1]), units=10, activation=None,
                                 use_bias=True, kernel_initializer=flow.truncated_normal(0.816496580927726),
                                 bias_initializer=flow.constant_initializer(), trainable=True, name="fc1")


def test_inception_v3_blocks_train_under_nested_namespaces():
    train_and_predict(inception_v3, (4, 3, 16, 16), decay="polynomial")
    names = set(flow.get_all_variables())
    assert {"InceptionV3-mixed_0-branch7x7-conv1-weight", "InceptionV3-mixed_0-branch7x7-conv1_bn-moving_mean",
            "InceptionV3-fc1-weight"} <= names


# ----------------------------------------------------------------- LanguageModeling/BERT

B, SEQ, HIDDEN, HEADS, VOCAB, PREDICTIONS = 2, 8, 16, 2, 30, 3


def truncated(std=0.02):
    return flow.truncated_normal(std)


def fully_connected(input_blob, input_size, units, name):
    weight = flow.get_variable(name=name + "-weight", shape=[input_size, units], dtype=input_blob.dtype,
                               initializer=truncated())
    bias = flow.get_variable(name=name + "-bias", shape=[units], dtype=input_blob.dtype,
                             initializer=flow.constant_initializer(0.0))
    return flow.nn.bias_add(flow.matmul(input_blob, weight), bias)


def dropout(blob, prob=0.1):
    return blob if prob == 0.0 else flow.nn.dropout(blob, rate=prob)


def layer_norm(blob):
    return flow.layers.layer_norm(blob, name="LayerNorm", begin_norm_axis=-1, begin_params_axis=-1)


def attention(x, addr):
    width = HIDDEN // HEADS

    def for_scores(blob):
        return flow.transpose(flow.reshape(blob, [-1, SEQ, HEADS, width]), perm=[0, 2, 1, 3])

    query = for_scores(fully_connected(x, HIDDEN, HIDDEN, "query"))
    key = for_scores(fully_connected(x, HIDDEN, HIDDEN, "key"))
    value = for_scores(fully_connected(x, HIDDEN, HIDDEN, "value"))
    scores = flow.matmul(query, key, transpose_b=True) * (1.0 / math.sqrt(float(width)))
    probs = dropout(flow.nn.softmax(scores + addr))
    context = flow.transpose(flow.matmul(probs, value), perm=[0, 2, 1, 3])
    return flow.reshape(context, [-1, HIDDEN])


def bert_pretrain(ids, mask, types, positions, lm_ids, lm_weights, ns_labels):
    """bert.py's BertBackbone (one layer) and pretrain.py's masked-LM and next-sentence losses."""
    with flow.scope.namespace("bert"):
        with flow.scope.namespace("embeddings"):
            table = flow.get_variable(name="word_embeddings", shape=[VOCAB, HIDDEN], dtype=flow.float,
                                      initializer=truncated())
            out = flow.gather(params=table, indices=ids, axis=0)
            type_table = flow.get_variable(name="token_type_embeddings", shape=[2, HIDDEN], dtype=out.dtype,
                                           initializer=truncated())
            out = out + flow.gather(params=type_table, indices=types, axis=0)
            position = flow.get_variable(name="position_embeddings", shape=[1, 16, HIDDEN], dtype=out.dtype,
                                         initializer=truncated())
            out = dropout(layer_norm(out + flow.slice(position, begin=[None, 0, 0], size=[None, SEQ, -1])))
        with flow.scope.namespace("encoder"):
            m = flow.reshape(flow.cast(mask, dtype=flow.float), [-1, 1, SEQ])
            m = flow.constant(0.0, dtype=flow.float, shape=[SEQ, SEQ]) + m
            addr = (flow.cast(flow.reshape(m, [-1, 1, SEQ, SEQ]), dtype=flow.float) - 1.0) * 10000.0
            x = flow.reshape(out, (-1, HIDDEN))
            with flow.scope.namespace("layer_0"):
                with flow.scope.namespace("attention"):
                    with flow.scope.namespace("self"):
                        a = attention(x, addr)
                    with flow.scope.namespace("output"):
                        a = layer_norm(dropout(fully_connected(a, HIDDEN, HIDDEN, "dense")) + x)
                with flow.scope.namespace("intermediate"):
                    i = flow.math.gelu(fully_connected(a, HIDDEN, 4 * HIDDEN, "dense"))
                with flow.scope.namespace("output"):
                    o = layer_norm(dropout(fully_connected(i, 4 * HIDDEN, HIDDEN, "dense")) + a)
            sequence = flow.reshape(o, (-1, SEQ, HIDDEN))
    with flow.scope.namespace("other"):
        weight_sum = flow.math.reduce_sum(lm_weights, axis=[-1])
        ones = weight_sum * 0.0 + 1.0
        weight_sum = flow.math.reduce_sum(weight_sum) / flow.math.reduce_sum(ones)
    with flow.scope.namespace("cls-predictions"):
        picked = flow.reshape(flow.gather(params=sequence, indices=positions, axis=2, batch_dims=2), [-1, HIDDEN])
        with flow.scope.namespace("transform"):
            picked = layer_norm(flow.math.gelu(fully_connected(picked, HIDDEN, HIDDEN, "dense")))
        bias = flow.get_variable(name="output_bias", shape=[VOCAB], dtype=picked.dtype,
                                 initializer=flow.constant_initializer(1.0))
        logits = flow.nn.bias_add(flow.matmul(picked, table, transpose_b=True), bias)
        per_example = flow.nn.sparse_softmax_cross_entropy_with_logits(logits=logits,
                                                                       labels=flow.reshape(lm_ids, [-1]))
        numerator = flow.reshape(per_example, [-1, PREDICTIONS]) * lm_weights
        with flow.scope.namespace("loss"):
            lm_loss = flow.math.reduce_sum(numerator, axis=[-1]) / (weight_sum + 1e-5)
    with flow.scope.namespace("bert-pooler"):
        first = flow.reshape(flow.slice(sequence, [None, 0, 0], [None, 1, -1]), [-1, HIDDEN])
        pooled = flow.math.tanh(fully_connected(first, HIDDEN, HIDDEN, "dense"))
    with flow.scope.namespace("cls-seq_relationship"):
        weight = flow.get_variable(name="output_weights", shape=[2, HIDDEN], dtype=pooled.dtype,
                                   initializer=truncated())
        bias = flow.get_variable(name="output_bias", shape=[2], dtype=pooled.dtype,
                                 initializer=flow.constant_initializer(0.0))
        ns_logits = flow.nn.bias_add(flow.matmul(pooled, weight, transpose_b=True), bias)
        ns_loss = flow.nn.sparse_softmax_cross_entropy_with_logits(logits=ns_logits, labels=ns_labels)
    with flow.scope.namespace("cls-loss"):
        return flow.math.reduce_mean(lm_loss) + flow.math.reduce_mean(ns_loss)


@pytest.mark.parametrize("optimizer_type", ["adam", "lamb"])
def test_bert_pretraining_step(optimizer_type):
    """run_pretraining.py: util.GetFunctionConfig and util.CreateOptimizer, fp16 and XLA off."""
    config = flow.function_config()
    config.enable_auto_mixed_precision(False)
    config.train.num_gradient_accumulation_steps(1)
    config.enable_fuse_add_to_output(True)
    config.enable_fuse_model_update_ops(True)
    Int = flow.int32

    @flow.global_function(type="train", function_config=config)
    def PretrainJob(ids: tp.Numpy.Placeholder((B, SEQ), dtype=Int), mask: tp.Numpy.Placeholder((B, SEQ), dtype=Int),
                    types: tp.Numpy.Placeholder((B, SEQ), dtype=Int),
                    positions: tp.Numpy.Placeholder((B, PREDICTIONS), dtype=Int),
                    lm_ids: tp.Numpy.Placeholder((B, PREDICTIONS), dtype=Int),
                    lm_weights: tp.Numpy.Placeholder((B, PREDICTIONS)),
                    ns_labels: tp.Numpy.Placeholder((B,), dtype=Int)) -> tp.Numpy:
        total_loss = bert_pretrain(ids, mask, types, positions, lm_ids, lm_weights, ns_labels)
        lr_warmup = flow.optimizer.warmup.linear(1, 0)
        lr_scheduler = flow.optimizer.PolynomialScheduler(1e-2, 10, 0.0, warmup=lr_warmup)
        excludes = ["bias", "LayerNorm", "layer_norm"]
        clipping = flow.optimizer.grad_clipping.by_global_norm(1.0)
        if optimizer_type == "lamb":
            opt = flow.optimizer.LAMB(lr_scheduler, beta1=0.9, beta2=0.999, epsilon=1e-6, weight_decay=0.01,
                                      weight_decay_excludes=excludes, grad_clipping=clipping, loss_scale_policy=None)
        else:
            opt = flow.optimizer.AdamW(lr_scheduler, epsilon=1e-6, weight_decay=0.01, weight_decay_excludes=excludes,
                                       grad_clipping=clipping, loss_scale_policy=None)
        opt.minimize(total_loss)
        return total_loss

    batch = [rng.integers(0, VOCAB, (B, SEQ)).astype(np.int32), np.ones((B, SEQ), np.int32),
             rng.integers(0, 2, (B, SEQ)).astype(np.int32), rng.integers(0, SEQ, (B, PREDICTIONS)).astype(np.int32),
             rng.integers(0, VOCAB, (B, PREDICTIONS)).astype(np.int32), np.ones((B, PREDICTIONS), np.float32),
             rng.integers(0, 2, (B,)).astype(np.int32)]
    losses = [float(PretrainJob(*batch)) for _ in range(3)]
    assert all(math.isfinite(v) for v in losses)
    variables = flow.get_all_variables()
    assert {"bert-encoder-layer_0-attention-self-query-weight", "bert-embeddings-LayerNorm-gamma",
            "cls-predictions-output_bias", "bert-embeddings-word_embeddings-m"} <= set(variables)


# ----------------------------------------------------------------- ClickThroughRate/WideDeepLearning

ROWS, DENSE, WIDE, DEEP, VOCAB_SIZE, EMBEDDING = 8, 3, 2, 2, 20, 4


def wide_and_deep(dense_fields, wide_sparse_fields, deep_sparse_fields):
    """wdl_train_eval.py's _model: split embedding tables, parallel_casts with gradient hints, a deep MLP."""
    wide_sparse_fields = flow.parallel_cast(wide_sparse_fields, distribute=flow.distribute.broadcast())
    wide_table = flow.get_variable(name="wide_embedding", shape=(VOCAB_SIZE, 1),
                                   initializer=flow.random_uniform_initializer(minval=-0.05, maxval=0.05),
                                   distribute=flow.distribute.split(0))
    wide = flow.gather(params=wide_table, indices=wide_sparse_fields)
    wide = flow.reshape(wide, shape=(-1, wide.shape[-1] * wide.shape[-2]))
    wide_scores = flow.math.reduce_sum(wide, axis=[1], keepdims=True)
    wide_scores = flow.parallel_cast(wide_scores, distribute=flow.distribute.split(0),
                                     gradient_distribute=flow.distribute.broadcast())
    deep_sparse_fields = flow.parallel_cast(deep_sparse_fields, distribute=flow.distribute.broadcast())
    deep_table = flow.get_variable(name="deep_embedding", shape=(VOCAB_SIZE, EMBEDDING),
                                   initializer=flow.random_uniform_initializer(minval=-0.05, maxval=0.05),
                                   distribute=flow.distribute.split(1))
    deep = flow.gather(params=deep_table, indices=deep_sparse_fields)
    deep = flow.parallel_cast(deep, distribute=flow.distribute.split(0), gradient_distribute=flow.distribute.split(2))
    deep = flow.reshape(deep, shape=(-1, deep.shape[-1] * deep.shape[-2]))
    deep_features = flow.concat([deep, dense_fields], axis=1)
    for idx, units in enumerate([8, 8]):
        deep_features = flow.layers.dense(deep_features, units=units,
                                          kernel_initializer=flow.glorot_uniform_initializer(),
                                          bias_initializer=flow.constant_initializer(0.0), activation=flow.math.relu,
                                          name="fc" + str(idx + 1))
        deep_features = flow.nn.dropout(deep_features, rate=0.5)
    deep_scores = flow.layers.dense(deep_features, units=1, kernel_initializer=flow.glorot_uniform_initializer(),
                                    bias_initializer=flow.constant_initializer(0.0), name="fc3")
    return wide_scores + deep_scores


def test_wide_and_deep_on_two_devices():
    """main(): the flow.config lines, flow.train.CheckPoint().init(), train_job().async_get and eval_job().get();
    _get_train_conf's indexed_slices_optimizer_conf and LazyAdam update only the embedding rows gathered."""
    flow.config.cpu_device_num(2)
    flow.config.enable_model_io_v2(True)
    flow.config.enable_debug_mode(True)
    flow.config.enable_legacy_model_io(True)
    flow.config.nccl_use_compute_stream(True)
    train_conf = flow.FunctionConfig()
    train_conf.default_data_type(flow.float)
    train_conf.indexed_slices_optimizer_conf(dict(include_op_names=dict(op_name=["wide_embedding", "deep_embedding"])))
    inputs = (tp.Numpy.Placeholder((ROWS, 1), dtype=flow.int32), tp.Numpy.Placeholder((ROWS, DENSE)),
              tp.Numpy.Placeholder((ROWS, WIDE), dtype=flow.int32), tp.Numpy.Placeholder((ROWS, DEEP), dtype=flow.int32))

    @flow.global_function("train", train_conf)
    def train_job(labels: inputs[0], dense_fields: inputs[1], wide: inputs[2], deep: inputs[3]):
        with flow.scope.placement("cpu", "0:0-1"):
            labels, dense_fields, wide, deep = flow.identity_n([labels, dense_fields, wide, deep])
        logits = wide_and_deep(dense_fields, wide, deep)
        loss = flow.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)
        flow.optimizer.LazyAdam(flow.optimizer.PiecewiseConstantScheduler([], [0.01])).minimize(loss)
        return flow.math.reduce_mean(loss)

    @flow.global_function()
    def eval_job(labels: inputs[0], dense_fields: inputs[1], wide: inputs[2], deep: inputs[3]):
        logits = wide_and_deep(dense_fields, wide, deep)
        loss = flow.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)
        return loss, flow.math.sigmoid(logits), labels

    flow.train.CheckPoint().init()
    start = {name: v.numpy().copy() for name, v in flow.get_all_variables().items()}
    batch = (rng.integers(0, 2, (ROWS, 1)).astype(np.int32), rng.random((ROWS, DENSE)).astype(np.float32),
             rng.integers(0, VOCAB_SIZE // 2, (ROWS, WIDE)).astype(np.int32),
             rng.integers(0, VOCAB_SIZE // 2, (ROWS, DEEP)).astype(np.int32))
    losses = []
    for _ in range(3):
        train_job(*batch).async_get(lambda loss: losses.append(float(loss.mean())))
    loss, predict, labels = eval_job(*batch).get()
    flow.sync_default_session()  # the train handlers have run
    assert len(losses) == 3 and all(math.isfinite(v) for v in losses)
    assert predict.numpy().shape == (ROWS, 1) and np.all((predict.numpy() > 0) & (predict.numpy() < 1))
    np.testing.assert_array_equal(labels.numpy(), batch[0])
    assert np.isfinite(loss.mean())
    trained = {name: v.numpy() for name, v in flow.get_all_variables().items()}
    for table, ids in (("wide_embedding", batch[2]), ("deep_embedding", batch[3])):
        gathered = np.isin(np.arange(VOCAB_SIZE), ids)  # the upper half of the vocabulary is never gathered
        np.testing.assert_array_equal(trained[table][~gathered], start[table][~gathered])
        assert not trained[f"{table}-m"][~gathered].any() and trained[f"{table}-m"][gathered].any()
        assert not np.array_equal(trained[table][gathered], start[table][gathered])
    module = train_job.module.clone()
    run_pipeline(module, "autodiff,optimizer")
    updates = sorted(op.operands[0].owner.var_name.data for op in module.walk() if isinstance(op, job.LazyAdamUpdateOp)
                     and isinstance(op.operands[2].owner.operands[0].owner, job.GatherGradOp))
    assert updates == ["deep_embedding", "wide_embedding"]  # the mask counts the rows gathered: indexed slices
