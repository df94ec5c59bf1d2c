"""RWKV-7 ("x070") language model on minigrad's fused kernels.

    emb -> ln0 -> n_layer x [ln1 -> time mix -> +residual; ln2 -> channel mix -> +residual] -> ln_out -> head

Each time mix is one fused autograd node (`F.rwkv7_time_mix`: token shift, projections, LoRAs, WKV7,
GroupNorm, bonus, gate, output), each channel mix another (`F.rwkv7_channel_mix`). Layer 0's value `v`
feeds the value residual of every later layer, token by token, so it is never carried across calls.
Each residual add runs fused with the LayerNorm after it (ln2, the next block's ln1, ln_out:
`add_layer_norm`), as GPT does with its RMSNorms.

The recurrent state of a batch is a list with one `(att_shift (B, C), wkv (B, H, N, N), ffn_shift (B, C))`
tuple of Tensors per layer. Passing it back in continues the sequence exactly: a sequence processed whole,
in chunks, or one token at a time gives the same logits, and gradients flow through a carried state.
Parameter names and shapes are those of the official checkpoints (see `rwkv7_init.py`).
"""
import numpy as np

from minigrad import functional as F
from minigrad.autograd import is_grad_enabled, no_grad
from minigrad.kernels.validate import check_index, check_int
from minigrad.models.rwkv7_decode import RecurrentDecoder
from minigrad.models.rwkv7_init import RWKV7Config, config_from_state_dict, expected_shapes, official_init
from minigrad.models.rwkv7_io import load_rwkv7, save_rwkv7
from minigrad.models.sampling import Sampler, check_new_tokens, left_padding, parameter_bytes
from minigrad.nn import Embedding, LayerNorm, Linear, Module, ModuleList, Parameter
from minigrad.nn.init import no_init
from minigrad.nn.lora import LoraLinear, frozen_adapters, fused_weight
from minigrad.ops.rwkv7 import add_layer_norm
from minigrad.tensor import Tensor
from minigrad.threads import decode_blas
from minigrad.utils.checkpoint import GradientCheckpointingMixin, checkpoint

__all__ = ["RWKV7Config", "RWKV7"]


def _param(shape, dtype):
    return Parameter(np.zeros(shape, dtype=dtype))


class _GroupNormAffine(Module):
    """Holds the per-channel affine of the time mix's per-head GroupNorm (`att.ln_x`)."""

    def __init__(self, C, dtype):
        super().__init__()
        self.weight = _param((C,), dtype)
        self.bias = _param((C,), dtype)


class RWKV7TimeMix(Module):
    """The x070 time mix as one fused node; parameter names as in the official checkpoints."""

    def __init__(self, cfg, layer_id, dtype):
        super().__init__()
        C = cfg.d_model
        self.layer_id, self.head_size = layer_id, cfg.head_size
        vec = (1, 1, C)  # per-channel parameters keep the official (1, 1, C) shape
        for name in ("x_r", "x_w", "x_k", "x_v", "x_a", "x_g", "w0", "a0"):
            setattr(self, name, _param(vec, dtype))
        self.w1, self.w2 = _param((C, cfg.d_decay_lora), dtype), _param((cfg.d_decay_lora, C), dtype)
        self.a1, self.a2 = _param((C, cfg.d_aaa_lora), dtype), _param((cfg.d_aaa_lora, C), dtype)
        if layer_id > 0:
            self.v0 = _param(vec, dtype)
            self.v1, self.v2 = _param((C, cfg.d_mv_lora), dtype), _param((cfg.d_mv_lora, C), dtype)
        self.g1, self.g2 = _param((C, cfg.d_gate_lora), dtype), _param((cfg.d_gate_lora, C), dtype)
        self.k_k, self.k_a = _param(vec, dtype), _param(vec, dtype)
        self.r_k = _param((cfg.n_head, cfg.head_size), dtype)
        for name in ("receptance", "key", "value", "output"):
            setattr(self, name, Linear(C, C, bias=False, dtype=dtype))
        self.ln_x = _GroupNormAffine(C, dtype)

    def forward(self, x, shift_state, wkv_state, v_first):
        """x (B, T, C) -> (out, new_shift_state, new_wkv_state, v_first)."""
        return F.rwkv7_time_mix(x, self._params(), shift_state, wkv_state, v_first,
                                layer_id=self.layer_id, head_size=self.head_size)

    def _params(self):
        """{name: Parameter} as named_parameters() gives it (own ones, then one level of children),
        without its generic traversal: this runs once per layer per call, also per decoded token.
        A LoRA projection's weight is its W + s B A (nn.lora.fused_weight)."""
        params = {name: p for name, p in self._parameters.items() if p is not None}
        for child_name, child in self._modules.items():
            for name, p in child._parameters.items():
                if p is not None:
                    params[f"{child_name}.{name}"] = p
            if isinstance(child, LoraLinear):
                params[f"{child_name}.weight"] = child.fused_weight()
        return params


class RWKV7ChannelMix(Module):
    """Token-shift lerp, relu(x W_k)², W_v — one fused node."""

    def __init__(self, cfg, dtype):
        super().__init__()
        C = cfg.d_model
        self.x_k = _param((1, 1, C), dtype)
        self.key = Linear(C, cfg.ffn_hidden, bias=False, dtype=dtype)
        self.value = Linear(cfg.ffn_hidden, C, bias=False, dtype=dtype)

    def forward(self, x, shift_state):
        return F.rwkv7_channel_mix(x, shift_state, self.x_k, fused_weight(self.key), fused_weight(self.value))


class RWKV7Block(Module):
    def __init__(self, cfg, layer_id, dtype):
        super().__init__()
        C = cfg.d_model
        if layer_id == 0:
            self.ln0 = LayerNorm(C, dtype=dtype)
        self.ln1 = LayerNorm(C, dtype=dtype)
        self.ln2 = LayerNorm(C, dtype=dtype)
        self.att = RWKV7TimeMix(cfg, layer_id, dtype)
        self.ffn = RWKV7ChannelMix(cfg, dtype)

    def forward(self, x, layer_state, v_first):
        att_shift, wkv, ffn_shift = layer_state
        dx, att_shift, wkv, v_first = self.att(self.ln1(x), att_shift, wkv, v_first)
        x = x + dx
        dx, ffn_shift = self.ffn(self.ln2(x), ffn_shift)
        return x + dx, (att_shift, wkv, ffn_shift), v_first

    def forward_normed(self, x, h, next_ln, layer_state, v_first):
        """The same block on the residual stream x with h = ln1(x) already computed; returns
        (x', next_ln(x'), state, v_first), each residual add fused with the LayerNorm after it."""
        att_shift, wkv, ffn_shift = layer_state
        dx, att_shift, wkv, v_first = self.att(h, att_shift, wkv, v_first)
        x, h = _add_norm(self.ln2, x, dx)
        dx, ffn_shift = self.ffn(h, ffn_shift)
        x, h = _add_norm(next_ln, x, dx)
        return x, h, (att_shift, wkv, ffn_shift), v_first


def _norm(ln, x):
    return F.layer_norm(x, ln.weight, ln.bias, ln.eps)


def _add_norm(ln, x, r):
    """(x + r, ln(x + r)) in one pass."""
    return add_layer_norm(x, r, ln.weight, ln.bias, ln.eps)


class RWKV7(GradientCheckpointingMixin, Module):
    """RWKV-7 language model. `model(idx)` -> logits (B, T, vocab_size).

    `model(idx, state=state, return_state=True)` -> (logits, new_state) continues from `state`
    (None = the start of the sequences). `RWKV7(config, dtype=float64, seed=0)` for an fp64 model.
    `gradient_checkpointing_enable()`: a forward with grad enabled checkpoints each block, its state
    and v_first passing in and out as arguments and outputs (minigrad.utils.checkpoint).
    """

    def __init__(self, config, dtype=np.float32, seed=None):
        super().__init__()
        self._build(config, dtype)
        self._load_arrays(official_init(config, seed=seed, dtype=self.dtype))

    def _build(self, config, dtype):
        if not isinstance(config, RWKV7Config):
            raise TypeError(f"RWKV7: config must be an RWKV7Config, got {type(config).__name__}")
        dtype = np.dtype(dtype)
        if dtype not in (np.float32, np.float64):
            raise TypeError(f"RWKV7: dtype must be float32 or float64, got {dtype}")
        self.config = config
        C, V = config.d_model, config.vocab_size
        self.emb = Embedding(V, C, dtype=dtype)
        self.blocks = ModuleList([RWKV7Block(config, i, dtype) for i in range(config.n_layer)])
        self.ln_out = LayerNorm(C, dtype=dtype)
        self.head = Linear(C, V, bias=False, dtype=dtype)

    @property
    def dtype(self):
        return self.head.weight.dtype

    # ---- weights -----------------------------------------------------------------------------
    @classmethod
    def from_state_dict(cls, state_dict):
        """Build a model from a dict name -> array (official names; layer 0's v0/v1/v2 are ignored).

        The config is inferred from the shapes; the dtype is that of `emb.weight` (fp32 if not fp64).
        """
        arrays = {k: np.asarray(v.data if isinstance(v, Tensor) else v) for k, v in state_dict.items()}
        config = config_from_state_dict(arrays)
        dtype = np.float64 if arrays["emb.weight"].dtype == np.float64 else np.float32
        arrays = cls._checked(config, arrays)  # before _build allocates what the shapes declare
        model = cls.__new__(cls)
        Module.__init__(model)
        with no_init():     # neither the official nor nn's init: every parameter is overwritten next
            model._build(config, dtype)
        model._load_arrays(arrays)
        return model

    def _load_arrays(self, arrays):
        """Copy arrays already checked against the config (`_checked`, or official_init's own) in at
        the model's dtype."""
        self.load_state_dict({k: np.asarray(v, dtype=self.dtype) for k, v in arrays.items()})

    @staticmethod
    def _checked(config, arrays):
        """`arrays` less layer 0's v0/v1/v2, after checking names, shapes and kinds against `config`
        (KeyError / ValueError / TypeError naming the tensor)."""
        ignored = {f"blocks.0.att.{n}" for n in ("v0", "v1", "v2")}
        arrays = {k: v for k, v in arrays.items() if k not in ignored}
        shapes = expected_shapes(config)
        missing = sorted(set(shapes) - set(arrays))
        unexpected = sorted(set(arrays) - set(shapes))
        if missing or unexpected:
            raise KeyError(f"RWKV7: state dict mismatch; missing {missing[:8]}, unexpected {unexpected[:8]}")
        for name, shape in shapes.items():
            value = arrays[name]
            if value.shape != shape:
                raise ValueError(f"RWKV7: {name} has shape {value.shape}, expected {shape}")
            if not np.issubdtype(value.dtype, np.floating):
                raise TypeError(f"RWKV7: {name} must be floating point, got {value.dtype}")
        return arrays

    from_pretrained = classmethod(load_rwkv7)  # RWKV7.from_pretrained(path): official .pth / .safetensors
    save_pretrained = save_rwkv7  # model.save_pretrained(path): safetensors, or torch for .pth/.pt/.bin

    # ---- forward -----------------------------------------------------------------------------
    def _check_idx(self, idx):
        arr = idx.data if isinstance(idx, Tensor) else np.asarray(idx)
        if arr.ndim != 2:
            raise ValueError(f"RWKV7: idx must have shape (B, T), got {tuple(arr.shape)}")
        if arr.shape[1] == 0:
            raise ValueError("RWKV7: idx has no tokens (T = 0)")
        return check_index("RWKV7", "idx", arr, self.config.vocab_size)

    def _check_state(self, state, B):
        cfg = self.config
        if not isinstance(state, (list, tuple)) or len(state) != cfg.n_layer:
            raise ValueError(f"RWKV7: state must be a list of {cfg.n_layer} (att_shift, wkv, ffn_shift) "
                             f"tuples, as returned with return_state=True")
        C, H, N = cfg.d_model, cfg.n_head, cfg.head_size
        want = ((B, C), (B, H, N, N), (B, C))
        for i, layer_state in enumerate(state):
            if not isinstance(layer_state, (list, tuple)):
                raise TypeError(f"RWKV7: state[{i}] must be an (att_shift, wkv, ffn_shift) tuple, "
                                f"got {type(layer_state).__name__}")
            if len(layer_state) != 3:
                raise ValueError(f"RWKV7: state[{i}] must be (att_shift, wkv, ffn_shift)")
            for name, s, shape in zip(("att_shift", "wkv", "ffn_shift"), layer_state, want):
                if not isinstance(s, Tensor):
                    raise TypeError(f"RWKV7: state[{i}].{name} must be a Tensor, got {type(s).__name__}")
                if s.shape != shape:
                    raise ValueError(f"RWKV7: state[{i}].{name} has shape {s.shape}, expected {shape}")
                if s.dtype != self.dtype:
                    raise TypeError(f"RWKV7: state[{i}].{name} is {s.dtype} but the model is {self.dtype}")

    def forward(self, idx, state=None, return_state=False):
        """idx (B, T) int token ids -> logits (B, T, V) [, new state]."""
        idx = self._check_idx(idx)
        if state is not None:
            self._check_state(state, idx.shape[0])
        logits, new_state = self._run(idx, state)
        return (logits, new_state) if return_state else logits

    def _run(self, idx, state):
        """forward on validated inputs: idx int64 (B, T), state a valid state or None."""
        if state is None:
            state = [(None, None, None)] * self.config.n_layer
        blocks = list(self.blocks)
        v_first = None
        new_state = []
        ckpt = self._checkpoint_kwargs                 # None unless gradient_checkpointing_enable()
        if ckpt is not None and not is_grad_enabled():
            ckpt = None
        if self.has_hooks():        # every block and norm called as a module, so that its hooks fire
            x = blocks[0].ln0(self.emb(idx))
            for block, layer_state in zip(blocks, state):
                args = (x, layer_state, v_first)
                x, layer_state, v_first = block(*args) if ckpt is None else checkpoint(block, *args, **ckpt)
                new_state.append(layer_state)
            return self.head(self.ln_out(x)), new_state
        x = _norm(blocks[0].ln0, self.emb(idx))
        h = _norm(blocks[0].ln1, x)
        for i, (block, layer_state) in enumerate(zip(blocks, state)):
            next_ln = blocks[i + 1].ln1 if i + 1 < len(blocks) else self.ln_out
            if ckpt is None:
                x, h, layer_state, v_first = block.forward_normed(x, h, next_ln, layer_state, v_first)
            else:
                x, h, layer_state, v_first = checkpoint(block.forward_normed, x, h, next_ln, layer_state,
                                                        v_first, **ckpt)
            new_state.append(layer_state)
        return self.head(h), new_state

    def init_state(self, batch_size):
        """The all-zeros state (equivalent to state=None)."""
        cfg, dt = self.config, self.dtype
        batch_size = check_int("RWKV7.init_state", "batch_size", batch_size, 0)
        z = lambda *shape: Tensor(np.zeros(shape, dtype=dt))
        return [(z(batch_size, cfg.d_model), z(batch_size, cfg.n_head, cfg.head_size, cfg.head_size),
                 z(batch_size, cfg.d_model)) for _ in range(cfg.n_layer)]

    # ---- generation --------------------------------------------------------------------------
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, top_p=None, seed=None, *,
                 eos_token_id=None, pad_token_id=None, repetition_penalty=1.0, min_p=None,
                 attention_mask=None, streamer=None, suppress_tokens=None):
        """Continue each row of idx (B, T) by up to `max_new_tokens` sampled tokens -> (B, T + new).

        The prompt runs in parallel once; then one token at a time through the recurrent state, so
        memory stays constant per token (no cache grows). temperature 0 means greedy (argmax).
        The sampling controls (top_k, top_p, min_p, repetition_penalty, suppress_tokens, eos_token_id,
        pad_token_id), the early stop once every row has sampled an eos id, attention_mask
        (left-padded prompts of different lengths: each row generates what its unpadded prompt alone
        would) and streamer are those of GPT.generate (Hugging Face semantics,
        minigrad.models.sampling). With padded rows the
        prompt runs per group of rows of one length (`_prefill_left_padded`). Returns an int64 Tensor.
        """
        max_new_tokens = check_new_tokens(max_new_tokens)
        tokens = self._check_idx(idx)
        pads = left_padding(attention_mask, tokens.shape)
        sampler = Sampler(tokens, max_new_tokens, self.config.vocab_size, temperature, top_k, top_p, seed,
                          eos_token_id=eos_token_id, pad_token_id=pad_token_id,
                          repetition_penalty=repetition_penalty, min_p=min_p, pads=pads, streamer=streamer,
                          suppress_tokens=suppress_tokens)
        was_training = self.training
        self.eval()                                 # as GPT.generate: no (LoRA) dropout
        try:
            with no_grad(), frozen_adapters(self):  # LoRA weights W + s B A built once, not per token
                if not sampler.done:
                    last, state = self._prefill(tokens, pads)
                    decode = self._decoder(state)
                    with decode_blas(parameter_bytes(self)):
                        while sampler.push(last):
                            last = decode(sampler.last)
        finally:
            self.train(was_training)
        sampler.finish()
        return Tensor(sampler.sequences())

    def _decoder(self, state):
        """step(ids (B,)) -> next-token logits (B, V), advancing `state` one token: the lean
        RecurrentDecoder (same logits as `_run`, without autograd nodes or per-token weight checks),
        or `_run` itself when forward hooks must fire."""
        if not self.has_hooks():
            return RecurrentDecoder(self, state).step
        carried = [state]

        def step(ids):
            logits, carried[0] = self._run(ids[:, None], carried[0])
            return logits.data[:, -1]
        return step

    def _prefill(self, tokens, pads):
        """The prompt tokens (B, T) through the model from the start -> (next-token logits (B, V) of
        each row, state); pads (B,) or None: see _prefill_left_padded."""
        if pads is not None:
            return self._prefill_left_padded(tokens, pads)
        logits, state = self._run(tokens, None)
        return logits.data[:, -1], state

    def _prefill_left_padded(self, tokens, pads):
        """`_prefill` of rows left-padded by pads (B,) columns: a recurrence has no mask, so each row's
        tokens without its pads run from the zero state, the rows of one length as one batch, and
        their logits and states are gathered in the batch's order: each row exactly as alone."""
        B, T = tokens.shape
        lengths = T - pads
        last = np.empty((B, self.config.vocab_size), self.dtype)
        state = self.init_state(B)
        for n in np.unique(lengths):
            rows = np.flatnonzero(lengths == n)
            logits, group_state = self._run(tokens[rows, T - n:], None)
            last[rows] = logits.data[:, -1]
            for layer, group_layer in zip(state, group_state):
                for whole, part in zip(layer, group_layer):
                    whole.data[rows] = part.data
        return last, state
