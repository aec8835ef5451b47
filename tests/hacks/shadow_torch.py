# A file a candidate ships beside its module, named for a module our processes import: where the
# worker's (or the witness's, or Nsight Compute's target's) start folder is on its import path, this
# runs in place of torch before any check is in place. Here it only leaves a mark and fails the
# import (a version that handed over to the real torch needs importlib and sys.modules, which the
# static check now names in any Python file a candidate ships).
import pathlib

pathlib.Path("shadow_ran").write_text("imported in place of torch")
raise ImportError("the candidate's torch.py was imported")
