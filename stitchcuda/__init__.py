"""StitchCUDA: turn a PyTorch nn.Module into verified, faster CUDA."""

__version__ = "0.1.0"
