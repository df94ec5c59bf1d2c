"""`Optimizer`: PyTorch's base — param_groups of hyperparameters, per-parameter state, state_dict.

A subclass sets its defaults and implements `_update(param, grad, group, state)`, which changes
`param.data` in place (numpy arrays), and lists in NON_NEGATIVE the hyperparameters that must be
finite and >= 0 (checked in every group before any parameter moves, at every step: schedulers and
per-group overrides change them after __init__). `step()` runs it under no_grad for every parameter with a
grad and bumps the parameter's version, so a graph that saved the old value refuses to backward.
"""
import numpy as np

from minigrad.autograd import enable_grad, no_grad
from minigrad.heap import keep_freed_memory
from minigrad.kernels.validate import check_finite_scalar
from minigrad.nn.module import zero_grads
from minigrad.tensor import Tensor


class Optimizer:
    NON_NEGATIVE = ()

    def __init__(self, params, defaults):
        self._check_group(defaults)
        self.defaults = dict(defaults)
        self.state = {}
        self.param_groups = []
        if isinstance(params, Tensor):
            raise TypeError("optimizer params must be an iterable of Tensors or of dicts, got a Tensor")
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)
        keep_freed_memory()   # each training step re-allocates its activations: reuse warm pages

    def add_param_group(self, group):
        """Add a dict with 'params' (and optional hyperparameters overriding the defaults)."""
        group = dict(group)
        params = group["params"]
        _check_ordered(params)
        params = [params] if isinstance(params, Tensor) else list(params)
        if params and all(_is_named(p) for p in params):   # model.named_parameters(), as torch >= 2.6
            group["param_names"] = [name for name, _ in params]
            params = [p for _, p in params]
        elif any(_is_named(p) for p in params):
            raise ValueError("a parameter group mixes (name, parameter) pairs with bare parameters")
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, got {type(p).__name__}")
            if p.data.dtype.kind != "f":
                raise TypeError(f"optimizer can only optimize float Tensors, got {p.data.dtype}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor (use .detach() and requires_grad_())")
        ids = [id(p) for p in params]
        if len(set(ids)) != len(ids):
            raise ValueError("a parameter group contains the same parameter twice")
        if self.param_groups and ("param_names" in group) != ("param_names" in self.param_groups[0]):
            raise ValueError("all parameter groups must be given with names (named_parameters()) or all "
                             "without")
        taken = {id(p) for g in self.param_groups for p in g["params"]}
        if taken & set(ids):
            raise ValueError("some parameters appear in more than one parameter group")
        for key, value in self.defaults.items():
            group.setdefault(key, value)
        group["params"] = params
        self.param_groups.append(group)

    def zero_grad(self, set_to_none=True):
        """Drop (default) or zero the grads of every parameter."""
        zero_grads((p for group in self.param_groups for p in group["params"]), set_to_none)

    def step(self, closure=None):
        """Update every parameter that has a grad; `closure` (re-evaluating the loss) is optional."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:     # all first: a bad value must not half-apply a step
                self._check_group(group)
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    self._update(p, self._grad_of(p), group, self.state.setdefault(p, {}))
                    p._bump_version()
        return loss

    def _grad_of(self, p):
        grad = p.grad.data
        if grad.shape != p.data.shape or grad.dtype != p.data.dtype:
            raise ValueError(f"{type(self).__name__}.step: grad {grad.shape}:{grad.dtype} does not match "
                             f"its parameter {p.data.shape}:{p.data.dtype}")
        return grad

    def _check_group(self, group):
        """Raise ValueError for hyperparameters of `group` that `_update` cannot use."""
        name = type(self).__name__
        for key in self.NON_NEGATIVE:
            if check_finite_scalar(name, key, group[key]) < 0:
                raise ValueError(f"{name}: {key} must be >= 0, got {group[key]}")

    def _update(self, param, grad, group, state):
        """Change `param.data` in place from `grad` (numpy arrays), the group's hyperparameters, `state`."""
        raise NotImplementedError

    # ---- state_dict -------------------------------------------------------------------------
    def _indexed_params(self):
        return [p for group in self.param_groups for p in group["params"]]

    def state_dict(self):
        """{'state': {index: {name: array copy | number}}, 'param_groups': [{..., 'params': [index]}]}.

        Parameters are numbered in param_groups order, as in PyTorch; arrays are copies.
        """
        index = {id(p): i for i, p in enumerate(self._indexed_params())}
        state = {index[id(p)]: {k: _copy(v) for k, v in s.items()}
                 for p, s in self.state.items() if id(p) in index and s}
        groups = []
        for group in self.param_groups:
            saved = {k: _copy(v) for k, v in group.items() if k != "params"}
            saved["params"] = [index[id(p)] for p in group["params"]]
            groups.append(saved)
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Restore hyperparameters and state (copied; float state cast to each parameter's dtype)."""
        name = type(self).__name__
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(f"{name}.load_state_dict: the state has {len(saved_groups)} parameter groups, "
                             f"the optimizer {len(self.param_groups)}")
        for i, (saved, group) in enumerate(zip(saved_groups, self.param_groups)):
            if len(saved["params"]) != len(group["params"]):
                raise ValueError(f"{name}.load_state_dict: parameter group {i} has {len(saved['params'])} "
                                 f"parameters in the state but {len(group['params'])} in the optimizer")
        by_index = {}
        for saved, group in zip(saved_groups, self.param_groups):
            by_index.update(zip(saved["params"], group["params"]))
        new_state = {}
        for key, entry in state_dict["state"].items():
            p = by_index.get(int(key))
            if p is None:
                raise ValueError(f"{name}.load_state_dict: state for unknown parameter index {key}")
            new_state[p] = {k: _restore(v, p, f"{name}.load_state_dict: state[{key}][{k!r}]")
                            for k, v in entry.items()}
        for saved, group in zip(saved_groups, self.param_groups):
            group.update({k: _copy(v) for k, v in saved.items() if k != "params"})
        self.state = new_state

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines.extend(f"    {k}: {v}" for k, v in sorted(group.items()) if k != "params")
        return "\n".join(lines + [")"])


def _check_ordered(params):
    """A set's order changes between runs, so state_dict indices would pair state with the wrong
    parameters on reload: refuse it in a param group, as torch (which, like minigrad, still takes
    a bare set as the top-level `params`)."""
    if isinstance(params, (set, frozenset)):
        raise TypeError("optimizer parameters must be an ordered collection (a list), not a set: a set's "
                        "order changes between runs")


def _is_named(item):
    return (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)
            and isinstance(item[1], Tensor))


def _copy(value):
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, (list, tuple)):
        return type(value)(_copy(v) for v in value)
    return value


def _restore(value, param, where):
    if isinstance(value, Tensor):
        value = value.data
    if not isinstance(value, np.ndarray):
        return _copy(value)
    if value.ndim == 0:  # a scalar (e.g. a step count) that went through an array format
        return value.item()
    if value.shape != param.data.shape:
        raise ValueError(f"{where} has shape {value.shape}, the parameter {param.data.shape}")
    if value.dtype.kind not in "biuf":
        raise TypeError(f"{where} must be a real number array, got {value.dtype}")
    # int / bool buffers too (torch casts every state tensor but `step` to the parameter's dtype): an
    # int64 exp_avg made numpy's in-place updates fail with a casting error at the next step
    return np.array(value, dtype=param.data.dtype, order="C")
