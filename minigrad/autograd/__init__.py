"""Autograd: the Function API, the tape engine, grad modes, anomaly detection and gradcheck."""
from minigrad.autograd.anomaly import detect_anomaly
from minigrad.autograd.engine import backward, grad, unbroadcast
from minigrad.autograd.function import Context, Function
from minigrad.autograd.grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from minigrad.autograd.gradcheck import GradcheckError, gradcheck

__all__ = ["Context", "Function", "backward", "grad", "unbroadcast", "gradcheck", "GradcheckError", "no_grad",
           "enable_grad", "set_grad_enabled", "is_grad_enabled", "detect_anomaly"]
