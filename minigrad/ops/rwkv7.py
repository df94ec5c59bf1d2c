"""RWKV-7 fused ops: WKV7 recurrence, the whole time-mix block, channel-mix, LayerNorm.

API (see docs/rwkv7_kernels.md for the maths and backward derivations). Work in progress:
the signatures below are final; the bodies are being filled in.
"""


def wkv7(r, w, k, v, a, b, state=None):
    """(B,T,H,N) x6, state (B,H,N,N) or None -> (y (B,T,H,N), final_state (B,H,N,N))."""
    raise NotImplementedError


def rwkv7_time_mix(x, params, shift_state=None, wkv_state=None, v_first=None, layer_id=0, head_size=64):
    """Whole x070 time-mix block -> (out, new_shift_state, new_wkv_state, v_first_out)."""
    raise NotImplementedError


def rwkv7_channel_mix(x, shift_state, x_k, key_weight, value_weight):
    """Channel-mix -> (out (B,T,C), new_shift_state (B,C))."""
    raise NotImplementedError


def layer_norm(x, weight, bias, eps=1e-5):
    """LayerNorm over the last dim."""
    raise NotImplementedError
