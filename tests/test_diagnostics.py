"""Diagnostics: recompilation reasons, program dumps (TORCH_TPU_DUMP_DIR and
torch_tpu.metrics.set_dump_dir) and the metrics report."""
import os
import subprocess
import sys

import pytest
import torch

import torch_tpu
import torch_tpu.metrics as metrics


@pytest.fixture(autouse=True)
def clean():
    metrics.reset()
    yield
    metrics.set_dump_dir(None)
    torch_tpu.set_eager_mode("strict")


def neg(shape, dtype=torch.float32):
    """A fresh op signature per shape: neg of a new tensor, read back."""
    return (-torch.ones(shape, dtype=dtype, device="tpu")).cpu()


def test_shape_change_is_a_recompile_with_its_reason():
    neg((3, 37))
    metrics.reset()
    neg((3, 41))
    reasons = metrics.recompile_reasons()
    assert "aten::neg.out: input 0 dim 1 changed 37 -> 41" in reasons
    assert metrics.counters()["recompile"] == len(reasons) > 0


def test_dtype_and_rank_changes_are_named():
    neg((5, 43))
    neg((5, 43), torch.bfloat16)
    assert "aten::neg.out: input 0 dtype changed float32 -> bfloat16" in metrics.recompile_reasons()
    neg((5, 43, 2), torch.bfloat16)
    assert "aten::neg.out: input 0 rank changed 2 -> 3" in metrics.recompile_reasons()


def test_layout_change_is_named():
    x = torch.ones(47, 47, device="tpu")
    (-x).cpu()
    (-x.t()).cpu()  # the same sizes, read through a transposed view
    assert "aten::neg.out: input 0 layout changed contiguous -> transposed" in metrics.recompile_reasons()


def test_repeating_a_signature_is_no_recompile():
    neg((7, 53))
    metrics.reset()
    for _ in range(3):
        neg((7, 53))
    assert metrics.recompile_reasons() == []
    assert metrics.counters()["recompile"] == 0


def test_reasons_keep_the_latest_64():
    for n in range(1, 80):
        neg((n, 59))
    reasons = metrics.recompile_reasons()
    assert len(reasons) == 64 and metrics.counters()["recompile"] >= 78
    assert reasons[-1].endswith("changed 78 -> 79")
    report = metrics.report()
    assert f"recompilations: {metrics.counters()['recompile']}, latest 64" in report


def dumps(directory):
    return sorted(p for p in os.listdir(directory) if p.endswith(".mlir"))


def test_set_dump_dir_writes_each_new_program(tmp_path):
    target = tmp_path / "nested" / "dumps"
    metrics.set_dump_dir(target)
    neg((2, 61))
    files = dumps(target)
    assert len(files) >= 1
    assert all(len(name) == 32 + len(".mlir") for name in files)
    text = (target / files[-1]).read_text()
    assert text.startswith(f"// torch_tpu program {files[-1][:32]}\n// key: program text")
    assert "plugin identity" in text and torch_tpu._C._runtime_info()["platform"] in text
    assert "stablehlo.negate" in "".join((target / f).read_text() for f in files)
    count = len(files)
    neg((2, 61))  # built already: nothing new
    assert len(dumps(target)) == count
    metrics.set_dump_dir(None)
    neg((2, 67))
    assert len(dumps(target)) == count


def test_dump_dir_that_is_a_file_is_an_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(OSError):
        metrics.set_dump_dir(blocker / "dumps")


def test_dump_dir_environment_variable(tmp_path):
    code = "import torch, torch_tpu; print((torch.ones(3, 71, device='tpu') * 2).sum().item())"
    env = dict(os.environ, TORCH_TPU_DUMP_DIR=str(tmp_path / "d"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=180)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-1] == "426.0"
    texts = [(tmp_path / "d" / f).read_text() for f in dumps(tmp_path / "d")]
    assert any("tensor<3x71xf32>" in t and "stablehlo.multiply" in t for t in texts)


def test_report_names_every_section():
    x = torch.randn(4, 73)
    y = (x.to("tpu") * 3).cpu()
    torch.testing.assert_close(y, x * 3)
    report = metrics.report()
    c = metrics.counters()
    assert c["execute"] >= 1 and c["transfer_to_device"] >= 1 and c["bytes_to_host"] >= 4 * 73 * 4
    for line in ("plugin: ", "platform: ", "eager mode: strict (0 fused ops pending)", "compiles: ",
                 "cache hits: ", "executions: ", "to device: ", "to host: ", "cpu fallbacks: ",
                 "recompilations: "):
        assert line in report, line


def test_report_shows_fused_mode_and_pending_ops():
    with torch_tpu.eager_mode("fused"):
        z = torch.ones(5, device="tpu") + 1
        pending = torch_tpu.modes.pending_op_count()
        assert pending > 0
        assert f"eager mode: fused ({pending} fused ops pending)" in metrics.report()
        assert z.cpu().tolist() == [2.0] * 5


def test_report_lists_cpu_fallbacks_per_op():
    x = torch.rand(6, device="tpu")
    with torch_tpu.cpu_fallback():
        torch.histogram(x, bins=4).hist.cpu()
    assert "  aten::histogram" in metrics.report()
