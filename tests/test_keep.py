"""Issue 17 item 4: code the user can keep. The proposal's module loads the kernels' library StitchCUDA
prebuilt beside it, so it runs in a fresh virtual environment that has torch but neither StitchCUDA
nor nvcc. On the CPU the candidate targets the host (its `<kernel>_host` entry points, built by nvcc
here); the GPU test does the same with the CUDA kernels."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import torch.nn as nn
from conftest import Staged, builtin_candidate, needs_nvcc

from stitchcuda import keep
from stitchcuda.kernel_loader import prebuilt_name
from stitchcuda.task import UsageError

pytestmark = pytest.mark.usefixtures("isolated_cache")




_RUN = textwrap.dedent('''
    import importlib.util, sys
    import torch
    try:
        import stitchcuda
    except ImportError:
        pass
    else:
        raise SystemExit(f"stitchcuda is importable here: {stitchcuda.__file__}")
    folder = sys.argv[1]
    spec = importlib.util.spec_from_file_location("kept_model", f"{folder}/model_new.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    saved = torch.load(f"{folder}/io.pt")
    new = mod.ModelNew().to(saved["x"].device)
    new.load_state_dict(saved["state"])
    with torch.no_grad():
        got = new(saved["x"])
    torch.testing.assert_close(got, saved["want"], rtol=1e-5, atol=1e-5)
    print("ran", type(mod._lib).__name__, mod._lib.path.name)
''')


def _fresh_venv(root: Path) -> Path:
    """A new virtual environment that sees torch's site-packages as a plain path: the .pth files there
    (StitchCUDA's editable install among them) are not processed, so `import stitchcuda` fails."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    python = root / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "torch_only.pth").write_text(str(Path(torch.__file__).parent.parent) + "\n")
    return python


def _no_nvcc_env(home: Path) -> dict[str, str]:
    path = "/usr/bin:/bin"
    assert shutil.which("nvcc", path=path) is None, "nvcc is on the test's bare PATH"
    env = {"PATH": path, "HOME": str(home), "LANG": "C.UTF-8"}
    for key in ("CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH"):
        if key in os.environ:
            env[key] = os.environ[key]
    return env


def _proposal(module: nn.Module, x: torch.Tensor, folder: Path, *, host: bool) -> None:
    cand = builtin_candidate(module, [x], host=host, title="kept")
    cand.write(folder)
    kept = keep.prebuild_proposal(cand, folder)
    assert kept.library is not None, kept.reason
    assert kept.library == folder / prebuilt_name(folder / "fused_kernels.cu")
    with torch.no_grad():
        torch.save({"x": x, "want": module(x), "state": module.state_dict()}, folder / "io.pt")


@pytest.mark.nvcc
@needs_nvcc
def test_the_proposal_runs_without_stitchcuda_and_without_nvcc(tmp_path):
    module = Staged()
    folder = tmp_path / "proposal"
    _proposal(module, torch.randn(2, 6, 9, 11), folder, host=True)
    python = _fresh_venv(tmp_path / "venv")
    env = _no_nvcc_env(tmp_path)
    run = subprocess.run([str(python), "-c", _RUN, str(folder)], capture_output=True, text=True, env=env, timeout=300,
                         cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"ran KernelLibrary {prebuilt_name(folder / 'fused_kernels.cu')}" in run.stdout

    # Sources edited since the build: the library no longer matches them, and the module says what to do
    # instead of running kernels other than its sources.
    cu = folder / "fused_kernels.cu"
    cu.write_text(cu.read_text() + "\n// edited\n")
    run = subprocess.run([str(python), "-c", _RUN, str(folder)], capture_output=True, text=True, env=env, timeout=300,
                         cwd=tmp_path)
    assert run.returncode != 0
    assert "is not beside it, and StitchCUDA is not installed to build it" in run.stderr


def test_arches_are_checked_and_named():
    assert keep.parse_arches("sm_80, 90,sm_90a") == ("sm_80", "sm_90", "sm_90a")
    assert keep.parse_arches(None) == ()
    with pytest.raises(UsageError, match="not a GPU arch"):
        keep.parse_arches("ampere")


@pytest.mark.nvcc
@needs_nvcc
def test_a_fat_binary_for_the_named_arches(tmp_path):
    from stitchcuda import runtime

    src = tmp_path / "k.cu"
    src.write_text('extern "C" __global__ void k(float* p) { p[threadIdx.x] = 1.0f; }\n')
    result = runtime.build([src], arch=["sm_80", "sm_90"])
    assert "-gencode=arch=compute_80,code=sm_80" in result.command
    assert "-gencode=arch=compute_90,code=compute_90" in result.command  # PTX of the newest, for newer GPUs
    cuobjdump = shutil.which("cuobjdump") or str(Path(runtime.find_nvcc() or "nvcc").with_name("cuobjdump"))
    if Path(cuobjdump).exists():
        listed = subprocess.run([cuobjdump, "--list-elf", str(result.library)], capture_output=True, text=True)
        assert "sm_80" in listed.stdout and "sm_90" in listed.stdout, listed.stdout + listed.stderr


@pytest.mark.gpu
def test_on_the_gpu_the_kept_proposal_runs_without_stitchcuda_and_without_nvcc(tmp_path):
    module = Staged().cuda()
    folder = tmp_path / "proposal"
    _proposal(module, torch.randn(4, 6, 33, 17, device="cuda"), folder, host=False)
    python = _fresh_venv(tmp_path / "venv")
    run = subprocess.run([str(python), "-c", _RUN, str(folder)], capture_output=True, text=True,
                         env=_no_nvcc_env(tmp_path), timeout=300, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr


def test_only_the_loader_as_shipped_is_exempt_from_the_static_check():
    """The loader reads the stream through torch._C; the static check lets exactly that code through
    (same AST as stitchcuda.kernel_loader's), and a changed copy is checked like any other code."""
    from stitchcuda.agents.verify.static_check import check_source

    text = builtin_candidate(Staged(), [torch.randn(2, 6, 9, 11)], host=False, title="kept").files["model_new.py"]
    assert not [f for f in check_source(text) if f.severity == "error"]
    tampered = text.replace("return torch._C._cuda_getCurrentRawStream(t.get_device())",
                            "return torch._C._nn.gelu(t).sum()")
    assert tampered != text
    found = [f for f in check_source(tampered) if f.severity == "error"]
    assert any("torch._C._nn.gelu" in f.message for f in found), found


@pytest.mark.nvcc
@needs_nvcc
def test_the_proposal_ships_the_library_the_verifier_ran(tmp_path):
    """optimize (replaying the example's GPU verdict, as on a machine without a GPU): the Verifier
    builds the kernels' library beside the candidate before its worker imports it, and the proposal's
    library is byte for byte that one."""
    from stitchcuda import cli

    root = Path(__file__).resolve().parent.parent
    out = tmp_path / "run"
    rc = cli.main(["optimize", str(root / "examples" / "gated_block.py"), "--out", str(out), "--rounds", "1",
                   "--replay", str(root / "bench" / "results" / "2026-12-04-h200-example-gated_block-d5354d9.json")])
    assert rc == 0
    (shipped,) = (out / "proposal").glob("fused_kernels.*.so")
    (ran,) = (out / "r1-builtin-pointwise").glob("fused_kernels.*.so")
    assert shipped.name == ran.name and shipped.read_bytes() == ran.read_bytes()
    verdict = (out / "r1-builtin-pointwise" / "verdict.json").read_text()
    assert f"kernels: {ran.name}, built for" in verdict
