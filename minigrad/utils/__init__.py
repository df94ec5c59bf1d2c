"""Utilities with PyTorch's names: `minigrad.utils.data` (Dataset, TensorDataset, DataLoader)."""
