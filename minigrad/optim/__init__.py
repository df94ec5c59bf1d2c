"""Optimizers (SGD, Adam, AdamW) and learning-rate schedules, with PyTorch's names and formulas."""
from minigrad.optim import lr_scheduler
from minigrad.optim.adam import Adam
from minigrad.optim.adamw import AdamW
from minigrad.optim.optimizer import Optimizer
from minigrad.optim.sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "lr_scheduler"]
