"""F.*: the functional API model code calls. Each op family registers itself with one import line."""
from minigrad.ops.api import embedding, gelu, log_softmax, pad, relu, sigmoid, silu, softmax, softplus, tanh  # noqa: F401,E501
from minigrad.ops.fused_gpt import causal_attention, cross_entropy, rms_norm, rope, swiglu  # noqa: F401,E501
from minigrad.ops.linear import linear  # noqa: F401
from minigrad.ops.rwkv7 import layer_norm, rwkv7_channel_mix, rwkv7_time_mix, wkv7  # noqa: F401
