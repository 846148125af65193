"""oneflow.core.record: the OFRecord messages (record_pb2)."""
