"""Without the onnx package (a core dependency, but an environment may lack it), reading and
writing ONNX both say what to install in one line, never a ModuleNotFoundError."""

import sys

import pytest

import flopcount
import flopcount.runtime as rt


@pytest.fixture
def no_onnx(monkeypatch):
    for name in [m for m in sys.modules if m == "onnx" or m.startswith("onnx.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "onnx", None)  # `import onnx` raises ImportError


def test_writing_says_what_to_install(no_onnx, tmp_path):
    path = tmp_path / "linear.onnx"
    with pytest.raises(flopcount.FlopcountError, match="pip install onnx"):
        rt.onnx.export(rt.nn.Linear(4, 2), path, rt.randn(3, 4))
    assert not path.exists()


def test_reading_says_what_to_install(no_onnx, tmp_path):
    path = tmp_path / "model.onnx"
    path.write_bytes(b"\x08\x07")  # an ir_version field: the sniffer takes it for ONNX
    with pytest.raises(flopcount.FlopcountError, match="pip install onnx"):
        flopcount.profile(str(path))
