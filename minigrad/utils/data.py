"""torch.utils.data in one process: datasets (`Dataset`, `IterableDataset`, `TensorDataset`, `Subset`,
`ConcatDataset`, `random_split`), samplers (`SequentialSampler`, `RandomSampler`,
`SubsetRandomSampler`, `WeightedRandomSampler`, `BatchSampler`) and a `DataLoader` whose batches
are collated as torch's `default_collate` makes them.

Random draws come from a numpy Generator (`minigrad.Generator`) passed as `generator`, or from
minigrad's global generator at the start of each epoch: seeded runs repeat, but the orders are not
torch's (a different random stream).

Collation (of the items of one batch, all of the same kind): Tensors are stacked along a new dim 0
with `minigrad.stack` (so gradients flow to the items); numpy arrays too (as Tensors of their dtype);
Python floats become a float64 Tensor, ints an int64 one, bools a bool one; strings stay a list;
tuples and lists are collated element by element into a list (as torch does, for TensorDataset's
tuples too); dicts key by key. `batch_size=None` turns batching off: each item is passed on with its
numpy arrays made Tensors (torch's `default_convert`).
"""
import bisect
import collections.abc
import math
import numbers

import numpy as np

from minigrad import random as _random
from minigrad.ops.join import stack
from minigrad.tensor import Tensor

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "Subset", "ConcatDataset", "random_split",
           "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler",
           "BatchSampler", "DataLoader", "default_collate", "default_convert"]


class Dataset:
    """A map-style dataset: subclasses define `__getitem__(index)` and `__len__()`."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __len__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __len__")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A stream: subclasses define `__iter__()`; the DataLoader batches consecutive items."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")

    def __getitem__(self, index):
        raise TypeError(f"{type(self).__name__} is an IterableDataset: iterate over it, do not index it")


class TensorDataset(Dataset):
    """Item i is the tuple (t[i] for t in tensors); all tensors have the same size in dim 0."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset: expects at least one tensor")
        for i, t in enumerate(tensors):
            if not isinstance(t, Tensor):
                raise TypeError(f"TensorDataset: argument {i} is a {type(t).__name__}, not a Tensor")
            if t.ndim == 0:
                raise ValueError(f"TensorDataset: tensor {i} is 0-dim; each needs a dim 0 to index")
        sizes = [t.shape[0] for t in tensors]
        if any(n != sizes[0] for n in sizes):
            raise ValueError(f"TensorDataset: size mismatch between tensors: dim 0 sizes {sizes}")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


def _index(name, i, n):
    """Index `i` of a length-`n` dataset (negative counts from the end), or IndexError."""
    if isinstance(i, (bool, np.bool_)) or not isinstance(i, numbers.Integral):
        raise TypeError(f"{name}: index must be an int, got {type(i).__name__}")
    if not -n <= i < n:
        raise IndexError(f"{name}: index {i} out of range for length {n}")
    return int(i) % n if n else int(i)


class Subset(Dataset):
    """The items of `dataset` at `indices`, in that order: subset[i] = dataset[indices[i]]."""

    def __init__(self, dataset, indices):
        self.dataset, self.indices = dataset, [int(i) for i in indices]

    def __getitem__(self, index):
        if isinstance(index, (list, tuple, np.ndarray)):      # a batch of indices
            return self.dataset[[self.indices[_index("Subset", i, len(self))] for i in index]]
        return self.dataset[self.indices[_index("Subset", index, len(self))]]

    def __len__(self):
        return len(self.indices)


class ConcatDataset(Dataset):
    """Map-style datasets one after another: item i is found in the dataset whose range holds it."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError("ConcatDataset: does not support IterableDataset")
        self.cumulative_sizes = np.cumsum([len(d) for d in self.datasets]).tolist()

    def __getitem__(self, index):
        i = _index("ConcatDataset", index, len(self))
        k = bisect.bisect_right(self.cumulative_sizes, i)
        return self.datasets[k][i - (self.cumulative_sizes[k - 1] if k else 0)]

    def __len__(self):
        return self.cumulative_sizes[-1]


def random_split(dataset, lengths, generator=None):
    """Non-overlapping random Subsets of the given lengths (ints summing to len(dataset), or fractions
    summing to 1: floor(f * n) each, the remainder handed out one by one from the first, as torch)."""
    n = len(dataset)
    lengths = list(lengths)
    if lengths and all(isinstance(x, float) for x in lengths) and math.isclose(sum(lengths), 1.0) \
            and sum(lengths) <= 1.0 + 1e-12:
        if any(not 0.0 <= f <= 1.0 for f in lengths):
            raise ValueError(f"random_split: fractions must be in [0, 1], got {lengths}")
        sizes = [math.floor(n * f) for f in lengths]
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
        lengths = sizes
    for x in lengths:
        if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Integral) or x < 0:
            raise ValueError(f"random_split: lengths must be non-negative ints or fractions summing to 1, "
                             f"got {lengths}")
    if sum(lengths) != n:
        raise ValueError(f"random_split: sum of input lengths {sum(lengths)} does not equal the length of "
                         f"the input dataset {n}")
    order = _generator(generator).permutation(n).tolist()
    ends = np.cumsum(lengths).tolist()
    return [Subset(dataset, order[end - k:end]) for k, end in zip(lengths, ends)]


def _check_positive(name, key, value):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or value <= 0:
        raise ValueError(f"{name}: {key} should be a positive integer value, got {value!r}")


def _generator(generator):
    if generator is None:
        return _random.default_generator()
    if not isinstance(generator, np.random.Generator):
        raise TypeError(f"generator must be a numpy Generator (e.g. minigrad.Generator), "
                        f"got {type(generator).__name__}")
    return generator


class Sampler:
    """An iterable of dataset indices (or, for a batch sampler, of lists of them)."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A fresh permutation of the indices per epoch; with replacement (or num_samples set), num_samples
    draws (default len(data_source)), uniform, with or without replacement."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source, self.replacement, self.generator = data_source, bool(replacement), generator
        _generator(generator)
        if num_samples is not None:
            _check_positive("RandomSampler", "num_samples", num_samples)
        self._num_samples = num_samples

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else int(self._num_samples)

    def __iter__(self):
        n, gen = len(self.data_source), _generator(self.generator)
        if self.replacement:
            return iter(gen.integers(0, n, self.num_samples).tolist())
        whole, rest = divmod(self.num_samples, n) if n else (0, 0)
        order = [i for _ in range(whole) for i in gen.permutation(n).tolist()]
        return iter(order + gen.permutation(n).tolist()[:rest])

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a fresh random order each epoch."""

    def __init__(self, indices, generator=None):
        self.indices, self.generator = list(indices), generator
        _generator(generator)

    def __iter__(self):
        return iter([self.indices[i] for i in _generator(self.generator).permutation(len(self.indices))])

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """num_samples indices drawn with probabilities proportional to `weights` (with replacement by
    default; without it, num_samples must not exceed the number of non-zero weights)."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        name = "WeightedRandomSampler"
        _check_positive(name, "num_samples", num_samples)
        w = np.asarray(getattr(weights, "data", weights), dtype=np.float64)
        if w.ndim != 1 or w.size == 0:
            raise ValueError(f"{name}: weights should be a non-empty 1-d sequence, got shape {w.shape}")
        if not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
            raise ValueError(f"{name}: weights must be finite, non-negative and not all zero")
        if not replacement and num_samples > np.count_nonzero(w):
            raise ValueError(f"{name}: cannot draw {num_samples} samples without replacement from "
                             f"{np.count_nonzero(w)} non-zero weights")
        _generator(generator)
        self.weights, self.num_samples = w, int(num_samples)
        self.replacement, self.generator = bool(replacement), generator

    def __iter__(self):
        gen = _generator(self.generator)
        p = self.weights / self.weights.sum()
        return iter(gen.choice(len(p), self.num_samples, replace=self.replacement, p=p).tolist())

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of batch_size indices from `sampler` (the last one shorter unless drop_last)."""

    def __init__(self, sampler, batch_size, drop_last):
        _check_positive("BatchSampler", "batch_size", batch_size)
        if not isinstance(drop_last, bool):
            raise ValueError(f"BatchSampler: drop_last should be a boolean value, got {drop_last!r}")
        self.sampler, self.batch_size, self.drop_last = sampler, int(batch_size), drop_last

    def __iter__(self):
        batch = []
        for i in self.sampler:
            batch.append(i)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(x, "_fields")


def default_collate(batch):
    """A list of items (each a Tensor, numpy array, number, string, or a tuple / list / dict of those)
    made one batch, as torch.utils.data.default_collate."""
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(batch, 0)
    if isinstance(elem, np.ndarray) and elem.dtype.kind not in "SUO":
        return stack([Tensor(np.array(b)) for b in batch], 0)
    if isinstance(elem, np.generic) and elem.dtype.kind not in "SUO":
        return Tensor(np.array(batch))
    if isinstance(elem, bool):
        return Tensor(np.array(batch, dtype=np.bool_))
    if isinstance(elem, float):
        return Tensor(np.array(batch, dtype=np.float64))
    if isinstance(elem, numbers.Integral):
        return Tensor(np.array(batch, dtype=np.int64))
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, collections.abc.Mapping):
        return {key: default_collate([d[key] for d in batch]) for key in elem}
    if _is_namedtuple(elem):
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, (tuple, list)):
        if any(len(b) != len(elem) for b in batch):
            raise RuntimeError("default_collate: each element in list of batch should be of equal size")
        return [default_collate(list(s)) for s in zip(*batch)]
    raise TypeError("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
                    f"found {type(elem)}")


def default_convert(item):
    """An item with its numpy arrays (and numpy scalars) made Tensors, as torch's default_convert."""
    if isinstance(item, (np.ndarray, np.generic)) and item.dtype.kind not in "SUO":
        return Tensor(np.array(item))
    if isinstance(item, collections.abc.Mapping):
        return {key: default_convert(v) for key, v in item.items()}
    if _is_namedtuple(item):
        return type(item)(*(default_convert(v) for v in item))
    if isinstance(item, (tuple, list)):
        return [default_convert(v) for v in item]
    return item


class DataLoader:
    """Batches of `dataset`, single-process, with torch's arguments and their rules.

    Map-style datasets are read in the order of `sampler` (default: sequential, or a RandomSampler
    with shuffle=True, a fresh permutation each epoch), grouped by `batch_size` / `drop_last` or by
    `batch_sampler`; iterable datasets are batched as they stream. `collate_fn` makes the batch
    (default_collate; default_convert with batch_size=None). pin_memory, timeout and
    persistent_workers are accepted and have nothing to do on one CPU process; num_workers must be 0.
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 generator=None, *, prefetch_factor=None, persistent_workers=False):
        if num_workers != 0 or worker_init_fn is not None or prefetch_factor is not None:
            raise ValueError(f"DataLoader: num_workers={num_workers!r} is not supported; minigrad loads "
                             "in the main process only (num_workers=0, no worker_init_fn / prefetch_factor)")
        if batch_size is not None:
            _check_positive("DataLoader", "batch_size", batch_size)
        if generator is not None:
            _generator(generator)
        iterable = isinstance(dataset, IterableDataset)
        if iterable and (shuffle or sampler is not None or batch_sampler is not None):
            raise ValueError("DataLoader: an IterableDataset takes no shuffle, sampler or batch_sampler "
                             "(it decides its own order)")
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("DataLoader: batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("DataLoader: batch_size=None option disables auto-batching and is "
                             "mutually exclusive with drop_last")
        if sampler is None and not iterable:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        if batch_sampler is None and batch_size is not None and not iterable:
            batch_sampler = BatchSampler(sampler, batch_size, bool(drop_last))
        self.dataset, self.generator = dataset, generator
        self.batch_size = None if batch_size is None else int(batch_size)
        self.drop_last, self.shuffle = bool(drop_last), bool(shuffle)
        self.sampler, self.batch_sampler = sampler, batch_sampler
        self.num_workers, self.pin_memory, self.timeout = 0, bool(pin_memory), timeout
        self.persistent_workers = bool(persistent_workers)
        auto = batch_size is not None or batch_sampler is not None
        self.collate_fn = collate_fn or (default_collate if auto else default_convert)

    def __iter__(self):
        if isinstance(self.dataset, IterableDataset):
            yield from self._stream()
            return
        if self.batch_sampler is None:
            for i in self.sampler:
                yield self.collate_fn(self.dataset[i])
            return
        # a TensorDataset batch under the default collation is each tensor indexed by the batch's
        # indices at once: the same values and gradients as stacking the items, without one indexing
        # op per item (~20 us each)
        whole = (self.collate_fn is default_collate
                 and type(self.dataset).__getitem__ is TensorDataset.__getitem__)
        for indices in self.batch_sampler:
            if whole:
                yield list(self.dataset[np.asarray(indices, dtype=np.int64)])
            else:
                yield self.collate_fn([self.dataset[i] for i in indices])

    def _stream(self):
        if self.batch_size is None:
            for item in self.dataset:
                yield self.collate_fn(item)
            return
        batch = []
        for item in self.dataset:
            batch.append(item)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def __len__(self):
        if isinstance(self.dataset, IterableDataset):
            n = len(self.dataset)        # TypeError when the stream has no __len__, as in torch
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)
        return len(self.batch_sampler if self.batch_sampler is not None else self.sampler)
