"""AdamW (decoupled weight decay) — torch.optim.AdamW's defaults and update order, one fused kernel."""
import numpy as np

from minigrad.optim.adam import Adam


class AdamW(Adam):
    """Per parameter, at step t (1-based), with grad g:

        p = p * (1 - lr * weight_decay)           (decoupled: the decay never enters m or v)
        m = beta1 * m + (1 - beta1) * g           v = beta2 * v + (1 - beta2) * g^2
        (amsgrad: v_max = max(v_max, v), used in place of v below)
        p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)

    Adam with the decay moved out of the gradient (as torch.optim.AdamW subclasses Adam): the whole
    update runs in `minigrad.kernels.adamw.adamw_step` (one pass, nogil, OpenMP).
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad)

    def _decay(self, param, grad, group):
        """The gradient as it is; the kernel scales p by (1 - lr * weight_decay) first."""
        return grad, group["weight_decay"]


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
