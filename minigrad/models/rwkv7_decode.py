"""Token-by-token RWKV-7 inference outside autograd: what `RWKV7.generate` runs after the prompt.

A step of one token per row is small (B x C by C x C products), so going through `RWKV7._run`
costs more in building autograd nodes and re-checking every weight's shape and dtype on every
call than in arithmetic. `RecurrentDecoder` checks nothing per token: it reads each layer's weights
once (LoRA layers inside the fused nodes as their W + s B A) and calls the same forward functions the autograd
nodes call (`ops.rwkv7.time_mix_forward`, `channel_mix_forward`, `layer_norm_forward`,
`add_layer_norm_forward`) in the same order, so its logits are those of `_run`, bit for bit.
"""
from minigrad.nn.lora import fused_weight
from minigrad.ops.rwkv7 import (
    add_layer_norm_forward,
    channel_mix_forward,
    layer_norm_forward,
    time_mix_forward,
)
from minigrad.tensor import Tensor


def _ln(module):
    return module.weight.data, module.bias.data, module.eps


class RecurrentDecoder:
    """decoder = RecurrentDecoder(model, state); logits = decoder.step(ids (B,)) -> (B, V).

    `state` is RWKV7's (one (att_shift, wkv, ffn_shift) tuple of Tensors per layer, for B rows); it
    is copied, and the copy advances one token per `step`. The caller guarantees what `_run`
    checks: ids in [0, vocab_size), a model without forward hooks, no gradients wanted, and weights
    that do not change while the decoder lives (it holds their arrays)."""

    def __init__(self, model, state):
        blocks = list(model.blocks)
        self.head_size = model.config.head_size
        self.emb = model.emb.weight.data
        self.ln0, self.ln1 = _ln(blocks[0].ln0), _ln(blocks[0].ln1)
        self.layers = []
        for i, block in enumerate(blocks):
            next_ln = blocks[i + 1].ln1 if i + 1 < len(blocks) else model.ln_out
            att, ffn = block.att, block.ffn
            self.layers.append((att.layer_id, {n: p.data for n, p in att._params().items()}, _ln(block.ln2),
                                ffn.x_k.data, fused_weight(ffn.key).data, fused_weight(ffn.value).data,
                                _ln(next_ln)))
        self.head = model.head      # called as the module: a LoRA head adds its B A x branch, as in _run
        self.state = [[s.data.copy() for s in layer] for layer in state]

    def step(self, ids):
        """Advance every row by its token ids (B,) int; returns the next-token logits (B, V)."""
        B, C = len(ids), self.emb.shape[1]          # (not -1: B may be 0)
        x, _, _ = layer_norm_forward(self.emb[ids].reshape(B, 1, C), *self.ln0)
        h, _, _ = layer_norm_forward(x, *self.ln1)
        v_first = None
        for state, (layer_id, p, ln2, x_k, key, value, next_ln) in zip(self.state, self.layers):
            dx, state[0], state[1], v, _ = time_mix_forward(h, state[0], state[1], v_first, p, layer_id,
                                                            self.head_size)
            if layer_id == 0:
                v_first = v
            x, h, _, _ = add_layer_norm_forward(x, dx, *ln2)
            dx, state[2], _ = channel_mix_forward(h, state[2], x_k, key, value)
            x, h, _, _ = add_layer_norm_forward(x, dx, *next_ln)
        return self.head(Tensor(h.reshape(B, C))).data

    def tensors(self):
        """The current state as RWKV7 takes it: a list of (att_shift, wkv, ffn_shift) Tensors."""
        return [tuple(Tensor(s) for s in layer) for layer in self.state]


__all__ = ["RecurrentDecoder"]
