# A file a candidate ships beside its module, named for a module our processes import: where the
# worker's (or the witness's, or Nsight Compute's target's) start folder is on its import path, this
# runs in place of torch before any check is in place. Here it only leaves a mark, then hands over
# to the real torch.
import importlib
import pathlib
import sys

pathlib.Path("shadow_ran").write_text(" ".join(sys.argv))
sys.path[:] = [p for p in sys.path if p not in ("", ".") and pathlib.Path(p).resolve() != pathlib.Path.cwd()]
del sys.modules["torch"]
sys.modules["torch"] = importlib.import_module("torch")
