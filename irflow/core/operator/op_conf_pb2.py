"""OneFlow's `oneflow.core.operator.op_conf_pb2`, as far as programs use it beside the job API: the
ActivationType enum (`op_conf_util.kRelu`, OneFlow-Benchmark's CNNs). The operator configuration messages
are how OneFlow's own Python builds ops; irflow traces job ops instead, so it has none of them."""

from irflow.core.enum_type import EnumType

ActivationType = EnumType("ActivationType", {"kNone": 0, "kTanH": 1, "kSigmoid": 2, "kRelu": 3})
globals().update(ActivationType.items())
