"""Jobs that read their batches from OFRecord files: what each call reads, training from records against the
same training fed by placeholders (one device, two devices consistent and mirrored), the IR, and errors."""

import struct
from typing import Tuple

import numpy as np
import pytest

import irflow as flow
import irflow.core.record.record_pb2 as pb
import irflow.typing as tp
from irflow.textir import parse_module, print_module

BATCH = 20


def write_parts(directory, images: np.ndarray, labels: np.ndarray, parts: int) -> list[np.ndarray]:
    """MNIST rows as OneFlow's docs write them (float list images, int64 list labels), `parts` part files;
    the row numbers each file holds."""
    directory.mkdir(exist_ok=True)
    split = np.array_split(np.arange(len(labels)), parts)
    for part, rows in enumerate(split):
        with open(directory / f"part-{part}", "wb") as f:
            for i in rows:
                record = pb.OFRecord(feature={
                    "images": pb.Feature(float_list=pb.FloatList(value=images[i].ravel().tolist())),
                    "labels": pb.Feature(int64_list=pb.Int64List(value=[int(labels[i])])),
                })  # fmt: skip
                data = record.SerializeToString()
                f.write(struct.pack("<q", len(data)) + data)
    return split


@pytest.fixture(scope="module")
def mnist():
    (images, labels), _ = flow.data.load_mnist(100, 100)
    return images.reshape(-1, 1, 28, 28)[:200], labels.reshape(-1)[:200]


def expected_batches(split: list[np.ndarray], devices: int, steps: int) -> list[np.ndarray]:
    """The row numbers of each step's batch, written from OneFlow's rule: device d reads its own part files
    (a balanced split of them) one after another, round and round, and gives BATCH / devices rows."""
    shares = np.array_split(np.arange(len(split)), devices)
    streams = [np.concatenate([split[p] for p in share]) for share in shares]
    rows = BATCH // devices
    return [np.concatenate([np.take(s, np.arange(k * rows, (k + 1) * rows), mode="wrap") for s in streams])
            for k in range(steps)]  # fmt: skip


def model(images, labels):
    hidden = flow.layers.dense(flow.reshape(images, [BATCH, -1]), 16, activation=flow.nn.relu, name="d1",
                               kernel_initializer=flow.random_normal_initializer(stddev=0.1, seed=1))  # fmt: skip
    logits = flow.layers.dense(hidden, 10, name="d2", kernel_initializer=flow.random_normal_initializer(stddev=0.1, seed=2))
    loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
    flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0.9).minimize(loss)
    return loss


def reader(directory, parts: int, **kwargs):
    record = flow.data.ofrecord_reader(str(directory), batch_size=BATCH, data_part_num=parts, **kwargs)
    images = flow.data.OFRecordRawDecoder(record, "images", shape=(1, 28, 28), dtype=flow.float)
    labels = flow.data.OFRecordRawDecoder(record, "labels", shape=(), dtype=flow.int32)
    return images, labels


def test_each_call_reads_the_next_batch_wrapping_around(tmp_path, mnist):
    images, labels = mnist
    split = write_parts(tmp_path / "ds", images[:50], labels[:50], parts=2)

    @flow.global_function(type="predict")
    def read() -> Tuple[tp.Numpy, tp.Numpy]:
        return reader(tmp_path / "ds", parts=2)

    for rows in expected_batches(split, 1, 6):  # 50 records, 20 a call: the third call wraps around
        got_images, got_labels = read()
        np.testing.assert_array_equal(got_images, images[rows])
        np.testing.assert_array_equal(got_labels, labels[rows])
        assert got_labels.dtype == np.int32


def train_losses(directory, split, images, labels, devices: int, mirrored: bool, steps: int = 6):
    """The same model trained from the records and from placeholders fed the batches written out by hand."""
    flow.config.cpu_device_num(devices)
    config = flow.function_config()
    if mirrored:
        config.default_logical_view(flow.scope.mirrored_view())

    @flow.global_function(type="train", function_config=config)
    def from_records() -> tp.Numpy:
        return model(*reader(directory, parts=len(split)))

    per_device = BATCH // devices if mirrored else BATCH
    kind = tp.ListNumpy if mirrored else tp.Numpy

    def from_arrays(x: kind.Placeholder((per_device, 1, 28, 28), dtype=flow.float),
                    y: kind.Placeholder((per_device,), dtype=flow.int32)) -> tp.Numpy:  # fmt: skip
        return model(x, y)

    ours = [from_records() for _ in range(steps)]
    flow.clear_default_session()  # a session of its own: the two jobs' variables have the same names
    flow.config.cpu_device_num(devices)
    job = flow.global_function(type="train", function_config=config)(from_arrays)
    theirs = []
    for rows in expected_batches(split, devices, steps):
        x, y = images[rows], labels[rows].astype(np.int32)
        theirs.append(job(*((np.split(x, devices), np.split(y, devices)) if mirrored else (x, y))))
    return ours, theirs


@pytest.mark.parametrize("devices,mirrored", [(1, False), (2, False), (2, True)])
def test_training_from_records_equals_training_from_the_same_arrays(tmp_path, mnist, devices, mirrored):
    images, labels = mnist
    split = write_parts(tmp_path / "ds", images[:90], labels[:90], parts=3)
    ours, theirs = train_losses(tmp_path / "ds", split, images, labels, devices, mirrored)
    if mirrored:  # the mirrored view's placeholders are tp.ListNumpy, dynamic: other kernels, rounded apart by an ulp
        np.testing.assert_allclose(np.array(ours), np.array(theirs), rtol=1e-6, atol=0)
    else:
        np.testing.assert_array_equal(np.array(ours), np.array(theirs))
    assert np.mean(ours[-1]) < np.mean(ours[0])


def test_the_reader_shows_in_the_ir_and_becomes_the_jobs_arguments(tmp_path, mnist):
    write_parts(tmp_path / "ds", *mnist, parts=1)

    @flow.global_function(type="predict")
    def read() -> tp.Numpy:
        images, labels = reader(tmp_path / "ds", parts=1)
        return flow.math.argmax(flow.reshape(images, [BATCH, -1]), axis=1) + flow.cast(labels, flow.int64)

    traced = read.ir("job")
    assert traced.count("job.ofrecord_decode") == 2
    assert 'field = "images"' in traced and 'reader = "OFRecord_Reader_0"' in traced
    lifted = read.ir("lift-host-inputs")
    assert "job.ofrecord_decode" not in lifted
    assert "@read(%images: tensor<20x1x28x28xf32>" in lifted and "%labels: tensor<20xi32>" in lifted
    assert "host_inputs = [{" in lifted
    assert "buffer.input %images {index = 0 : i64}" in read.ir("buffer")
    assert read().shape == (BATCH,)


def test_a_field_named_outside_ascii_reads_and_its_ir_parses_back(tmp_path):
    """The field's name becomes the value's name only where the text IR reads it back (ASCII, as all IR text)."""
    (tmp_path / "ds").mkdir()
    with open(tmp_path / "ds" / "part-0", "wb") as f:
        for i in range(BATCH):
            data = pb.OFRecord(feature={"px像素": pb.Feature(float_list=pb.FloatList(value=[i, -i]))}).SerializeToString()
            f.write(struct.pack("<q", len(data)) + data)

    @flow.global_function(type="predict")
    def read() -> tp.Numpy:
        record = flow.data.ofrecord_reader(str(tmp_path / "ds"), batch_size=BATCH)
        return flow.data.OFRecordRawDecoder(record, "px像素", shape=(2,), dtype=flow.float)

    for stage in ("job", "lift-host-inputs", "buffer"):
        text = read.ir(stage)
        assert text.isascii() and print_module(parse_module(text), debuginfo=True) == text
    np.testing.assert_array_equal(read(), np.stack([np.arange(BATCH), -np.arange(BATCH)], axis=1))


def test_shuffled_reading_is_the_same_in_every_run(tmp_path, mnist):
    write_parts(tmp_path / "ds", *mnist, parts=2)

    def run() -> list[np.ndarray]:
        flow.clear_default_session()

        @flow.global_function(type="predict")
        def read() -> tp.Numpy:
            return reader(tmp_path / "ds", parts=2, random_shuffle=True, shuffle_buffer_size=64,
                          shuffle_after_epoch=True)[1]  # fmt: skip

        return [read() for _ in range(25)]

    first, second = run(), run()
    np.testing.assert_array_equal(np.array(first), np.array(second))
    assert not np.array_equal(first[0], mnist[1][:BATCH])


# ----------------------------------------------------------------- errors


def line_of(text: str) -> int:
    """The line of this file that holds `text` (errors name the user's line)."""
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if text in line and "line_of" not in line)


def test_errors_when_the_job_is_defined_name_the_line(tmp_path, mnist):
    write_parts(tmp_path / "ds", *mnist, parts=1)
    cases = [
        (lambda: flow.data.ofrecord_reader(str(tmp_path / "nowhere"), batch_size=4),  # missing dir
         r"no directory '.*nowhere'", "# missing dir"),
        (lambda: flow.data.OFRecordRawDecoder(flow.data.ofrecord_reader(str(tmp_path / "ds"), batch_size=4,  # two parts
                                                                        data_part_num=2), "labels", (), flow.int32),
         r"data_part_num=2 needs the part file\(s\) '.*part-1', which do not exist \(the directory holds part-0\)",
         "# two parts"),
        (lambda: flow.data.OFRecordRawDecoder(flow.data.ofrecord_reader(str(tmp_path / "ds"), batch_size=4),  # field
                                              "image", shape=(784,), dtype=flow.float),
         r"record 0 of '.*part-0' has no field 'image' \(its fields: 'images', 'labels'\)", "# field"),
        (lambda: flow.data.OFRecordRawDecoder(flow.data.ofrecord_reader(str(tmp_path / "ds"), batch_size=4),  # size
                                              "images", shape=(28, 28, 3), dtype=flow.float),
         r"field 'images' \(float_list\) has 784 values, but shape \(28, 28, 3\) takes 2352", "# size"),
        (lambda: flow.data.OFRecordRawDecoder(flow.data.ofrecord_reader(str(tmp_path / "ds"), batch_size=4),  # varying
                                              "images", shape=(784,), dtype=flow.float, dim1_varying_length=True),
         r"dim1_varying_length=True gives each record's row a length of its own", "# varying"),
        (lambda: flow.data.OFRecordImageDecoderRandomCrop(  # jpeg
            flow.data.ofrecord_reader(str(tmp_path / "ds"), batch_size=4), "images", color_space="GRAY"),
         r"OFRecordImageDecoderRandomCrop decodes JPEG images, which needs an image library irflow does not have",
         "# jpeg"),
        (lambda: flow.data.OFRecordRawDecoder(flow.constant(0, shape=(4,)), "images", (784,), flow.float),  # blob
         r"decodes the records of flow.data.ofrecord_reader, got Blob", "# blob"),
    ]
    for make, message, marker in cases:
        with pytest.raises(flow.TraceError, match=message) as caught:
            @flow.global_function(type="predict")
            def job() -> tp.Numpy:
                return make()
        assert caught.value.location.line == line_of(marker), message
    with pytest.raises(flow.TraceError, match="runs on 2 devices, each reading its own part files and rows: it needs "
                                              r"data_part_num >= 2 \(got 1\)"):
        flow.config.cpu_device_num(2)

        @flow.global_function(type="predict")
        def two() -> tp.Numpy:
            return reader(tmp_path / "ds", parts=1)[0]


def test_a_bad_record_fails_its_call_names_it_and_leaves_the_job_where_it_was(tmp_path, mnist):
    images, labels = mnist
    write_parts(tmp_path / "ds", images[:30], labels[:30], parts=1)
    bad = pb.OFRecord(feature={"images": pb.Feature(float_list=pb.FloatList(value=[0.0] * 10)),
                               "labels": pb.Feature(int64_list=pb.Int64List(value=[1]))}).SerializeToString()  # fmt: skip
    with open(tmp_path / "ds" / "part-0", "ab") as f:
        f.write(struct.pack("<q", len(bad)) + bad)  # record 30, read by the second call

    @flow.global_function(type="predict")
    def read() -> Tuple[tp.Numpy, tp.Numpy]:
        return reader(tmp_path / "ds", parts=1)

    first, _ = read()
    np.testing.assert_array_equal(first, images[:20])
    for _ in range(2):  # the failed call moved nothing: the next call meets the same record
        with pytest.raises(flow.ExecutionError, match=r"'OFRecord_Reader_0': record 30 of '.*part-0', field 'images' "
                                                      r"\(float_list\) has 10 values, but shape \(1, 28, 28\) takes 784") as caught:
            read()
        assert caught.value.location.line == line_of('images = flow.data.OFRecordRawDecoder(record, "images"')

    @flow.global_function(type="predict")
    def double(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return x * 2

    np.testing.assert_array_equal(double(np.ones(2, np.float32)), [2, 2])  # the session goes on


def test_a_truncated_part_file_fails_the_first_call_naming_it(tmp_path, mnist):
    write_parts(tmp_path / "ds", *(a[:30] for a in mnist), parts=1)
    data = (tmp_path / "ds" / "part-0").read_bytes()
    (tmp_path / "ds" / "part-0").write_bytes(data[:-100])

    @flow.global_function(type="predict")
    def read() -> tp.Numpy:
        return reader(tmp_path / "ds", parts=1)[1]

    with pytest.raises(flow.ExecutionError, match=r"part file '.*part-0' is truncated or corrupt: record 29") as caught:
        read()
    assert caught.value.location.line == line_of("record = flow.data.ofrecord_reader(str(directory)")


def test_oneflows_older_decode_ofrecord_reads_the_same(tmp_path, mnist):
    images, labels = mnist
    write_parts(tmp_path / "ds", images[:40], labels[:40], parts=1)

    with pytest.warns(DeprecationWarning, match="decode_ofrecord is deprecated"):
        @flow.global_function(type="predict")
        def read() -> Tuple[tp.Numpy, tp.Numpy]:
            return flow.data.decode_ofrecord(str(tmp_path / "ds"), (
                flow.data.BlobConf("images", shape=(784,), dtype=flow.float, codec=flow.data.RawCodec()),
                flow.data.BlobConf("labels", shape=(), dtype=flow.int32, codec=flow.data.RawCodec()),
            ), batch_size=BATCH)  # fmt: skip

    got_images, got_labels = read()
    np.testing.assert_array_equal(got_images, images[:BATCH].reshape(BATCH, -1))
    np.testing.assert_array_equal(got_labels, labels[:BATCH])
    with pytest.warns(DeprecationWarning), pytest.raises(flow.TraceError, match="ImageCodec decodes JPEG images"):
        @flow.global_function(type="predict")
        def jpeg() -> tp.Numpy:
            return flow.data.decode_ofrecord(str(tmp_path / "ds"), [
                flow.data.BlobConf("images", shape=(28, 28, 1), dtype=flow.float, codec=flow.data.ImageCodec()),
            ], batch_size=BATCH)[0]  # fmt: skip


def test_a_reader_placed_apart_from_its_job_is_refused_at_its_line(tmp_path, mnist):
    write_parts(tmp_path / "ds", *mnist, parts=2)
    with pytest.raises(flow.TraceError, match=r"is placed on .*\"0:0\".*, but its job runs on .*0:0-1") as caught:

        @flow.global_function(type="predict")
        def job() -> tp.Numpy:
            with flow.scope.placement("cpu", "0:0"):
                images, _ = reader(tmp_path / "ds", parts=2)
            with flow.scope.placement("cpu", "0:0-1"):
                return flow.math.relu(images)

    assert caught.value.location.line == line_of("record = flow.data.ofrecord_reader(str(directory)")  # in reader()
