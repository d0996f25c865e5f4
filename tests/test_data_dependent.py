"""Ops whose output length depends on the values: masked_select, nonzero and
indexing with a boolean mask (x[mask]).
The glue counts the selected elements on the device (reading the count back
is a sync, as on CUDA), then runs one program for that length; results must
equal the CPU's exactly."""
import pytest
import torch
import torch.nn.functional as F

import torch_tpu.metrics
from parity import assert_close, check

DTYPES = [torch.float32, torch.bfloat16, torch.int64, torch.int8, torch.bool]


def make(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    return (torch.randn(shape, generator=g) * 3).to(dtype)


def mask(shape, seed=1):
    return torch.rand(shape, generator=torch.Generator().manual_seed(seed)) > 0.5


@pytest.mark.parametrize("dtype", DTYPES)
def test_masked_select(dtype):
    check(torch.masked_select, make((4, 5), dtype), mask((4, 5)))


def test_masked_select_broadcast_views_and_edges():
    check(torch.masked_select, make((3, 4, 5)), mask((4, 1)))  # mask broadcast to self
    check(torch.masked_select, make((4,)), mask((3, 4)))  # self broadcast to mask
    check(lambda x, m: torch.masked_select(x.t()[1:], m), make((5, 4)), mask((3, 5)))
    check(torch.masked_select, make((3, 4)), torch.zeros(3, 4, dtype=torch.bool))  # nothing
    check(torch.masked_select, make((3, 4)), torch.ones(3, 4, dtype=torch.bool))  # all
    check(torch.masked_select, torch.tensor(2.5), torch.tensor(True))
    check(torch.masked_select, make((0, 3)), mask((0, 3)))


def test_masked_select_out_and_grad():
    x, m = make((4, 5)), mask((4, 5))
    out = torch.empty(0, device="tpu")  # resized to the count
    torch.masked_select(x.to("tpu"), m.to("tpu"), out=out)
    assert_close(out, torch.masked_select(x, m))
    xc, xd = x.clone().requires_grad_(), x.to("tpu").requires_grad_()
    g = torch.randn(int(m.sum()))
    torch.masked_select(xc, m).backward(g)
    torch.masked_select(xd, m.to("tpu")).backward(g.to("tpu"))
    assert_close(xd.grad, xc.grad)


def test_masked_select_compiles_once_per_count():
    x = make((6, 6)).to("tpu")
    positive, doubled_positive, above_one = x > 0, x * 2 > 0, x > 1
    assert 0 < int(above_one.sum()) < int(positive.sum())

    def compiles_of_select(mask):
        before = torch_tpu.metrics.counters()["compile"]
        selected = torch.masked_select(x, mask)  # kept: fused mode drops unread work
        torch.tpu.synchronize()  # (fused mode) runs the select on its own
        del selected
        return torch_tpu.metrics.counters()["compile"] - before

    compiles_of_select(positive)
    assert compiles_of_select(doubled_positive) == 0  # another mask, the same count
    assert compiles_of_select(above_one) > 0  # a new count: a program of its own


def test_masked_select_errors_match_cpu():
    x = torch.arange(6.0)
    for dev in ["cpu", "tpu"]:
        xd = x.to(dev)
        with pytest.raises(RuntimeError, match="expected BoolTensor for mask"):
            torch.masked_select(xd, (xd > 2).to(torch.uint8))
        with pytest.raises(RuntimeError, match="same scalar type"):
            torch.masked_select(xd, xd > 2, out=torch.empty(0, dtype=torch.int64, device=dev))


@pytest.mark.parametrize("dtype", DTYPES)
def test_nonzero(dtype):
    x = make((3, 4, 2), dtype)
    check(torch.nonzero, x)
    check(lambda x: torch.nonzero(x, as_tuple=True), x)
    check(torch.argwhere, x)


def test_nonzero_edges():
    check(torch.nonzero, torch.tensor([0.0, float("nan"), -0.0, 1e-30, float("inf")]))
    check(torch.nonzero, torch.zeros(3, 4))
    check(torch.nonzero, torch.tensor(3))
    check(torch.nonzero, torch.tensor(0))
    check(torch.nonzero, make((0, 2)))
    check(lambda x: torch.nonzero(x.t()[::2]), make((5, 4), torch.int32))
    out = torch.empty(0, dtype=torch.int64, device="tpu")
    x = make((4, 5))
    torch.nonzero(x.to("tpu"), out=out)
    assert_close(out, torch.nonzero(x))
    with pytest.raises(RuntimeError, match="scalar type Long"):
        torch.nonzero(x.to("tpu"), out=torch.empty(0, device="tpu"))


@pytest.mark.parametrize("dtype", DTYPES)
def test_boolean_mask_indexing(dtype):
    x = make((4, 5, 3), dtype)
    check(lambda x, m: x[m], x, mask((4, 5)))  # a mask over the leading dims
    check(lambda x, m: x[m], x, mask((4, 5, 3)))  # over all dims: a 1-d result
    check(lambda x, m: x[:, m], x, mask((5,)))  # after a slice
    check(lambda x, m, i: x[m, :, i], x, mask((4,)), torch.tensor([2, 0]))  # with integer indices


def test_boolean_mask_indexing_edges_views_and_grad():
    x = make((4, 5))
    check(lambda x, m: x[m], x, torch.zeros(4, dtype=torch.bool))  # selects nothing
    check(lambda x, m: x[m], x, torch.ones(4, 5, dtype=torch.bool))  # selects everything
    check(lambda x, m: x.t()[m], x, mask((5,)))  # a strided view
    check(lambda x, m: x[m], torch.tensor(3.5), torch.tensor(True))  # 0-d
    check(lambda x: x[x > 0], x)
    xc, xd = x.clone().requires_grad_(), x.to("tpu").requires_grad_()
    m = mask((4, 5))
    g = torch.randn(int(m.sum()))
    xc[m].backward(g)
    xd[m.to("tpu")].backward(g.to("tpu"))
    assert_close(xd.grad, xc.grad)


def test_boolean_mask_indexing_errors_match_cpu():
    for dev in ["cpu", "tpu"]:
        x = torch.zeros(4, 3, device=dev)
        with pytest.raises(IndexError, match=r"shape of the mask \[5\] at index 0 does not match"):
            x[torch.ones(5, dtype=torch.bool, device=dev)]
        assert x[torch.ones(4, dtype=torch.bool, device=dev)].shape == (4, 3)  # still works after


def test_cross_entropy_weight_label_smoothing_mean_uses_masked_select():
    # PyTorch's composite normalizes by weight[target[target != ignore]].sum().
    w = torch.tensor([0.5, 2.0, 1.0, 0.25])
    x, t = make((7, 4)), torch.tensor([0, 1, -100, 3, 2, 1, -100])
    xc, xd = x.clone().requires_grad_(), x.to("tpu").requires_grad_()
    expected = F.cross_entropy(xc, t, weight=w, label_smoothing=0.1)
    actual = F.cross_entropy(xd, t.to("tpu"), weight=w.to("tpu"), label_smoothing=0.1)
    assert_close(actual, expected)
    expected.backward()
    actual.backward()
    assert_close(xd.grad, xc.grad)
