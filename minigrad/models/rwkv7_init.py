"""RWKV-7 ("x070") configuration, official sizing rules and the official initialisation, in numpy.

Sizing (BlinkDL/RWKV-LM RWKV-v7 train_temp, x070): LoRA ranks are `max(32, round(s / 32) * 32)` with
s = 1.8·√C (decay), 1.8·√C (in-context rate), 1.3·√C (value residual), 0.6·C^0.8 (gate);
e.g. C = 768 gives 64 / 64 / 32 / 128, the sizes of the released 0.1B model.

Initialisation (the official trainer's `__init__` values, then `generate_init_weight`):
- token-shift lerps x_r..x_g = 1 - (i/C)^(p·(1 - l/L)) with p = 0.2, 0.9, 0.7, 0.7, 0.9, 0.2;
  ffn.x_k = 1 - (i/C)^((1 - l/L)^4);
- w0 = -6 + 6 (n/(C-1))^(1 + (l/(L-1))^0.3) + 0.5 + 2.5·zigzag; a0 = -0.19 + 0.3·zigzag + 0.4·linear;
  v0 = 0.73 - 0.4·linear; k_k = 0.71 - 0.1·linear; k_a = 1.02; r_k = -0.04;
- LoRA down-projections (w1, a1, v1, g1) zero, up-projections orthogonal with gain 0.1·√(in/out) (in > out);
- receptance/value orthogonal (gain 1), key orthogonal (gain 0.1), output zero; ffn.key orthogonal,
  ffn.value zero; emb uniform(±1e-4); head orthogonal with gain 0.5·√(V/C) (V > C) else 0.5;
- LayerNorms weight 1 / bias 0; ln_x.weight = ((l + 1)/L)^0.7, ln_x.bias 0.
"""
from dataclasses import dataclass

import numpy as np

from minigrad.kernels.validate import check_int


def _lora_rank(scale):
    return max(32, int(round(scale / 32)) * 32)


@dataclass
class RWKV7Config:
    """Sizes of an RWKV-7 model. None LoRA sizes / ffn_hidden take the official defaults."""
    vocab_size: int
    d_model: int
    n_layer: int
    head_size: int = 64
    d_decay_lora: int = None
    d_aaa_lora: int = None
    d_mv_lora: int = None
    d_gate_lora: int = None
    ffn_hidden: int = None

    def __post_init__(self):
        for name in ("vocab_size", "d_model", "n_layer", "head_size"):   # TypeError for 2.5, True
            setattr(self, name, check_int("RWKV7Config", name, getattr(self, name), 1))
        if self.d_model % self.head_size:
            raise ValueError(f"RWKV7Config: d_model ({self.d_model}) must be a multiple of "
                             f"head_size ({self.head_size})")
        C = self.d_model
        defaults = {"d_decay_lora": _lora_rank(1.8 * C ** 0.5), "d_aaa_lora": _lora_rank(1.8 * C ** 0.5),
                    "d_mv_lora": _lora_rank(1.3 * C ** 0.5), "d_gate_lora": _lora_rank(0.6 * C ** 0.8),
                    "ffn_hidden": 4 * C}
        for name, default in defaults.items():
            value = getattr(self, name)
            setattr(self, name, default if value is None else check_int("RWKV7Config", name, value, 1))

    @property
    def n_head(self):
        return self.d_model // self.head_size

    def param_shapes(self):
        """Yield (name, shape) of every parameter lazily (see `iter_shapes`)."""
        return iter_shapes(self)


def _orthogonal(rng, shape, gain):
    """torch.nn.init.orthogonal_ in numpy: rows (or columns) orthonormal, times `gain`."""
    rows, cols = shape
    flat = rng.standard_normal((rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q *= np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return gain * q


def _lora_up(rng, rank, C):
    gain = (rank / C) ** 0.5 if rank > C else 1.0
    return _orthogonal(rng, (rank, C), 0.1 * gain)


def _time_mix_init(cfg, layer, rng):
    C, N, L = cfg.d_model, cfg.head_size, cfg.n_layer
    ratio_0_to_1 = layer / (L - 1) if L > 1 else 0.0
    ratio_1_to_almost0 = 1.0 - layer / L
    ddd = np.arange(C) / C
    n = np.arange(C)
    linear = n / (C - 1) - 0.5 if C > 1 else np.zeros(C)
    zigzag = ((n % N) - (N - 1) / 2) / ((N - 1) / 2) if N > 1 else np.zeros(C)
    zigzag = zigzag * np.abs(zigzag)
    www = -6 + 6 * (n / max(C - 1, 1)) ** (1 + ratio_0_to_1 ** 0.3)
    vec = lambda v: np.broadcast_to(v, (C,)).reshape(1, 1, C).copy()
    p = {f"x_{c}": vec(1.0 - ddd ** (s * ratio_1_to_almost0))
         for c, s in zip("rwkvag", (0.2, 0.9, 0.7, 0.7, 0.9, 0.2))}
    p["w0"] = vec(www + 0.5 + 2.5 * zigzag)
    p["w1"], p["w2"] = np.zeros((C, cfg.d_decay_lora)), _lora_up(rng, cfg.d_decay_lora, C)
    p["a0"] = vec(-0.19 + 0.3 * zigzag + 0.4 * linear)
    p["a1"], p["a2"] = np.zeros((C, cfg.d_aaa_lora)), _lora_up(rng, cfg.d_aaa_lora, C)
    if layer > 0:
        p["v0"] = vec(0.73 - 0.4 * linear)
        p["v1"], p["v2"] = np.zeros((C, cfg.d_mv_lora)), _lora_up(rng, cfg.d_mv_lora, C)
    p["g1"], p["g2"] = np.zeros((C, cfg.d_gate_lora)), _lora_up(rng, cfg.d_gate_lora, C)
    p["k_k"] = vec(0.71 - 0.1 * linear)
    p["k_a"] = vec(1.02)
    p["r_k"] = np.full((cfg.n_head, N), -0.04)
    p["receptance.weight"] = _orthogonal(rng, (C, C), 1.0)
    p["key.weight"] = _orthogonal(rng, (C, C), 0.1)
    p["value.weight"] = _orthogonal(rng, (C, C), 1.0)
    p["output.weight"] = np.zeros((C, C))
    p["ln_x.weight"] = np.full(C, ((layer + 1) / L) ** 0.7)
    p["ln_x.bias"] = np.zeros(C)
    return p


def official_init(cfg, seed=None, dtype=np.float32):
    """A dict name -> array with the official names, shapes and initial values for `cfg`."""
    rng = np.random.default_rng(seed)
    C, V, L = cfg.d_model, cfg.vocab_size, cfg.n_layer
    ones, zeros = np.ones(C), np.zeros(C)
    out = {"emb.weight": rng.uniform(-1e-4, 1e-4, (V, C))}
    for layer in range(L):
        pre = f"blocks.{layer}."
        norms = ("ln0", "ln1", "ln2") if layer == 0 else ("ln1", "ln2")
        for ln in norms:
            out[pre + ln + ".weight"], out[pre + ln + ".bias"] = ones, zeros
        for name, value in _time_mix_init(cfg, layer, rng).items():
            out[pre + "att." + name] = value
        ddd = np.arange(C) / C
        out[pre + "ffn.x_k"] = (1.0 - ddd ** ((1.0 - layer / L) ** 4)).reshape(1, 1, C)
        out[pre + "ffn.key.weight"] = _orthogonal(rng, (cfg.ffn_hidden, C), 1.0)
        out[pre + "ffn.value.weight"] = np.zeros((C, cfg.ffn_hidden))
    out["ln_out.weight"], out["ln_out.bias"] = ones, zeros
    out["head.weight"] = _orthogonal(rng, (V, C), 0.5 * (V / C) ** 0.5 if V > C else 0.5)
    return {k: np.ascontiguousarray(v, dtype=dtype) for k, v in out.items()}


def expected_shapes(cfg):
    """name -> shape of every parameter of `cfg`, in the official order."""
    return dict(iter_shapes(cfg))


def iter_shapes(cfg):
    """Yield (name, shape) of every parameter of `cfg` lazily, one block at a time."""
    C, H, N = cfg.d_model, cfg.n_head, cfg.head_size
    yield "emb.weight", (cfg.vocab_size, C)
    vec = (1, 1, C)
    for layer in range(cfg.n_layer):
        pre = f"blocks.{layer}."
        shapes = {}
        for ln in (("ln0", "ln1", "ln2") if layer == 0 else ("ln1", "ln2")):
            shapes[pre + ln + ".weight"] = shapes[pre + ln + ".bias"] = (C,)
        att = {f"x_{c}": vec for c in "rwkvag"}
        att.update(w0=vec, w1=(C, cfg.d_decay_lora), w2=(cfg.d_decay_lora, C),
                   a0=vec, a1=(C, cfg.d_aaa_lora), a2=(cfg.d_aaa_lora, C))
        if layer > 0:
            att.update(v0=vec, v1=(C, cfg.d_mv_lora), v2=(cfg.d_mv_lora, C))
        att.update({"g1": (C, cfg.d_gate_lora), "g2": (cfg.d_gate_lora, C), "k_k": vec, "k_a": vec,
                    "r_k": (H, N), "receptance.weight": (C, C), "key.weight": (C, C),
                    "value.weight": (C, C), "output.weight": (C, C), "ln_x.weight": (C,), "ln_x.bias": (C,)})
        shapes.update({pre + "att." + k: v for k, v in att.items()})
        shapes.update({pre + "ffn.x_k": vec, pre + "ffn.key.weight": (cfg.ffn_hidden, C),
                       pre + "ffn.value.weight": (C, cfg.ffn_hidden)})
        yield from shapes.items()
    yield from {"ln_out.weight": (C,), "ln_out.bias": (C,), "head.weight": (cfg.vocab_size, C)}.items()


def config_from_state_dict(arrays):
    """Infer an RWKV7Config from a dict of official-name arrays (KeyError/ValueError if not one)."""
    try:
        V, C = arrays["emb.weight"].shape
        layers = {int(k.split(".")[1]) for k in arrays if k.startswith("blocks.")}
        if not layers:
            raise ValueError("no blocks.{i}.* tensors")
        if max(layers) >= len(layers):  # checked before any range(): blocks.1000000000000.* is one key
            raise ValueError(f"block indices {sorted(layers)[:8]} are not 0..{len(layers) - 1}")
        n_layer = max(layers) + 1
        H, N = arrays["blocks.0.att.r_k"].shape
        cfg = RWKV7Config(
            vocab_size=int(V), d_model=int(C), n_layer=n_layer, head_size=int(N),
            d_decay_lora=int(arrays["blocks.0.att.w1"].shape[1]),
            d_aaa_lora=int(arrays["blocks.0.att.a1"].shape[1]),
            d_mv_lora=int(arrays["blocks.1.att.v1"].shape[1]) if n_layer > 1 else None,
            d_gate_lora=int(arrays["blocks.0.att.g1"].shape[1]),
            ffn_hidden=int(arrays["blocks.0.ffn.key.weight"].shape[0]))
    except KeyError as e:
        raise KeyError(f"RWKV7.from_state_dict: missing {e.args[0]!r}; not an RWKV-7 state dict") from None
    except (ValueError, IndexError) as e:
        raise ValueError(f"RWKV7.from_state_dict: cannot infer the config: {e}") from None
    if layers != set(range(n_layer)):
        raise ValueError(f"RWKV7.from_state_dict: block indices {sorted(layers)} are not 0..{n_layer - 1}")
    return cfg

