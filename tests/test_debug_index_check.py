"""Debug mode checks indices: an index outside its dimension raises at the
call, with the exception type PyTorch's CPU raises for that op (IndexError
or RuntimeError), where strict and fused modes, like XLA, clamp or drop it.
In-range indices (negative ones where the op allows them) give the CPU's
results exactly (these ops move values, they compute nothing)."""
import pytest
import torch
import torch.nn.functional as F

import torch_tpu

DATA = torch.arange(12, dtype=torch.float32).reshape(3, 4)


def ones(n, m, like):
    return torch.ones(n, m, device=like.device)


# name: f(index, data) for a 1-d index into dimension 0 of a 3 x 4 tensor.
OPS = {
    "embedding": lambda i, x: F.embedding(i, x),
    "index_select": lambda i, x: x.index_select(0, i),
    "gather": lambda i, x: x.gather(0, i.view(-1, 1)),
    "scatter": lambda i, x: x.clone().scatter_(0, i.view(-1, 1), -1.0),
    "scatter_add": lambda i, x: x.clone().scatter_add_(0, i.view(-1, 1), ones(i.numel(), 1, x)),
    "scatter_reduce": lambda i, x: x.clone().scatter_reduce_(0, i.view(-1, 1), ones(i.numel(), 1, x), "amax"),
    "index_add": lambda i, x: x.clone().index_add_(0, i, ones(i.numel(), 4, x)),
    "index_copy": lambda i, x: x.clone().index_copy_(0, i, ones(i.numel(), 4, x)),
    "index_fill": lambda i, x: x.clone().index_fill_(0, i, -1.0),
    "index_reduce": lambda i, x: x.clone().index_reduce_(0, i, ones(i.numel(), 4, x), "amax"),
    "getitem": lambda i, x: x[i],
    "getitem_dim1": lambda i, x: x[:, i],
    "index_put": lambda i, x: x.clone().index_put_((i,), torch.tensor(-1.0, device=x.device)),
    "setitem": lambda i, x: x.clone().__setitem__((slice(None), i), -1.0),
    "take": lambda i, x: x.take(i * 4),
    "put": lambda i, x: x.clone().put_(i * 4, torch.full((i.numel(),), -1.0, device=x.device)),
    "nll_loss": lambda i, x: F.nll_loss(x[:, :3], i.repeat(3)[:3], reduction="sum"),
    "cross_entropy": lambda i, x: F.cross_entropy(x[:, :3], i.repeat(3)[:3], reduction="none"),
    "embedding_bag": lambda i, x: F.embedding_bag(i.view(1, -1), x),
    # Output planes of 3 elements, one value per index.
    "max_unpool2d": lambda i, x: torch.ops.aten.max_unpool2d(x.flatten()[:i.numel()].view(1, 1, 1, -1),
                                                             i.view(1, 1, 1, -1), [1, 3]),
}


@pytest.fixture(autouse=True)
def debug_mode():
    with torch_tpu.eager_mode("debug"):
        yield


def run(f, index, dev):
    out = f(torch.tensor(index, device=dev), DATA.to(dev))
    return None if out is None else out.cpu()


def cpu_outcome(f, index):
    try:
        return run(f, index, "cpu"), None
    except (IndexError, RuntimeError) as e:
        return None, type(e)


@pytest.mark.parametrize("index", [[0, 2], [-1], [3], [-4], [1, 5, 0]], ids=str)
@pytest.mark.parametrize("name", list(OPS))
def test_out_of_range_raises_what_the_cpu_raises(name, index):
    f = OPS[name]
    expected, error = cpu_outcome(f, index)
    if error is None:
        torch.testing.assert_close(run(f, index, "tpu"), expected, rtol=0, atol=0)
    else:
        with pytest.raises(error, match="out of bounds|out of range"):
            run(f, index, "tpu")
    # The process keeps working: the same op with in-range indices runs.
    torch.testing.assert_close(run(f, [0], "tpu"), run(f, [0], "cpu"), rtol=0, atol=0)


def test_error_names_the_op_index_dimension_and_size():
    x = torch.zeros(5, 3, device="tpu")
    with pytest.raises(IndexError, match=r"aten::index_select.*index 9 is out of bounds for dimension 1 with size 3"):
        x.index_select(1, torch.tensor([0, 9], device="tpu"))


def test_nll_loss_skips_the_ignored_target():
    logits = torch.randn(4, 3)
    target = torch.tensor([0, -100, 2, -100])
    got = F.nll_loss(logits.to("tpu"), target.to("tpu"), ignore_index=-100)
    torch.testing.assert_close(got.cpu(), F.nll_loss(logits, target, ignore_index=-100))
    with pytest.raises(IndexError, match="target 7 is out of bounds"):
        F.nll_loss(logits.to("tpu"), torch.tensor([0, 7, 2, -100], device="tpu"), ignore_index=-100)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_strided_and_int32_indices(dtype):
    index = torch.tensor([[0, 9], [2, 1]], dtype=dtype).t()  # a transposed view: 0, 2 | 9, 1
    x = torch.randn(3, 4)
    torch.testing.assert_close(x.to("tpu").index_select(0, index[0].to("tpu")).cpu(), x.index_select(0, index[0]))
    with pytest.raises(IndexError, match="index 9"):
        x.to("tpu").index_select(0, index.to("tpu")[1])


def test_empty_index_and_zero_dim_data():
    x = torch.tensor(5.0)
    empty = torch.empty(0, dtype=torch.int64)
    torch.testing.assert_close(x.to("tpu").gather(0, torch.zeros(1, dtype=torch.int64, device="tpu")).cpu(),
                               x.gather(0, torch.zeros(1, dtype=torch.int64)))
    with pytest.raises(RuntimeError, match="index 1 is out of bounds for dimension 0 with size 1"):
        x.to("tpu").gather(0, torch.ones(1, dtype=torch.int64, device="tpu"))
    torch.testing.assert_close(DATA.to("tpu").index_select(0, empty.to("tpu")).cpu(), DATA.index_select(0, empty))


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_strict_and_fused_modes_do_not_read_indices_back(mode):
    # XLA clamps a gather index: index 3 of a size-3 dimension reads row 2.
    with torch_tpu.eager_mode(mode):
        got = DATA.to("tpu").index_select(0, torch.tensor([3], device="tpu")).cpu()
    torch.testing.assert_close(got, DATA[2:3])


def test_multi_margin_loss_targets_are_checked():
    """A loss computes (sums), so it is not among OPS, whose results must
    match exactly."""
    for target, bad in (([3, 0, 1], 3), ([0, -1, 2], -1)):
        with pytest.raises(RuntimeError):
            F.multi_margin_loss(DATA[:, :3], torch.tensor(target))
        with pytest.raises(RuntimeError, match=f"target {bad} is out of bounds for the classes"):
            F.multi_margin_loss(DATA[:, :3].to("tpu"), torch.tensor(target, device="tpu"))
    torch.testing.assert_close(F.multi_margin_loss(DATA[:, :3].to("tpu"), torch.tensor([2, 0, 1], device="tpu")).cpu(),
                               F.multi_margin_loss(DATA[:, :3], torch.tensor([2, 0, 1])))
