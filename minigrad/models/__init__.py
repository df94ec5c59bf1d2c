"""Model zoo: GPT (Llama-style) and RWKV-7."""
from minigrad.models.gpt import GPT, GPTConfig  # noqa: F401
from minigrad.models.rwkv7 import RWKV7, RWKV7Config  # noqa: F401
