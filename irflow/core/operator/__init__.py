"""oneflow.core.operator: the enums of op_conf.proto that programs use (op_conf_pb2)."""
