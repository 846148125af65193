"""A protobuf enum as generated Python modules expose it: `Enum.Name(v)`, `Enum.Value(name)`, and each value
as a module-level constant (`data_type_pb2.kFloat`)."""

from __future__ import annotations

from collections.abc import Mapping


class EnumType:
    """protobuf's EnumTypeWrapper: names and numbers of one enum, both ways."""

    def __init__(self, name: str, values: Mapping[str, int]):
        self.name = name
        self._values = dict(values)
        self._names = {number: key for key, number in reversed(list(values.items()))}

    def Name(self, number: int) -> str:  # noqa: N802  protobuf's names
        if number not in self._names:
            raise ValueError(f"Enum {self.name} has no name defined for value {number!r}")
        return self._names[number]

    def Value(self, name: str) -> int:  # noqa: N802
        if name not in self._values:
            raise ValueError(f"Enum {self.name} has no value defined for name {name!r}")
        return self._values[name]

    def keys(self) -> list[str]:
        return list(self._values)

    def values(self) -> list[int]:
        return list(self._values.values())

    def items(self) -> list[tuple[str, int]]:
        return list(self._values.items())
