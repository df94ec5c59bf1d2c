"""Flatten: merge a range of dims into one (torch.nn.Flatten; its default keeps the batch dim)."""
from minigrad.kernels.validate import check_int
from minigrad.nn.module import Module


class Flatten(Module):
    """y = x.flatten(start_dim, end_dim): dims start_dim..end_dim become one; (N, C, H, W) -> (N, C*H*W)."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim = check_int("Flatten", "start_dim", start_dim)
        self.end_dim = check_int("Flatten", "end_dim", end_dim)

    def forward(self, x):
        return x.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"
