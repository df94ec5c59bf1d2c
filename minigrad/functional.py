"""F.*: the functional API model code calls. Each op family registers itself with one import line."""
from minigrad.ops.activations import elu, glu, leaky_relu, logsigmoid  # noqa: F401
from minigrad.ops.api import embedding, gelu, log_softmax, pad, relu, sigmoid, silu, softmax, softplus, tanh  # noqa: F401,E501
from minigrad.ops.dropout import dropout  # noqa: F401
from minigrad.ops.fused_gpt import causal_attention, cross_entropy, rms_norm, rope, swiglu  # noqa: F401,E501
from minigrad.ops.linear import linear  # noqa: F401
from minigrad.ops.losses import (  # noqa: F401
    binary_cross_entropy_with_logits,
    huber_loss,
    kl_div,
    l1_loss,
    mse_loss,
    nll_loss,
    smooth_l1_loss,
)
from minigrad.ops.normalize import cosine_similarity, normalize  # noqa: F401
from minigrad.ops.one_hot import one_hot  # noqa: F401
from minigrad.ops.rwkv7 import layer_norm, rwkv7_channel_mix, rwkv7_time_mix, wkv7  # noqa: F401
from minigrad.ops.sdp_attention import scaled_dot_product_attention  # noqa: F401
