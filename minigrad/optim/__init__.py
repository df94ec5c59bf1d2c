"""Optimizers (SGD, Adam, AdamW, RMSprop, Adagrad) and learning-rate schedules, with PyTorch's names and
formulas."""
from minigrad.optim import lr_scheduler
from minigrad.optim.adagrad import Adagrad
from minigrad.optim.adam import Adam
from minigrad.optim.adamw import AdamW
from minigrad.optim.optimizer import Optimizer
from minigrad.optim.rmsprop import RMSprop
from minigrad.optim.sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "lr_scheduler"]
