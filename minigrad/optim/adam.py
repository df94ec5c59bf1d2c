"""Adam (L2 weight decay folded into the gradient) — torch.optim.Adam's defaults and update order.

The moment updates and the step are AdamW's fused kernel (`minigrad.kernels.adamw.adamw_step`); Adam
and AdamW differ only in where the weight decay goes, which `_decay` decides (AdamW subclasses Adam,
as in PyTorch).
"""
import numpy as np

from minigrad.kernels.adamw import adamw_step
from minigrad.kernels.validate import check_finite_scalar
from minigrad.optim.optimizer import Optimizer


class Adam(Optimizer):
    """Per parameter, at step t (1-based), with grad g:

        g = g + weight_decay * p                  (L2 penalty, coupled: it goes through m and v)
        m = beta1 * m + (1 - beta1) * g           v = beta2 * v + (1 - beta2) * g^2
        (amsgrad: v_max = max(v_max, v), used in place of v below)
        p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)

    State per parameter (torch's names): step, exp_avg, exp_avg_sq (and max_exp_avg_sq with amsgrad).
    """

    NON_NEGATIVE = ("lr", "eps", "weight_decay")

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False):
        super().__init__(params, dict(lr=lr, betas=_as_tuple(betas), eps=eps, weight_decay=weight_decay,
                                      amsgrad=amsgrad))

    def _check_group(self, group):
        super()._check_group(group)
        name, betas = type(self).__name__, group["betas"]
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise ValueError(f"{name}: betas must be a pair (beta1, beta2), got {betas!r}")
        for i, beta in enumerate(betas):
            if not 0.0 <= check_finite_scalar(name, f"betas[{i}]", beta) < 1.0:
                raise ValueError(f"{name}: betas[{i}] must be in [0, 1), got {beta}")
        if not group["eps"] > 0:   # (torch takes 0, then divides by sqrt(v) = 0 for an unused weight)
            raise ValueError(f"{name}: eps must be > 0, got {group['eps']}")

    def _decay(self, param, grad, group):
        """(the gradient the moments see, the decoupled decay for the kernel): Adam's L2 term is
        added to a copy of the gradient (p.grad is left as it is), so the kernel's decay is 0."""
        wd = group["weight_decay"]
        if wd == 0:
            return grad, 0.0
        decayed = np.multiply(param.data, param.data.dtype.type(wd))
        decayed += grad
        return decayed, 0.0

    def _update(self, param, grad, group, state):
        grad, decoupled_decay = self._decay(param, grad, group)
        data = param.data
        if not state:
            state["step"] = 0
            state["exp_avg"] = np.zeros(data.shape, data.dtype)         # (C order whatever p's layout)
            state["exp_avg_sq"] = np.zeros(data.shape, data.dtype)
        if group["amsgrad"] and "max_exp_avg_sq" not in state:   # also when switched on mid-training
            state["max_exp_avg_sq"] = np.zeros(data.shape, data.dtype)
        for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
            if key in state:
                state[key] = _c_order(state[key])
        state["step"] = int(state["step"]) + 1
        beta1, beta2 = group["betas"]
        # the kernel takes C-order arrays: a p.data assigned a transposed or strided view (as torch
        # allows) is stepped in a C-order copy, written back into p's own memory
        work = _c_order(data)
        adamw_step(work, _c_order(grad), state["exp_avg"], state["exp_avg_sq"], float(group["lr"]),
                   float(beta1), float(beta2), float(group["eps"]), float(decoupled_decay), state["step"],
                   max_exp_avg_sq=state.get("max_exp_avg_sq") if group["amsgrad"] else None)
        if work is not data:
            data[...] = work


def _c_order(a):
    """A strided array as a C-order copy of the same shape (np.ascontiguousarray would make a 0-d array
    1-d); anything else as given, for the kernel to check and name."""
    return a.copy(order="C") if isinstance(a, np.ndarray) and not a.flags.c_contiguous else a


def _as_tuple(betas):
    """betas (any iterable) as a tuple; a non-iterable (None, 0.9) as given, for _check_group to name."""
    try:
        return tuple(betas)
    except TypeError:
        return betas
