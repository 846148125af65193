"""OneFlow's `oneflow.core.common.data_type_pb2`: the DataType enum of data_type.proto."""

from irflow.core.enum_type import EnumType

DataType = EnumType("DataType", {
    "kInvalidDataType": 0, "kChar": 1, "kFloat": 2, "kDouble": 3, "kInt8": 4, "kInt32": 5, "kInt64": 6,
    "kUInt8": 7, "kOFRecord": 8, "kFloat16": 9, "kTensorBuffer": 10, "kBFloat16": 11, "kBool": 12,
    "kUInt16": 13, "kUInt32": 14, "kUInt64": 15, "kUInt128": 16, "kInt16": 17, "kInt128": 18,
    "kComplex32": 19, "kComplex64": 20, "kComplex128": 21,
})  # fmt: skip
globals().update(DataType.items())
