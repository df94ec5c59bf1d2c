"""`Module`: the base of every layer and model, with PyTorch's registration and state_dict conventions.

Assigning a `Parameter` or a `Module` to an attribute registers it; `register_buffer` registers a
non-trainable Tensor. Names are dotted paths (`blocks.0.attn.wq.weight`), as in PyTorch.
"""
from collections import OrderedDict, namedtuple

import numpy as np

from minigrad.autograd import no_grad
from minigrad.nn.hooks import (  # noqa: F401 - RemovableHandle, register_module_*: torch's names here
    RemovableHandle,
    _global_hook_ids,
    add_hook,
    call_with_hooks,
    register_module_forward_hook,
    register_module_forward_pre_hook,
    register_module_full_backward_hook,
    register_module_full_backward_pre_hook,
)
from minigrad.nn.hooks import _state as hooks_state
from minigrad.nn.parameter import Parameter
from minigrad.tensor import Tensor, to_args

IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])
# torch's per-module hook dicts (id -> hook, or id -> True for the flags), and `_hook_ids`: every id
# of this module's hooks, so that a call without hooks tests one dict (minigrad/nn/hooks.py)
_HOOK_DICTS = ("_forward_pre_hooks", "_forward_pre_hooks_with_kwargs", "_forward_hooks",
               "_forward_hooks_with_kwargs", "_forward_hooks_always_called", "_backward_pre_hooks",
               "_backward_hooks", "_hook_ids")


class Module:
    """Subclass, assign layers/Parameters in `__init__`, write `forward`; call the module to run it."""

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)
        for name in _HOOK_DICTS:
            object.__setattr__(self, name, OrderedDict())

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has no forward()")

    def __call__(self, *args, **kwargs):
        if self._hook_ids or _global_hook_ids:
            return call_with_hooks(self, args, kwargs)
        return self.forward(*args, **kwargs)

    # ---- hooks (torch's; minigrad/nn/hooks.py) -----------------------------------------------
    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """Run `hook(module, args)` before each forward; a return value other than None replaces
        args (a non-tuple is wrapped in one). with_kwargs: `hook(module, args, kwargs)` -> None or
        (args, kwargs). Hooks run in registration order; prepend puts this one first."""
        flags = [self._forward_pre_hooks_with_kwargs] if with_kwargs else []
        return add_hook(self._forward_pre_hooks, hook, self._hook_ids, prepend=prepend, flags=flags)

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """Run `hook(module, args, output)` (with_kwargs: `hook(module, args, kwargs, output)`) after
        each forward; a return value other than None replaces the output. always_call: also run it
        (output None) when forward or another hook raised; the error is then re-raised."""
        flags = [d for d, on in ((self._forward_hooks_with_kwargs, with_kwargs),
                                 (self._forward_hooks_always_called, always_call)) if on]
        return add_hook(self._forward_hooks, hook, self._hook_ids, prepend=prepend, flags=flags)

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """Run `hook(module, grad_output)` when the gradients w.r.t. the module's outputs are known
        (a tuple, one entry per output, None for non-Tensors and outputs that got no gradient); a
        returned tuple replaces grad_output, before the gradient flows into the module."""
        return add_hook(self._backward_pre_hooks, hook, self._hook_ids, prepend=prepend)

    def register_full_backward_hook(self, hook, prepend=False):
        """Run `hook(module, grad_input, grad_output)` once the gradients w.r.t. the module's
        positional inputs are computed (one entry per positional argument: None for non-Tensors,
        zeros for Tensors that don't require grad; all None, right after grad_output, when no input
        requires grad); a returned tuple replaces grad_input, i.e. what flows on to the inputs.
        Hooks registered when the module is called apply to that call's backward."""
        return add_hook(self._backward_hooks, hook, self._hook_ids, prepend=prepend)

    # ---- registration -----------------------------------------------------------------------
    def _registries(self):
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__}: call super().__init__() before assigning "
                                 "attributes")
        return self._parameters, self._buffers, self._modules

    def __setattr__(self, name, value):
        params, buffers, modules = self._registries()
        if isinstance(value, Parameter):
            self._forget(name, keep=params)
            params[name] = value
        elif isinstance(value, Module):
            self._forget(name, keep=modules)
            modules[name] = value
        elif name in params:
            if value is not None:
                raise TypeError(f"cannot assign {type(value).__name__} to parameter '{name}' "
                                "(wrap it in nn.Parameter, or None)")
            params[name] = None
        elif name in modules:
            if value is not None:
                raise TypeError(f"cannot assign {type(value).__name__} to submodule '{name}' "
                                "(Module or None)")
            modules[name] = None
        elif name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign {type(value).__name__} to buffer '{name}' (Tensor or None)")
            buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def _forget(self, name, keep=None):
        """Remove `name` from every registry but `keep` (where a reassignment keeps its position)."""
        for registry in (self._parameters, self._buffers, self._modules):
            if registry is not keep:
                registry.pop(name, None)
        if keep is not self._buffers:
            self._non_persistent.discard(name)
        self.__dict__.pop(name, None)

    def __getattr__(self, name):
        # Only called when normal lookup fails: look in the registries.
        d = self.__dict__
        for registry in ("_parameters", "_buffers", "_modules"):
            if registry in d and name in d[registry]:
                return d[registry][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        if any(name in r for r in (self._parameters, self._buffers, self._modules)):
            self._forget(name)
        else:
            object.__delattr__(self, name)

    def __dir__(self):
        names = set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules)
        return sorted(names)

    def register_parameter(self, name, param):
        """Register `param` (a Parameter or None) under `name`."""
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"register_parameter: '{name}' must be a Parameter or None, "
                            f"got {type(param).__name__}")
        self._check_name(name, self._parameters)
        self._forget(name, keep=self._parameters)
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """Register a non-trainable Tensor (or None); persistent buffers appear in `state_dict()`."""
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"register_buffer: '{name}' must be a Tensor or None, "
                            f"got {type(tensor).__name__}")
        self._check_name(name, self._buffers)
        self._forget(name, keep=self._buffers)
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent.discard(name)
        else:
            self._non_persistent.add(name)

    def add_module(self, name, module):
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"add_module: '{name}' must be a Module or None, got {type(module).__name__}")
        self._check_name(name, self._modules)
        self._forget(name, keep=self._modules)
        self._modules[name] = module

    register_module = add_module

    def _check_name(self, name, registry=None):
        self._registries()
        if not isinstance(name, str) or not name or "." in name:
            raise KeyError(f"invalid name {name!r}: a non-empty string without '.'")
        if registry is not None and name not in registry and hasattr(self, name):
            # as torch: registering must not silently replace another attribute (e.g. turn a
            # Parameter into a buffer, which the optimizer would then never see)
            raise KeyError(f"attribute '{name}' already exists")

    # ---- traversal --------------------------------------------------------------------------
    def named_modules(self, prefix="", memo=None, remove_duplicate=True):
        """Yield (dotted name, module) for this module and every descendant: each module once, under
        its first name, or (remove_duplicate=False) a shared module under every name."""
        memo = set() if memo is None else memo
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, child in self._modules.items():
            if child is not None:
                yield from child.named_modules(f"{prefix}.{name}" if prefix else name, memo, remove_duplicate)

    def has_hooks(self):
        """True when this module or one inside it has hooks, or global module hooks exist. The
        models call their layers as modules (unfused) then, so that every hook fires."""
        if not hooks_state["hooks_seen"]:
            return False
        return bool(_global_hook_ids) or any(m._hook_ids for m in self.modules())

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, child in self._modules.items():
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                yield name, child

    def children(self):
        for _, child in self.named_children():
            yield child

    def get_submodule(self, target):
        """The submodule at dotted path `target` ("" is this module); AttributeError naming the
        missing part otherwise."""
        mod = self
        for part in target.split(".") if target else []:
            child = mod._modules.get(part) if isinstance(mod, Module) else None
            if child is None:
                raise AttributeError(f"{type(mod).__name__} has no submodule {part!r} (in {target!r})")
            mod = child
        return mod

    def get_parameter(self, target):
        """The Parameter at dotted path `target` (e.g. "layers.0.mlp.up_proj.weight")."""
        path, _, name = target.rpartition(".")
        mod = self.get_submodule(path)
        if mod._parameters.get(name) is None:
            raise AttributeError(f"{type(mod).__name__} has no parameter {name!r} (in {target!r})")
        return mod._parameters[name]

    def _named_members(self, registry, prefix, recurse, remove_duplicate):
        seen = set()
        modules = [(prefix, self)]
        if recurse:
            modules = self.named_modules(prefix, remove_duplicate=remove_duplicate)
        for mod_prefix, mod in modules:
            for name, value in getattr(mod, registry).items():
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                seen.add(id(value))
                yield (f"{mod_prefix}.{name}" if mod_prefix else name), value

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """Yield (dotted name, Parameter); a shared (tied) Parameter appears once, under its first name."""
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def num_parameters(self, trainable_only=False):
        """Total element count of the (unique) parameters."""
        return sum(p.data.size for p in self.parameters() if p.requires_grad or not trainable_only)

    def apply(self, fn):
        """Call `fn(module)` on every submodule (children first) and on self; return self."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # ---- modes and grads --------------------------------------------------------------------
    def train(self, mode=True):
        """Set `.training` on this module and all descendants (affects Dropout etc.); return self."""
        if not isinstance(mode, (bool, np.bool_)):
            raise ValueError(f"Module.train: mode must be a bool, got {mode!r}")
        object.__setattr__(self, "training", bool(mode))
        for child in self.children():   # through each child's train(), as torch: overrides are honoured
            child.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        """Set `requires_grad` on every parameter (torch's keyword name); return self."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Drop (default) or zero every parameter's `.grad`."""
        zero_grads(self.parameters(), set_to_none)

    def to(self, *args, dtype=None, device=None):
        """Cast every float parameter, its grad and float buffer to `dtype` in place; return self.

        Called as torch's `to(dtype)`, `to(device)`, `to(device, dtype)`, `to(tensor)` (its dtype): the
        device must be the CPU ("cpu", or e.g. torch.device("cpu")), which is a no-op.
        Parameters keep their identity (optimizers built before still hold them), but optimizer
        state made before the cast keeps its old dtype: build the optimizer after `.to()`.
        """
        dtype = to_args("Module.to", args, dtype, device)
        if dtype is None:
            return self
        dtype = np.dtype(dtype)
        if dtype not in (np.float32, np.float64):
            raise TypeError(f"Module.to: expected float32 or float64, got {dtype}")
        for t in list(self.parameters()) + list(self.buffers()):
            if t.data.dtype.kind == "f" and t.data.dtype != dtype:
                t.data = t.data.astype(dtype)
                t._bump_version()
                if t.grad is not None:
                    t.grad = Tensor(t.grad.data.astype(dtype))
        return self

    def float(self):
        return self.to(np.float32)

    def double(self):
        return self.to(np.float64)

    # ---- state_dict -------------------------------------------------------------------------
    def _state_items(self):
        """(dotted name, Tensor) for every parameter and persistent buffer; tied ones, and those of a
        module shared under several names, under each name (as torch's state_dict)."""
        for prefix, mod in self.named_modules(remove_duplicate=False):
            dot = f"{prefix}." if prefix else ""
            for name, p in mod._parameters.items():
                if p is not None:
                    yield dot + name, p
            for name, b in mod._buffers.items():
                if b is not None and name not in mod._non_persistent:
                    yield dot + name, b

    def state_dict(self, *, destination=None, prefix="", keep_vars=False):
        """An OrderedDict of dotted name -> numpy array (a copy), parameters then buffers per module.
        As torch: `prefix` is put before every key, `destination` (a dict) is filled and returned,
        `keep_vars=True` gives the parameter and buffer Tensors themselves instead of copies."""
        out = OrderedDict() if destination is None else destination
        for name, t in self._state_items():
            out[prefix + name] = t if keep_vars else t.data.copy()
        return out

    def load_state_dict(self, state_dict, strict=True):
        """Copy arrays from `state_dict` into this module's parameters and buffers (in place).

        Values may be numpy arrays, Tensors or torch tensors (read through their `.numpy()`, so
        `model.load_state_dict(torch_model.state_dict())` works; torch is not imported). Shape and
        dtype must match exactly (no silent casts);
        with strict=True the key sets must match too. Every problem is reported in one RuntimeError
        and nothing is modified unless all checks pass. Returns (missing_keys, unexpected_keys).
        """
        own = OrderedDict(self._state_items())
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        problems = []
        updates = []
        for name, target in own.items():
            if name not in state_dict:
                continue
            value = _state_array(state_dict[name])
            if not isinstance(value, np.ndarray):
                kind = f"{type(value).__module__}.{type(value).__qualname__}"
                hint = (f" of dtype {value.dtype}, which numpy has no type for (convert it with .float())"
                        if kind.startswith("torch.") else "")
                problems.append(f"{name}: expected a numpy array, a minigrad Tensor or a torch tensor, got "
                                f"{kind}{hint}")
                continue
            if value.shape != target.data.shape:
                problems.append(f"size mismatch for {name}: copying a param with shape {value.shape} from "
                                f"the checkpoint, the shape in the current model is {target.data.shape}")
            elif value.dtype != target.data.dtype:
                problems.append(f"dtype mismatch for {name}: the checkpoint has {value.dtype}, the model has "
                                f"{target.data.dtype} (cast the model with .to() or the array first)")
            else:
                updates.append((target, value))
        if strict:
            if missing:
                problems.insert(0, "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing))
            if unexpected:
                problems.insert(int(bool(missing)),
                                "Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected))
        if problems:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                               + "\n\t".join(problems))
        with no_grad():
            for target, value in updates:
                np.copyto(target.data, value)
                target._bump_version()
        return IncompatibleKeys(missing, unexpected)

    # ---- repr -------------------------------------------------------------------------------
    def extra_repr(self):
        """The text inside this module's parentheses in `repr` (override in layers)."""
        return ""

    def __repr__(self):
        lines = [line for line in self.extra_repr().split("\n") if line]
        for name, child in self._modules.items():
            child_repr = repr(child).replace("\n", "\n  ")
            lines.append(f"({name}): {child_repr}")
        if not lines:
            return f"{type(self).__name__}()"
        if len(lines) == 1 and not self._modules:
            return f"{type(self).__name__}({lines[0]})"
        return f"{type(self).__name__}(\n  " + "\n  ".join(lines) + "\n)"


def _state_array(value):
    """A state-dict value as a numpy array (minigrad Tensor, numpy array, or a torch tensor with a
    numpy dtype); anything else is returned as it is, for the caller's error."""
    if isinstance(value, Tensor):
        return value.data
    if type(value).__module__.split(".")[0] == "torch" and hasattr(value, "detach"):
        try:
            return value.detach().cpu().numpy()
        except (TypeError, RuntimeError):      # bfloat16 and other dtypes numpy has no type for
            return value
    return value


def zero_grads(params, set_to_none=True):
    """Drop (set_to_none) or zero in place the `.grad` of every tensor in `params`."""
    for p in params:
        if p.grad is None:
            continue
        if set_to_none:
            p.grad = None
        else:
            p.grad.data[...] = 0
            p.grad._bump_version()
