"""conv1d / conv2d (torch.nn.functional's signatures): im2col + BLAS GEMMs, analytic backward.

Layout: the padded input xp (N, C, *Lp) is read through a strided view as columns
cols (C, *k, N, *out) -> (G, Cg*K, N*P) (K taps, P output positions), so the forward is one GEMM per
group, W_g (Og, Cg*K) @ cols_g (Cg*K, N*P) (`gemm_batch`), and the weight grad is one GEMM per group
too, gyT_g (Og, N*P) @ cols_g.T. The input grad is gcols_g = W_g.T @ gyT_g followed by col2im: a
loop over the K kernel taps adding each tap's (C, N, *out) block into a strided slice of the padded
grad (never a loop over output positions).
"""
import math

import numpy as np

from minigrad.autograd.engine import sum_accurate
from minigrad.autograd.function import Function
from minigrad.blas import gemm_batch
from minigrad.kernels.validate import FLOAT_DTYPES
from minigrad.tensor import Tensor


def ntuple(op, name, value, d, low=None):
    """An int or a sequence of d ints (one int for every dim; a 1-sequence repeats) as a d-tuple."""
    if isinstance(value, (list, tuple)):
        vals = tuple(value)
        if len(vals) == 1:
            vals = vals * d
        if len(vals) != d:
            raise ValueError(f"{op}: {name} must be an int or a tuple of {d} ints, got {value!r}")
    else:
        vals = (value,) * d
    out = []
    for v in vals:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{op}: {name} must be an int or a tuple of {d} ints, got {value!r}")
        if low is not None and v < low:
            raise ValueError(f"{op}: {name} must be >= {low} in every dim, got {value!r}")
        out.append(int(v))
    return tuple(out)


def check_float_input(op, name, x):
    """A Tensor (or numpy array) of float32/float64: TypeError otherwise (minigrad's convs, pools
    and norms are float-only; torch also runs conv / max / avg pooling on integer tensors)."""
    arr = x.data if isinstance(x, Tensor) else x
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")
    if arr.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{op}: {name} must be float32 or float64, got {arr.dtype} (\"{op}\" is not "
                        "implemented for integer or bool tensors)")
    return arr


def window_view(xp, lead, k, dilation, out, stride, taps_first):
    """A strided view of xp (*lead, *Lp) holding, for every kernel tap t and output position o, the
    element at o*stride + t*dilation: shape (*lead, *k, *out), or with taps_first=True and
    lead = (N, C): (C, *k, N, *out) (the im2col layout)."""
    st = xp.strides
    nl = len(lead)
    sp = st[nl:]
    tap_strides = tuple(s * dl for s, dl in zip(sp, dilation))
    out_strides = tuple(s * sd for s, sd in zip(sp, stride))
    if taps_first:
        shape = (lead[1],) + tuple(k) + (lead[0],) + tuple(out)
        strides = (st[1],) + tap_strides + (st[0],) + out_strides
    else:
        shape = tuple(lead) + tuple(k) + tuple(out)
        strides = st[:nl] + tap_strides + out_strides
    return np.lib.stride_tricks.as_strided(xp, shape, strides, writeable=False)


def tap_slices(tap, dilation, stride, out):
    """The slices of the padded spatial dims that tap `tap` reads for all output positions."""
    return tuple(slice(j * dl, j * dl + sd * (o - 1) + 1, sd)
                 for j, dl, sd, o in zip(tap, dilation, stride, out))


class ConvNd(Function):
    """x (N, C, *L) or unbatched (C, *L), weight (O, C/groups, *k), bias (O,) or None ->
    y (N, O, *out), out = (L + lo + hi - dilation*(k-1) - 1) // stride + 1 per spatial dim.
    pads: ((lo, hi), ...) zero padding per spatial dim. See the module docstring for the maths."""

    @staticmethod
    def forward(ctx, x, weight, bias, stride, pads, dilation, groups, op):
        d = len(stride)
        unbatched = x.ndim == d + 1
        if unbatched:
            x = x[None]
        N, C = x.shape[:2]
        L = x.shape[2:]
        O, Cg = weight.shape[:2]
        k = weight.shape[2:]
        G = groups
        Og = O // G
        K = math.prod(k)
        Lp = tuple(n + lo + hi for n, (lo, hi) in zip(L, pads))
        out = tuple((n - dl * (kk - 1) - 1) // sd + 1 for n, kk, dl, sd in zip(Lp, k, dilation, stride))
        P = math.prod(out)
        if any(lo or hi for lo, hi in pads):
            xp = np.zeros((N, C) + Lp, dtype=x.dtype)
            xp[(slice(None), slice(None)) + tuple(slice(lo, lo + n) for n, (lo, _) in zip(L, pads))] = x
        else:
            xp = x
        cols = np.empty((C,) + tuple(k) + (N,) + out, dtype=x.dtype)
        np.copyto(cols, window_view(xp, (N, C), k, dilation, out, stride, taps_first=True))
        cols = cols.reshape(G, Cg * K, N * P)
        w2 = weight.reshape(G, Og, Cg * K)
        y = np.empty((G, Og, N * P), dtype=x.dtype)
        gemm_batch([(w2[g], cols[g], False, False, y[g]) for g in range(G)])
        if bias is not None:
            y += bias.reshape(G, Og, 1)
        y = y.reshape((O, N) + out)
        y = np.ascontiguousarray(np.moveaxis(y, 0, 1))
        ctx.save_for_backward(cols if ctx.needs_input_grad[1] else None,
                              weight if ctx.needs_input_grad[0] else None)
        ctx.geom = (N, C, L, pads, Lp, k, out, stride, dilation, G, unbatched)
        return y[0] if unbatched else y

    @staticmethod
    def backward(ctx, gy):
        cols, weight = ctx.saved_tensors
        N, C, L, pads, Lp, k, out, stride, dilation, G, unbatched = ctx.geom
        needs = ctx.needs_input_grad
        if unbatched:
            gy = gy[None]
        O = gy.shape[1]
        Og, Cg, K, P = O // G, C // G, math.prod(k), math.prod(out)
        gyT = np.ascontiguousarray(np.moveaxis(gy.reshape(N, O, P), 1, 0)).reshape(G, Og, N * P)
        gx = gw = gb = None
        if needs[2]:
            gb = sum_accurate(gyT, 2).reshape(O)
        if needs[1]:
            gw = np.empty((G, Og, Cg * K), dtype=gy.dtype)
            gemm_batch([(gyT[g], cols[g], False, True, gw[g]) for g in range(G)])
            gw = gw.reshape((O, Cg) + tuple(k))
        if needs[0]:
            w2 = weight.reshape(G, Og, Cg * K)
            gcols = np.empty((G, Cg * K, N * P), dtype=gy.dtype)
            gemm_batch([(w2[g], gyT[g], True, False, gcols[g]) for g in range(G)])
            gcols = gcols.reshape((C,) + tuple(k) + (N,) + out)
            gxp = np.zeros((C, N) + Lp, dtype=gy.dtype)
            full = (slice(None), slice(None))
            for tap in np.ndindex(*k):
                gxp[full + tap_slices(tap, dilation, stride, out)] += gcols[(slice(None),) + tap]
            crop = full + tuple(slice(lo, lo + n) for n, (lo, _) in zip(L, pads))
            gx = np.ascontiguousarray(np.moveaxis(gxp[crop], 0, 1))
            if unbatched:
                gx = gx[0]
        return gx, gw, gb, None, None, None, None, None


def _conv_padding(op, padding, d, k, dilation, stride):
    """torch's padding argument (int, tuple, 'valid', 'same') as ((lo, hi), ...) per spatial dim."""
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * d
        if padding == "same":
            if any(s != 1 for s in stride):
                raise ValueError(f"{op}: padding='same' is not supported for strided convolutions")
            pairs = []
            for kk, dl in zip(k, dilation):
                total = dl * (kk - 1)
                pairs.append((total // 2, total - total // 2))     # the odd one on the right, as torch
            return tuple(pairs)
        raise ValueError(f"{op}: invalid padding string {padding!r}, should be one of {{'valid', 'same'}}")
    pad = ntuple(op, "padding", padding, d)
    if any(p < 0 for p in pad):
        raise ValueError(f"{op}: negative padding is not supported, got padding={padding!r}")
    return tuple((p, p) for p in pad)


def _conv(op, d, input, weight, bias, stride, padding, dilation, groups):  # noqa: A002
    x = check_float_input(op, "input", input)
    w = check_float_input(op, "weight", weight)
    if bias is not None:
        b = check_float_input(op, "bias", bias)
    if not isinstance(input, Tensor) or not isinstance(weight, Tensor) or (
            bias is not None and not isinstance(bias, Tensor)):
        raise TypeError(f"{op}: input, weight and bias must be Tensors")
    if x.ndim not in (d + 1, d + 2):
        raise ValueError(f"{op}: expected {d + 1}D (unbatched) or {d + 2}D (batched) input, but got input "
                         f"of shape {tuple(x.shape)}")
    if w.ndim != d + 2:
        raise ValueError(f"{op}: weight must have {d + 2} dims (out_channels, in_channels/groups, "
                         f"*kernel_size), got shape {tuple(w.shape)}")
    for name, arr in (("weight", w), ("bias", None if bias is None else b)):
        if arr is not None and arr.dtype != x.dtype:
            raise TypeError(f"{op}: input is {x.dtype} but {name} is {arr.dtype}; they must match")
    if isinstance(groups, (bool, np.bool_)) or not isinstance(groups, (int, np.integer)):
        raise TypeError(f"{op}: groups must be an int, got {groups!r}")
    groups = int(groups)
    if groups < 1:
        raise ValueError(f"{op}: non-positive groups is not supported, got groups={groups}")
    stride = ntuple(op, "stride", stride, d, low=1)
    dilation = ntuple(op, "dilation", dilation, d, low=1)
    O, Cg = w.shape[:2]
    k = w.shape[2:]
    C = x.shape[-d - 1]
    if O < groups:
        raise ValueError(f"{op}: given groups={groups}, expected weight to be at least {groups} at "
                         f"dimension 0, but got weight of size {tuple(w.shape)} instead")
    if O % groups:
        raise ValueError(f"{op}: given groups={groups}, expected weight to be divisible by {groups} at "
                         f"dim 0, but got weight of shape {tuple(w.shape)}")
    if Cg * groups != C:
        raise ValueError(f"{op}: given groups={groups}, weight of shape {tuple(w.shape)}, expected input "
                         f"{tuple(x.shape)} to have {Cg * groups} channels, but got {C} channels instead")
    if bias is not None and b.shape != (O,):
        raise ValueError(f"{op}: bias must have shape ({O},), got {tuple(b.shape)}")
    if any(kk < 1 for kk in k):
        raise ValueError(f"{op}: weight has an empty kernel dim: shape {tuple(w.shape)}")
    pads = _conv_padding(op, padding, d, k, dilation, stride)
    L = x.shape[-d:]
    Lp = tuple(n + lo + hi for n, (lo, hi) in zip(L, pads))
    eff = tuple(dl * (kk - 1) + 1 for kk, dl in zip(k, dilation))
    if any(p < e for p, e in zip(Lp, eff)):
        raise ValueError(f"{op}: calculated padded input size per channel: {Lp}; (dilated) kernel size: "
                         f"{eff}. Kernel size can't be greater than the actual input size")
    return ConvNd.apply(input, weight, bias, stride, pads, dilation, groups, op)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """torch.nn.functional.conv1d: input (N, C_in, L) or (C_in, L), weight (C_out, C_in/groups, k),
    bias (C_out,) -> (N, C_out, L_out). padding: int, (p,), 'valid' or 'same' (stride 1)."""
    return _conv("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """torch.nn.functional.conv2d: input (N, C_in, H, W) or (C_in, H, W), weight
    (C_out, C_in/groups, kh, kw), bias (C_out,) -> (N, C_out, H_out, W_out). stride, padding,
    dilation: an int or a pair; padding also 'valid' or 'same' (stride 1)."""
    return _conv("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)
