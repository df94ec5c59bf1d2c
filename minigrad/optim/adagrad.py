"""Adagrad — torch.optim.Adagrad's defaults and update order."""
import numpy as np

from minigrad.optim.optimizer import Optimizer


class Adagrad(Optimizer):
    """Per parameter p with grad g, at step t (1-based; scalars in p's dtype):

        g = g + weight_decay * p
        s = s + g^2                                  (s starts at initial_accumulator_value)
        p = p - lr / (1 + (t - 1) * lr_decay) * g / (sqrt(s) + eps)

    State per parameter (torch's names): step, sum.
    """

    NON_NEGATIVE = ("lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps")

    def __init__(self, params, lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0,
                 eps=1e-10):
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value, eps=eps))

    def _update(self, param, grad, group, state):
        s = param.data.dtype.type
        if not state:
            state["step"] = 0
            state["sum"] = np.full_like(param.data, group["initial_accumulator_value"])
        state["step"] = int(state["step"]) + 1
        if group["weight_decay"] != 0:
            grad = grad + s(group["weight_decay"]) * param.data
        clr = group["lr"] / (1 + (state["step"] - 1) * group["lr_decay"])
        state["sum"] += grad * grad
        denom = np.sqrt(state["sum"])
        denom += s(group["eps"])
        param.data -= s(clr) * (grad / denom)
