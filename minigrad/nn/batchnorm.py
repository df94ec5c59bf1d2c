"""BatchNorm1d/2d, GroupNorm, InstanceNorm1d/2d (torch.nn's signatures, buffers, state_dict keys,
train/eval behaviour and repr), over minigrad/ops/batch_group_norm.py."""
import numpy as np

from minigrad.autograd.grad_mode import no_grad
from minigrad.kernels.validate import check_finite_scalar, check_int
from minigrad.nn.conv import module_dtype
from minigrad.nn.module import Module
from minigrad.nn.parameter import Parameter
from minigrad.ops.batch_group_norm import batch_norm, group_norm, instance_norm
from minigrad.tensor import Tensor


class _NormBase(Module):
    """weight (C,) = 1 and bias (C,) = 0 when affine (bias=False drops the bias); buffers
    running_mean (C,) = 0, running_var (C,) = 1, num_batches_tracked (int64 0-d) when
    track_running_stats, else registered as None (not in the state_dict), as torch."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None, *, bias=True):
        super().__init__()
        name = type(self).__name__
        dtype = module_dtype(name, dtype, device)
        self.num_features = check_int(name, "num_features", num_features, 1)
        self.eps = check_finite_scalar(name, "eps", eps)
        self.momentum = None if momentum is None else check_finite_scalar(name, "momentum", momentum)
        self.affine = bool(affine)
        self.track_running_stats = bool(track_running_stats)
        C = self.num_features
        if self.affine:
            self.weight = Parameter(np.ones(C, dtype=dtype))
            if bias:
                self.bias = Parameter(np.zeros(C, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if self.track_running_stats:
            self.register_buffer("running_mean", Tensor(np.zeros(C, dtype=dtype)))
            self.register_buffer("running_var", Tensor(np.ones(C, dtype=dtype)))
            self.register_buffer("num_batches_tracked", Tensor(np.array(0, dtype=np.int64)))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self):
        if self.track_running_stats:
            with no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1)
                self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            with no_grad():
                self.weight.fill_(1)
                if self.bias is not None:
                    self.bias.zero_()

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    _ndims = ()

    def forward(self, x):
        if x.ndim not in self._ndims:
            raise ValueError(f"{type(self).__name__}: expected "
                             f"{' or '.join(f'{n}D' for n in self._ndims)} input (got {x.ndim}D input)")
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            with no_grad():
                self.num_batches_tracked.add_(1)
            factor = 1.0 / float(self.num_batches_tracked.item()) if self.momentum is None else self.momentum
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        keep = not self.training or self.track_running_stats
        return batch_norm(x, self.running_mean if keep else None, self.running_var if keep else None,
                          self.weight, self.bias, use_batch, factor, self.eps)


class BatchNorm1d(_BatchNorm):
    """torch.nn.BatchNorm1d: (N, C) or (N, C, L), statistics per channel over N (and L). In training
    the batch's statistics normalise and update running_mean / running_var (momentum; None = the
    cumulative average over num_batches_tracked batches; the unbiased variance), in eval the running
    statistics normalise."""

    _ndims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """torch.nn.BatchNorm2d: (N, C, H, W), statistics per channel over N, H, W (see BatchNorm1d)."""

    _ndims = (4,)


class _InstanceNorm(_NormBase):
    _d = 0

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False,
                 device=None, dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def forward(self, x):
        d, name = self._d, type(self).__name__
        if x.ndim not in (d + 1, d + 2):
            raise ValueError(f"{name}: expected {d + 1}D (unbatched) or {d + 2}D (batched) input, got "
                             f"{x.ndim}D input")
        unbatched = x.ndim == d + 1
        if unbatched:
            x = x.unsqueeze(0)
        if x.shape[1] != self.num_features and self.affine:
            raise ValueError(f"{name}: expected input's size at dim=1 to match num_features "
                             f"({self.num_features}), but got: {x.shape[1]}.")
        use_stats = self.training or not self.track_running_stats
        y = instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias, use_stats,
                          0.0 if self.momentum is None else self.momentum, self.eps)
        return y.squeeze(0) if unbatched else y


class InstanceNorm1d(_InstanceNorm):
    """torch.nn.InstanceNorm1d: (N, C, L) or (C, L); each (sample, channel) normalised over L.
    affine=False and track_running_stats=False by default, as torch."""

    _d = 1


class InstanceNorm2d(_InstanceNorm):
    """torch.nn.InstanceNorm2d: (N, C, H, W) or (C, H, W); each (sample, channel) over H, W."""

    _d = 2


class GroupNorm(Module):
    """torch.nn.GroupNorm: (N, C, *) with C = num_channels divisible by num_groups; each sample's
    groups of C/G channels normalised over the group's channels and spatial dims; per-channel
    weight (C,) = 1, bias (C,) = 0 when affine (bias=False drops the bias)."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None, *,
                 bias=True):
        super().__init__()
        dtype = module_dtype("GroupNorm", dtype, device)
        self.num_groups = check_int("GroupNorm", "num_groups", num_groups, 1)
        self.num_channels = check_int("GroupNorm", "num_channels", num_channels, 1)
        if self.num_channels % self.num_groups:
            raise ValueError("GroupNorm: num_channels must be divisible by num_groups, got "
                             f"{num_channels} and {num_groups}")
        self.eps = check_finite_scalar("GroupNorm", "eps", eps)
        self.affine = bool(affine)
        if self.affine:
            self.weight = Parameter(np.ones(self.num_channels, dtype=dtype))
            if bias:
                self.bias = Parameter(np.zeros(self.num_channels, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def reset_parameters(self):
        if self.affine:
            with no_grad():
                self.weight.fill_(1)
                if self.bias is not None:
                    self.bias.zero_()

    def forward(self, x):
        if x.ndim >= 2 and x.shape[1] != self.num_channels:
            raise ValueError(f"GroupNorm: expected input with {self.num_channels} channels at dim 1, got "
                             f"shape {tuple(x.shape)}")
        return group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")
