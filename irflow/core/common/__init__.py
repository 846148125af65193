"""oneflow.core.common: the DataType enum (data_type_pb2)."""
