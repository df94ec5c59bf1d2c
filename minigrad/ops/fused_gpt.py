"""The fused kernels a Llama-style GPT uses, one family per file; re-exported for F.*."""
from minigrad.ops.attention import attention_inference, causal_attention  # noqa: F401
from minigrad.ops.cross_entropy import cross_entropy  # noqa: F401
from minigrad.ops.rms_norm import rms_norm  # noqa: F401
from minigrad.ops.rope import rope, split_qkv_rope  # noqa: F401
from minigrad.ops.swiglu import swiglu, swiglu_packed  # noqa: F401
