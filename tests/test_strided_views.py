"""Reads and writes through strided views against the CPU, exactly (views
move values, they compute nothing). A view whose strides nest (each a
multiple of the next smaller one) and that sits inside one row of each
dimension at its offset, such as q, k and v split out of one qkv tensor or
a stepped slice, is a slice of its storage seen as a dense array; other
strided views are gathered element by element. Both kinds are covered, and
the first must compile no gather and share one program across offsets."""
import pathlib
import random

import pytest
import torch

import torch_tpu.metrics as metrics

VIEWS = {
    "qkv_q": ((4, 16, 96), lambda t: t[..., 0:32].view(4, 16, 2, 16).transpose(1, 2)),
    "qkv_k": ((4, 16, 96), lambda t: t[..., 32:64].view(4, 16, 2, 16).transpose(1, 2)),
    "qkv_v": ((4, 16, 96), lambda t: t[..., 64:96].view(4, 16, 2, 16).transpose(1, 2)),
    "step_2": ((6, 10), lambda t: t[:, ::2]),
    "step_3_offset": ((6, 10), lambda t: t[1:, 1::3]),
    "transposed_step": ((6, 10), lambda t: t.t()[::2, 1:4]),
    "inner_box": ((3, 5, 7), lambda t: t[:, 1:4, 2:6]),
    "permuted_box": ((3, 5, 7), lambda t: t[1:, :, 1::2].permute(2, 0, 1)),
    "box_with_unit_dims": ((3, 5, 7), lambda t: t[:, 1:4, 2:6].unsqueeze(1)[:, :, :1]),
    "rows_wrap": ((100,), lambda t: t.as_strided((3, 4), (10, 3), 7)),  # 7 + 3*3 passes 10: gathered
    "rows_fit": ((100,), lambda t: t.as_strided((3, 4), (10, 2), 3)),
    "not_nested": ((100,), lambda t: t.as_strided((2, 3, 2), (30, 7, 2), 5)),
    "last_row_partial": ((38,), lambda t: t.as_strided((4, 3), (10, 2), 1)),
    # A permutation of the whole storage: read and written with a transpose alone.
    "transposed": ((6, 10), lambda t: t.t()),
    "permuted": ((3, 5, 7), lambda t: t.permute(2, 0, 1)),
    "permuted_with_unit_dim": ((3, 1, 7), lambda t: t.permute(1, 2, 0)),
}


def base(shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("name", list(VIEWS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16])
def test_read_and_write_match_cpu(name, dtype):
    shape, view = VIEWS[name]
    cpu = (base(shape) * 10).to(dtype)
    tpu = cpu.to("tpu")
    torch.testing.assert_close(view(tpu).cpu(), view(cpu), rtol=0, atol=0)
    torch.testing.assert_close((view(tpu) * 3).cpu(), view(cpu) * 3, rtol=0, atol=0)
    # In place through the view, and a copy into it.
    view(cpu).mul_(-2)
    view(tpu).mul_(-2)
    torch.testing.assert_close(tpu.cpu(), cpu, rtol=0, atol=0)
    values = torch.arange(view(cpu).numel()).reshape(view(cpu).shape).to(dtype)
    view(cpu).copy_(values)
    view(tpu).copy_(values.to("tpu"))
    torch.testing.assert_close(tpu.cpu(), cpu, rtol=0, atol=0)


def test_writing_a_whole_permuted_view_does_not_read_the_old_storage(tmp_path):
    """An op writing all of a transposed output (out=, or a fresh output laid
    out like a transposed input) takes no old value of that storage: the
    program has just the inputs as parameters."""
    x = base((9, 11)).to("tpu")
    out = torch.empty(11, 9, device="tpu").t()  # [9, 11], covering its storage transposed
    metrics.set_dump_dir(tmp_path)
    try:
        torch.neg(x, out=out)
        torch.testing.assert_close(out.cpu(), -x.cpu(), rtol=0, atol=0)
    finally:
        metrics.set_dump_dir(None)
    programs = [p.read_text() for p in pathlib.Path(tmp_path).glob("*.mlir")]
    assert "@main(%v0: tensor<99xf32>) ->" in "".join(programs)


def test_random_as_strided_reads_match_cpu():
    rng = random.Random(0)
    for _ in range(100):
        n = rng.randint(20, 200)
        sizes = [rng.randint(1, 4) for _ in range(rng.randint(1, 4))]
        strides = [rng.randint(0, 12) for _ in sizes]
        span = sum((s - 1) * st for s, st in zip(sizes, strides))
        if span >= n:
            continue
        offset = rng.randint(0, n - 1 - span)
        x = base((n,), seed=n)
        got = x.to("tpu").as_strided(sizes, strides, offset).cpu()
        torch.testing.assert_close(got, x.as_strided(sizes, strides, offset), rtol=0, atol=0,
                                   msg=f"sizes {sizes} strides {strides} offset {offset}")


def test_split_heads_compile_once_without_gather(tmp_path):
    qkv = base((2, 8, 3 * 40)).to("tpu")  # shapes no other test uses
    metrics.set_dump_dir(tmp_path)
    try:
        metrics.reset()
        heads = [(qkv[..., k * 40:(k + 1) * 40].view(2, 8, 4, 10).transpose(1, 2) * 2).cpu() for k in range(3)]
        compiles = metrics.counters()["compile"]
    finally:
        metrics.set_dump_dir(None)
    cpu = qkv.cpu()
    for k, h in enumerate(heads):
        torch.testing.assert_close(h, cpu[..., k * 40:(k + 1) * 40].view(2, 8, 4, 10).transpose(1, 2) * 2)
    assert compiles == 1  # the offset is a runtime value: one program for q, k and v
    texts = [p.read_text() for p in pathlib.Path(tmp_path).glob("*.mlir")]
    assert texts and not any("stablehlo.gather" in t for t in texts)
    assert any("stablehlo.dynamic_slice" in t for t in texts)
