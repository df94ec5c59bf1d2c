"""Learning-rate schedules: set each param group's 'lr' from its base lr and the step count.

As in PyTorch, constructing a scheduler applies the step-0 value, and `scheduler.step()` goes after
`optimizer.step()`. `get_last_lr()` is the list of lrs now in the param groups.
"""
import math


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
