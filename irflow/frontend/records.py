"""flow.data.ofrecord_reader and its decoders: a job that reads its own batches from OFRecord files.

The reader is a host-side object, not a tensor: `ofrecord_reader` checks its
part files and returns a `RecordReader` handle; each decoder traces one
`job.ofrecord_decode` op (the reader's arguments and the field's as its
properties), which `lift-host-inputs` makes an argument of the job. At every
call `HostFeeds` reads the next batch of records (irflow/data/ofrecord.py) and
passes each decoded field as that argument. On N devices each device reads
its own share of the part files, as OneFlow's reader does, and contributes its
rows of the batch; under mpiexec a rank reads only its own device's.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

import numpy as np

from irflow.data import ofrecord
from irflow.dialects.job import OFRecordDecodeOp, tensor
from irflow.dialects.sbp import PlacementAttr
from irflow.errors import ExecutionError, SourceLocation
from irflow.frontend import dtypes
from irflow.frontend.blob import Blob
from irflow.frontend.locations import fail, user_location
from irflow.frontend.tracing import Trace, current, placements
from irflow.runtime import mpi
from irflow.runtime.spmd import DevicePieces
from irflow.textir.regions import is_value_name

_DECODABLE = (dtypes.float32, dtypes.float64, dtypes.int8, dtypes.int32, dtypes.int64, dtypes.uint8)


@dataclass(frozen=True)
class RecordReader:
    """What `flow.data.ofrecord_reader` returns: OneFlow's record Blob of shape (batch_size,), which only the
    decoders take."""

    conf: ofrecord.ReaderConf
    name: str
    trace: Trace
    location: SourceLocation
    placement: PlacementAttr | None  # its placement scope's, if any

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.conf.batch_size,)


@dataclass(frozen=True)
class Feed:
    """One decoded field: which reader, what it becomes, and the user's line that asked for it."""

    reader: RecordReader
    field: ofrecord.FieldConf
    location: SourceLocation


def _positive(value: object, name: str, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        fail(f"{what}: {name} must be a positive int, got {value!r}")
    return value


def ofrecord_reader(
    ofrecord_dir: str,
    batch_size: int = 1,
    data_part_num: int = 1,
    part_name_prefix: str = "part-",
    part_name_suffix_length: int = -1,
    random_shuffle: bool = False,
    shuffle_buffer_size: int = 1024,
    shuffle_after_epoch: bool = False,
    name: str | None = None,
) -> RecordReader:
    """OneFlow's reader of OFRecord part files `<dir>/<prefix><number>`, `batch_size` records per call.

    The files this process reads must exist when the job is defined (HostFeeds checks them); they are read
    when it runs.
    """
    what = "flow.data.ofrecord_reader"
    trace = current(what)
    for value, arg in ((batch_size, "batch_size"), (data_part_num, "data_part_num"),
                       (shuffle_buffer_size, "shuffle_buffer_size")):  # fmt: skip
        _positive(value, arg, what)
    if not isinstance(part_name_suffix_length, int) or isinstance(part_name_suffix_length, bool):
        fail(f"{what}: part_name_suffix_length must be an int, got {part_name_suffix_length!r}")
    if not isinstance(ofrecord_dir, (str, os.PathLike)) or not isinstance(part_name_prefix, str):
        fail(f"{what}: the directory and part_name_prefix must be strings, got {ofrecord_dir!r}, {part_name_prefix!r}")
    conf = ofrecord.ReaderConf(
        os.fspath(ofrecord_dir), batch_size, data_part_num, part_name_prefix, part_name_suffix_length,
        bool(random_shuffle), shuffle_buffer_size, bool(shuffle_after_epoch),
    )  # fmt: skip
    if not os.path.isdir(conf.data_dir):
        fail(f"{what}: no directory '{conf.data_dir}'")
    name = name or trace.unique_name("OFRecord_Reader")
    return RecordReader(conf, name, trace, user_location(), placements[-1] if placements else None)


def OFRecordRawDecoder(  # noqa: N802  OneFlow's name
    input_blob: RecordReader,
    blob_name: str,
    shape: Sequence[int],
    dtype: object,
    dim1_varying_length: bool = False,
    truncate: bool = False,
    auto_zero_padding: bool = False,
    name: str | None = None,
) -> Blob:
    """The field `blob_name` of each record as a (batch_size, *shape) Blob of `dtype`, as OneFlow's raw decoder.

    Every record's field holds `prod(shape)` values (a bytes list: one value of that many bytes,
    read as int8); `truncate` (and OneFlow's deprecated `auto_zero_padding`) cuts longer ones and
    pads shorter ones with zeros.
    """
    what = "flow.data.OFRecordRawDecoder"
    trace = current(what)
    location = user_location()
    if not isinstance(input_blob, RecordReader):
        fail(f"{what} decodes the records of flow.data.ofrecord_reader, got {type(input_blob).__name__} {input_blob!r}")
    if input_blob.trace is not trace:
        fail(f"{what}: the reader '{input_blob.name}' belongs to job '{input_blob.trace.name}', not to '{trace.name}'")
    if any(f.reader.name == input_blob.name and f.reader is not input_blob for f in trace.feeds):
        fail(f"{what}: two readers of job '{trace.name}' are named '{input_blob.name}'; give each its own name")
    if not isinstance(blob_name, str) or not blob_name:
        fail(f"{what}: the field name must be a non-empty string, got {blob_name!r}")
    if dim1_varying_length:
        fail(
            f"{what}: dim1_varying_length=True gives each record's row a length of its own, which irflow's "
            "dynamic shapes (one size per axis, docs/dynamic.md) cannot hold; pass truncate=True to pad each row to shape"
        )
    if auto_zero_padding:
        warnings.warn(f"{what}: auto_zero_padding is deprecated, pass truncate=True", DeprecationWarning, stacklevel=2)
    try:
        dims = tuple(int(d) for d in shape)
        dt = dtypes.as_dtype(dtype)
    except (TypeError, ValueError) as err:
        fail(f"{what}: field '{blob_name}': {err}")
    if any(d < 1 for d in dims) or any(int(d) != d for d in shape):
        fail(f"{what}: field '{blob_name}': shape must be positive ints, got {tuple(shape)}")
    if dt not in _DECODABLE:
        fail(f"{what}: field '{blob_name}' cannot be decoded as {dt!r}; use one of "
             f"{', '.join(repr(d) for d in _DECODABLE)}")
    field = ofrecord.FieldConf(blob_name, dims, dt.np_dtype, bool(truncate or auto_zero_padding))
    conf = input_blob.conf
    placed = {} if input_blob.placement is None else {"placement": input_blob.placement}
    op = OFRecordDecodeOp.make(
        [], tensor((conf.batch_size, *dims), dt.element_type),
        reader=input_blob.name, data_dir=conf.data_dir, data_part_num=conf.data_part_num,
        part_name_prefix=conf.part_name_prefix, part_name_suffix_length=conf.part_name_suffix_length,
        random_shuffle=conf.random_shuffle, shuffle_buffer_size=conf.shuffle_buffer_size,
        shuffle_after_epoch=conf.shuffle_after_epoch, field=blob_name, truncate=field.truncate, **placed,
    )  # fmt: skip
    trace.append(op, location)
    label = name or trace.unique_name("OFRecordRawDecoder")
    hint = blob_name.replace("/", "_")
    if is_value_name(hint):
        op.res.name_hint = hint  # the field's name reads in the IR: %images
    trace.feeds.append(Feed(input_blob, field, location))
    return Blob(op.res, trace, label)


ofrecord_raw_decoder = OFRecordRawDecoder


def image_decoder_unavailable(what: str) -> Any:
    """OneFlow's JPEG decoders (and the readers built on them): irflow has no image codec."""

    def refuse(*args: Any, **kwargs: Any) -> NoReturn:
        fail(
            f"flow.data.{what} decodes JPEG images, which needs an image library irflow does not have; "
            "write the pixels into the records as a bytes or numeric list and read them with "
            "flow.data.OFRecordRawDecoder(record, name, shape=(c, h, w), dtype=flow.uint8 or flow.float)"
        )

    refuse.__name__ = what
    return refuse


def OFRecordBytesDecoder(input_blob: RecordReader, blob_name: str, name: str | None = None) -> NoReturn:  # noqa: N802
    """OneFlow's decoder of a bytes field into a TensorBuffer of each record's bytes: not in irflow."""
    fail(
        "flow.data.OFRecordBytesDecoder gives each record's bytes, of lengths of their own, as a TensorBuffer for "
        "the image ops, which irflow does not have; decode fixed-size bytes with flow.data.OFRecordRawDecoder"
    )


ofrecord_bytes_decoder = OFRecordBytesDecoder


# ----------------------------------------------------------------- OneFlow's older API


@dataclass(frozen=True)
class RawCodec:
    """`flow.data.RawCodec`: decode a BlobConf's field with the raw decoder."""

    truncate: bool = False
    auto_zero_padding: bool = False


@dataclass(frozen=True)
class ImageCodec:
    """`flow.data.ImageCodec`: decode a BlobConf's field as a JPEG image, which irflow cannot (see below)."""

    image_preprocessors: Sequence[Any] | None = None


@dataclass(frozen=True)
class BlobConf:
    """`flow.data.BlobConf(name, shape, dtype, codec)`: one field of `decode_ofrecord`."""

    name: str
    shape: Sequence[int]
    dtype: object
    codec: RawCodec | ImageCodec
    preprocessors: Sequence[Any] | None = None


def decode_ofrecord(
    ofrecord_dir: str,
    blobs: Sequence[BlobConf],
    batch_size: int = 1,
    data_part_num: int = 1,
    part_name_prefix: str = "part-",
    part_name_suffix_length: int = -1,
    shuffle: bool = False,
    buffer_size: int = 1024,
    name: str | None = None,
) -> tuple[Blob, ...]:
    """OneFlow's deprecated reader and decoders in one call: a Blob per BlobConf, in their order."""
    warnings.warn("flow.data.decode_ofrecord is deprecated; use flow.data.ofrecord_reader and "
                  "flow.data.OFRecordRawDecoder", DeprecationWarning, stacklevel=2)  # fmt: skip
    record = ofrecord_reader(ofrecord_dir, batch_size, data_part_num, part_name_prefix, part_name_suffix_length,
                             random_shuffle=shuffle, shuffle_buffer_size=buffer_size, name=name)  # fmt: skip
    decoded = []
    for conf in blobs:
        if not isinstance(conf, BlobConf):
            fail(f"flow.data.decode_ofrecord takes flow.data.BlobConf fields, got {type(conf).__name__} {conf!r}")
        if isinstance(conf.codec, ImageCodec):
            image_decoder_unavailable("ImageCodec")()
        if not isinstance(conf.codec, RawCodec):
            fail(f"flow.data.BlobConf '{conf.name}': codec must be flow.data.RawCodec(), got {conf.codec!r}")
        if conf.preprocessors:
            fail(f"flow.data.BlobConf '{conf.name}': preprocessors work on decoded images, which irflow has not")
        decoded.append(OFRecordRawDecoder(record, conf.name, conf.shape, conf.dtype,
                                          truncate=conf.codec.truncate or conf.codec.auto_zero_padding))  # fmt: skip
    return tuple(decoded)


def ofrecord_loader(
    ofrecord_dir: str,
    batch_size: int = 1,
    data_part_num: int = 1,
    part_name_prefix: str = "part-",
    part_name_suffix_length: int = -1,
    shuffle: bool = False,
    shuffle_buffer_size: int = 1024,
    name: str | None = None,
) -> RecordReader:
    """OneFlow's deprecated name of `ofrecord_reader`, with `shuffle` for `random_shuffle`."""
    warnings.warn("flow.data.ofrecord_loader is deprecated; use flow.data.ofrecord_reader",
                  DeprecationWarning, stacklevel=2)  # fmt: skip
    return ofrecord_reader(ofrecord_dir, batch_size, data_part_num, part_name_prefix, part_name_suffix_length,
                           random_shuffle=shuffle, shuffle_buffer_size=shuffle_buffer_size, name=name)  # fmt: skip


class HostFeeds:
    """The job's readers at run time: every call reads each reader's next batch and decodes its fields.

    Each device of the job's placement has a stream per reader over its share
    of the part files, and gives its rows of the batch (the rows a split(0)
    gives that device). This process feeds its own devices: all of them in one
    process, its one device under mpiexec, which opens only that device's files
    (a machine's disk need hold no others unless `shuffle_after_epoch` moves
    files between devices). The fields go in as those devices' pieces: a list
    in the mirrored view, `DevicePieces` in the consistent view on several
    devices, one array on one device. A call that fails leaves every stream where it was.
    """

    def __init__(self, feeds: Sequence[Feed], placement: PlacementAttr, per_device: bool):
        self.feeds, self.devices, self.per_device = list(feeds), len(placement.devices), per_device
        self.local = local_devices(self.devices)
        self.streams: dict[str, list[ofrecord.RecordStream]] = {}
        for feed in self.feeds:
            reader, conf = feed.reader, feed.reader.conf
            if reader.name not in self.streams:
                self.streams[reader.name] = self._streams(reader, placement)
            if self.local:  # a typo in a field's name or shape is an error at the decoder's line, not at the first call
                first = self.streams[reader.name][0]
                try:
                    ofrecord.decode_fields([(ofrecord.PartFile.head(first.files[first.share[0]].path), 0)], [feed.field])
                except (ofrecord.RecordFormatError, OSError) as err:
                    fail(f"flow.data.OFRecordRawDecoder: {err}", feed.location)

    def _streams(self, reader: RecordReader, placement: PlacementAttr) -> list[ofrecord.RecordStream]:
        """The reader's stream for each device this process feeds, its files checked to exist."""
        conf, what = reader.conf, f"flow.data.ofrecord_reader '{reader.name}'"
        if reader.placement is not None and reader.placement != placement:
            fail(
                f"{what} is placed on {reader.placement}, but its job runs on {placement}: a reader feeds "
                "every device of its job; open it in the job's placement scope",
                reader.location,
            )
        if conf.data_part_num < self.devices or conf.batch_size % self.devices:
            fail(
                f"{what} runs on {self.devices} devices, each reading its own part files and rows: it needs "
                f"data_part_num >= {self.devices} (got {conf.data_part_num}) and a batch_size divisible by "
                f"{self.devices} (got {conf.batch_size})",
                reader.location,
            )
        shares = conf.device_parts(self.devices)
        paths = conf.part_paths()
        needed = range(len(paths)) if conf.shuffle_after_epoch else sorted(p for d in self.local for p in shares[d])
        missing = [paths[p] for p in needed if not os.path.isfile(paths[p])]
        if missing:
            held = sorted(os.listdir(conf.data_dir))
            here = f" on rank {self.local[0]} of {self.devices} (mpiexec)" if len(self.local) < self.devices else ""
            fail(
                f"flow.data.ofrecord_reader: data_part_num={conf.data_part_num} needs the part file(s) "
                f"{', '.join(repr(p) for p in missing)}{here}, which do not exist (the directory holds "
                f"{', '.join(held[:8]) or 'nothing'}{', ...' if len(held) > 8 else ''})",
                reader.location,
            )
        files = [ofrecord.PartFile(path) for path in paths]  # shared by the devices' streams, each read once if at all
        return [ofrecord.RecordStream(files, conf, ofrecord.DATASET_SEED + d, shares[d]) for d in self.local]

    def next(self) -> list[Any]:
        """Each field of the next batch, in the feeds' order (the order of the arguments they feed)."""
        positions = {name: [s.position() for s in streams] for name, streams in self.streams.items()}
        fields, batches = [], {}
        where: SourceLocation | None = None
        who = ""
        try:
            for name, streams in self.streams.items():
                reader = next(f.reader for f in self.feeds if f.reader.name == name)
                who, where = reader.name, reader.location  # opening a part file: the reader's line
                batches[name] = [s.take(reader.conf.batch_size // self.devices) for s in streams]
            for feed in self.feeds:
                who, where = feed.reader.name, feed.location  # a record's field: the decoder's line
                pieces = [ofrecord.decode_fields(records, [feed.field])[0] for records in batches[feed.reader.name]]
                fields.append(pieces if self.per_device else DevicePieces(pieces) if self.devices > 1 else pieces[0])
        except (ofrecord.RecordFormatError, OSError) as err:
            for name, saved in positions.items():
                for stream, at in zip(self.streams[name], saved):
                    stream.restore(at)
            raise ExecutionError(f"flow.data.ofrecord_reader '{who}': {err}", where) from None
        return fields


def local_devices(devices: int) -> list[int]:
    """The devices of a job on `devices` devices that this process runs: all of them, or under mpiexec its own
    (a rank is the device at its place in the job's placement, docs/mpi.md); none when the number of processes
    does not match, which start-up reports."""
    size = mpi.launched_size()
    if size == 1:
        return list(range(devices))
    return [mpi.launched_rank()] if size == devices else []
