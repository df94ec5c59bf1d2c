"""LoRA fine-tuning (Hu et al. 2021) with Hugging Face PEFT's names, defaults and adapter files.

    apply_lora(model, LoraConfig(r=8, lora_alpha=16, target_modules=("q_proj", "v_proj")))
    opt = optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    ...                                   # train: only the adapters get grads
    save_adapter(model, "runs/adapter")   # adapter_config.json + adapter_model.safetensors (PEFT's)
    merge_lora(model)                     # plain Linear layers again, W <- W + s B A

Each target `nn.Linear` is replaced in place by a `LoraLinear` that keeps the Linear's own weight W
(out, in) and bias b (frozen; their state_dict keys do not change) and adds A = `lora_A.weight`
(r, in), kaiming-uniform (a = sqrt(5)), and B = `lora_B.weight` (out, r), zeros, so that at first
the model computes what it did:

    y = x Wᵀ + b + s · dropout(x) Aᵀ Bᵀ,    s = lora_alpha / r   (lora_alpha / sqrt(r) with use_rslora)

Models that multiply by a layer's weight inside a fused op instead of calling it (GPT's stacked
q/k/v and gate/up projections, RWKV-7's time mix and channel mix) read it through `fused_weight`:
W for a Linear, W + s B A for a LoRA layer, built differentiably each call (out·in·r flops; the
fused op's weight gradient then flows into A and B). That is exact while dropout is inactive. With
lora_dropout > 0 in training, x is dropped on the LoRA branch only, which no weight can express:
`needs_call(layer)` is then True and the model calls the layer as a module instead (GPT's packed
projections do); `fused_weight` raises rather than silently skip the dropout.
"""
import contextlib
import json
import math
import os
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from minigrad.autograd import no_grad
from minigrad.io import atomic_write_bytes, load_safetensors, save_safetensors
from minigrad.kernels.validate import check_bool, check_finite_scalar, check_int
from minigrad.nn.dropout import Dropout
from minigrad.nn.linear import Identity, Linear
from minigrad.nn.module import Module
from minigrad.ops.linear import linear
from minigrad.tensor import Tensor

__all__ = ["LoraConfig", "LoraLinear", "apply_lora", "get_peft_model", "lora_layers", "merge_lora",
           "unload_lora", "disable_adapters", "lora_state_dict", "merged_state_dict", "load_lora_state_dict",
           "save_adapter", "load_adapter", "print_trainable_parameters", "fused_weight", "needs_call",
           "adapter_record", "apply_adapter_record", "adapter_names"]

CONFIG_NAME = "adapter_config.json"
WEIGHTS_NAME = "adapter_model.safetensors"
PEFT_PREFIX = "base_model.model."        # PEFT's names: PeftModel.base_model (LoraModel).model
ALL_LINEAR = "all-linear"                # PEFT's shorthand: every Linear but the output head
OUTPUT_HEADS = ("lm_head", "head")       # GPT's and RWKV-7's output heads, left out of all-linear
ADAPTER_PARTS = ("lora_A", "lora_B")
# PEFT's init_lora_weights values that leave the base weights alone (pissa, olora, loftq, corda ...
# rewrite W when PEFT loads the adapter: an adapter made with them does not fit the plain base model)
PLAIN_INITS = (True, False, "gaussian", "eva", "orthogonal")


@dataclass
class LoraConfig:
    """PEFT's LoraConfig, the fields minigrad implements.

    target_modules: names matched as PEFT does: a list entry matches a module named exactly so or
    ending in "." + entry ("q_proj", "layers.0.self_attn.q_proj"); a string is a regex the whole
    name must match; "all-linear" is every Linear but the output head (lm_head / head).
    bias: only "none" (biases stay frozen). task_type is only written to adapter_config.json."""

    r: int = 8
    lora_alpha: float = 16
    lora_dropout: float = 0.0
    target_modules: object = ("q_proj", "v_proj")
    bias: str = "none"
    use_rslora: bool = False
    init_lora_weights: bool = True
    task_type: str = None

    def __post_init__(self):
        where = "LoraConfig"
        self.r = check_int(where, "r", self.r, 1)
        alpha = check_finite_scalar(where, "lora_alpha", self.lora_alpha)
        self.lora_alpha = int(alpha) if alpha.is_integer() else alpha     # PEFT writes an int
        self.lora_dropout = check_finite_scalar(where, "lora_dropout", self.lora_dropout)
        if not 0.0 <= self.lora_dropout < 1.0:
            raise ValueError(f"{where}: lora_dropout must be in [0, 1), got {self.lora_dropout}")
        self.target_modules = _check_targets(self.target_modules)
        if self.bias != "none":
            raise ValueError(f"{where}: bias={self.bias!r} is not supported (biases stay frozen); use 'none'")
        self.use_rslora = check_bool(where, "use_rslora", self.use_rslora)
        self.init_lora_weights = check_bool(where, "init_lora_weights", self.init_lora_weights)
        if self.task_type is not None and not isinstance(self.task_type, str):
            raise TypeError(f"{where}: task_type must be a string or None, got {self.task_type!r}")

    @property
    def scaling(self):
        """s = lora_alpha / r, or lora_alpha / sqrt(r) with use_rslora."""
        return self.lora_alpha / (math.sqrt(self.r) if self.use_rslora else self.r)


def _check_targets(targets):
    """A regex string, or a tuple of non-empty names (from any non-empty sequence of strings)."""
    if isinstance(targets, str):
        if not targets:
            raise ValueError("LoraConfig: target_modules is an empty string")
        try:
            re.compile(targets)
        except re.error as e:
            raise ValueError(f"LoraConfig: target_modules {targets!r} is not a valid regex: {e}") from None
        return targets
    try:
        names = tuple(targets)
    except TypeError:
        raise TypeError(f"LoraConfig: target_modules must be a string or a list of strings, got "
                        f"{targets!r}") from None
    if not names or not all(isinstance(n, str) and n for n in names):
        raise ValueError(f"LoraConfig: target_modules must be non-empty names, got {targets!r}")
    return names


# ----------------------------------------------------------------------------------------------
# the layer


class LoraLinear(Module):
    """y = x Wᵀ + b + s · dropout(x) Aᵀ Bᵀ for x (..., in): the wrapped Linear's W (out, in) and b
    (out,) frozen, A = lora_A.weight (r, in), B = lora_B.weight (out, r), s = `scaling`.

    PEFT's init: A ~ kaiming_uniform(a=sqrt(5)) (nn.Linear's), B = 0 (init_lora_weights=False: B
    keeps nn.Linear's init too, so the adapter is not a no-op). `disabled`: the base layer alone.
    It starts in the Linear's train/eval mode, and the Linear's own hooks keep firing (it is then
    called for the base output, as PEFT's base_layer)."""

    def __init__(self, base, config, name=""):
        super().__init__()
        if not isinstance(base, Linear):
            raise TypeError(f"LoraLinear wraps an nn.Linear, got {type(base).__name__}")
        if not isinstance(config, LoraConfig):
            raise TypeError(f"LoraLinear: config must be a LoraConfig, got {type(config).__name__}")
        self.config, self.name = config, name
        self.in_features, self.out_features = base.in_features, base.out_features
        self.r, self.scaling, self.dropout_p = config.r, config.scaling, config.lora_dropout
        self.weight = base.weight                   # the same Parameters: keys and identity kept
        self.register_parameter("bias", base.bias)
        self.lora_dropout = Dropout(config.lora_dropout) if config.lora_dropout > 0 else Identity()
        dtype = base.weight.dtype
        self.lora_A = Linear(self.in_features, config.r, bias=False, dtype=dtype)
        self.lora_B = Linear(config.r, self.out_features, bias=False, dtype=dtype)
        if config.init_lora_weights:
            self.lora_B.weight.data[...] = 0
        self.disabled = False
        object.__setattr__(self, "_base", base)     # not a child: given back by merge / unload
        object.__setattr__(self, "_frozen", {})     # thread id -> W + s B A fixed by `frozen`
        self.train(base.training)                   # the model's mode: an eval model gets no dropout

    @property
    def dropout_active(self):
        """True while dropout changes the LoRA branch's input (training, p > 0, not disabled)."""
        return self.training and self.dropout_p > 0 and not self.disabled

    def train(self, mode=True):
        super().train(mode)
        self._base.train(mode)      # not a child, but given back by merge / unload in the model's mode
        return self

    def forward(self, x):
        if self._base._hook_ids:    # hooks on the wrapped Linear fire, as on PEFT's base_layer
            out = self.restored_base()(x)
        else:
            out = linear(x, self.weight, self.bias)
        if self.disabled:
            return out
        return out + self.lora_B(self.lora_A(self.lora_dropout(x))) * self.scaling

    def delta_weight(self):
        """s · B A, (out, in): what merging adds to W (differentiable in A and B)."""
        return (self.lora_B.weight @ self.lora_A.weight) * self.scaling

    def fused_weight(self):
        """W + s · B A (out, in), so that x (W + s B A)ᵀ = forward(x) - b: the matrix a fused op
        multiplies by in place of calling this layer; W itself while disabled. RuntimeError while
        dropout is active (see needs_call)."""
        if self.disabled:
            return self.weight
        if self._frozen:
            w = self._frozen.get(threading.get_ident())
            if w is not None:
                return w
        if self.dropout_active:
            raise RuntimeError(
                f"LoRA layer {self.name or self.extra_repr()}: lora_dropout={self.dropout_p} is active "
                "(training mode) but the model multiplies by this layer's weight inside a fused op, "
                "which cannot drop the LoRA branch's input alone; give such layers lora_dropout=0, "
                "or eval()")
        return self.weight + self.delta_weight()

    @contextlib.contextmanager
    def frozen(self):
        """Within the block fused_weight returns one fixed, graph-free W + s B A (for the calling
        thread): a decode loop then does not rebuild it for every token."""
        with no_grad():
            self._frozen[threading.get_ident()] = self.fused_weight()
        try:
            yield
        finally:
            self._frozen.pop(threading.get_ident(), None)

    def restored_base(self):
        """The wrapped nn.Linear, holding this layer's (possibly merged) W and b."""
        self._base.weight = self.weight
        self._base.register_parameter("bias", self.bias)
        return self._base

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, r={self.r}, "
                f"lora_alpha={self.config.lora_alpha}, bias={self.bias is not None}")


def fused_weight(layer):
    """The (out, in) matrix a fused op must multiply by to compute `layer` (a Linear or LoraLinear)
    without calling it: W (the Parameter itself) or W + s B A."""
    return layer.fused_weight() if isinstance(layer, LoraLinear) else layer.weight


def needs_call(layer):
    """True when `layer` must be called as a module rather than have its weight read into a fused
    op: a LoRA layer whose dropout is active."""
    return isinstance(layer, LoraLinear) and layer.dropout_active


# ----------------------------------------------------------------------------------------------
# applying, merging, disabling


def lora_layers(model):
    """[(name, LoraLinear)] of `model`, each layer once (under its first name)."""
    return [(name, m) for name, m in model.named_modules() if isinstance(m, LoraLinear)]


def _linears(model):
    return [(name, m) for name, m in model.named_modules() if name and type(m) is Linear]


def _short(name):
    return name.rsplit(".", 1)[-1]


def _matches(name, target):
    """PEFT's rule for one list entry: the name itself, or its suffix after a dot."""
    return name == target or name.endswith("." + target)


def _select(model, targets):
    """[(name, Linear)] that `targets` selects (see LoraConfig); ValueError for an entry or regex
    that selects nothing, or that names a module which is not an nn.Linear."""
    linears = _linears(model)
    if targets == ALL_LINEAR:
        chosen = [(n, m) for n, m in linears if _short(n) not in OUTPUT_HEADS]
        if not chosen:
            raise ValueError("apply_lora: target_modules 'all-linear': the model has no Linear layer")
        return chosen
    if isinstance(targets, str):
        tests = {targets: lambda name: re.fullmatch(targets, name) is not None}
    else:
        tests = {t: (lambda name, t=t: _matches(name, t)) for t in targets}
    others = [(n, m) for n, m in model.named_modules() if n and type(m) is not Linear]
    for target, test in tests.items():
        wrong = [f"{n} ({type(m).__name__})" for n, m in others if test(n)]
        if wrong:
            raise ValueError(f"apply_lora: target {target!r} names {', '.join(wrong[:3])}: LoRA wraps "
                             "nn.Linear layers only")
        if not any(test(n) for n, _ in linears):
            known = sorted({_short(n) for n, _ in linears})
            raise ValueError(f"apply_lora: target {target!r} matches no Linear layer of "
                             f"{type(model).__name__}; its Linear layers are named {known}")
    return [(n, m) for n, m in linears if any(test(n) for test in tests.values())]


def _swap(model, replacement):
    """Put replacement[id(m)] wherever a module m in `replacement` is a child, in every parent."""
    for parent in model.modules():
        for name, child in list(parent._modules.items()):
            new = replacement.get(id(child))
            if new is not None:
                parent._modules[name] = new


def _named_linears(model, names, where):
    """{name: Linear} of `model` for exactly `names`; ValueError naming those that are not its Linears."""
    linears = dict(_linears(model))
    unknown = sorted(set(names) - set(linears))
    if unknown:
        raise ValueError(f"{where} adapts {unknown[:4]}, which are not Linear layers of "
                         f"{type(model).__name__}")
    return {name: linears[name] for name in names}


def _refuse_second_adapter(model, where):
    present = lora_layers(model)
    if present:
        raise ValueError(f"{where}: {type(model).__name__} already has LoRA layers ({present[0][0]}, "
                         "...); merge_lora or unload_lora it first (one adapter per model)")


def apply_lora(model, config=None, **kwargs):
    """Wrap the Linear layers `config` (or LoraConfig(**kwargs)) selects in LoraLinear layers, in
    place, and freeze every other parameter; returns `model` (PEFT's get_peft_model, without a
    wrapper class: names gain no `base_model.model.` prefix)."""
    if config is None:
        config = LoraConfig(**kwargs)
    elif kwargs or not isinstance(config, LoraConfig):
        raise TypeError("apply_lora: pass a LoraConfig or LoraConfig's keyword arguments, not both")
    if not isinstance(model, Module):
        raise TypeError(f"apply_lora: model must be an nn.Module, got {type(model).__name__}")
    _refuse_second_adapter(model, "apply_lora")
    _wrap(model, config, _select(model, config.target_modules))
    return model


def _wrap(model, config, chosen):
    """Freeze every parameter of `model` and put a LoraLinear around each (name, Linear) of `chosen`."""
    for p in model.parameters():
        p.requires_grad_(False)
    _swap(model, {id(m): LoraLinear(m, config, name=n) for n, m in chosen})


get_peft_model = apply_lora


def _unwrap(model, fold):
    layers = lora_layers(model)
    if not layers:
        raise ValueError(f"{type(model).__name__} has no LoRA layers")
    with no_grad():
        if fold:
            for _, layer in layers:
                layer.weight.add_(layer.delta_weight())
        _swap(model, {id(layer): layer.restored_base() for _, layer in layers})
    return model


def merge_lora(model):
    """Fold every adapter into its base weight, W <- W + s B A (PEFT's merge_and_unload), and put
    the plain Linear layers back; returns `model`. W keeps its identity and requires_grad (False)."""
    return _unwrap(model, fold=True)


def unload_lora(model):
    """Put the plain Linear layers back, dropping the adapters (PEFT's unload); returns `model`."""
    return _unwrap(model, fold=False)


@contextlib.contextmanager
def disable_adapters(model):
    """Within the block every LoRA layer computes its base layer alone (PEFT's disable_adapter())."""
    layers = [layer for _, layer in lora_layers(model)]
    before = [layer.disabled for layer in layers]
    for layer in layers:
        layer.disabled = True
    try:
        yield model
    finally:
        for layer, flag in zip(layers, before):
            layer.disabled = flag


@contextlib.contextmanager
def frozen_adapters(model):
    """Within the block (and the calling thread) every LoRA layer's fused_weight is one graph-free
    W + s B A computed on entry: for decode loops, which would otherwise rebuild it every token."""
    with contextlib.ExitStack() as stack:
        for _, layer in lora_layers(model):
            stack.enter_context(layer.frozen())
        yield model


def print_trainable_parameters(model):
    """Print PEFT's line "trainable params: ... || all params: ... || trainable%: ..." and return
    (trainable, total) element counts of the model's (unique) parameters."""
    trainable, total = model.num_parameters(trainable_only=True), model.num_parameters()
    print(f"trainable params: {trainable:,d} || all params: {total:,d} || "
          f"trainable%: {100 * trainable / max(total, 1):.4f}")
    return trainable, total


# ----------------------------------------------------------------------------------------------
# adapter state dicts


def _adapter_params(model):
    """OrderedDict "<layer>.lora_A.weight" / "<layer>.lora_B.weight" -> Parameter."""
    return OrderedDict((f"{name}.{part}.weight", getattr(layer, part).weight)
                       for name, layer in lora_layers(model) for part in ADAPTER_PARTS)


def lora_state_dict(model):
    """The adapters only: OrderedDict name -> array copy (`layers.0.self_attn.q_proj.lora_A.weight`)."""
    return OrderedDict((name, p.data.copy()) for name, p in _adapter_params(model).items())


def merged_state_dict(model):
    """model.state_dict() as the model computes, for formats that know no adapters (HF, official
    RWKV-7): each LoRA layer's weight W + s B A (W while disabled), its lora_A / lora_B entries left
    out. The model keeps its adapters."""
    state = model.state_dict()
    with no_grad():
        for name, module in model.named_modules():
            if isinstance(module, LoraLinear):
                prefix = f"{name}." if name else ""
                state[prefix + "weight"] = module.weight if module.disabled else \
                    module.weight + module.delta_weight()
                for part in ADAPTER_PARTS:
                    state.pop(f"{prefix}{part}.weight", None)
    return state


def _float_array(value, name, dtype, where="load_lora_state_dict"):
    if "bfloat16" in str(getattr(value, "dtype", "")) and hasattr(value, "float"):
        value = value.float()        # a torch bf16 tensor: numpy has no bfloat16 to convert it to
    arr = np.asarray(getattr(value, "data", value))
    if arr.dtype.kind != "f":
        raise TypeError(f"{where}: {name} must be floating point, got {arr.dtype}")
    return np.ascontiguousarray(arr, dtype=dtype)


def load_lora_state_dict(model, state_dict):
    """Copy adapter arrays (lora_state_dict's names) into the model's LoRA layers, in place. The keys
    must be exactly the model's adapter names and every shape must match (ValueError naming them:
    a different r or another model); floats are cast to the layer's dtype. Checked before any copy."""
    own = _adapter_params(model)
    if not own:
        raise ValueError(f"load_lora_state_dict: {type(model).__name__} has no LoRA layers; apply_lora "
                         "first (or load_adapter a PEFT directory)")
    missing, unexpected = sorted(set(own) - set(state_dict)), sorted(set(state_dict) - set(own))
    if missing or unexpected:
        raise ValueError(f"load_lora_state_dict: adapter names differ from the model's; missing "
                         f"{missing[:4]}, unexpected {unexpected[:4]}")
    arrays = {name: _float_array(state_dict[name], name, p.dtype) for name, p in own.items()}
    wrong = [f"{name}: {arrays[name].shape} vs the model's {p.shape}" for name, p in own.items()
             if arrays[name].shape != p.shape]
    if wrong:
        raise ValueError("load_lora_state_dict: shape mismatch (another r, or another model): "
                         + "; ".join(wrong[:4]))
    with no_grad():
        for name, p in own.items():
            p.copy_(Tensor(arrays[name]))


# ----------------------------------------------------------------------------------------------
# PEFT adapter directories


def _transformers_prefix(model):
    """What the transformers model puts before this model's module names: GPT is LlamaForCausalLM's
    `model` (its lm_head excepted); other models' names are used as they are."""
    from minigrad.models.gpt import GPT  # nn knows no model: looked up only for adapter files

    return "model." if isinstance(model, GPT) else ""


def _peft_key(prefix, name):
    return PEFT_PREFIX + (name if name == "lm_head" or name.startswith("lm_head.") else prefix + name)


def _own_name(prefix, module, where):
    if prefix and module != "lm_head":
        if not module.startswith(prefix):
            raise ValueError(f"{where}: module {module!r} is not under {prefix!r}")
        return module[len(prefix):]
    return module


def _file_targets(model, names):
    """target_modules for adapter_config.json: the short names when they select exactly `names`
    (as PEFT usually writes them), else every full name as transformers names it."""
    short = sorted({_short(n) for n in names})
    linear_like = [n for n, m in model.named_modules() if n and type(m) in (Linear, LoraLinear)
                   and _short(n) not in ADAPTER_PARTS]
    if {n for n in linear_like if _short(n) in short} == set(names):
        return short
    prefix = _transformers_prefix(model)
    return sorted(_peft_key(prefix, n)[len(PEFT_PREFIX):] for n in names)


def save_adapter(model, path):
    """Write a PEFT adapter directory: adapter_config.json and adapter_model.safetensors, keys
    `base_model.model.<transformers module name>.lora_A.weight` (GPT: `...model.layers.0.self_attn.
    q_proj.lora_A.weight`); each file atomically. PeftModel.from_pretrained loads it."""
    layers = lora_layers(model)
    if not layers:
        raise ValueError(f"save_adapter: {type(model).__name__} has no LoRA layers")
    prefix, config = _transformers_prefix(model), layers[0][1].config
    tensors = {_peft_key(prefix, name): p.data for name, p in _adapter_params(model).items()}
    targets = _file_targets(model, [n for n, _ in layers])
    peft_config = {"peft_type": "LORA", "task_type": config.task_type, "r": config.r,
                   "lora_alpha": config.lora_alpha, "lora_dropout": config.lora_dropout,
                   "use_rslora": config.use_rslora, "target_modules": targets,
                   "bias": "none", "fan_in_fan_out": False, "init_lora_weights": True,
                   "modules_to_save": None, "base_model_name_or_path": None, "revision": None,
                   "inference_mode": True}
    os.makedirs(path, exist_ok=True)
    save_safetensors(os.path.join(path, WEIGHTS_NAME), tensors, {"format": "pt"})
    atomic_write_bytes(os.path.join(path, CONFIG_NAME), json.dumps(peft_config, indent=2).encode("utf-8"))
    return path


# adapter_config.json fields that do not change what a loaded adapter computes (initialisation,
# bookkeeping, and the module matching, which the weight file's names replace)
_INERT_FIELDS = {"peft_type", "init_lora_weights", "target_modules", "base_model_name_or_path", "revision",
                 "inference_mode", "peft_version", "auto_mapping", "layers_to_transform", "layers_pattern",
                 "exclude_modules", "loftq_config", "eva_config", "corda_config", "lora_ga_config",
                 "megatron_config", "megatron_core", "qalora_group_size", "ensure_weight_tying"}
_CONFIG_FIELDS = ("r", "lora_alpha", "lora_dropout", "bias", "use_rslora", "task_type")


def _read_config(path):
    """LoraConfig keyword arguments (no target_modules) of an adapter_config.json; ValueError naming
    any feature minigrad does not implement (every other field must be null, false, {} or [])."""
    file = os.path.join(path, CONFIG_NAME)
    if not os.path.isfile(file):
        raise FileNotFoundError(f"load_adapter: {path} has no {CONFIG_NAME}")
    try:
        with open(file, encoding="utf-8") as f:
            raw = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
        raise ValueError(f"{file}: not valid JSON ({e})") from None
    if not isinstance(raw, dict) or raw.get("peft_type") != "LORA":
        raise ValueError(f"{file}: not a PEFT LoRA adapter config (peft_type must be 'LORA')")
    if raw.get("init_lora_weights", True) not in PLAIN_INITS:
        raise ValueError(f"{file}: init_lora_weights={raw['init_lora_weights']!r} makes PEFT rewrite the "
                         "base weights when it loads this adapter; minigrad does not")
    known = _INERT_FIELDS.union(_CONFIG_FIELDS)
    unsupported = sorted(k for k, v in raw.items() if k not in known and v not in (None, False, {}, []))
    if unsupported:
        raise ValueError(f"{file}: sets {unsupported}, which minigrad's LoRA does not implement")
    return {k: raw[k] for k in _CONFIG_FIELDS if k in raw}


def _read_tensors(model, path):
    """{module name (minigrad's): {"lora_A" | "lora_B" [| "base_layer"]: array}} of an adapter file."""
    file = os.path.join(path, WEIGHTS_NAME)
    if not os.path.isfile(file):
        raise FileNotFoundError(f"load_adapter: {path} has no {WEIGHTS_NAME}")
    tensors, _ = load_safetensors(file)
    prefix, modules = _transformers_prefix(model), {}
    for key, value in tensors.items():
        stem = key[len(PEFT_PREFIX):-len(".weight")]           # model.layers.0.self_attn.q_proj.lora_A
        module, _, part = stem.rpartition(".")
        if not (key.startswith(PEFT_PREFIX) and key.endswith(".weight") and module
                and part in (*ADAPTER_PARTS, "base_layer")):
            raise ValueError(f"{file}: tensor {key!r} is not a LoRA weight "
                             "(base_model.model.<module>.lora_A.weight); minigrad implements no other")
        modules.setdefault(_own_name(prefix, module, file), {})[part] = value
    incomplete = sorted(n for n, parts in modules.items() if not set(ADAPTER_PARTS) <= set(parts))
    if incomplete:
        raise ValueError(f"{file}: modules {incomplete[:4]} lack lora_A or lora_B")
    return modules


def _check_fit(modules, linears, r):
    """ValueError naming every array of `modules` (see _read_tensors) that does not fit its Linear:
    A (r, in), B (out, r), base_layer (out, in)."""
    wrong = []
    for name, parts in modules.items():
        layer = linears[name]
        want = {"lora_A": (r, layer.in_features), "lora_B": (layer.out_features, r),
                "base_layer": (layer.out_features, layer.in_features)}
        wrong += [f"{name}.{part}.weight {tuple(a.shape)}, expected {want[part]}"
                  for part, a in parts.items() if tuple(a.shape) != want[part]]
    if wrong:
        raise ValueError(f"load_adapter: shape mismatch with r={r} (adapter_config.json) and the model: "
                         + "; ".join(wrong[:4]))


def load_adapter(model, path, is_trainable=False):
    """PEFT's PeftModel.from_pretrained(model, path), in place: wrap the Linear layers the adapter
    file holds weights for (with its config's r, lora_alpha, lora_dropout, use_rslora) and load
    them; a `<module>.base_layer.weight` there (PEFT's save_embedding_layers) replaces that W, as in
    PEFT. is_trainable=False (PEFT's default) freezes the adapters too. Everything is checked
    (config, names, shapes, dtypes) before the model changes. Returns `model`."""
    _refuse_second_adapter(model, "load_adapter")
    kwargs = _read_config(path)
    modules = _read_tensors(model, path)
    try:
        config = LoraConfig(**kwargs, target_modules=tuple(modules))
    except (TypeError, ValueError) as e:
        raise ValueError(f"{os.path.join(path, CONFIG_NAME)}: {e}") from None
    linears = _named_linears(model, modules, f"load_adapter: {path}")
    _check_fit(modules, linears, config.r)
    arrays = {name: {part: _float_array(a, f"{name}.{part}.weight", linears[name].weight.dtype,
                                        f"load_adapter: {os.path.join(path, WEIGHTS_NAME)}")
                     for part, a in parts.items()} for name, parts in modules.items()}
    # exactly the file's modules: as a target list, "0" would also select a nested "1.0"
    _wrap(model, config, [(name, linears[name]) for name in modules])
    load_lora_state_dict(model, {f"{n}.{part}.weight": parts[part]
                                 for n, parts in arrays.items() for part in ADAPTER_PARTS})
    with no_grad():
        for name, parts in arrays.items():
            if "base_layer" in parts:
                linears[name].weight.copy_(Tensor(parts["base_layer"]))
    for p in _adapter_params(model).values():
        p.requires_grad_(bool(is_trainable))
    return model


# ----------------------------------------------------------------------------------------------
# a model's adapters as a JSON record (minigrad checkpoints)

_RECORD_FIELDS = ("r", "lora_alpha", "lora_dropout", "use_rslora")


def adapter_record(model):
    """A JSON-able record of the model's adapters: LoraConfig's r, lora_alpha, lora_dropout,
    use_rslora and "modules", the exact names of the adapted layers; `apply_adapter_record` puts the
    same (freshly initialised) adapters on a model without any. ValueError if it has none."""
    layers = lora_layers(model)
    if not layers:
        raise ValueError(f"adapter_record: {type(model).__name__} has no LoRA layers")
    config = layers[0][1].config
    return {**{k: getattr(config, k) for k in _RECORD_FIELDS}, "modules": [name for name, _ in layers]}


def adapter_names(record):
    """The adapter parameter names ("<layer>.lora_A.weight", ...) of an `adapter_record`."""
    return [f"{name}.{part}.weight" for name in record["modules"] for part in ADAPTER_PARTS]


def apply_adapter_record(model, record, where="apply_adapter_record"):
    """Wrap exactly the layers `record` (see adapter_record) names, with its config, in place, and
    freeze every other parameter; returns `model`. ValueError / TypeError naming `where` for a
    malformed record or a layer the model lacks; checked before the model changes."""
    _refuse_second_adapter(model, where)
    if not isinstance(record, dict) or set(record) != {*_RECORD_FIELDS, "modules"}:
        raise ValueError(f"{where}: a LoRA record has exactly the keys {[*_RECORD_FIELDS, 'modules']}, got "
                         f"{sorted(record) if isinstance(record, dict) else record!r}")
    modules = record["modules"]
    if not isinstance(modules, list) or not all(isinstance(n, str) for n in modules):
        raise ValueError(f"{where}: the LoRA record's modules must be a list of names, got {modules!r:.200}")
    try:
        config = LoraConfig(**{k: record[k] for k in _RECORD_FIELDS}, target_modules=tuple(modules))
    except (TypeError, ValueError) as e:
        raise ValueError(f"{where}: {e}") from None
    linears = _named_linears(model, modules, where)
    _wrap(model, config, list(linears.items()))
    return model
