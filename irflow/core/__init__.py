"""OneFlow's `oneflow.core` protobuf modules that programs import beside the job API, in pure Python.

`irflow.core.record.record_pb2` writes and reads OFRecord files;
`irflow.core.common.data_type_pb2` and `irflow.core.operator.op_conf_pb2`
offer the enum values programs take from them (DataType, ActivationType).
"""
