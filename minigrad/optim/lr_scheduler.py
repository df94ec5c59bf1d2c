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
    """Sorted int milestones; a Counter / dict (torch's form) maps each milestone to its multiplicity."""
    if isinstance(milestones, dict):
        milestones = [m for m, count in milestones.items() for _ in range(count)]
    return sorted(check_int(name, "milestones", m) for m in milestones)


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
