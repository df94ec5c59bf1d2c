"""Sequential, ModuleList and ModuleDict: modules that hold other modules under index/key names."""
from collections import OrderedDict

from minigrad.nn.module import Module


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


def _index(idx, n):
    idx = int(idx)
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range for a container of {n} modules")
    return idx % n
