"""Learning-rate schedules: set each param group's 'lr' from its base lr and the step count.

As in PyTorch, constructing a scheduler applies the step-0 value, and `scheduler.step()` goes after
`optimizer.step()`. `get_last_lr()` is the list of lrs now in the param groups.

Every schedule here is a closed form of the step count and the base (initial) lrs, so a scheduler
sets the lr outright: unlike PyTorch's chainable schedulers, two schedulers on one optimizer do not
multiply (the last one stepped wins; use `SequentialLR` to run schedules one after another). Stepped
in order, as usual, the values are PyTorch's (to rounding: its recursive forms multiply step by step).
"""
import math
from bisect import bisect_right

from minigrad.kernels.validate import check_finite_scalar, check_int


def warmup_cosine(step, base_lr, warmup_steps, total_steps, min_lr=0.0):
    """The lr at `step` (0-based): linear warmup, then half-cosine from base_lr down to min_lr.

        step <  warmup:          base_lr * (step + 1) / (warmup + 1)
        warmup <= step < total:  min_lr + (base_lr - min_lr) * (1 + cos(pi * progress)) / 2,
                                 progress = (step - warmup) / (total - warmup)
        step >= total:           min_lr
    """
    if step < warmup_steps:
        return base_lr * (step + 1) / (warmup_steps + 1)
    if step >= total_steps:
        return min_lr
    progress = (step - warmup_steps) / (total_steps - warmup_steps)
    return min_lr + (base_lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))


def warmup_constant(step, base_lr, warmup_steps):
    """Linear warmup as in `warmup_cosine`, then base_lr forever."""
    return base_lr * (step + 1) / (warmup_steps + 1) if step < warmup_steps else base_lr


class LRScheduler:
    """Base: subclasses implement `lr_at(step, base_lr)`; `step()` advances and writes the lrs."""

    def __init__(self, optimizer, last_epoch=-1):
        self.optimizer = optimizer
        for group in optimizer.param_groups:
            if last_epoch == -1:
                group.setdefault("initial_lr", group["lr"])
            elif "initial_lr" not in group:
                raise KeyError("param group has no 'initial_lr': resume with last_epoch=-1 first")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self.step()

    def lr_at(self, step, base_lr):
        raise NotImplementedError

    def get_lr(self):
        return [self.lr_at(self.last_epoch, base) for base in self.base_lrs]

    def step(self):
        """Advance one step and write the new lr into every param group."""
        self.last_epoch += 1
        self._last_lr = self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, self._last_lr):
            group["lr"] = lr

    def get_last_lr(self):
        return list(self._last_lr)

    def state_dict(self):
        """Everything but the optimizer and callables (lambdas are not saved; rebuild them)."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer" and not callable(v)
                and not (isinstance(v, list) and any(callable(x) for x in v))}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)


class LambdaLR(LRScheduler):
    """lr = base_lr * lr_lambda(step); one lambda for all groups or a list with one per group."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        n = len(optimizer.param_groups)
        lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else [lr_lambda] * n
        if len(lambdas) != n:
            raise ValueError(f"LambdaLR: {len(lambdas)} lambdas for {n} param groups")
        self.lr_lambdas = lambdas
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [base * fn(self.last_epoch) for base, fn in zip(self.base_lrs, self.lr_lambdas)]


class WarmupCosineLR(LRScheduler):
    """Linear warmup for `warmup_steps`, cosine decay to `min_lr` at `total_steps`, then min_lr."""

    def __init__(self, optimizer, warmup_steps, total_steps, min_lr=0.0, last_epoch=-1):
        if not 0 <= warmup_steps <= total_steps:
            raise ValueError(f"WarmupCosineLR: need 0 <= warmup_steps <= total_steps, got {warmup_steps}, "
                             f"{total_steps}")
        self.warmup_steps, self.total_steps, self.min_lr = int(warmup_steps), int(total_steps), float(min_lr)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, step, base_lr):
        return warmup_cosine(step, base_lr, self.warmup_steps, self.total_steps, self.min_lr)


class WarmupConstantLR(LRScheduler):
    """Linear warmup for `warmup_steps` (0: none), then the base lr: a constant schedule."""

    def __init__(self, optimizer, warmup_steps=0, last_epoch=-1):
        if warmup_steps < 0:
            raise ValueError(f"WarmupConstantLR: warmup_steps must be >= 0, got {warmup_steps}")
        self.warmup_steps = int(warmup_steps)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, step, base_lr):
        return warmup_constant(step, base_lr, self.warmup_steps)


class StepLR(LRScheduler):
    """lr = base_lr * gamma ** (step // step_size): decay by gamma every step_size steps."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size = check_int("StepLR", "step_size", step_size, 1)
        self.gamma = check_finite_scalar("StepLR", "gamma", gamma)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, step, base_lr):
        return base_lr * self.gamma ** (step // self.step_size)


class MultiStepLR(LRScheduler):
    """lr = base_lr * gamma ** (number of milestones <= step); a milestone listed twice counts twice."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones = _milestones("MultiStepLR", milestones)
        self.gamma = check_finite_scalar("MultiStepLR", "gamma", gamma)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, step, base_lr):
        return base_lr * self.gamma ** bisect_right(self.milestones, step)

    def load_state_dict(self, state_dict):
        """Also takes torch's state (milestones as a Counter of milestone -> count)."""
        state = dict(state_dict)
        if "milestones" in state:
            state["milestones"] = _milestones("MultiStepLR", state["milestones"])
        super().load_state_dict(state)


def _milestones(name, milestones):
    """Sorted int milestones >= 0 (torch never reaches a negative one; counting it here would decay
    every step); a Counter / dict (torch's form) maps each milestone to its multiplicity."""
    if isinstance(milestones, dict):
        milestones = [m for m, count in milestones.items() for _ in range(count)]
    return sorted(check_int(name, "milestones", m, 0) for m in milestones)


class ExponentialLR(LRScheduler):
    """lr = base_lr * gamma ** step."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = check_finite_scalar("ExponentialLR", "gamma", gamma)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, step, base_lr):
        return base_lr * self.gamma ** step


class CosineAnnealingLR(LRScheduler):
    """lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * step / T_max)) / 2 (torch's closed form).

    Past T_max the cosine goes on: the lr climbs back to base_lr at 2 T_max, as in PyTorch.
    """

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        self.T_max = check_int("CosineAnnealingLR", "T_max", T_max, 1)
        self.eta_min = check_finite_scalar("CosineAnnealingLR", "eta_min", eta_min)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, step, base_lr):
        return self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * step / self.T_max)) / 2


class LinearLR(LRScheduler):
    """lr = base_lr * (start_factor + (end_factor - start_factor) * min(step, total_iters) / total_iters).

    start_factor in (0, 1], end_factor in [0, 1], as PyTorch requires.
    """

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5, last_epoch=-1):
        name = "LinearLR"
        if not 0.0 < check_finite_scalar(name, "start_factor", start_factor) <= 1.0:
            raise ValueError(f"{name}: start_factor must be in (0, 1], got {start_factor}")
        if not 0.0 <= check_finite_scalar(name, "end_factor", end_factor) <= 1.0:
            raise ValueError(f"{name}: end_factor must be in [0, 1], got {end_factor}")
        self.start_factor, self.end_factor = start_factor, end_factor
        self.total_iters = check_int(name, "total_iters", total_iters, 1)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, step, base_lr):
        factor = self.start_factor + (self.end_factor - self.start_factor) * min(self.total_iters, step) \
            / self.total_iters
        return base_lr * factor


class ConstantLR(LRScheduler):
    """lr = base_lr * factor for step < total_iters, then base_lr (factor in [0, 1])."""

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        if not 0.0 <= check_finite_scalar("ConstantLR", "factor", factor) <= 1.0:
            raise ValueError(f"ConstantLR: factor must be in [0, 1], got {factor}")
        self.factor = factor
        self.total_iters = check_int("ConstantLR", "total_iters", total_iters, 0)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, step, base_lr):
        return base_lr * (self.factor if step < self.total_iters else 1.0)


class PolynomialLR(LRScheduler):
    """lr = base_lr * (1 - min(step, total_iters) / total_iters) ** power."""

    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1):
        self.total_iters = check_int("PolynomialLR", "total_iters", total_iters, 1)
        self.power = check_finite_scalar("PolynomialLR", "power", power)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, step, base_lr):
        return base_lr * (1.0 - min(step, self.total_iters) / self.total_iters) ** self.power


class CosineAnnealingWarmRestarts(LRScheduler):
    """SGDR: lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * T_cur / T_i)) / 2, where the i-th run
    lasts T_i = T_0 * T_mult**i steps and T_cur counts steps since the last restart.

    `step(epoch)` also takes an explicit (possibly fractional) epoch, as in PyTorch.
    """

    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0.0, last_epoch=-1):
        self.T_0 = check_int("CosineAnnealingWarmRestarts", "T_0", T_0, 1)
        self.T_mult = check_int("CosineAnnealingWarmRestarts", "T_mult", T_mult, 1)
        self.eta_min = check_finite_scalar("CosineAnnealingWarmRestarts", "eta_min", eta_min)
        super().__init__(optimizer, last_epoch)

    def _position(self, epoch):
        """(T_cur, T_i) at `epoch` (a float >= 0)."""
        if self.T_mult == 1:
            return epoch % self.T_0, self.T_0
        t_cur, t_i = epoch, self.T_0        # (a loop, not torch's log formula: exact at restarts)
        while t_cur >= t_i:
            t_cur, t_i = t_cur - t_i, t_i * self.T_mult
        return t_cur, t_i

    def lr_at(self, step, base_lr):
        t_cur, t_i = self._position(step)
        return self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * t_cur / t_i)) / 2

    def step(self, epoch=None):
        if epoch is None:
            return super().step()
        if check_finite_scalar("CosineAnnealingWarmRestarts", "epoch", epoch) < 0:
            raise ValueError(f"CosineAnnealingWarmRestarts: epoch must be >= 0, got {epoch}")
        self.last_epoch = math.floor(epoch) - 1
        super().step()                                   # last_epoch = floor(epoch)
        self._last_lr = [self.lr_at(epoch, base) for base in self.base_lrs]
        for group, lr in zip(self.optimizer.param_groups, self._last_lr):
            group["lr"] = lr


class OneCycleLR(LRScheduler):
    """The 1cycle policy: lr rises from max_lr / div_factor to max_lr over the first pct_start of
    total_steps, then falls to max_lr / (div_factor * final_div_factor) (three_phase: back to the
    start over as many steps, then to the minimum); 'cos' or 'linear' annealing within a phase.
    With cycle_momentum, momentum (SGD) or beta1 (Adam, AdamW) moves inversely, between
    max_momentum and base_momentum. Stepping past total_steps raises, as in PyTorch.
    """

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None, pct_start=0.3,
                 anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85, max_momentum=0.95,
                 div_factor=25.0, final_div_factor=1e4, three_phase=False, last_epoch=-1):
        name = "OneCycleLR"
        if total_steps is not None:
            self.total_steps = check_int(name, "total_steps", total_steps, 1)
        elif epochs is not None and steps_per_epoch is not None:
            self.total_steps = check_int(name, "epochs", epochs, 1) * check_int(name, "steps_per_epoch",
                                                                                 steps_per_epoch, 1)
        else:
            raise ValueError(f"{name}: give total_steps, or epochs and steps_per_epoch")
        if not 0.0 <= check_finite_scalar(name, "pct_start", pct_start) <= 1.0:
            raise ValueError(f"{name}: pct_start must be in [0, 1], got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"{name}: anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}")
        self.anneal_strategy, self.cycle_momentum = anneal_strategy, bool(cycle_momentum)
        up = float(pct_start * self.total_steps) - 1
        if three_phase:
            self._phases = [(up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                            (2 * up, "max_lr", "initial_lr", "base_momentum", "max_momentum"),
                            (self.total_steps - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum")]
        else:
            self._phases = [(up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                            (self.total_steps - 1, "max_lr", "min_lr", "base_momentum", "max_momentum")]
        groups = optimizer.param_groups
        if self.cycle_momentum and "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
            raise ValueError(f"{name}: cycle_momentum needs an optimizer with momentum or betas "
                             f"({type(optimizer).__name__} has neither); pass cycle_momentum=False")
        self._use_beta1 = "betas" in optimizer.defaults
        if last_epoch == -1:
            for group, top, low, high in zip(groups, _per_group(name, "max_lr", max_lr, groups),
                                             _per_group(name, "base_momentum", base_momentum, groups),
                                             _per_group(name, "max_momentum", max_momentum, groups)):
                group["initial_lr"] = top / check_finite_scalar(name, "div_factor", div_factor, positive=True)
                group["max_lr"] = top
                group["min_lr"] = group["initial_lr"] / check_finite_scalar(name, "final_div_factor",
                                                                            final_div_factor, positive=True)
                if self.cycle_momentum:
                    group["base_momentum"], group["max_momentum"] = low, high
                    self._set_momentum(group, high)
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start, end, pct):
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def _set_momentum(self, group, value):
        if self._use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def get_lr(self):
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"OneCycleLR: tried to step {step} times; total_steps is {self.total_steps}")
        lrs = []
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, (end, lr0, lr1, m0, m1) in enumerate(self._phases):
                if step <= end or i == len(self._phases) - 1:
                    pct = (step - start) / (end - start)
                    lrs.append(self._anneal(group[lr0], group[lr1], pct))
                    if self.cycle_momentum:
                        self._set_momentum(group, self._anneal(group[m0], group[m1], pct))
                    break
                start = end
        return lrs


def _per_group(name, key, value, groups):
    """`value` for every param group: a list/tuple gives one per group, a number the same for all."""
    if isinstance(value, (list, tuple)):
        if len(value) != len(groups):
            raise ValueError(f"{name}: {key} has {len(value)} values for {len(groups)} param groups")
        return [check_finite_scalar(name, key, v) for v in value]
    return [check_finite_scalar(name, key, value)] * len(groups)


class ReduceLROnPlateau(LRScheduler):
    """Multiply every group's lr by `factor` (not below its min_lr) when `step(metric)` has not improved
    on the best value for more than `patience` calls, then wait `cooldown` calls. Improvement, with
    best b: mode 'min' + 'rel': m < b * (1 - threshold); 'min' + 'abs': m < b - threshold; 'max'
    mirrors. A reduction smaller than eps is skipped. PyTorch's rules; a NaN metric is no improvement.
    """

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4, threshold_mode="rel",
                 cooldown=0, min_lr=0.0, eps=1e-8):
        name = "ReduceLROnPlateau"
        if mode not in ("min", "max"):
            raise ValueError(f"{name}: mode must be 'min' or 'max', got {mode!r}")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"{name}: threshold_mode must be 'rel' or 'abs', got {threshold_mode!r}")
        if not check_finite_scalar(name, "factor", factor) < 1.0:
            raise ValueError(f"{name}: factor must be < 1.0, got {factor}")
        self.optimizer = optimizer
        self.mode, self.threshold_mode, self.factor = mode, threshold_mode, factor
        self.patience = check_int(name, "patience", patience, 0)
        self.cooldown = check_int(name, "cooldown", cooldown, 0)
        self.threshold = check_finite_scalar(name, "threshold", threshold)
        self.eps = check_finite_scalar(name, "eps", eps)
        self.min_lrs = _per_group(name, "min_lr", min_lr, optimizer.param_groups)
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs, self.cooldown_counter, self.last_epoch = 0, 0, 0
        self._last_lr = [group["lr"] for group in optimizer.param_groups]

    def is_better(self, value, best):
        sign = 1.0 if self.mode == "min" else -1.0
        if self.threshold_mode == "rel":
            bound = best * (1.0 - sign * self.threshold)
        else:
            bound = best - sign * self.threshold
        return value < bound if self.mode == "min" else value > bound

    def step(self, metrics):
        """Record one value of the watched metric (a number or a one-element Tensor)."""
        value = float(getattr(metrics, "item", lambda: metrics)())
        self.last_epoch += 1
        if self.is_better(value, self.best):
            self.best, self.num_bad_epochs = value, 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            for group, min_lr in zip(self.optimizer.param_groups, self.min_lrs):
                new_lr = max(group["lr"] * self.factor, min_lr)
                if group["lr"] - new_lr > self.eps:
                    group["lr"] = new_lr
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]


class SequentialLR(LRScheduler):
    """schedulers[i] runs from milestones[i - 1] (0 for the first) to milestones[i], each restarted
    at its own step 0: at step s, lr = schedulers[i] at step s - milestones[i - 1].

    The schedulers must drive `optimizer`; their state is saved inside this one's state_dict.
    """

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        name = "SequentialLR"
        schedulers = list(schedulers)
        if not schedulers:
            raise ValueError(f"{name}: expects at least one scheduler")
        for i, sched in enumerate(schedulers):
            if not isinstance(sched, LRScheduler):
                raise TypeError(f"{name}: schedulers[{i}] must be an LRScheduler, got {type(sched).__name__}")
            if sched.optimizer is not optimizer:
                raise ValueError(f"{name}: schedulers[{i}] ({type(sched).__name__}) drives another optimizer")
        milestones = [check_int(name, "milestones", m, 0) for m in milestones]
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(f"{name}: {len(schedulers)} schedulers need {len(schedulers) - 1} milestones, "
                             f"got {len(milestones)}")
        if milestones != sorted(milestones):
            raise ValueError(f"{name}: milestones must be in increasing order, got {milestones}")
        self._schedulers, self._milestones = schedulers, milestones
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        i = bisect_right(self._milestones, self.last_epoch)
        sched = self._schedulers[i]
        sched.last_epoch = self.last_epoch - (self._milestones[i - 1] if i else 0)
        sched._last_lr = sched.get_lr()
        return sched.get_last_lr()

    def state_dict(self):
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [sched.state_dict() for sched in self._schedulers]
        return state

    def load_state_dict(self, state_dict):
        state = dict(state_dict)
        saved = state.pop("_schedulers")
        if len(saved) != len(self._schedulers):
            raise ValueError(f"SequentialLR.load_state_dict: the state has {len(saved)} schedulers, "
                             f"this one {len(self._schedulers)}")
        super().load_state_dict(state)
        for sched, sd in zip(self._schedulers, saved):
            sched.load_state_dict(sd)
