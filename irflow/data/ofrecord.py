"""OFRecord files as OneFlow writes and reads them, in pure Python and numpy.

A part file is a sequence of records, each an 8-byte little-endian length and
then an `OFRecord` message (oneflow/core/record/record.proto): a map from
field names to a `Feature`, one of a bytes list or a packed float, double,
int32 or int64 list. This module holds the protobuf wire format both ways
(`irflow.core.record.record_pb2` writes with it), the part files a reader
opens, and `RecordStream`, the host-side reader a job's
`flow.data.ofrecord_reader` feeds it from: records in file order, wrapping
around at the end of an epoch, shuffled deterministically when asked.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

WIRE_VARINT, WIRE_I64, WIRE_LEN, WIRE_I32 = 0, 1, 2, 5
# Feature's oneof `kind`: field number -> (name, numpy dtype of its packed values; None for bytes).
KINDS: dict[int, tuple[str, np.dtype | None]] = {
    1: ("bytes_list", None),
    2: ("float_list", np.dtype("<f4")),
    3: ("double_list", np.dtype("<f8")),
    4: ("int32_list", np.dtype(np.int32)),
    5: ("int64_list", np.dtype(np.int64)),
}
DATASET_SEED = 524287  # the seed of OneFlow's dataset shuffles (kOneflowDatasetSeed)


class RecordFormatError(ValueError):
    """Bytes that are not the OFRecord wire format; the message says where."""


# ----------------------------------------------------------------- the wire format


def encode_varint(n: int) -> bytes:
    """A protobuf varint; negative numbers as their 64-bit two's complement (10 bytes), as int32/int64 fields."""
    n &= (1 << 64) - 1
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_varints(values: np.ndarray) -> bytes:
    """Many varints at once (a packed int32/int64 list): each value's 7-bit groups, the last without 0x80."""
    v = np.asarray(values, dtype=np.int64).view(np.uint64)
    if v.size <= 8:  # a label or two: one at a time is quicker than the arrays below
        return b"".join(encode_varint(int(n)) for n in v)
    groups = (v[:, None] >> (np.arange(10, dtype=np.uint64) * np.uint64(7))) & np.uint64(0x7F)
    bits = np.zeros(v.shape, dtype=np.int64)
    rest = v.copy()
    while rest.any():  # the number of significant bits, 7 at a time
        bits += rest > 0
        rest >>= np.uint64(7)
    count = np.maximum(bits, 1)
    position = np.arange(10)[None, :]
    keep = position < count[:, None]
    more = position < (count - 1)[:, None]
    encoded = (groups.astype(np.uint8) | np.where(more, 0x80, 0).astype(np.uint8))[keep]
    return encoded.tobytes()


def decode_varints(data: bytes | memoryview, where: str) -> np.ndarray:
    """The varints of a packed list as uint64, decoded together: each byte's 7 bits shifted into its value."""
    b = np.frombuffer(data, dtype=np.uint8)
    if b.size == 0:
        return np.zeros(0, np.uint64)
    ends = b < 0x80
    if not ends[-1]:
        raise RecordFormatError(f"{where}: a packed list ends inside a varint")
    value_of = np.concatenate(([0], np.cumsum(ends[:-1])))  # the value each byte belongs to
    starts = np.flatnonzero(np.concatenate(([True], ends[:-1])))
    position = np.arange(b.size) - starts[value_of]
    if position.max() >= 10:
        raise RecordFormatError(f"{where}: a varint longer than 10 bytes")
    parts = (b & 0x7F).astype(np.uint64) << (position.astype(np.uint64) * np.uint64(7))
    return np.bitwise_or.reduceat(parts, starts)


def read_varint(buf: bytes | memoryview, pos: int, end: int, where: str) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end:
            raise RecordFormatError(f"{where}: the message ends inside a varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise RecordFormatError(f"{where}: a varint longer than 10 bytes")


def fields(buf: memoryview, where: str) -> Iterator[tuple[int, int, int | memoryview]]:
    """(field number, wire type, value) of each field of a message: an int, or the bytes of a LEN or fixed field."""
    pos, end = 0, len(buf)
    while pos < end:
        tag, pos = read_varint(buf, pos, end, where)
        number, wire = tag >> 3, tag & 7
        if wire == WIRE_VARINT:
            value, pos = read_varint(buf, pos, end, where)
            yield number, wire, value
            continue
        start, pos = _extent(buf, tag, pos, end, where)
        yield number, wire, buf[start:pos]


def _skip(buf: bytes | memoryview, tag: int, pos: int, end: int, where: str) -> int:
    """The position after the value of a field (`tag` read) that a parser passes over."""
    if tag & 7 == WIRE_VARINT:
        return read_varint(buf, pos, end, where)[1]
    return _extent(buf, tag, pos, end, where)[1]


def _extent(buf: bytes | memoryview, tag: int, pos: int, end: int, where: str) -> tuple[int, int]:
    """Where the bytes of a LEN or fixed-size field's value (`tag` read at `pos`) start and end."""
    wire = tag & 7
    if wire == WIRE_LEN:
        size, pos = read_varint(buf, pos, end, where)
    elif wire in (WIRE_I64, WIRE_I32):
        size = 8 if wire == WIRE_I64 else 4
    else:
        raise RecordFormatError(f"{where}: field {tag >> 3} has wire type {wire}, which OFRecord does not use")
    if pos + size > end:
        raise RecordFormatError(f"{where}: field {tag >> 3} claims {size} bytes, {end - pos} remain")
    return pos, pos + size


def _length(buf: bytes | memoryview, pos: int, end: int, where: str) -> tuple[int, int]:
    """A LEN field's size (read at `pos`) and where its bytes start, checked to fit before `end`."""
    size = buf[pos] if pos < end else 0x80
    size, pos = (size, pos + 1) if size < 0x80 else read_varint(buf, pos, end, where)
    if pos + size > end:
        raise RecordFormatError(f"{where}: a field claims {size} bytes, {end - pos} remain")
    return size, pos


def record_fields(buf: bytes, pos: int, end: int, where: str) -> dict[str, tuple[int, int, int]]:
    """The features of the OFRecord in `buf[pos:end]` by name: (kind number, start, end of its list message).

    Written out for the form every writer produces (one-byte tags, map entries of a
    key and a Feature), since a reader indexes every record it opens; other fields
    are skipped as protobuf skips unknown ones, and in a oneof the last wins.
    """
    features: dict[str, tuple[int, int, int]] = {}
    while pos < end:
        tag, pos = read_varint(buf, pos, end, where) if buf[pos] >= 0x80 else (buf[pos], pos + 1)
        if tag != 0x0A:
            pos = _skip(buf, tag, pos, end, where)
            continue
        size, pos = _length(buf, pos, end, where)
        stop = pos + size
        key, kind, first, last = "", 0, stop, stop
        while pos < stop:
            tag, pos = read_varint(buf, pos, stop, where) if buf[pos] >= 0x80 else (buf[pos], pos + 1)
            if tag == 0x0A:
                size, pos = _length(buf, pos, stop, where)
                key = buf[pos : pos + size].decode("utf-8")
            elif tag == 0x12:
                size, pos = _length(buf, pos, stop, where)
                q, feature_end = pos, pos + size
                while q < feature_end:
                    inner, q = read_varint(buf, q, feature_end, where) if buf[q] >= 0x80 else (buf[q], q + 1)
                    if inner & 7 == WIRE_LEN and inner >> 3 in KINDS:
                        n, q = _length(buf, q, feature_end, f"{where}, feature '{key}'")
                        kind, first, last = inner >> 3, q, q + n
                        q += n
                    else:
                        q = _skip(buf, inner, q, feature_end, where)
            else:
                pos = _skip(buf, tag, pos, stop, where)
                continue
            pos += size
        features[key] = (kind, first, last)
    return features


def parse_record(data: bytes | memoryview, where: str = "record") -> dict[str, tuple[int, memoryview]]:
    """An OFRecord's features by name: (kind number, the bytes of its list message), decoded on demand."""
    buf = bytes(data)
    view = memoryview(buf)
    return {k: (kind, view[a:b]) for k, (kind, a, b) in record_fields(buf, 0, len(buf), where).items()}


def list_values(kind: int, payload: memoryview, where: str) -> np.ndarray | list[bytes]:
    """A feature's values: the bytes of a bytes list, else a numpy array (packed or not, as protobuf accepts)."""
    if kind == 1:
        return [bytes(v) for n, w, v in fields(payload, where) if n == 1 and w == WIRE_LEN]  # type: ignore[arg-type]
    dtype = KINDS[kind][1]
    assert dtype is not None
    first = payload[:1].tobytes()
    if first == b"\x0a":  # the usual form: one packed field filling the message
        size, pos = read_varint(payload, 1, len(payload), where)
        if pos + size == len(payload):
            return _packed(payload[pos:], dtype, where)
    chunks = []
    for n, w, v in fields(payload, where):
        if n != 1:
            continue
        if w == WIRE_LEN:
            chunks.append(_packed(v, dtype, where))  # type: ignore[arg-type]
        elif w == WIRE_VARINT:
            chunks.append(np.array([v], np.uint64).view(np.int64).astype(dtype))
        else:
            chunks.append(np.frombuffer(v, dtype))  # type: ignore[arg-type]
    return np.concatenate(chunks) if chunks else np.zeros(0, dtype)


def _packed(data: memoryview, dtype: np.dtype, where: str) -> np.ndarray:
    if dtype.kind == "f":
        if len(data) % dtype.itemsize:
            raise RecordFormatError(f"{where}: a packed {dtype.name} list of {len(data)} bytes")
        return np.frombuffer(data, dtype)
    if len(data) <= 32:  # a few values (a label): a loop beats a dozen numpy calls
        values, pos, end = [], 0, len(data)
        while pos < end:
            value, pos = read_varint(data, pos, end, where)
            values.append(value)
        return np.array(values, np.uint64).view(np.int64).astype(dtype)
    return decode_varints(data, where).view(np.int64).astype(dtype)  # int32 keeps the low 32 bits, as protobuf


def split_records(data: bytes, path: str) -> list[tuple[int, int]]:
    """(offset, size) of each record of a part file; a file that ends inside a record is an error naming it."""
    spans, pos, end = [], 0, len(data)
    while pos < end:
        if pos + 8 > end:
            raise RecordFormatError(
                f"part file '{path}' is truncated: record {len(spans)} at byte {pos} has {end - pos} of its 8 length bytes"
            )
        size = int.from_bytes(data[pos : pos + 8], "little", signed=True)
        if size <= 0 or pos + 8 + size > end:
            raise RecordFormatError(
                f"part file '{path}' is truncated or corrupt: record {len(spans)} at byte {pos} claims {size} bytes, "
                f"{end - pos - 8} remain"
            )
        spans.append((pos + 8, size))
        pos += 8 + size
    return spans


# ----------------------------------------------------------------- the reader


@dataclass(frozen=True)
class ReaderConf:
    """`flow.data.ofrecord_reader`'s arguments, as its job op carries them."""

    data_dir: str
    batch_size: int
    data_part_num: int = 1
    part_name_prefix: str = "part-"
    part_name_suffix_length: int = -1
    random_shuffle: bool = False
    shuffle_buffer_size: int = 1024
    shuffle_after_epoch: bool = False

    def part_paths(self) -> list[str]:
        """OneFlow's part file names: the prefix and the part's number, zero-padded to the suffix length."""
        width = max(self.part_name_suffix_length, 0)
        return [os.path.join(self.data_dir, f"{self.part_name_prefix}{i:0{width}d}") for i in range(self.data_part_num)]

    def device_parts(self, devices: int) -> list[list[int]]:
        """The positions in the files' order each of `devices` devices reads, as OneFlow balances them (the first
        ones get one more): the part files with those numbers, until `shuffle_after_epoch` reorders the files."""
        base, extra = divmod(self.data_part_num, devices)
        bounds = np.cumsum([0] + [base + (d < extra) for d in range(devices)])
        return [list(range(bounds[d], bounds[d + 1])) for d in range(devices)]


@dataclass(frozen=True)
class FieldIndex:
    """Where one field lies in each record of a part file: its kind (0: absent), its list message's bytes, and
    where its values start when the list is the usual single packed field (else -1)."""

    kind: np.ndarray
    start: np.ndarray
    stop: np.ndarray
    packed: np.ndarray


class PartFile:
    """One part file, read and indexed whole on first use: where each record's fields lie, so that a batch
    of a field is gathered from the file's bytes by numpy rather than parsed record by record."""

    def __init__(self, path: str):
        self.path = path
        self.data = b""
        self.count = 0
        self.spans: list[tuple[int, int]] = []
        self.fields: dict[str, FieldIndex] = {}

    def load(self) -> None:
        if not self.count:
            with open(self.path, "rb") as f:
                self.index(f.read())

    @classmethod
    def head(cls, path: str) -> PartFile:
        """The file's first record alone (what a decoder checks when the job is defined)."""
        part = cls(path)
        with open(path, "rb") as f:
            head = f.read(8)
            size = int.from_bytes(head, "little", signed=True) if len(head) == 8 else 0
            part.index(head + (f.read(size) if size > 0 else b""))
        return part

    def index(self, data: bytes) -> None:
        spans = split_records(data, self.path)
        if not spans:
            raise RecordFormatError(f"part file '{self.path}' holds no record")
        columns: dict[str, np.ndarray] = {}
        for i, (offset, size) in enumerate(spans):
            for name, (kind, first, last) in record_fields(data, offset, offset + size, f"record {i} of '{self.path}'").items():
                if name not in columns:
                    columns[name] = np.zeros((len(spans), 4), np.int64)
                    columns[name][:, 3] = -1
                packed = -1
                if last - first > 1 and data[first] == 0x0A:  # one packed field filling the list message?
                    n, q = data[first + 1], first + 2
                    if n >= 0x80:
                        n, q = read_varint(data, first + 1, last, self.path)
                    packed = q if q + n == last else -1
                columns[name][i] = (kind, first, last, packed)
        self.fields = {name: FieldIndex(*(c[:, j] for j in range(4))) for name, c in columns.items()}
        self.data, self.spans, self.count = data, spans, len(spans)


@dataclass
class _Position:
    """Where a stream is: the part files it reads this epoch, the file and record next, the shuffle buffer."""

    order: list[int]
    file: int = 0
    record: int = 0
    epoch: int = 0
    buffer: list[tuple[PartFile, int]] | None = None
    rng_state: dict | None = None


class RecordStream:
    """The records of one device's part files, one after another, for ever: OneFlow's OFRecordDataset on a device.

    `files` are all the reader's part files; the device reads those at the
    positions `share` of the files' order (all of them by default), opening no
    other. At the end of its last file an epoch ends and reading starts again at
    its first; with `shuffle_after_epoch` the whole list is then shuffled (by the
    epoch's own seed, the same on every device, as OneFlow shuffles its file list)
    and the device reads the files now at its positions, so devices in the same
    epoch read disjoint files. `random_shuffle` draws each record at random from a
    buffer of `shuffle_buffer_size` upcoming records, refilled from the stream,
    as OneFlow's RandomShuffleDataset, with the generator `seed`. Seeds are
    fixed, so two runs read the same batches.
    """

    def __init__(
        self, files: Sequence[PartFile], conf: ReaderConf, seed: int = DATASET_SEED, share: Sequence[int] | None = None
    ):
        self.files, self.conf, self.seed = list(files), conf, seed
        self.share = list(range(len(self.files))) if share is None else list(share)
        self._rng = np.random.Generator(np.random.PCG64(seed))
        self._at = _Position(order=list(self.share))

    def take(self, count: int) -> list[tuple[PartFile, int]]:
        """The next `count` records, each (its part file, its index there)."""
        return [self._draw() for _ in range(count)]

    def position(self) -> _Position:
        """Where the stream is, for `restore` after a step that failed."""
        at = copy.copy(self._at)
        at.order, at.buffer = list(at.order), None if at.buffer is None else list(at.buffer)
        at.rng_state = self._rng.bit_generator.state
        return at

    def restore(self, at: _Position) -> None:
        assert at.rng_state is not None
        self._rng.bit_generator.state = at.rng_state
        self._at = at

    def _draw(self) -> tuple[PartFile, int]:
        if not self.conf.random_shuffle:
            return self._next()
        at = self._at
        if at.buffer is None:
            at.buffer = []
        while len(at.buffer) < self.conf.shuffle_buffer_size:
            at.buffer.append(self._next())
        i = int(self._rng.integers(len(at.buffer)))
        drawn, at.buffer[i] = at.buffer[i], self._next()
        return drawn

    def _next(self) -> tuple[PartFile, int]:
        at = self._at
        part = self.files[at.order[at.file]]
        part.load()
        drawn = (part, at.record)
        at.record += 1
        if at.record == part.count:
            at.record, at.file = 0, at.file + 1
            if at.file == len(at.order):
                at.file, at.epoch = 0, at.epoch + 1
                if self.conf.shuffle_after_epoch:
                    shuffled = np.random.Generator(np.random.PCG64(DATASET_SEED + at.epoch)).permutation(len(self.files))
                    at.order = [int(shuffled[p]) for p in self.share]
        return drawn


# ----------------------------------------------------------------- decoding a field


@dataclass(frozen=True)
class FieldConf:
    """`flow.data.OFRecordRawDecoder`'s arguments: which feature, and the tensor it becomes per record."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    truncate: bool = False


def decode_fields(records: Sequence[tuple[PartFile, int]], wanted: Sequence[FieldConf]) -> list[np.ndarray]:
    """Each wanted field of every record as one (batch, *shape) array of its dtype, as OneFlow's raw decoder
    casts it.

    A bytes list holds one value, read as int8 (OneFlow's char) bytes; any list
    holds exactly the shape's count of values, or with `truncate` any number, cut
    to the count or padded with zeros. Anything else is a RecordFormatError naming
    the record, its file and the field. The records of one file are gathered
    together where their lists have the common form (packed floats of the right
    size, or small integers of one byte each); the others are decoded one by one.
    """
    outs = []
    files: dict[int, tuple[PartFile, list[int], list[int]]] = {}
    for row, (part, index) in enumerate(records):
        files.setdefault(id(part), (part, [], []))
        files[id(part)][1].append(row)
        files[id(part)][2].append(index)
    for field in wanted:
        count = int(np.prod(field.shape, dtype=np.int64))
        out = np.zeros((len(records), count), field.dtype)
        for part, rows, indices in files.values():
            _gather(part, np.array(rows), np.array(indices), field, count, out)
        outs.append(out.reshape((len(records), *field.shape)))
    return outs


def _gather(part: PartFile, rows: np.ndarray, indices: np.ndarray, field: FieldConf, count: int, out: np.ndarray) -> None:
    """`field` of records `indices` of `part` into `out[rows]`."""
    at = part.fields.get(field.name)
    kinds = at.kind[indices] if at is not None else np.zeros(len(indices), np.int64)
    if (kinds == 0).any():
        bad = int(indices[np.argmax(kinds == 0)])
        where = f"record {bad} of '{part.path}'"
        offset, size = part.spans[bad]
        held = record_fields(part.data, offset, offset + size, where)
        if field.name in held:
            raise RecordFormatError(f"{where}: field '{field.name}' holds no list")
        known = ", ".join(repr(k) for k in sorted(held)) or "none"
        raise RecordFormatError(f"{where} has no field '{field.name}' (its fields: {known})")
    assert at is not None
    kind = int(kinds[0])
    dtype = KINDS[kind][1] or np.dtype(np.int8)  # a bytes list's one value: packed looks the same
    if (kinds == kind).all() and (at.packed[indices] >= 0).all():
        starts, sizes = at.packed[indices], at.stop[indices] - at.packed[indices]
        width = count * dtype.itemsize if dtype.kind == "f" else count  # a small integer is one byte
        if (sizes == width).all():
            data = part.data
            raw = np.frombuffer(b"".join([data[a : a + width] for a in starts.tolist()]), np.uint8).reshape(len(rows), width)
            if dtype.kind == "f" or kind == 1:
                out[rows] = raw.view(dtype).reshape(len(rows), count)
                return
            if (raw < 0x80).all():
                out[rows] = raw
                return
    for row, index in zip(rows, indices):
        _decode_one(part, int(index), field, count, out[row])


def _decode_one(part: PartFile, index: int, field: FieldConf, count: int, out: np.ndarray) -> None:
    at = part.fields[field.name]
    kind, start, stop = int(at.kind[index]), int(at.start[index]), int(at.stop[index])
    where = f"record {index} of '{part.path}', field '{field.name}'"
    values = list_values(kind, memoryview(part.data)[start:stop], where)
    if kind == 1:
        if len(values) != 1:
            raise RecordFormatError(f"{where} is a bytes list of {len(values)} values; the raw decoder reads exactly one")
        values = np.frombuffer(values[0], np.int8)  # type: ignore[arg-type]
    n = len(values)
    if n != count and not field.truncate:
        raise RecordFormatError(
            f"{where} ({KINDS[kind][0]}) has {n} values, but shape {field.shape} takes {count}; "
            "pass truncate=True to cut or zero-pad it"
        )
    n = min(n, count)
    out[:n] = values[:n]  # type: ignore[index]
