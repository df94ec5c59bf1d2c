"""Sequential, ModuleList and ModuleDict: modules that hold other modules under index/key names;
ParameterList and ParameterDict: the same for parameters."""
from collections import OrderedDict

from minigrad.nn.module import Module
from minigrad.nn.parameter import Parameter
from minigrad.tensor import Tensor


class _IndexedModules(Module):
    """Modules held in order under index names "0", "1", ...: the list behaviour Sequential and
    ModuleList share (as torch, deleting or inserting renumbers them)."""

    def _renumber(self, modules):
        self._modules.clear()
        for i, m in enumerate(modules):
            self.add_module(str(i), m)

    def append(self, module):
        self.add_module(str(len(self._modules)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        items = list(self._modules.values())
        items.insert(index, module)
        self._renumber(items)
        return self if isinstance(self, Sequential) else None   # as torch: Sequential.insert chains

    def pop(self, index=-1):
        module = self[index]
        del self[index]
        return module

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __setitem__(self, idx, module):
        self.add_module(list(self._modules)[_index(idx, len(self))], module)

    def __delitem__(self, idx):
        items = list(self._modules.values())
        if isinstance(idx, slice):
            del items[idx]
        else:
            del items[_index(idx, len(items))]
        self._renumber(items)

    def __iadd__(self, modules):
        """`seq += modules`: extend in place (any iterable of modules), as torch."""
        return self.extend(modules)

    def __add__(self, other):
        if not isinstance(other, type(self)):
            return NotImplemented
        return type(self)().extend(list(self) + list(other))


class Sequential(_IndexedModules):
    """Calls its modules in order: `Sequential(a, b)(x) == b(a(x))`. Also takes an OrderedDict of names."""

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, m in modules[0].items():
                self.add_module(name, m)
        else:
            self.extend(modules)

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return Sequential(OrderedDict(list(self._modules.items())[idx]))
        return list(self._modules.values())[_index(idx, len(self))]


class ModuleList(_IndexedModules):
    """A list of modules, registered as `0`, `1`, ... so their parameters are found and saved."""

    def __init__(self, modules=()):
        super().__init__()
        self.extend(modules)

    def __getitem__(self, idx):
        items = list(self._modules.values())
        if isinstance(idx, slice):
            return ModuleList(items[idx])
        return items[_index(idx, len(items))]

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList has no forward(); iterate over it in your module's forward")


class ModuleDict(Module):
    """A dict of modules registered under their keys."""

    def __init__(self, modules=None):
        super().__init__()
        for name, m in (modules or {}).items():
            self.add_module(name, m)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def pop(self, key):
        module = self._modules[key]
        del self._modules[key]
        return module

    def update(self, modules):
        """Add (or replace) modules from a mapping or an iterable of (key, module) pairs."""
        for name, m in (modules.items() if hasattr(modules, "items") else modules):
            self.add_module(name, m)

    def clear(self):
        self._modules.clear()

    def __contains__(self, key):
        return key in self._modules

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict has no forward(); index it in your module's forward")


def _as_parameter(value):
    """torch's rule: a Tensor that is not a Parameter is wrapped in one (requires_grad kept as True)."""
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        return Parameter(value.data)
    if not isinstance(value, Parameter):
        raise TypeError(f"expected a Parameter or a Tensor, got {type(value).__name__}")
    return value


class ParameterList(Module):
    """A list of parameters registered as `0`, `1`, ... (plain Tensors are wrapped in Parameter)."""

    def __init__(self, values=None):
        super().__init__()
        for v in values or ():
            self.append(v)

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.values())

    def __getitem__(self, idx):
        items = list(self._parameters.values())
        if isinstance(idx, slice):
            return ParameterList(items[idx])
        return items[_index(idx, len(items))]

    def __setitem__(self, idx, value):
        self.register_parameter(list(self._parameters)[_index(idx, len(self))], _as_parameter(value))

    def append(self, value):
        self.register_parameter(str(len(self._parameters)), _as_parameter(value))
        return self

    def extend(self, values):
        for v in values:
            self.append(v)
        return self

    def __iadd__(self, values):
        return self.extend(values)

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterList has no forward(); iterate over it in your module's forward")


class ParameterDict(Module):
    """A dict of parameters registered under their keys (plain Tensors are wrapped in Parameter)."""

    def __init__(self, parameters=None):
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key):
        return self._parameters[key]

    def __setitem__(self, key, value):
        self.register_parameter(key, _as_parameter(value))

    def __delitem__(self, key):
        del self._parameters[key]

    def pop(self, key):
        value = self._parameters[key]
        del self._parameters[key]
        return value

    def update(self, parameters):
        for key, v in (parameters.items() if hasattr(parameters, "items") else parameters):
            self[key] = v

    def clear(self):
        self._parameters.clear()

    def __contains__(self, key):
        return key in self._parameters

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters)

    def keys(self):
        return self._parameters.keys()

    def values(self):
        return self._parameters.values()

    def items(self):
        return self._parameters.items()

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterDict has no forward(); index it in your module's forward")


def _index(idx, n):
    idx = int(idx)
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range for a container of {n} modules")
    return idx % n
