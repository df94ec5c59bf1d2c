"""Every Python-level op against PyTorch (fp64 forward and backward with a random cotangent).

Skipped cleanly when torch is not installed.
"""
import numpy as np
import pytest
from op_helpers import leaf, positive, randn

import minigrad as mg

torch = pytest.importorskip("torch")
TF = torch.nn.functional
IDS = np.array([[3, 0, 3], [1, 1, 2]])
MASK = np.array([True, False, True, False, True])

# name, inputs, minigrad fn, torch fn (the same maths spelt the PyTorch way)
CASES = [
    ("add_bcast", [randn(2, 3, 4), randn(3, 1)], lambda a, b: a + b, lambda a, b: a + b),
    ("rsub_scalar", [randn(3, 4)], lambda a: 2.5 - a, lambda a: 2.5 - a),
    ("div_bcast", [randn(2, 3), positive(3)], lambda a, b: a / b, lambda a, b: a / b),
    ("rdiv", [positive(4)], lambda a: 1.0 / a, lambda a: 1.0 / a),
    ("pow_tensor", [positive(3, 4), randn(4)], lambda a, b: a ** b, lambda a, b: a ** b),
    ("rpow", [randn(5)], lambda a: 3.0 ** a, lambda a: 3.0 ** a),
    ("pow_neg_int", [positive(5)], lambda a: a ** -2, lambda a: a ** -2),
    ("rsqrt", [positive(5)], lambda a: a.rsqrt(), torch.rsqrt),
    ("abs", [randn(5)], lambda a: a.abs(), torch.abs),
    ("clamp", [randn(4, 5)], lambda a: a.clamp(-0.3, 0.4), lambda a: a.clamp(-0.3, 0.4)),
    ("clamp_max", [randn(4, 5)], lambda a: a.clamp(max=0.1), lambda a: a.clamp(max=0.1)),
    ("maximum_ties", [np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.0, 3.0])], mg.maximum, torch.maximum),
    ("minimum_bcast", [randn(3, 4), randn(4)], mg.minimum, torch.minimum),
    ("where", [randn(3, 4), randn(4)], lambda a, b: mg.where(a > 0, a, b),
     lambda a, b: torch.where(a > 0, a, b)),
    ("relu_gelu_silu", [randn(6)], lambda a: a.relu() + a.gelu() + a.silu(),
     lambda a: TF.relu(a) + TF.gelu(a) + TF.silu(a)),
    ("tanh_sigmoid_softplus", [randn(6) * 4], lambda a: a.tanh() * a.sigmoid() + a.softplus(),
     lambda a: a.tanh() * a.sigmoid() + TF.softplus(a)),
    ("log_exp_sqrt", [positive(5)], lambda a: a.log() + a.exp() + a.sqrt(),
     lambda a: a.log() + a.exp() + a.sqrt()),
    ("sum_dims", [randn(2, 3, 4)], lambda a: a.sum((0, 2), keepdim=True),
     lambda a: a.sum((0, 2), keepdim=True)),
    ("mean", [randn(2, 3, 4)], lambda a: a.mean(-1), lambda a: a.mean(-1)),
    ("var", [randn(3, 5)], lambda a: a.var(0) + a.var(1, correction=0).sum(),
     lambda a: a.var(0) + a.var(1, correction=0).sum()),
    ("std_all", [randn(3, 5)], lambda a: a.std(), lambda a: a.std()),
    ("max_all_ties", [np.array([[1.0, 4.0], [4.0, 2.0]])], lambda a: a.max(), lambda a: a.max()),
    ("amax_dim", [randn(3, 5)], lambda a: a.amax(1), lambda a: a.amax(1)),
    ("min_dims", [randn(2, 3, 4)], lambda a: a.amin((0, 1)), lambda a: a.amin((0, 1))),
    ("max_dim_values", [randn(3, 5)], lambda a: a.max(1).values, lambda a: a.max(1).values),
    ("logsumexp", [randn(3, 5) * 10], lambda a: a.logsumexp(-1), lambda a: a.logsumexp(-1)),
    ("softmax", [randn(2, 3, 5)], lambda a: a.softmax(1), lambda a: a.softmax(1)),
    ("log_softmax", [randn(2, 3, 5) * 5], lambda a: a.log_softmax(-1), lambda a: a.log_softmax(-1)),
    ("reshape_permute", [randn(2, 3, 4)], lambda a: a.permute(2, 0, 1).reshape(4, 6).T,
     lambda a: a.permute(2, 0, 1).reshape(4, 6).T),
    ("flatten_transpose", [randn(2, 3, 4)], lambda a: a.transpose(0, 1).flatten(1),
     lambda a: a.transpose(0, 1).flatten(1)),
    ("squeeze_unsqueeze_expand", [randn(3, 1)], lambda a: a.unsqueeze(0).expand(2, 3, 4).squeeze(),
     lambda a: a.unsqueeze(0).expand(2, 3, 4).squeeze()),
    ("cat_stack", [randn(2, 3), randn(2, 3)], lambda a, b: mg.cat([a, mg.stack([a, b], -1).sum(-1)], 1),
     lambda a, b: torch.cat([a, torch.stack([a, b], -1).sum(-1)], 1)),
    ("split_chunk", [randn(7, 2)], lambda a: a.split(3)[2] * a.chunk(4)[3],
     lambda a: a.split(3)[2] * a.chunk(4)[3]),
    ("pad", [randn(2, 3, 4)], lambda a: mg.pad(a, (1, -1, 2, 0), value=-2.0),
     lambda a: TF.pad(a, (1, -1, 2, 0), value=-2.0)),
    ("getitem_basic", [randn(4, 5, 6)], lambda a: a[1:, None, ..., ::2], lambda a: a[1:, None, ..., ::2]),
    ("getitem_ids", [randn(4, 5)], lambda a: a[IDS], lambda a: a[torch.tensor(IDS)]),
    ("getitem_mask", [randn(5, 2)], lambda a: a[MASK], lambda a: a[torch.tensor(MASK)]),
    ("getitem_two_arrays", [randn(4, 5)], lambda a: a[IDS, IDS],
     lambda a: a[torch.tensor(IDS), torch.tensor(IDS)]),
    ("matmul_batched", [randn(2, 1, 3, 4), randn(5, 4, 2)], lambda a, b: a @ b, lambda a, b: a @ b),
    ("matmul_vec", [randn(4), randn(2, 4, 3)], lambda a, b: a @ b, lambda a, b: a @ b),
    ("embedding", [randn(4, 3)], lambda w: mg.embedding(IDS, w),
     lambda w: TF.embedding(torch.tensor(IDS), w)),
    ("embedding_pad", [randn(4, 3)], lambda w: mg.embedding(IDS, w, padding_idx=3),
     lambda w: TF.embedding(torch.tensor(IDS), w, padding_idx=3)),
    ("masked_fill", [randn(3, 4)], lambda a: a.masked_fill(a < 0, 0.5), lambda a: a.masked_fill(a < 0, 0.5)),
]


@pytest.mark.parametrize("name,inputs,fn,tfn", CASES, ids=[c[0] for c in CASES])
def test_matches_torch(name, inputs, fn, tfn):
    ours = [leaf(a) for a in inputs]
    theirs = [torch.tensor(a, requires_grad=True) for a in inputs]
    out, tout = fn(*ours), tfn(*theirs)
    assert out.shape == tuple(tout.shape)
    np.testing.assert_allclose(out.data, tout.detach().numpy(), rtol=1e-12, atol=1e-14)
    g = np.random.default_rng(0).standard_normal(out.shape)
    out.backward(mg.tensor(g, dtype=mg.float64))
    tout.backward(torch.tensor(g))
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.data, b.grad.numpy(), rtol=1e-11, atol=1e-13)
