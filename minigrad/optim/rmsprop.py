"""RMSprop (optionally centered, with momentum) — torch.optim.RMSprop's defaults and update order."""
import numpy as np

from minigrad.optim.optimizer import Optimizer


class RMSprop(Optimizer):
    """Per parameter p with grad g (scalars in p's dtype):

        g = g + weight_decay * p
        v = alpha * v + (1 - alpha) * g^2
        centered:  m = alpha * m + (1 - alpha) * g,   d = sqrt(v - m^2) + eps
        else:      d = sqrt(v) + eps
        momentum:  b = momentum * b + g / d,  p = p - lr * b
        else:      p = p - lr * g / d

    State per parameter (torch's names): step, square_avg, grad_avg (centered), momentum_buffer
    (momentum > 0).
    """

    NON_NEGATIVE = ("lr", "alpha", "eps", "weight_decay", "momentum")

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False):
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered))

    def _update(self, param, grad, group, state):
        s = param.data.dtype.type
        if group["weight_decay"] != 0:
            grad = grad + s(group["weight_decay"]) * param.data
        if not state:
            state["step"] = 0
            state["square_avg"] = np.zeros_like(param.data)
        state["step"] = int(state["step"]) + 1
        alpha = s(group["alpha"])
        square_avg = state["square_avg"]
        square_avg *= alpha
        square_avg += s(1 - group["alpha"]) * grad * grad
        if group["centered"]:
            grad_avg = state.setdefault("grad_avg", np.zeros_like(param.data))
            grad_avg *= alpha
            grad_avg += s(1 - group["alpha"]) * grad
            denom = np.sqrt(square_avg - grad_avg * grad_avg)
        else:
            denom = np.sqrt(square_avg)
        denom += s(group["eps"])
        if group["momentum"] > 0:
            buf = state.setdefault("momentum_buffer", np.zeros_like(param.data))
            buf *= s(group["momentum"])
            buf += grad / denom
            param.data -= s(group["lr"]) * buf
        else:
            param.data -= s(group["lr"]) * (grad / denom)
