"""Loss modules with torch.nn's names, arguments and reductions ('mean' | 'sum' | 'none'): each keeps
its arguments and calls the functional of the same name (minigrad.ops.losses), where the maths lives."""
from minigrad.kernels.validate import check_int
from minigrad.nn.module import Module
from minigrad.ops import losses as _L
from minigrad.ops.cross_entropy import check_label_smoothing, cross_entropy


class _Loss(Module):
    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        _L.check_legacy(type(self).__name__, size_average, reduce)
        self.reduction = _L.check_reduction(type(self).__name__, reduction)


class MSELoss(_Loss):
    """loss_i = (input_i - target_i)^2, then the mean (default), sum, or none of them (F.mse_loss)."""

    def forward(self, input, target):
        return _L.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """loss_i = |input_i - target_i|, then the mean (default), sum, or none of them (gradient 0 where
    input == target, as torch; F.l1_loss)."""

    def forward(self, input, target):
        return _L.l1_loss(input, target, reduction=self.reduction)


class NLLLoss(_Loss):
    """F.nll_loss over log-probabilities: loss_n = -weight[t_n] * input[n, t_n] (class dim 1)."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)              # a buffer, as torch: in state_dict
        self.ignore_index = check_int("NLLLoss", "ignore_index", ignore_index)

    def forward(self, input, target):
        return _L.nll_loss(input, target, self.weight, ignore_index=self.ignore_index,
                           reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """F.binary_cross_entropy_with_logits: sigmoid + binary cross-entropy in one stable expression."""

    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return _L.binary_cross_entropy_with_logits(input, target, self.weight, reduction=self.reduction,
                                                   pos_weight=self.pos_weight)


class CrossEntropyLoss(_Loss):
    """F.cross_entropy as a module: softmax cross-entropy over the class dim 1 of logits.

    input (C,), (N, C) or (N, C, d1, ...); target int class indices () / (N,) / (N, d1, ...) or float
    class probabilities of the input's shape. `weight` (C,) scales each class's loss (a buffer, as
    torch: in state_dict; 'mean' then divides by the summed weight of the non-ignored targets);
    targets equal to `ignore_index` contribute nothing ('mean' is nan if none is left);
    `label_smoothing` eps in [0, 1] mixes (1 - eps) of the loss with eps of the mean over classes of
    -log p_c. 'none' returns the target's batch shape.
    """

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                 label_smoothing=0.0):
        super().__init__(size_average, reduce, reduction)
        name = "CrossEntropyLoss"
        self.register_buffer("weight", weight)
        self.ignore_index = check_int(name, "ignore_index", ignore_index)
        self.label_smoothing = check_label_smoothing(name, label_smoothing)

    def forward(self, input, target):
        return cross_entropy(input, target, self.weight, ignore_index=self.ignore_index,
                             reduction=self.reduction, label_smoothing=self.label_smoothing)
