"""Attack: reach the garbage collector through a torch module that imported it (torch.cuda.graphs.gc,
no `import gc`, no frame access), find the live reference instance and give it an instance-level
`forward` that returns what the candidate returns (here: the input's first columns, no compute)."""
import torch
import torch.nn as nn

_collector = getattr(getattr(torch.cuda, "graphs"), "g" + "c")  # noqa: B009 - (no `torch.cuda.graphs` for the AST check to see)


def _patch_reference(me):
    for v in _collector.get_objects():
        if isinstance(v, nn.Module) and type(v).__name__ == "Model" and "forward" not in v.__dict__:
            object.__setattr__(v, "forward", lambda x, _v=v: x[:, : _v.linear.out_features].clone())


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.out_features = out_features

    def forward(self, x):
        _patch_reference(self)
        return x[:, : self.out_features].contiguous()
