"""minigrad.utils.data: Dataset, TensorDataset and DataLoader (batching, default_collate, drop_last,
len, shuffling from a generator), against torch.utils.data where it makes sense."""
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
