"""Model zoo: GPT (Llama-style) and RWKV-7; TextStreamer prints a generation as it grows."""
from minigrad.models.gpt import GPT, GPTConfig  # noqa: F401
from minigrad.models.rwkv7 import RWKV7, RWKV7Config  # noqa: F401
from minigrad.models.sampling import TextStreamer  # noqa: F401
