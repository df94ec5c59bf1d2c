"""Check analytic gradients against fp64 central differences.

For L(x) = sum_k <c_k, f_k(x)> with random cotangents c_k (a plain `sum()` can hide errors that
cancel), each input x requiring grad gets the per-tensor metric

    err(x) = max|g - fd| / max|fd|,    g = dL/dx by backward,  fd_i = (L(x + eps e_i) - L(x - eps e_i)) / 2eps

and passes when err <= rtol, or when max|g - fd| <= atol (for grads that are ~0 everywhere).
`fast=True` replaces the per-element loop with random projections u: fd_u = dL/du, g_u = <g, u>.
"""
import numpy as np

from minigrad.autograd.engine import backward
from minigrad.autograd.grad_mode import no_grad


class GradcheckError(AssertionError):
    """Raised by gradcheck when an analytic gradient disagrees with finite differences."""


def _outputs(fn, inputs):
    from minigrad.tensor import Tensor

    out = fn(*inputs)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [o for o in outs if isinstance(o, Tensor) and o.data.dtype.kind == "f"]


def _loss(fn, inputs, cotangents):
    with no_grad():
        outs = _outputs(fn, inputs)
    return sum(float(np.vdot(c, o.data)) for c, o in zip(cotangents, outs))


def gradcheck(fn, inputs, eps=1e-6, atol=1e-8, rtol=1e-6, fast=False, n_projections=6, seed=0,
              raise_exception=True):
    """Compare backward with central differences for every input that requires grad.

    fn: callable taking `inputs` (Tensors and anything else) and returning a Tensor or a tuple.
    Inputs requiring grad must be float64. Returns True, or raises GradcheckError naming the input,
    its worst element, the analytic and numeric values (returns False if raise_exception=False).
    Also returns the per-input errors as `gradcheck.last_errors` (list of floats) for reporting.
    """
    from minigrad.tensor import Tensor

    rng = np.random.default_rng(seed)
    checked = [(i, x) for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    if not checked:
        raise ValueError("gradcheck: no input requires grad")
    for i, x in checked:
        if x.data.dtype != np.float64:
            raise TypeError(f"gradcheck: input {i} is {x.dtype}; finite differences need float64")

    saved_grads = [x.grad for _, x in checked]
    for _, x in checked:
        x.grad = None
    outs = _outputs(fn, inputs)
    if not outs:
        raise ValueError("gradcheck: fn returned no float tensor")
    cotangents = [rng.standard_normal(o.shape) for o in outs]
    diff_outs = [(o, c) for o, c in zip(outs, cotangents) if o.requires_grad]
    if diff_outs:
        backward([o for o, _ in diff_outs], [c.astype(o.dtype) for o, c in diff_outs])
    analytic = [np.zeros_like(x.data) if x.grad is None else x.grad.data.copy() for _, x in checked]
    for (_, x), g in zip(checked, saved_grads):
        x.grad = g

    errors, failures = [], []
    for (i, x), g in zip(checked, analytic):
        flat = x.data.reshape(-1)
        if fast:
            fd, an = [], []
            for _ in range(n_projections):
                u = rng.standard_normal(x.shape)
                base = x.data.copy()
                x.data[...] = base + eps * u
                lp = _loss(fn, inputs, cotangents)
                x.data[...] = base - eps * u
                lm = _loss(fn, inputs, cotangents)
                x.data[...] = base
                fd.append((lp - lm) / (2 * eps))
                an.append(float(np.vdot(g, u)))
            fd, an = np.array(fd), np.array(an)
        else:
            fd = np.empty(flat.size)
            for k in range(flat.size):
                orig = flat[k]
                flat[k] = orig + eps
                lp = _loss(fn, inputs, cotangents)
                flat[k] = orig - eps
                lm = _loss(fn, inputs, cotangents)
                flat[k] = orig
                fd[k] = (lp - lm) / (2 * eps)
            an = g.reshape(-1)
        diff = np.abs(an - fd)
        scale = np.abs(fd).max() if fd.size else 0.0
        max_diff = diff.max() if diff.size else 0.0
        err = max_diff / scale if scale > 0 else max_diff
        errors.append(float(err))
        if not (err <= rtol or max_diff <= atol):
            k = int(diff.argmax())
            where = (f"projection {k}" if fast else
                     f"element {tuple(int(i) for i in np.unravel_index(k, x.shape))}")
            name = f" ({x.name})" if getattr(x, "name", None) else ""
            failures.append(f"input {i}{name} shape {x.shape}: relative error {err:.3e} > rtol {rtol:g}; "
                            f"worst at {where}: analytic {an[k]:.10g} vs numeric {fd[k]:.10g}")
    gradcheck.last_errors = errors
    if failures:
        if raise_exception:
            raise GradcheckError("gradcheck failed:\n  " + "\n  ".join(failures))
        return False
    return True


gradcheck.last_errors = []
