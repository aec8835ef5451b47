from pathlib import Path

import pytest
from conftest import KERNELBENCH

from stitchcuda.task import TaskError, find_task, load_task_module


def write(tmp_path: Path, text: str, name: str = "m.py") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.skipif(not (KERNELBENCH / "level1").is_dir(), reason="KernelBench is not available (KERNELBENCH_DIR)")
def test_kernelbench_format_picks_model():
    task = find_task(KERNELBENCH / "level1" / "19_ReLU.py")
    assert task.class_name == "Model"
    _, cls = load_task_module(task)
    assert cls.__name__ == "Model"


def test_single_named_module_is_found(tmp_path):
    p = write(tmp_path, "import torch.nn as nn\nclass Block(nn.Module):\n  pass\n"
                        "def get_inputs(): return []\ndef get_init_inputs(): return []\n")
    assert find_task(p).class_name == "Block"


def test_missing_functions_say_what_to_add(tmp_path):
    p = write(tmp_path, "import torch.nn as nn\nclass Block(nn.Module):\n  pass\ndef get_inputs(): return []\n")
    with pytest.raises(TaskError) as e:
        find_task(p)
    msg = str(e.value)
    assert "get_init_inputs" in msg and "def get_init_inputs():" in msg
    assert "get_inputs and" not in msg  # only what is missing is named


def test_several_modules_need_a_choice(tmp_path):
    src = ("import torch.nn as nn\nclass A(nn.Module):\n  pass\nclass B(nn.Module):\n  pass\n"
           "def get_inputs(): return []\ndef get_init_inputs(): return []\n")
    p = write(tmp_path, src)
    with pytest.raises(TaskError, match="--class"):
        find_task(p)
    assert find_task(p, "B").class_name == "B"
    with pytest.raises(TaskError, match="no class named 'C'"):
        find_task(p, "C")


def test_syntax_error_is_a_message_not_a_traceback(tmp_path):
    p = write(tmp_path, "class (:\n")
    with pytest.raises(TaskError, match=r"m.py:1: syntax error"):
        find_task(p)


def test_class_that_is_not_a_module(tmp_path):
    p = write(tmp_path, "class Model:\n  pass\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n")
    with pytest.raises(TaskError):
        load_task_module(find_task(p, "Model"))


def test_a_folder_is_called_a_folder(tmp_path):
    with pytest.raises(TaskError, match="is a folder: give one .py file"):
        find_task(tmp_path)
