"""AdamW (decoupled weight decay) — torch.optim.AdamW's defaults and update order, one fused kernel."""
import numpy as np

from minigrad.kernels.adamw import adamw_step
from minigrad.kernels.validate import check_finite_scalar
from minigrad.optim.optimizer import Optimizer


class AdamW(Optimizer):
    """Per parameter, at step t (1-based), with grad g:

        p = p * (1 - lr * weight_decay)
        m = beta1 * m + (1 - beta1) * g           v = beta2 * v + (1 - beta2) * g^2
        (amsgrad: v_max = max(v_max, v), used in place of v below)
        p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)

    The update runs in `minigrad.kernels.adamw.adamw_step` (one pass, nogil, OpenMP).
    """

    NON_NEGATIVE = ("lr", "eps", "weight_decay")

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      amsgrad=amsgrad))

    def _check_group(self, group):
        super()._check_group(group)
        betas = group["betas"]
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise ValueError(f"AdamW: betas must be a pair (beta1, beta2), got {betas!r}")
        for i, beta in enumerate(betas):
            if not 0.0 <= check_finite_scalar("AdamW", f"betas[{i}]", beta) < 1.0:
                raise ValueError(f"AdamW: betas[{i}] must be in [0, 1), got {beta}")

    def _update(self, param, grad, group, state):
        if not state:
            state["step"] = 0
            state["exp_avg"] = np.zeros_like(param.data)
            state["exp_avg_sq"] = np.zeros_like(param.data)
        if group["amsgrad"] and "max_exp_avg_sq" not in state:   # also when switched on mid-training
            state["max_exp_avg_sq"] = np.zeros_like(param.data)
        state["step"] = int(state["step"]) + 1
        beta1, beta2 = group["betas"]
        adamw_step(param.data, grad, state["exp_avg"], state["exp_avg_sq"], float(group["lr"]), float(beta1),
                   float(beta2), float(group["eps"]), float(group["weight_decay"]), state["step"],
                   max_exp_avg_sq=state.get("max_exp_avg_sq") if group["amsgrad"] else None)


def adamw_step_numpy(param, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, step,
                     max_exp_avg_sq=None):
    """The same update in plain numpy (several passes over memory): the reference for tests/benchmarks."""
    s = param.dtype.type
    param *= s(1 - lr * weight_decay)
    exp_avg += s(1 - beta1) * (grad - exp_avg)
    exp_avg_sq *= s(beta2)
    exp_avg_sq += s(1 - beta2) * grad * grad
    v = exp_avg_sq
    if max_exp_avg_sq is not None:
        np.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
        v = max_exp_avg_sq
    denom = np.sqrt(v) / s((1 - beta2 ** step) ** 0.5) + s(eps)
    param += s(-lr / (1 - beta1 ** step)) * exp_avg / denom
