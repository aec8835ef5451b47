"""location.py: a candidate may read and ask about only its own files, and may not test its own
path. Each probe below is a defeat device's first step (test_environment_probes.py runs two of them
through the Verifier); each pass is a pattern an honest module loading its kernels writes."""

from __future__ import annotations

import pytest

from stitchcuda.agents.verify.static_check import check_candidate_sources

_MODULE = '''import os, hashlib, logging, torch, torch.nn as nn
from pathlib import Path
from torch.utils.cpp_extension import load_inline
HERE = os.path.dirname(__file__)
{top}
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
{body}
        return x
'''
_FILES = {"kernels.cu": "__global__ void k() {}\n", "csrc/more.cuh": "\n"}


def _probes(top: str = "", body: str = "        pass") -> list[str]:
    files = {"model_new.py": _MODULE.format(top=top, body=body), **_FILES}
    return [f.message for f in check_candidate_sources(files, "model_new.py") if f.code == "environment-probe"]


@pytest.mark.parametrize(("body", "asked"), [
    ('        if os.path.exists("request.json"): x = x * 2', "a file not its own"),
    ('        if os.path.isfile(os.path.join(HERE, "worker.log")): x = x * 2', "a file not its own"),
    ('        if os.path.isdir(os.path.join(HERE, ".git")): x = x * 2', "a file not its own"),
    ('        if os.path.isdir("/home"): x = x * 2', "a file not its own"),
    ('        if Path(__file__).with_name("request.json").exists(): x = x * 2', "a file not its own"),
    ('        if Path("tmp").is_dir(): x = x * 2', "a file not its own"),
    ('        name = "req" + "uest.json"\n        if os.path.getsize(os.path.join(HERE, name)): x = x * 2',
     "a file not its own"),
    ('        if open("kernels.cu").read(): x = x * 2', "a file not its own"),  # relative: wherever it was started
    ('        if "tmp" in __file__: x = x * 2', "a comparison of its own path"),
    ('        if HERE.startswith("/tmp"): x = x * 2', ".startswith() of its own path"),
    ('        if len(HERE) > 20: x = x * 2', "handed to len()"),
    ('        x = x * (hash(__file__) % 2)', "handed to hash()"),
    ('        if __spec__.origin.endswith("x"): x = x * 2', ".endswith() of its own path"),
    ('        if Path(__file__).parent.name == "v": x = x * 2', "a comparison of its own path"),
    ('        if hashlib.sha256(HERE.encode()).hexdigest()[0] == "a": x = x * 2', "a comparison of its own path"),
    ('        x = x * {"/tmp": 2}.get(HERE[:4], 1)', "handed to"),
    ('        if type(self).__module__ != "model_new": x = x * 2', "a comparison of its own path"),
    ('        if __name__ == "model_new": x = x * 2', "a comparison of its own path"),
    ('        if "tmp" in ModelNew.forward.__code__.co_filename: x = x * 2', "a comparison of its own path"),
    ('        if "tmp" in str(Path(".").absolute()): x = x * 2', "made absolute against the folder"),
    ('        if "tmp" in str(Path("x").resolve()): x = x * 2', "made absolute against the folder"),
])
def test_questions_about_its_place_are_probes(body, asked):
    found = _probes(body=body)
    assert any(asked in m for m in found), found


def test_its_path_is_followed_through_names_parameters_attributes_and_returns():
    top = '''def where(p):
    return str(p)
class Box:
    def __init__(self, path):
        self.path = path
    def check(self):
        return self.path.count("/") > 3
_W = where(Path(__file__))
'''
    assert any("a comparison of its own path" in m for m in _probes(top, '        if _W[:4] == "/tmp": x = x * 2'))
    assert any(".count() of its own path" in m for m in _probes(top, "        Box(HERE).check()"))
    h = '        h = hashlib.sha256()\n        h.update(HERE.encode())\n        if h.hexdigest() < "8": x = x * 2'
    assert any("a comparison of its own path" in m for m in _probes(body=h))


@pytest.mark.parametrize("body", [
    '        src = open(os.path.join(HERE, "kernels.cu")).read()',
    '        src = (Path(__file__).parent / "kernels.cu").read_text()',
    '        src = Path(HERE, "csrc", "more.cuh").read_text()',
    '        ok = os.path.exists(os.path.join(os.path.dirname(__file__), "kernels.cu"))',
    '        ok = Path(__file__).with_name("kernels.cu").is_file()',
    '        ok = os.path.isfile(f"{HERE}/kernels.cu")',
    '        ok = os.path.isfile(HERE + "/kernels.cu")',
    '        ok = os.path.getsize(__file__)',
    '        ok = Path(__file__).resolve().parent.exists()',
    # the commonest way a module finds its folder: absolute against nothing but itself
    '        src = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernels.cu")).read()',
    '        src = open(os.path.join(os.path.dirname(os.path.realpath(__file__)), "kernels.cu")).read()',
    '        os.makedirs(os.path.join(HERE, "build"), exist_ok=True)',
    '        m = load_inline("k", "", cuda_sources=open(os.path.join(HERE, "kernels.cu")).read(), '
    'build_directory=os.path.join(HERE, "build"))',
    "        logging.getLogger(__name__).debug('%s', HERE)",
    '        digest = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()',
    "        raise RuntimeError(f'no kernels beside {HERE}')",
    "        t = x.is_contiguous() and x.shape[0] > 1",
])
def test_what_a_module_loading_its_kernels_writes_passes(body):
    assert _probes(body=body) == []


def test_a_main_guard_passes():
    assert _probes(top='if __name__ == "__main__":\n    print(HERE)\n') == []


def test_a_file_not_among_the_candidates_is_not_its_own():
    """The same name passes where it is one of the candidate's files, and not where it is not."""
    body = '        src = open(os.path.join(HERE, "extra.cu")).read()'
    assert _probes(body=body)
    files = {"model_new.py": _MODULE.format(top="", body=body), "extra.cu": "\n"}
    assert [f for f in check_candidate_sources(files, "model_new.py") if f.code == "environment-probe"] == []


@pytest.mark.parametrize("body", [
    '        if "tmp" in str(_lib.path): x = x * 2',
    '        if _lib._lib._name.startswith("/tmp"): x = x * 2',
    '        if "cache" in _ext.__file__: x = x * 2',
])
def test_where_its_library_was_built_is_its_place_too(body):
    """The Verifier builds into its own cache, the user's module loads the library beside it."""
    top = ('from stitchcuda import runtime\n_lib = runtime.load(Path(__file__).with_name("kernels.cu"))\n'
           '_ext = load_inline("k", "", cuda_sources="")\n')
    assert any("of its own path" in m for m in _probes(top, body)), _probes(top, body)


def test_the_generated_module_asks_nothing(tmp_path):
    """The built-in coder's module for the shipped example: its loader, its op named after a digest of
    its sources and library path, its fast path."""
    from pathlib import Path

    from stitchcuda.agents.coder import builtin
    from stitchcuda.agents.loop import plan_task
    from stitchcuda.task import find_task

    task = find_task(Path(__file__).resolve().parents[1] / "examples" / "gated_block.py")
    cand = builtin.code(task, plan_task(task))
    assert "_define_op" in cand.files[cand.module] and "__file__" in cand.files[cand.module]
    assert [f for f in check_candidate_sources(cand.files, cand.module) if f.code == "environment-probe"] == []


@pytest.mark.parametrize("body", [
    "        _lib.path.unlink()",
    "        Path(str(_lib.path)).unlink(missing_ok=True)",
    '        Path(HERE, "kernels.cu").rename(os.path.join(HERE, "k.cu"))',
])
def test_a_file_of_its_own_removed_or_moved_is_a_finding(body):
    """A library gone from the run folder once loaded is out of the native checks' sight."""
    top = 'from stitchcuda import runtime\n_lib = runtime.load(Path(__file__).with_name("kernels.cu"))\n'
    assert any("deletes or moves a file" in m for m in _probes(top, body)), _probes(top, body)



_READER = 'def _read(name, mode="r"):\n    with open(os.path.join(HERE, name), mode) as f:\n        return f.read()\n'


@pytest.mark.parametrize(("calls", "asks"), [
    ('SRC = _read("kernels.cu")', False),
    ('SRC = _read(name="kernels.cu")', False),
    ('N = "kernels.cu"\nSRC = _read(N)', False),
    ('SRC = _read("kernels.cu")\nB = _read("request.json")', True),  # one caller asks about another file
    ('SRC = _read("kernels.cu")\nL = list(map(_read, ["request.json"]))', True),  # handed on: callers unseen
    ('N = "req" + "uest.json"\nSRC = _read(N)', True),
])
def test_a_reader_of_its_own_files_is_judged_by_what_its_callers_pass(calls, asks):
    found = _probes(top=_READER + calls + "\n")
    assert bool(found) == asks, found


@pytest.mark.parametrize(("top", "cond"), [
    ("class H:\n    pass\nH.p = __file__\n", '"tmp" in H.p'),  # a class's attribute
    ('D = {}\nD["p"] = __file__\n', '"tmp" in D["p"]'),  # a container's item
    ("L = [__file__]\n", '"tmp" in L[0]'),
])
def test_its_path_kept_in_a_class_or_a_container_is_still_its_path(top, cond):
    assert any("a comparison of its own path" in m for m in _probes(top, f"        if {cond}: x = x * 2"))


# A red-team review's routes (2026-12-05): its path through defaults, *args, lambdas, generators, loop
# counts, buffers, errors, an object's text, a library's alias, and its own folder's size.
@pytest.mark.parametrize(("top", "cond"), [
    ("def f(p=__file__):\n    return p\n", '"tmp" in f()'),
    ("def g(*a):\n    return a[0]\n", '"tmp" in g(__file__)'),
    ("get = lambda: __file__\n", '"tmp" in get()'),
    ("def gen():\n    yield __file__\n", '"tmp" in next(gen())'),
    ("N = 0\nfor _c in __file__:\n    N += 1\n", "N > 30"),
    ("import io\nB = io.StringIO()\nprint(__file__, file=B)\n", '"tmp" in B.getvalue()'),
    ("E = ValueError(__file__)\n", '"tmp" in E.args[0]'),
    ("", '"model_new" in str(type(self))'),
    ("", 'torch.typename(self).startswith("model_new")'),
    ("", 'ModelNew.__dict__["__module__"] == "m"'),
    ("from stitchcuda import runtime\n_L = runtime.load(Path(__file__).with_name('kernels.cu'))\n_A = _L\n",
     '"cache" in str(_A.path)'),
])
def test_its_path_is_followed_through_what_a_review_found(top, cond):
    found = _probes(top, f"        if {cond}: x = x * 2")
    assert any("of its own path" in m for m in found), found


def test_of_its_own_folder_only_whether_it_is_there_may_be_asked():
    assert _probes(body="        ok = os.path.isdir(HERE)") == []
    assert any("not its own" in m for m in _probes(body="        n = os.path.getsize(HERE)"))


def test_a_file_it_ships_under_a_run_folder_name_is_not_its_own():
    """result.json or request.json shipped with the candidate: the run folder rewrites or removes them."""
    body = '        ok = os.path.exists(os.path.join(HERE, "result.json"))'
    files = {"model_new.py": _MODULE.format(top="", body=body), "result.json": "{}"}
    assert [f for f in check_candidate_sources(files, "model_new.py") if f.code == "environment-probe"]


@pytest.mark.parametrize("body", [
    # an RNN's weights by layer, an activation by its name: lookups no dunder can answer
    '        for layer in range(2):\n            w = getattr(self, f"weight_ih_l{layer}").contiguous()',
    '        w = getattr(self, "bias_" + str(1)).contiguous()',
    '        w = getattr(self, "w{}".format(1)).contiguous()',
    '        w = getattr(self, "w%d" % 1).contiguous()',
    '        for n in ("relu", "gelu"):\n            x = getattr(torch.nn.functional, n)(x)',
])
def test_an_attribute_looked_up_by_a_name_that_is_no_dunder_passes(body):
    """CI's run of good_rnn_full (getattr(self.rnn, f"weight_ih_l{layer}")) found these flagged: a
    computed name is a location value only where it may be a dunder, and an operation looked up in
    torch says where torch lies, not the candidate (where torch's name may reach the process is
    probes.py's, test_environment_probes)."""
    assert _probes(body=body) == []


@pytest.mark.parametrize("body", [
    '        if getattr(self, "__mod" + "ule__") != "model_new": x = x * 2',
    '        if getattr(self, "_" + "_module__") != "model_new": x = x * 2',
    '        if getattr(self, f"__{self.which}__") != "model_new": x = x * 2',
    '        if getattr(self, "{}module__".format("__")) != "model_new": x = x * 2',
    '        if getattr(self, self.which) != "model_new": x = x * 2',
    '        if getattr(torch.utils.cpp_extension, self.which)("k", False).startswith("/tmp"): x = x * 2',
])
def test_a_name_that_may_be_a_dunder_is_still_its_place(body):
    assert any("its own path" in m for m in _probes(body=body)), _probes(body=body)


@pytest.mark.parametrize(("top", "body"), [
    # a question whose every answer ends in the same state: nothing after it can tell them apart
    ('_B = os.path.join(HERE, "build")\nif not os.path.exists(_B):\n    os.makedirs(_B)', '        pass'),
    ('_B = Path(__file__).parent / "build"\nif not _B.exists():\n    _B.mkdir(parents=True)', '        pass'),
    ('import sys\nif HERE not in sys.path:\n    sys.path.insert(0, HERE)', '        pass'),
    # a class's name is what its source says
    ('', '        for m in self.children():\n            if type(m).__name__ == "ReLU": x = x * 2'),
    ('', '        if self.__class__.__name__ != "ModelNew": x = x * 2'),
])
def test_honest_guards_and_class_names_pass(top, body):
    files = {"model_new.py": _MODULE.format(top=top, body=body), **_FILES}
    found = [f.message for f in check_candidate_sources(files, "model_new.py") if f.code == "environment-probe"]
    assert found == []


@pytest.mark.parametrize(("top", "body"), [
    # a guard that does more than make its answer true carries the answer on
    ('_B = os.path.join(HERE, "build")\nFIRST = False\nif not os.path.exists(_B):\n    os.makedirs(_B)\n'
     '    FIRST = True', '        pass'),
    ('_B = os.path.join(HERE, "build")\nif not os.path.exists(_B):\n    os.makedirs(_B)\nelse:\n    pass', '        pass'),
    ('import sys\nif HERE not in sys.path:\n    sys.path.insert(0, "/elsewhere")', '        pass'),
    # the name its importer gave a module of its own
    ('import helpers', '        if helpers.__name__ != "helpers": x = x * 2'),
    ('from . import helpers', '        if helpers.__name__.startswith("tmp"): x = x * 2'),
])
def test_what_a_guard_or_a_name_carries_on_is_still_asked(top, body):
    files = {"model_new.py": _MODULE.format(top=top, body=body), "helpers.py": "X = 1\n", **_FILES}
    found = [f.message for f in check_candidate_sources(files, "model_new.py") if f.code == "environment-probe"]
    assert found, (top, body)
