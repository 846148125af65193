"""OFRecord's wire format (record_pb2 against bytes written out by hand from the protobuf encoding rules),
the part files a reader opens, and the reader's order: files, epochs, shuffles, field decoding."""

import struct

import numpy as np
import pytest

import irflow.core.common.data_type_pb2 as data_type_pb2
import irflow.core.operator.op_conf_pb2 as op_conf_pb2
import irflow.core.record.record_pb2 as pb
from irflow.data import ofrecord as o


def varint(n: int) -> bytes:
    """The protobuf spec's base-128 varint, written independently of irflow's."""
    n &= (1 << 64) - 1
    out = b""
    while True:
        low, n = n & 0x7F, n >> 7
        out += bytes([low | (0x80 if n else 0)])
        if not n:
            return out


def ld(field: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2)."""
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def entry(key: str, feature: bytes) -> bytes:
    """One entry of OFRecord's `map<string, Feature> feature = 1`: a message of key = 1 and value = 2."""
    return ld(1, ld(1, key.encode()) + ld(2, feature))


# ----------------------------------------------------------------- record_pb2


def test_each_list_kind_serializes_as_the_protobuf_spec_says():
    record = pb.OFRecord(feature={
        "f": pb.Feature(float_list=pb.FloatList(value=[1.0, -2.5])),
        "d": pb.Feature(double_list=pb.DoubleList(value=[0.1])),
        "i": pb.Feature(int32_list=pb.Int32List(value=[0, 1, 127, 128, 300, -1, 2**31 - 1, -(2**31)])),
        "l": pb.Feature(int64_list=pb.Int64List(value=[2**40, -3])),
        "b": pb.Feature(bytes_list=pb.BytesList(value=[b"ab", b""])),
    })  # fmt: skip
    ints = [0, 1, 127, 128, 300, -1, 2**31 - 1, -(2**31)]
    expected = (
        entry("f", ld(2, ld(1, struct.pack("<2f", 1.0, -2.5))))  # Feature.float_list = 2, FloatList.value packed = 1
        + entry("d", ld(3, ld(1, struct.pack("<d", 0.1))))
        + entry("i", ld(4, ld(1, b"".join(varint(v) for v in ints))))  # negative int32: 10-byte varints
        + entry("l", ld(5, ld(1, varint(2**40) + varint(-3))))
        + entry("b", ld(1, ld(1, b"ab") + ld(1, b"")))  # bytes are not packed: one field per value
    )
    assert record.SerializeToString() == expected
    assert record.ByteSize() == len(expected)
    assert varint(-1) == b"\xff" * 9 + b"\x01" and varint(300) == b"\xac\x02"  # the spec's own examples
    back = pb.OFRecord.FromString(expected)
    assert back == record
    assert back.feature["i"].int32_list.value == ints
    assert back.feature["f"].float_list.value == [1.0, -2.5]
    assert back.feature["b"].bytes_list.value == [b"ab", b""]
    assert back.feature["l"].WhichOneof("kind") == "int64_list"


def test_empty_lists_and_empty_features_keep_their_kind():
    assert pb.OFRecord(feature={"e": pb.Feature(float_list=pb.FloatList())}).SerializeToString() == entry("e", ld(2, b""))
    assert pb.OFRecord(feature={"n": pb.Feature()}).SerializeToString() == entry("n", b"")
    assert pb.FloatList().SerializeToString() == b""


def test_the_message_api_programs_use():
    record = pb.OFRecord()
    record.feature["label"].int64_list.value.append(7)  # reading a missing key creates it; changing a member sets the oneof
    record.feature["pixels"].bytes_list.value.extend([b"\x00\xff"])
    assert list(record.feature) == ["label", "pixels"]
    assert record.feature["label"].HasField("int64_list") and not record.feature["label"].HasField("float_list")
    feature = pb.Feature(int32_list=pb.Int32List(value=[1]))
    feature.float_list.value.append(0.1)  # another member of the oneof: it replaces the first
    assert feature.WhichOneof("kind") == "float_list" and feature.float_list.value == [float(np.float32(0.1))]
    copy = pb.OFRecord()
    copy.CopyFrom(record)
    assert copy == record and copy is not record
    copy.ParseFromString(pb.OFRecord(feature={"x": feature}).SerializeToString())
    assert list(copy.feature) == ["x"]
    with pytest.raises(TypeError, match="expected one of: bytes"):
        pb.BytesList(value=["text"])
    with pytest.raises(ValueError, match="out of range"):
        pb.Int32List(value=[2**31])
    with pytest.raises(TypeError):
        pb.FloatList(value=["1.0"])
    with pytest.raises(TypeError, match="expected one of: int"):
        pb.Int64List(value=[1.5])
    with pytest.raises(ValueError, match="out of range"):
        pb.Int32List(value=np.array([0, 2**31]))  # a numpy array is checked at once, then value by value
    assert pb.Int32List(value=np.arange(3)).value == [0, 1, 2]
    assert pb.FloatList(value=np.array([0.1])).value == [float(np.float32(0.1))]
    with pytest.raises(AttributeError):
        pb.FloatList().value = [1.0]
    with pytest.raises(pb.DecodeError, match="OFRecord"):
        pb.OFRecord.FromString(b"\x0a\x05\x0a")


def test_protobuf_itself_agrees_where_it_is_installed():
    """Only where the venv has protobuf (it is not a dependency): its parser reads our bytes the same."""
    pytest.importorskip("google.protobuf")
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    proto = descriptor_pb2.FileDescriptorProto(name="record.proto", package="oneflow", syntax="proto2")
    for name, kind in (("FloatList", 2), ("Int32List", 5), ("BytesList", 12)):
        message = proto.message_type.add(name=name)
        message.field.add(name="value", number=1, type=kind, label=3, options=descriptor_pb2.FieldOptions(
            packed=kind != 12))  # fmt: skip
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    floats = message_factory.GetMessageClass(pool.FindMessageTypeByName("oneflow.FloatList"))
    ints = message_factory.GetMessageClass(pool.FindMessageTypeByName("oneflow.Int32List"))
    assert floats(value=[1.0, -2.5]).SerializeToString() == pb.FloatList(value=[1.0, -2.5]).SerializeToString()
    assert ints(value=[-1, 300]).SerializeToString() == pb.Int32List(value=[-1, 300]).SerializeToString()


def test_unpacked_lists_and_unknown_fields_read_as_protobuf_reads_them():
    unpacked = b"".join(b"\x0d" + struct.pack("<f", v) for v in (1.5, 2.5))  # value = 1, wire type 5, one per value
    unknown = varint(9 << 3) + varint(42)  # an OFRecord field 9 a newer writer might add
    data = unknown + entry("f", ld(2, unpacked)) + entry("i", ld(4, b"\x08\x03\x08\x05"))
    record = pb.OFRecord.FromString(data)
    assert record.feature["f"].float_list.value == [1.5, 2.5]
    assert record.feature["i"].int32_list.value == [3, 5]


def test_varints_in_bulk_match_one_at_a_time():
    rng = np.random.default_rng(0)
    values = np.concatenate([rng.integers(-(2**63), 2**63 - 1, 200, dtype=np.int64),
                             np.array([0, 1, 127, 128, 16383, 16384, -1, 2**63 - 1, -(2**63)], np.int64)])  # fmt: skip
    encoded = o.encode_varints(values)
    assert encoded == b"".join(varint(int(v)) for v in values)
    np.testing.assert_array_equal(o.decode_varints(encoded, "test").view(np.int64), values)


def test_enums_programs_import():
    assert (data_type_pb2.kFloat, data_type_pb2.kInt32, data_type_pb2.kOFRecord) == (2, 5, 8)
    assert data_type_pb2.DataType.Name(3) == "kDouble" and data_type_pb2.DataType.Value("kInt8") == 4
    assert (op_conf_pb2.kNone, op_conf_pb2.kTanH, op_conf_pb2.kSigmoid, op_conf_pb2.kRelu) == (0, 1, 2, 3)
    with pytest.raises(ValueError, match="DataType"):
        data_type_pb2.DataType.Name(99)


# ----------------------------------------------------------------- part files and the reader


def write(path, records) -> None:
    """Part file: each record an 8-byte little-endian length and the message."""
    with open(path, "wb") as f:
        for record in records:
            data = record.SerializeToString()
            f.write(struct.pack("<q", len(data)) + data)


def numbered(first: int, count: int) -> list:
    return [pb.OFRecord(feature={"n": pb.Feature(int64_list=pb.Int64List(value=[first + i]))}) for i in range(count)]


def stream_of(tmp_path, sizes, **conf):
    for part, size in enumerate(sizes):
        write(tmp_path / f"part-{part}", numbered(100 * part, size))
    reader = o.ReaderConf(str(tmp_path), 1, len(sizes), **conf)
    return o.RecordStream([o.PartFile(p) for p in reader.part_paths()], reader)


def numbers(stream, count: int) -> list[int]:
    (column,) = o.decode_fields(stream.take(count), [o.FieldConf("n", (), np.dtype(np.int64))])
    return column.tolist()


def test_part_names_and_the_files_each_device_reads():
    conf = o.ReaderConf("/d", 8, data_part_num=3, part_name_prefix="part-", part_name_suffix_length=5)
    assert conf.part_paths() == ["/d/part-00000", "/d/part-00001", "/d/part-00002"]
    assert o.ReaderConf("/d", 1, 2).part_paths() == ["/d/part-0", "/d/part-1"]
    assert o.ReaderConf("/d", 1, 5).device_parts(2) == [[0, 1, 2], [3, 4]]  # OneFlow's BalancedSplitter
    assert o.ReaderConf("/d", 1, 4).device_parts(4) == [[0], [1], [2], [3]]


def test_records_come_in_file_order_and_wrap_around_at_the_epoch(tmp_path):
    stream = stream_of(tmp_path, [3, 2])
    assert numbers(stream, 7) == [0, 1, 2, 100, 101, 0, 1]


def test_shuffle_after_epoch_reorders_the_files_the_same_way_every_run(tmp_path):
    orders = []
    for _ in range(2):
        stream = stream_of(tmp_path, [1, 1, 1, 1, 1, 1], shuffle_after_epoch=True)
        orders.append(numbers(stream, 18))
    first, later = orders[0][:6], [orders[0][6:12], orders[0][12:]]
    assert first == [0, 100, 200, 300, 400, 500]
    assert all(sorted(epoch) == first for epoch in later) and later[0] != first and later[0] != later[1]
    assert orders[0] == orders[1]


def test_random_shuffle_draws_from_a_buffer_deterministically(tmp_path):
    drawn = [numbers(stream_of(tmp_path, [50], random_shuffle=True, shuffle_buffer_size=10), 500) for _ in range(2)]
    assert drawn[0] == drawn[1]
    assert drawn[0][:50] != list(range(50))
    assert all(n < 10 + i for i, n in enumerate(drawn[0][:40]))  # a buffer of 10: never further ahead than that
    counts = np.bincount(drawn[0], minlength=50)
    assert counts.min() >= 5 and counts.max() <= 15  # every record comes about once per epoch


def test_a_stream_goes_back_to_a_position(tmp_path):
    stream = stream_of(tmp_path, [4], random_shuffle=True, shuffle_buffer_size=3)
    numbers(stream, 5)
    at = stream.position()
    ahead = numbers(stream, 6)
    stream.restore(at)
    assert numbers(stream, 6) == ahead


def test_fields_decode_as_oneflow_casts_them(tmp_path):
    record = pb.OFRecord(feature={
        "pixels": pb.Feature(bytes_list=pb.BytesList(value=[bytes([0, 127, 128, 255])])),
        "short": pb.Feature(float_list=pb.FloatList(value=[1.5, 2.5])),
        "big": pb.Feature(int32_list=pb.Int32List(value=[-1, 70000, 5])),
    })  # fmt: skip
    write(tmp_path / "part-0", [record, record])
    part = o.PartFile(str(tmp_path / "part-0"))
    part.load()
    pixels, as_float, padded, cut, big = o.decode_fields([(part, 0), (part, 1)], [
        o.FieldConf("pixels", (2, 2), np.dtype(np.uint8)),
        o.FieldConf("pixels", (4,), np.dtype(np.float32)),  # bytes are OneFlow's char: signed
        o.FieldConf("short", (3,), np.dtype(np.float64), truncate=True),
        o.FieldConf("big", (2,), np.dtype(np.int64), truncate=True),
        o.FieldConf("big", (3,), np.dtype(np.int32)),
    ])  # fmt: skip
    np.testing.assert_array_equal(pixels, [[[0, 127], [128, 255]]] * 2)
    np.testing.assert_array_equal(as_float, [[0, 127, -128, -1]] * 2)
    np.testing.assert_array_equal(padded, [[1.5, 2.5, 0.0]] * 2)
    np.testing.assert_array_equal(cut, [[-1, 70000]] * 2)
    assert big.dtype == np.int32 and big.tolist() == [[-1, 70000, 5]] * 2


def test_bad_records_name_their_file_record_and_field(tmp_path):
    write(tmp_path / "part-0", numbered(0, 2) + [pb.OFRecord(feature={"m": pb.Feature()})])
    part = o.PartFile(str(tmp_path / "part-0"))
    part.load()
    n = o.FieldConf("n", (), np.dtype(np.int64))
    with pytest.raises(o.RecordFormatError, match=r"record 2 of '.*part-0' has no field 'n' \(its fields: 'm'\)"):
        o.decode_fields([(part, 0), (part, 2)], [n])
    with pytest.raises(o.RecordFormatError, match=r"record 0 of '.*part-0', field 'n' \(int64_list\) has 1 values, "
                                                  r"but shape \(2,\) takes 2; pass truncate=True"):
        o.decode_fields([(part, 0)], [o.FieldConf("n", (2,), np.dtype(np.int64))])
    data = (tmp_path / "part-0").read_bytes()
    (tmp_path / "part-1").write_bytes(data[:-3])
    with pytest.raises(o.RecordFormatError, match=r"part file '.*part-1' is truncated or corrupt: record 2 at byte"):
        o.PartFile(str(tmp_path / "part-1")).load()
    (tmp_path / "part-2").write_bytes(data + b"\x01\x02")
    with pytest.raises(o.RecordFormatError, match=r"'.*part-2' is truncated: record 3 .* 2 of its 8 length bytes"):
        o.PartFile(str(tmp_path / "part-2")).load()


def test_bytes_fields_gather_as_the_record_by_record_decoding_does(tmp_path):
    rng = np.random.default_rng(1)
    pixels = rng.integers(0, 256, (6, 12), dtype=np.uint8)
    records = [pb.OFRecord(feature={"p": pb.Feature(bytes_list=pb.BytesList(value=[row.tobytes()]))}) for row in pixels]
    records[4] = pb.OFRecord(feature={"p": pb.Feature(bytes_list=pb.BytesList(value=[pixels[4, :5].tobytes()]))})
    write(tmp_path / "part-0", records)
    part = o.PartFile(str(tmp_path / "part-0"))
    part.load()
    together, = o.decode_fields([(part, i) for i in (0, 1, 2, 3, 5)], [o.FieldConf("p", (3, 4), np.dtype(np.uint8))])
    np.testing.assert_array_equal(together, pixels[[0, 1, 2, 3, 5]].reshape(5, 3, 4))
    padded, = o.decode_fields([(part, 4), (part, 0)], [o.FieldConf("p", (12,), np.dtype(np.int32), truncate=True)])
    np.testing.assert_array_equal(padded[0], list(pixels[4, :5].astype(np.int8)) + [0] * 7)  # one by one: short
    np.testing.assert_array_equal(padded[1], pixels[0].astype(np.int8))


def test_after_an_epoch_the_devices_read_their_positions_of_the_whole_shuffled_list(tmp_path):
    """OneFlow's OFRecordDataset shuffles the whole file list (the same on every device) and each device reads
    its balanced range of it: every epoch the devices read disjoint files, all of them, not always the same ones."""
    streams = []
    for device, share in enumerate(([0, 1], [2, 3])):
        for part in range(4):
            write(tmp_path / f"part-{part}", numbered(100 * part, 1))
        reader = o.ReaderConf(str(tmp_path), 1, 4, shuffle_after_epoch=True)
        streams.append(o.RecordStream([o.PartFile(p) for p in reader.part_paths()], reader, o.DATASET_SEED + device, share))
    epochs = [[numbers(s, 2) for s in streams] for _ in range(6)]
    assert epochs[0] == [[0, 100], [200, 300]]
    for mine, theirs in epochs:
        assert sorted(mine + theirs) == [0, 100, 200, 300]
    assert len({tuple(sorted(mine)) for mine, _ in epochs}) > 1  # files move between devices
