"""minigrad.utils.data: datasets, samplers and DataLoader (batching, default_collate, drop_last, len,
shuffling from a generator, samplers, iterable datasets), against torch.utils.data where it makes sense."""
import subprocess
import sys

import numpy as np
import pytest

import minigrad as mg
import minigrad.utils.data as mdata


def _dataset(n=10):
    x = mg.tensor(np.arange(n * 3, dtype=np.float32).reshape(n, 3))
    y = mg.tensor(np.arange(n, dtype=np.int64))
    return mdata.TensorDataset(x, y)


def test_lazy_attribute_and_import():
    assert mg.utils.data.DataLoader is mdata.DataLoader
    code = "import minigrad as mg; mg.utils.data.DataLoader; mg.utils.checkpoint.checkpoint"
    subprocess.run([sys.executable, "-c", code], check=True)      # a fresh interpreter: nothing imported yet


def test_tensor_dataset_items_and_checks():
    ds = _dataset()
    assert len(ds) == 10
    x, y = ds[4]
    np.testing.assert_array_equal(x.data, [12.0, 13.0, 14.0])
    assert int(y.item()) == 4 and isinstance(ds[4], tuple)
    with pytest.raises(ValueError, match="size mismatch"):
        mdata.TensorDataset(mg.zeros(3, 2), mg.zeros(4))
    with pytest.raises(ValueError, match="at least one"):
        mdata.TensorDataset()


def test_batch_shapes_dtypes_len_and_drop_last():
    ds = _dataset()
    loader = mdata.DataLoader(ds, batch_size=4)
    batches = list(loader)
    assert len(loader) == 3 == len(batches)
    assert [tuple(b[0].shape) for b in batches] == [(4, 3), (4, 3), (2, 3)]
    assert all(isinstance(b, list) and b[0].dtype == np.float32 and b[1].dtype == np.int64 for b in batches)
    np.testing.assert_array_equal(batches[2][1].data, [8, 9])
    dropped = mdata.DataLoader(ds, batch_size=4, drop_last=True)
    assert len(dropped) == 2 == len(list(dropped))
    assert len(mdata.DataLoader(ds, batch_size=5, drop_last=True)) == 2
    assert len(mdata.DataLoader(ds)) == 10


def test_shuffle_is_reproducible_with_a_seeded_generator_and_fresh_each_epoch():
    ds = _dataset(20)

    def epochs(loader, n=2):
        return [np.concatenate([y.data for _, y in loader]).tolist() for _ in range(n)]

    a = epochs(mdata.DataLoader(ds, batch_size=3, shuffle=True, generator=mg.Generator().manual_seed(7)))
    b = epochs(mdata.DataLoader(ds, batch_size=3, shuffle=True, generator=mg.Generator().manual_seed(7)))
    assert a == b
    assert a[0] != a[1]                              # a fresh order every epoch
    for order in a:
        assert sorted(order) == list(range(20))      # every item exactly once
    mg.manual_seed(3)                                # no generator: the global one
    c = epochs(mdata.DataLoader(ds, batch_size=3, shuffle=True), 1)
    mg.manual_seed(3)
    d = epochs(mdata.DataLoader(ds, batch_size=3, shuffle=True), 1)
    assert c == d and sorted(c[0]) == list(range(20))


def test_shuffled_batches_keep_pairs_together():
    ds = _dataset(9)
    for x, y in mdata.DataLoader(ds, batch_size=4, shuffle=True, generator=mg.Generator().manual_seed(1)):
        np.testing.assert_array_equal(x.data[:, 0], y.data * 3)


class _Items(mdata.Dataset):
    """Items of every kind default_collate takes."""

    def __len__(self):
        return 5

    def __getitem__(self, i):
        return {"a": np.full((2,), i, dtype=np.int32), "f": float(i) / 2, "i": i, "b": i % 2 == 0,
                "s": f"item{i}", "n": np.float32(i), "l": [i, (float(i), i)]}


def test_default_collate_matches_torch():
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader as TorchLoader

    mine = list(mdata.DataLoader(_Items(), batch_size=2))
    theirs = list(TorchLoader(_Items(), batch_size=2))
    assert len(mine) == len(theirs) == 3

    def compare(m, t):
        if isinstance(t, torch.Tensor):
            assert isinstance(m, mg.Tensor)
            assert m.dtype == np.dtype(str(t.dtype).replace("torch.", ""))
            np.testing.assert_array_equal(m.data, t.numpy())
        elif isinstance(t, dict):
            assert isinstance(m, dict) and m.keys() == t.keys()
            for k in t:
                compare(m[k], t[k])
        elif isinstance(t, list):
            assert type(m) is list and len(m) == len(t)
            for a, b in zip(m, t):
                compare(a, b)
        else:
            assert m == t

    for m, t in zip(mine, theirs):
        compare(m, t)


def test_stacked_batches_keep_gradients():
    x = mg.tensor(np.ones((4, 2)), requires_grad=True)
    ds = mdata.TensorDataset(x * 2)
    (batch,) = next(iter(mdata.DataLoader(ds, batch_size=4)))
    batch.sum().backward()
    np.testing.assert_array_equal(x.grad.data, 2.0)


def test_batch_size_none_converts_items_unbatched():
    loader = mdata.DataLoader(_Items(), batch_size=None)
    items = list(loader)
    assert len(loader) == len(items) == 5
    assert isinstance(items[3]["a"], mg.Tensor) and tuple(items[3]["a"].shape) == (2,)
    assert items[3]["i"] == 3 and items[3]["s"] == "item3"
    with pytest.raises(ValueError, match="drop_last"):
        mdata.DataLoader(_Items(), batch_size=None, drop_last=True)


def test_rejected_arguments():
    ds = _dataset()
    with pytest.raises(ValueError, match="num_workers"):
        mdata.DataLoader(ds, num_workers=2)
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="batch_size"):
            mdata.DataLoader(ds, batch_size=bad)
    with pytest.raises(TypeError, match="generator"):
        mdata.DataLoader(ds, shuffle=True, generator=7)
    with pytest.raises(NotImplementedError):
        len(mdata.Dataset())
    with pytest.raises(RuntimeError, match="equal size"):
        mdata.default_collate([[1, 2], [3]])
    with pytest.raises(TypeError, match="found"):
        mdata.default_collate([object()])


def test_tensor_dataset_batches_equal_item_by_item_collation():
    """A TensorDataset under the default collation is indexed once per batch; the batches (values,
    dtypes, gradients) equal those of collating the items one by one, as any other dataset is."""
    x = mg.tensor(np.random.default_rng(0).standard_normal((11, 3)), requires_grad=True)
    y = mg.tensor(np.arange(11) % 4)
    runs = []
    for collate in (None, lambda items: mdata.default_collate(items)):
        loader = mdata.DataLoader(mdata.TensorDataset(x, y), batch_size=4, shuffle=True,
                                  generator=np.random.default_rng(7), collate_fn=collate)
        x.grad = None
        batches = list(loader)
        sum((bx * (i + 1)).sum() for i, (bx, _) in enumerate(batches)).backward()
        assert [(bx.shape, by.dtype) for bx, by in batches] == [((4, 3), np.int64)] * 2 + [((3, 3), np.int64)]
        runs.append((batches, x.grad.data.copy()))
    (fast, g_fast), (slow, g_slow) = runs
    for (fx, fy), (sx, sy) in zip(fast, slow):
        np.testing.assert_array_equal(fx.data, sx.data)
        np.testing.assert_array_equal(fy.data, sy.data)
    np.testing.assert_array_equal(g_fast, g_slow)


# ---- samplers, subsets, iterable datasets -----------------------------------------------------------
class _Stream(mdata.IterableDataset):
    def __init__(self, n, with_len=True):
        self.n, self.with_len = n, with_len

    def __iter__(self):
        return iter(np.arange(self.n, dtype=np.int64) * 10)

    def __len__(self):
        if not self.with_len:
            raise TypeError("no len")
        return self.n


def _ys(loader):
    return [b[1].data.tolist() for b in loader]


def test_subset_concat_and_random_split():
    ds = _dataset(10)
    sub = mdata.Subset(ds, [7, 2, 9])
    assert len(sub) == 3 and int(sub[1][1].item()) == 2 and int(sub[-1][1].item()) == 9
    with pytest.raises(IndexError, match="out of range"):
        sub[3]
    both = ds + sub
    assert isinstance(both, mdata.ConcatDataset) and len(both) == 13
    assert [int(both[i][1].item()) for i in (0, 9, 10, 12, -1)] == [0, 9, 7, 9, 9]
    with pytest.raises(IndexError):
        both[13]
    parts = mdata.random_split(ds, [3, 7], generator=mg.Generator().manual_seed(1))
    got = sorted(int(p[i][1].item()) for p in parts for i in range(len(p)))
    assert [len(p) for p in parts] == [3, 7] and got == list(range(10))
    again = mdata.random_split(ds, [3, 7], generator=mg.Generator().manual_seed(1))
    assert parts[0].indices == again[0].indices
    with pytest.raises(ValueError, match="does not equal the length"):
        mdata.random_split(ds, [3, 8])
    with pytest.raises(ValueError, match="ConcatDataset"):
        mdata.ConcatDataset([])
    assert _ys(mdata.DataLoader(sub, batch_size=2)) == [[7, 2], [9]]


@pytest.mark.parametrize("n, fractions", [(10, [0.3, 0.7]), (11, [0.5, 0.5]), (7, [0.1, 0.2, 0.3, 0.4]),
                                          (5, [1 / 3, 1 / 3, 1 / 3])])
def test_random_split_fraction_lengths_match_torch(n, fractions):
    torch = pytest.importorskip("torch")
    parts = mdata.random_split(_dataset(n), fractions, generator=mg.Generator().manual_seed(0))
    ours = [len(p) for p in parts]
    theirs = [len(p) for p in torch.utils.data.random_split(range(n), fractions)]
    assert ours == theirs


def test_batch_sampler_and_sequential_batches_match_torch():
    torch = pytest.importorskip("torch")
    tdata = torch.utils.data
    for n, b, drop in [(10, 3, False), (10, 3, True), (9, 3, True), (2, 5, False)]:
        ours = mdata.BatchSampler(mdata.SequentialSampler(range(n)), b, drop)
        theirs = tdata.BatchSampler(tdata.SequentialSampler(range(n)), b, drop)
        assert list(ours) == list(theirs) and len(ours) == len(theirs)


def test_samplers_draw_what_they_say():
    gen = mg.Generator().manual_seed(3)
    perm = list(mdata.RandomSampler(range(6), generator=gen))
    assert sorted(perm) == list(range(6))
    more = list(mdata.RandomSampler(range(4), num_samples=10, generator=gen))
    assert len(more) == 10 and all(more.count(i) >= 2 for i in range(4))   # two permutations + 2
    drawn = list(mdata.RandomSampler(range(4), replacement=True, num_samples=50, generator=gen))
    assert len(drawn) == 50 and set(drawn) <= set(range(4))
    assert sorted(mdata.SubsetRandomSampler([5, 1, 8], generator=gen)) == [1, 5, 8]
    w = mdata.WeightedRandomSampler([0.0, 1.0, 3.0], 4000, generator=gen)
    counts = np.bincount(list(w), minlength=3)
    assert counts[0] == 0 and 0.7 < counts[2] / counts.sum() < 0.8 and len(w) == 4000
    assert sorted(mdata.WeightedRandomSampler([1, 0, 2, 5], 3, replacement=False, generator=gen)) == [0, 2, 3]
    for make, match in [(lambda: mdata.WeightedRandomSampler([1.0, -1.0], 2), "non-negative"),
                        (lambda: mdata.WeightedRandomSampler([1, 0], 2, replacement=False), "cannot draw 2"),
                        (lambda: mdata.WeightedRandomSampler([1.0], 0), "num_samples"),
                        (lambda: mdata.RandomSampler(range(3), num_samples=0), "num_samples"),
                        (lambda: mdata.BatchSampler(range(3), 2, drop_last=1), "drop_last")]:
        with pytest.raises(ValueError, match=match):
            make()


def test_loader_with_sampler_and_batch_sampler():
    ds = _dataset(10)
    assert _ys(mdata.DataLoader(ds, batch_size=3, sampler=[9, 0, 4, 4])) == [[9, 0, 4], [4]]
    assert _ys(mdata.DataLoader(ds, batch_sampler=[[1, 2], [8], [0, 0, 3]])) == [[1, 2], [8], [0, 0, 3]]
    loader = mdata.DataLoader(ds, batch_sampler=mdata.BatchSampler(range(7), 3, True), pin_memory=True)
    assert len(loader) == 2 and _ys(loader) == [[0, 1, 2], [3, 4, 5]]
    unbatched = list(mdata.DataLoader(ds, batch_size=None, sampler=[3, 1]))
    assert [int(y.item()) for _, y in unbatched] == [3, 1]
    sampler = mdata.RandomSampler(ds, generator=mg.Generator().manual_seed(5))
    seeded = mdata.DataLoader(ds, batch_size=4, sampler=sampler)
    same = mdata.DataLoader(ds, batch_size=4, shuffle=True, generator=mg.Generator().manual_seed(5))
    assert _ys(seeded) == _ys(same)


@pytest.mark.parametrize("kwargs, match", [
    (dict(sampler=[0], shuffle=True), "sampler option is mutually exclusive with shuffle"),
    (dict(batch_sampler=[[0]], batch_size=2), "batch_sampler option is mutually exclusive"),
    (dict(batch_sampler=[[0]], drop_last=True), "batch_sampler option is mutually exclusive"),
    (dict(batch_sampler=[[0]], sampler=[0]), "batch_sampler option is mutually exclusive"),
    (dict(num_workers=0, prefetch_factor=2), "num_workers"),
])
def test_loader_rejects_like_torch(kwargs, match):
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError, match=match):
        mdata.DataLoader(_dataset(4), **kwargs)
    if "prefetch_factor" not in kwargs:
        with pytest.raises(ValueError, match=match):
            torch.utils.data.DataLoader(range(4), **kwargs)


def test_iterable_dataset_batches_as_it_streams():
    batches = list(mdata.DataLoader(_Stream(7), batch_size=3))
    assert [b.data.tolist() for b in batches] == [[0, 10, 20], [30, 40, 50], [60]]
    assert batches[0].dtype == np.int64
    assert len(mdata.DataLoader(_Stream(7), batch_size=3)) == 3
    assert len(mdata.DataLoader(_Stream(7), batch_size=3, drop_last=True)) == 2
    dropped = mdata.DataLoader(_Stream(7), batch_size=3, drop_last=True)
    assert [b.data.tolist() for b in dropped][-1] == [30, 40, 50]
    assert [int(x.item()) for x in mdata.DataLoader(_Stream(3), batch_size=None)] == [0, 10, 20]
    with pytest.raises(TypeError):
        len(mdata.DataLoader(_Stream(3, with_len=False), batch_size=2))
    for kwargs in (dict(shuffle=True), dict(sampler=[0]), dict(batch_sampler=[[0]])):
        with pytest.raises(ValueError, match="IterableDataset takes no shuffle"):
            mdata.DataLoader(_Stream(3), **kwargs)
    with pytest.raises(TypeError, match="do not index it"):
        _Stream(3)[0]
