"""F.*: the functional API model code calls. Each op family registers itself with one import line."""
import numpy as np

from minigrad.kernels.validate import check_finite_scalar
from minigrad.ops.activations import (  # noqa: F401
    elu,
    glu,
    hardtanh,
    leaky_relu,
    logsigmoid,
    mish,
    prelu,
    relu6,
    softmin,
)
from minigrad.ops.api import embedding, gelu, log_softmax, pad, relu, sigmoid, silu, softmax, softplus, tanh  # noqa: F401,E501
from minigrad.ops.batch_group_norm import batch_norm, group_norm, instance_norm  # noqa: F401
from minigrad.ops.conv import conv1d, conv2d  # noqa: F401
from minigrad.ops.dropout import dropout  # noqa: F401
from minigrad.ops.fused_gpt import causal_attention, cross_entropy, rms_norm, rope, swiglu  # noqa: F401,E501
from minigrad.ops.linear import linear  # noqa: F401
from minigrad.ops.losses import (  # noqa: F401
    binary_cross_entropy,
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
from minigrad.ops.pooling import (  # noqa: F401
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_max_pool1d,
    adaptive_max_pool2d,
    avg_pool1d,
    avg_pool2d,
    max_pool1d,
    max_pool2d,
)
from minigrad.ops.rwkv7 import layer_norm as _fused_layer_norm
from minigrad.ops.rwkv7 import rwkv7_channel_mix, rwkv7_time_mix, wkv7  # noqa: F401
from minigrad.ops.sdp_attention import scaled_dot_product_attention  # noqa: F401
from minigrad.tensor import Tensor


def _is_shape(s):
    if isinstance(s, (int, np.integer)) and not isinstance(s, (bool, np.bool_)):
        return True
    return isinstance(s, (tuple, list)) and all(
        isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in s)


_UNSET = object()     # tells layer_norm(x, w, b, eps=None) (an error) from layer_norm(x, w, b)


def layer_norm(input, normalized_shape, weight=None, bias=_UNSET, eps=1e-5):  # noqa: A002
    """torch.nn.functional.layer_norm: y = (x - mean) / sqrt(var + eps) * weight + bias, mean and
    (biased) var over the trailing dims `normalized_shape` (an int or a sequence); weight and bias
    (normalized_shape) optional. One normalised dim with both weight and bias runs the fused kernel
    (`minigrad.ops.rwkv7.layer_norm`); other cases are composed of differentiable ops.

    minigrad's earlier form `layer_norm(x, weight, bias, eps=1e-5)` (weight and bias Tensors of
    shape (C,)) still works: a Tensor as the second argument selects it.
    """
    if not _is_shape(normalized_shape):          # layer_norm(x, weight, bias[, eps])
        return _fused_layer_norm(input, normalized_shape, weight, eps if bias is _UNSET else bias)
    bias = None if bias is _UNSET else bias
    if np.ndim(normalized_shape) == 0:
        shape = (int(normalized_shape),)
    else:
        shape = tuple(int(v) for v in normalized_shape)
    if not isinstance(input, Tensor):
        raise TypeError(f"layer_norm: input must be a Tensor, got {type(input).__name__}")
    if not input.is_floating_point():
        raise TypeError(f"layer_norm: input must be float32 or float64, got {input.dtype}")
    k = len(shape)
    if k == 0 or input.ndim < k or tuple(input.shape[input.ndim - k:]) != shape:
        raise ValueError(f"layer_norm: normalized_shape {shape} does not match the trailing dims of input "
                         f"{tuple(input.shape)}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (not isinstance(t, Tensor) or tuple(t.shape) != shape):
            raise ValueError(f"layer_norm: {name} must be None or a Tensor of shape {shape}, got "
                             f"{tuple(t.shape) if isinstance(t, Tensor) else type(t).__name__}")
    eps = check_finite_scalar("layer_norm", "eps", eps, positive=True)
    if k == 1 and weight is not None and bias is not None:
        return _fused_layer_norm(input, weight, bias, eps)
    dims = tuple(range(input.ndim - k, input.ndim))
    centred = input - input.mean(dim=dims, keepdim=True)
    y = centred * ((centred * centred).mean(dim=dims, keepdim=True) + eps).rsqrt()
    if weight is not None:
        y = y * weight
    return y if bias is None else y + bias
