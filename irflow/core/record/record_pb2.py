"""OneFlow's `oneflow.core.record.record_pb2`: the OFRecord messages, in pure Python.

The classes programs use to write (and read back) OFRecord files, with the
part of protobuf's message API they call: keyword construction,
`SerializeToString`, `ByteSize`, `ParseFromString` / `FromString`, `CopyFrom`,
`WhichOneof("kind")`, `HasField`, `feature["name"]` creating an entry, and
`.value` lists that check what goes in. The bytes are protobuf's wire format
for record.proto (packed numeric lists; map entries in insertion order), written
and read by `irflow.data.ofrecord`, so files written here are OneFlow's and
OneFlow's are read here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar

import numpy as np

from irflow.data import ofrecord as wire


class _Message:
    """What every message here offers: protobuf's serialization and comparison API."""

    def _payload(self) -> bytes:
        raise NotImplementedError

    def _merge_bytes(self, data: bytes) -> None:
        raise NotImplementedError

    def SerializeToString(self, deterministic: bool = False) -> bytes:  # noqa: N802  protobuf's names
        return self._payload()

    def ByteSize(self) -> int:  # noqa: N802
        return len(self._payload())

    def ParseFromString(self, data: bytes) -> int:  # noqa: N802
        self.Clear()
        self.MergeFromString(data)
        return len(data)

    def MergeFromString(self, data: bytes) -> int:  # noqa: N802
        try:
            self._merge_bytes(bytes(data))
        except wire.RecordFormatError as err:
            raise DecodeError(f"Error parsing message with type 'oneflow.{type(self).__name__}': {err}") from None
        return len(data)

    @classmethod
    def FromString(cls, data: bytes) -> Any:  # noqa: N802
        message = cls()
        message.ParseFromString(data)
        return message

    def CopyFrom(self, other: _Message) -> None:  # noqa: N802
        if type(other) is not type(self):
            raise TypeError(f"CopyFrom expects a {type(self).__name__}, got {type(other).__name__}")
        if other is not self:
            self.Clear()
            self._merge(other)

    def _merge(self, other: Any) -> None:
        """Add `other`'s content (of this type), as MergeFrom; CopyFrom clears first."""
        raise NotImplementedError

    def Clear(self) -> None:  # noqa: N802
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._payload() == other._payload()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]  # mutable, as protobuf's messages


class DecodeError(Exception):
    """Bytes that do not parse as the message (protobuf's `google.protobuf.message.DecodeError`)."""


# ----------------------------------------------------------------- the lists


class _Values(list):
    """A repeated field: checks (and converts) each value, and tells its message when it changes."""

    def __init__(self, check: Callable[[Any], Any], changed: Callable[[], None], dtype: np.dtype | None = None):
        super().__init__()
        self._check, self._changed, self._dtype = check, changed, dtype

    def append(self, value: Any) -> None:
        super().append(self._check(value))
        self._changed()

    def extend(self, values: Iterable[Any]) -> None:
        super().extend(self._numeric(values))
        self._changed()

    def _numeric(self, values: Iterable[Any]) -> list[Any]:
        """The values checked and converted: numbers of a numeric list at once (a record's 784 pixels),
        anything else one by one, which says what is wrong with a value."""
        values = values if isinstance(values, np.ndarray) else list(values)
        if self._dtype is not None and len(values):
            array = np.asarray(values) if not isinstance(values, list) or not isinstance(values[0], str) else None
            if array is not None and array.ndim == 1 and array.dtype.kind in "fiu":
                info = np.finfo(self._dtype) if self._dtype.kind == "f" else np.iinfo(self._dtype)
                if self._dtype.kind == "f" or (array.dtype.kind != "f" and info.min <= array.min() and array.max() <= info.max):
                    return array.astype(self._dtype).tolist()
        return [self._check(v) for v in (values.tolist() if isinstance(values, np.ndarray) else values)]

    def insert(self, index: Any, value: Any) -> None:
        super().insert(index, self._check(value))
        self._changed()

    def __setitem__(self, index: Any, value: Any) -> None:
        if isinstance(index, slice):
            super().__setitem__(index, [self._check(v) for v in value])
        else:
            super().__setitem__(index, self._check(value))
        self._changed()

    def __iadd__(self, values: Iterable[Any]) -> _Values:  # type: ignore[override,misc]
        self.extend(values)
        return self

    def __eq__(self, other: object) -> bool:
        return list(self) == list(other) if isinstance(other, (list, tuple)) else NotImplemented

    __hash__ = None  # type: ignore[assignment]


def _integer(bits: int) -> Callable[[Any], int]:
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1

    def check(value: Any) -> int:
        if isinstance(value, (bool, float, str, bytes)) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{value!r} has type {type(value).__name__}, but expected one of: int")
        if not low <= int(value) <= high:
            raise ValueError(f"Value out of range: {value}")
        return int(value)

    return check


def _real(dtype: type[np.floating]) -> Callable[[Any], float]:
    def check(value: Any) -> float:
        if isinstance(value, (bool, str, bytes)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(f"{value!r} has type {type(value).__name__}, but expected one of: int, float")
        return float(dtype(value))  # a float field keeps float32's value, as protobuf's

    return check


def _bytes(value: Any) -> bytes:
    if not isinstance(value, bytes):
        raise TypeError(f"{value!r} has type {type(value).__name__}, but expected one of: bytes")
    return value


class _List(_Message):
    """A list message: `value`, a repeated field of one type."""

    KIND: ClassVar[int]  # its number in Feature's oneof
    CHECK: ClassVar[Callable[[Any], Any]]

    def __init__(self, value: Iterable[Any] | None = None):
        self._on_change: Callable[[], None] | None = None  # set while it is an unselected member of a Feature
        self._value = _Values(type(self).CHECK, self._changed, wire.KINDS[self.KIND][1])
        if value is not None:
            self._value.extend(value)

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change()

    @property
    def value(self) -> _Values:
        return self._value

    @value.setter
    def value(self, _: Any) -> None:
        raise AttributeError("Assignment not allowed to repeated field \"value\" in protocol message object.")

    def Clear(self) -> None:  # noqa: N802
        list.clear(self._value)

    def _payload(self) -> bytes:
        values = list(self._value)
        if not values:
            return b""
        if self.KIND == 1:
            return b"".join(b"\x0a" + wire.encode_varint(len(v)) + v for v in values)
        dtype = wire.KINDS[self.KIND][1]
        assert dtype is not None
        packed = np.array(values, dtype).tobytes() if dtype.kind == "f" else wire.encode_varints(np.array(values))
        return b"\x0a" + wire.encode_varint(len(packed)) + packed

    def _merge(self, other: _List) -> None:
        list.extend(self._value, other._value)  # checked when they went in
        self._changed()

    def _merge_bytes(self, data: bytes) -> None:
        values = wire.list_values(self.KIND, memoryview(data), type(self).__name__)
        list.extend(self._value, values if isinstance(values, list) else values.tolist())
        self._changed()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(value={list(self._value)!r})"


class BytesList(_List):
    KIND, CHECK = 1, staticmethod(_bytes)


class FloatList(_List):
    KIND, CHECK = 2, staticmethod(_real(np.float32))


class DoubleList(_List):
    KIND, CHECK = 3, staticmethod(_real(np.float64))


class Int32List(_List):
    KIND, CHECK = 4, staticmethod(_integer(32))


class Int64List(_List):
    KIND, CHECK = 5, staticmethod(_integer(64))


_LISTS: dict[str, type[_List]] = {
    "bytes_list": BytesList, "float_list": FloatList, "double_list": DoubleList,
    "int32_list": Int32List, "int64_list": Int64List,
}  # fmt: skip


# ----------------------------------------------------------------- Feature and OFRecord


class Feature(_Message):
    """One of the five lists (the oneof `kind`). Reading an unset member gives an empty list that becomes
    the feature's kind once it is changed, as in protobuf."""

    def __init__(self, **lists: _List):
        self._kind: str | None = None
        self._members: dict[str, _List] = {}
        for name, given in lists.items():
            if name not in _LISTS:
                raise ValueError(f'Protocol message Feature has no "{name}" field.')
            if not isinstance(given, _LISTS[name]):
                raise TypeError(f"Feature's {name} must be a {_LISTS[name].__name__}, got {type(given).__name__}")
            self._member(name).CopyFrom(given)
            self._select(name)

    def _member(self, name: str) -> _List:
        if name not in self._members:
            member = _LISTS[name]()
            member._on_change = lambda: self._select(name)
            self._members[name] = member
        return self._members[name]

    def _select(self, name: str) -> None:
        """`name` becomes the kind; the other members are cleared, as setting a oneof does."""
        if self._kind != name:
            self._members = {name: self._members[name]} if name in self._members else {}
            self._kind = name

    def WhichOneof(self, group: str) -> str | None:  # noqa: N802
        if group != "kind":
            raise ValueError(f'Protocol message has no oneof "{group}" field.')
        return self._kind

    def HasField(self, name: str) -> bool:  # noqa: N802
        if name not in _LISTS and name != "kind":
            raise ValueError(f'Protocol message has no singular "{name}" field.')
        return self._kind is not None if name == "kind" else self._kind == name

    def Clear(self) -> None:  # noqa: N802
        self._kind, self._members = None, {}

    def _payload(self) -> bytes:
        if self._kind is None:
            return b""
        body = self._members[self._kind]._payload()
        return bytes([_LISTS[self._kind].KIND << 3 | wire.WIRE_LEN]) + wire.encode_varint(len(body)) + body

    def _merge(self, other: Feature) -> None:
        if other._kind is not None:
            self._select(other._kind)
            self._member(other._kind)._merge(other._members[other._kind])

    def _merge_bytes(self, data: bytes) -> None:
        for number, kind, payload in wire.fields(memoryview(data), "Feature"):
            if number in wire.KINDS and kind == wire.WIRE_LEN:
                name = wire.KINDS[number][0]
                self._select(name)
                self._member(name)._merge_bytes(bytes(payload))  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return "Feature()" if self._kind is None else f"Feature({self._kind}={self._members[self._kind]!r})"


def _kind_property(name: str) -> property:
    return property(lambda self: self._member(name), doc=f"The {name} member of the oneof `kind`.")


for _name in _LISTS:
    setattr(Feature, _name, _kind_property(_name))


class _FeatureMap(dict):
    """OFRecord.feature: reading a missing name creates its Feature, as protobuf's message maps do."""

    def __missing__(self, key: str) -> Feature:
        if not isinstance(key, str):
            raise TypeError(f"{key!r} has type {type(key).__name__}, but expected one of: str")
        self[key] = feature = Feature()
        return feature

    def __setitem__(self, key: str, value: Feature) -> None:
        if not isinstance(key, str) or not isinstance(value, Feature):
            raise TypeError(f"OFRecord.feature maps str to Feature, got {type(key).__name__} -> {type(value).__name__}")
        super().__setitem__(key, value)


class OFRecord(_Message):
    """A map from field names to Features (`feature`), serialized in insertion order."""

    def __init__(self, feature: Mapping[str, Feature] | None = None):
        self._feature = _FeatureMap()
        for key, value in (feature or {}).items():
            if not isinstance(value, Feature):
                raise TypeError(f"OFRecord.feature['{key}'] must be a Feature, got {type(value).__name__}")
            self._feature[key].CopyFrom(value)

    @property
    def feature(self) -> _FeatureMap:
        return self._feature

    def Clear(self) -> None:  # noqa: N802
        self._feature.clear()

    def _payload(self) -> bytes:
        out = []
        for key, value in self._feature.items():
            name, body = key.encode("utf-8"), value._payload()
            entry = b"\x0a" + wire.encode_varint(len(name)) + name + b"\x12" + wire.encode_varint(len(body)) + body
            out.append(b"\x0a" + wire.encode_varint(len(entry)) + entry)
        return b"".join(out)

    def _merge(self, other: OFRecord) -> None:
        for key, value in other._feature.items():
            self._feature[key].CopyFrom(value)  # a map's entry is replaced, not merged, as in protobuf

    def _merge_bytes(self, data: bytes) -> None:
        for key, (number, payload) in wire.parse_record(data, "OFRecord").items():
            feature = self._feature[key]
            feature.Clear()
            if number:
                name = wire.KINDS[number][0]
                feature._select(name)
                feature._member(name)._merge_bytes(bytes(payload))

    def __repr__(self) -> str:
        return f"OFRecord(feature={dict(self._feature)!r})"


__all__ = ["BytesList", "DecodeError", "DoubleList", "Feature", "FloatList", "Int32List", "Int64List", "OFRecord"]
