"""SGD with momentum, dampening, Nesterov and (coupled) weight decay — torch.optim.SGD's formulas."""
from minigrad.kernels.validate import check_finite_scalar
from minigrad.optim.optimizer import Optimizer


class SGD(Optimizer):
    """For each parameter p with grad g (scalars in p's dtype):

        d = g + weight_decay * p
        b = d                                   (first step)
        b = momentum * b + (1 - dampening) * d  (later steps)
        d = d + momentum * b  if nesterov else  b          (when momentum != 0)
        p = p - lr * d
    """

    NON_NEGATIVE = ("lr", "momentum", "weight_decay")

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov))

    def _check_group(self, group):
        super()._check_group(group)
        check_finite_scalar("SGD", "dampening", group["dampening"])
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError("SGD: nesterov momentum requires momentum > 0 and dampening == 0")

    def _update(self, param, grad, group, state):
        s = param.data.dtype.type  # keep scalars in the parameter's precision (no silent upcast)
        d = grad
        if group["weight_decay"] != 0:
            d = d + s(group["weight_decay"]) * param.data
        momentum = group["momentum"]
        if momentum != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = d.copy()
            else:
                buf *= s(momentum)
                buf += s(1 - group["dampening"]) * d
            d = d + s(momentum) * buf if group["nesterov"] else buf
        param.data += s(-group["lr"]) * d
