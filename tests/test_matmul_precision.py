"""torch.set_float32_matmul_precision on tpu: float32 matmuls and
convolutions carry it to XLA as their precision_config ("highest", PyTorch's
default, as HIGHEST; "high" as HIGH; "medium" as XLA's DEFAULT, the device's
fastest form), in every mode, and changing it compiles anew with that
reason. The CPU plugin computes float32 exactly under each, so results are
compared with the CPU's at float32 tolerances (rtol 1e-5, atol 1e-5); the
programs' text is read from a dump directory."""
import pathlib

import pytest
import torch
import torch.nn.functional as F

import torch_tpu
import torch_tpu.metrics as metrics

PRECISIONS = {"highest": "HIGHEST", "high": "HIGH", "medium": None}
F32 = dict(rtol=1e-5, atol=1e-5)


@pytest.fixture(autouse=True)
def restore():
    yield
    torch.set_float32_matmul_precision("highest")
    metrics.set_dump_dir(None)
    torch_tpu.set_eager_mode("strict")


def texts(directory):
    """Every dumped program's text, by file name order."""
    return [p.read_text() for p in sorted(pathlib.Path(directory).glob("*.mlir"))]


def op_lines(directory, op):
    return [line for text in texts(directory) for line in text.splitlines() if f'"stablehlo.{op}"' in line]


def expected_config(xla_name):
    return f"#stablehlo<precision {xla_name}>, #stablehlo<precision {xla_name}>"


def inputs(seed, *shapes, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g).to(dtype) for s in shapes]


@pytest.mark.parametrize("precision", list(PRECISIONS))
def test_mm_and_conv_carry_the_precision(precision, tmp_path):
    # Shapes no other test uses, so these programs are built (and dumped) here;
    # 8 input features, as from 4 or fewer the convolution is a sum of taps
    # (elementwise float32 products, no convolution op).
    a, b = inputs(1, (7, 13), (13, 5))
    x, w = inputs(2, (2, 8, 9, 9), (4, 8, 3, 3))
    torch.set_float32_matmul_precision(precision)
    metrics.set_dump_dir(tmp_path)
    mm = (a.to("tpu") @ b.to("tpu")).cpu()
    conv = F.conv2d(x.to("tpu"), w.to("tpu"), padding=1).cpu()
    torch.set_float32_matmul_precision("highest")
    torch.testing.assert_close(mm, a @ b, **F32)
    torch.testing.assert_close(conv, F.conv2d(x, w, padding=1), **F32)
    xla_name = PRECISIONS[precision]
    for op in ("dot_general", "convolution"):
        lines = op_lines(tmp_path, op)
        assert lines, f"no {op} in the dumped programs"
        for line in lines:
            if xla_name:
                assert expected_config(xla_name) in line, line
            else:
                assert "precision_config" not in line, line


def test_bfloat16_products_carry_no_precision(tmp_path):
    a, b = inputs(3, (6, 11), (11, 3), dtype=torch.bfloat16)
    metrics.set_dump_dir(tmp_path)
    y = (a.to("tpu") @ b.to("tpu")).cpu()
    torch.testing.assert_close(y, a @ b)
    lines = op_lines(tmp_path, "dot_general")
    assert lines and not any("precision_config" in line for line in lines)


def test_changing_precision_recompiles_with_its_reason():
    a, b = inputs(4, (5, 17), (17, 2))
    ta, tb = a.to("tpu"), b.to("tpu")
    (ta @ tb).cpu()
    metrics.reset()
    torch.set_float32_matmul_precision("high")
    y = (ta @ tb).cpu()
    torch.testing.assert_close(y, a @ b, **F32)
    assert metrics.counters()["recompile"] >= 1
    assert any("float32 matmul precision changed highest -> high" in r for r in metrics.recompile_reasons())
    metrics.reset()
    (ta @ tb).cpu()  # the same setting again reuses its program
    assert metrics.counters()["compile"] == 0


def test_fused_graph_carries_the_precision(tmp_path):
    a, b, c = inputs(5, (3, 19), (19, 4), (4, 6))
    torch.set_float32_matmul_precision("high")
    metrics.set_dump_dir(tmp_path)
    with torch_tpu.eager_mode("fused"):
        y = torch.relu(a.to("tpu") @ b.to("tpu")) @ c.to("tpu")
        y = y.cpu()
    torch.testing.assert_close(y, torch.relu(a @ b) @ c, **F32)
    fused = [t for t in texts(tmp_path) if t.count('"stablehlo.dot_general"') == 2]
    assert fused, "no fused program with both products"
    assert fused[0].count(expected_config("HIGH")) == 2


def test_compiled_graph_carries_the_precision(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(23, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    (x,) = inputs(6, (4, 23))
    expected = model(x).detach()
    compiled = torch.compile(model.to("tpu"), backend="tpu")
    for precision in ("highest", "medium"):  # one compiled model; dynamo guards on the setting
        torch.set_float32_matmul_precision(precision)
        metrics.set_dump_dir(tmp_path / precision)
        with torch.no_grad():
            y = compiled(x.to("tpu")).cpu()
        torch.testing.assert_close(y, expected, **F32)
        lines = op_lines(tmp_path / precision, "dot_general")
        assert len(lines) == 2, lines
        for line in lines:
            if PRECISIONS[precision]:
                assert expected_config(PRECISIONS[precision]) in line, line
            else:
                assert "precision_config" not in line, line
