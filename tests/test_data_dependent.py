"""Ops whose output length depends on the values: masked_select, nonzero,
indexing with a boolean mask (x[mask]), nonzero_static (fixed size, no
readback), bincount, unique,
unique_consecutive and repeat_interleave with a tensor of repeats.
The glue counts the selected elements on the device (reading the count back
is a sync, as on CUDA), then runs one program for that length; results must
equal the CPU's exactly."""
import pytest
import torch
import torch.nn.functional as F

import torch_tpu.metrics
from parity import assert_close, check

NAN = float("nan")
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


@pytest.mark.parametrize("dtype", DTYPES + [torch.complex64])
def test_nonzero_static(dtype):
    x = make((3, 4, 2), dtype)
    for size in (0, 5, 24, 30):  # fewer, as many as and more rows than nonzeros/elements
        check(lambda x: torch.nonzero_static(x, size=size, fill_value=-7), x)
    check(lambda x: torch.nonzero_static(x.transpose(0, 2)[:, ::2], size=6), x)


def test_nonzero_static_edges_and_no_readback():
    check(lambda x: torch.nonzero_static(x, size=3, fill_value=9), torch.tensor(2.0))
    check(lambda x: torch.nonzero_static(x, size=3), torch.tensor(0))
    check(lambda x: torch.nonzero_static(x, size=4), make((0, 2)))
    check(lambda x: torch.nonzero_static(x, size=0), make((0, 2)))
    # The shape is fixed by size, so another count needs no program of its own.
    first, second = make((6, 6), seed=0).to("tpu"), make((6, 6), seed=5).to("tpu")
    assert int((first > 0).sum()) != int((second > 0).sum())
    torch.nonzero_static(first > 0, size=8).cpu()
    before = torch_tpu.metrics.counters()["compile"]
    torch.nonzero_static(second > 0, size=8).cpu()
    assert torch_tpu.metrics.counters()["compile"] == before


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


# ---- bincount ----

@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
def test_bincount(dtype):
    values = torch.tensor([3, 1, 3, 0, 7, 1, 1], dtype=dtype)
    check(torch.bincount, values)
    check(lambda v: torch.bincount(v, minlength=12), values)  # minlength past the largest value
    check(lambda v: torch.bincount(v, minlength=2), values)  # and short of it
    check(lambda v: torch.bincount(v[::2]), values)  # a strided view


@pytest.mark.parametrize("weight_dtype", [torch.float32, torch.float64, torch.int64])
def test_bincount_weighted(weight_dtype):
    """float32 weights count in float32, others in float64, as on CPU."""
    values = torch.randint(0, 6, (40,), generator=torch.Generator().manual_seed(0))
    check(torch.bincount, values, make((40,), seed=2).to(weight_dtype))


def test_bincount_edges_and_errors_match_cpu():
    check(torch.bincount, torch.zeros(0, dtype=torch.int64))  # nothing: no bins
    check(lambda v: torch.bincount(v, minlength=3), torch.zeros(0, dtype=torch.int64))
    check(lambda v, w: torch.bincount(v, w), torch.zeros(0, dtype=torch.int64), torch.zeros(0))
    check(torch.bincount, torch.tensor([5]))
    x = torch.tensor([-1, 2]).to("tpu")
    with pytest.raises(RuntimeError, match=r"bincount: expected non-negative values, got -1 in input of shape \[2\]"):
        torch.bincount(x)
    with pytest.raises(RuntimeError, match=r"bincount: expected a 1-d tensor of non-negative integers, got Float"):
        torch.bincount(torch.ones(3, device="tpu"))
    with pytest.raises(RuntimeError, match=r"bincount: weights should be 1-d and as long as the input"):
        torch.bincount(torch.tensor([1, 2], device="tpu"), torch.ones(3, device="tpu"))
    with pytest.raises(RuntimeError, match=r"bincount: minlength should be >= 0, got -1"):
        torch.bincount(torch.tensor([1, 2], device="tpu"), minlength=-1)
    assert torch.bincount(x.abs()).tolist() == [0, 1, 1]  # the process goes on


# ---- unique ----

UNIQUE_FLAGS = [dict(), dict(return_inverse=True), dict(return_counts=True),
                dict(return_inverse=True, return_counts=True)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int8, torch.bool])
@pytest.mark.parametrize("flags", UNIQUE_FLAGS, ids=["values", "inverse", "counts", "both"])
def test_unique(dtype, flags):
    values = (make((5, 6), seed=3).round() % 4).to(dtype)  # repeats
    check(lambda v: torch.unique(v, **flags), values)
    check(lambda v: torch.unique(v.t()[1:], **flags), values)  # a non-contiguous view


@pytest.mark.parametrize("flags", UNIQUE_FLAGS, ids=["values", "inverse", "counts", "both"])
def test_unique_edges(flags):
    check(lambda v: torch.unique(v, **flags), torch.zeros(0, 3))  # empty
    check(lambda v: torch.unique(v, **flags), torch.tensor(2.5))  # 0-d
    check(lambda v: torch.unique(v, **flags), torch.full((4,), 7))  # one value
    check(lambda v: torch.unique(v, **flags), torch.tensor([1.0, float("nan"), 1.0, float("nan")]))  # NaN != NaN


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
@pytest.mark.parametrize("flags", UNIQUE_FLAGS, ids=["values", "inverse", "counts", "both"])
def test_unique_consecutive(dtype, flags):
    values = (make((4, 6), seed=6).round() % 3).to(dtype).sort(1).values  # runs
    check(lambda v: torch.unique_consecutive(v, **flags), values)
    check(lambda v: torch.unique_consecutive(v.t(), **flags), values)  # a non-contiguous view
    check(lambda v: torch.unique_consecutive(v, **flags), torch.zeros(0, dtype=dtype))
    if dtype.is_floating_point:
        check(lambda v: torch.unique_consecutive(v, **flags), torch.tensor([1.0, NAN, NAN, 1.0, 1.0]))


def test_unique_consecutive_dim_is_not_lowered():
    with pytest.raises(NotImplementedError, match=r"unique_consecutive: dim= is not lowered for tpu \(got dim=0\)"):
        torch.unique_consecutive(torch.zeros(2, 2, device="tpu"), dim=0)
    assert torch.unique_consecutive(torch.zeros(2, 2, device="tpu")).tolist() == [0.0]  # the process goes on


def test_unique_unsorted_and_tensor_method():
    """sorted=False leaves the order open: the tpu sorts (as CUDA does), so
    the values match the CPU's as a set, and the inverse maps back."""
    values = make((20,), seed=4).round()
    actual, inverse = torch.unique(values.to("tpu"), sorted=False, return_inverse=True)
    assert sorted(actual.cpu().tolist()) == sorted(torch.unique(values).tolist())
    assert torch.equal(actual[inverse].cpu(), values)
    check(lambda v: v.unique(return_counts=True), values)


def test_unique_compiles_once_per_count():
    """The plan is keyed by the distinct count and by which outputs are
    asked for: the same count reuses its program."""
    def compiles_of_unique(x, **flags):
        before = torch_tpu.metrics.counters()["compile"]
        result = torch.unique(x, **flags)  # kept: fused mode drops unread work
        torch.tpu.synchronize()  # (fused mode) runs the unique on its own
        return torch_tpu.metrics.counters()["compile"] - before, result

    a, b = torch.tensor([3, 1, 3, 2]).to("tpu"), torch.tensor([5, 5, 6, 7]).to("tpu")
    compiles_of_unique(a)
    assert compiles_of_unique(b)[0] == 0  # other values, the same count
    compiles, (values, inverse) = compiles_of_unique(b, return_inverse=True)  # another output: its own plan
    assert compiles > 0 and inverse.tolist() == [0, 0, 1, 2] and values.tolist() == [5, 6, 7]


# ---- repeat_interleave with a tensor of repeats ----

@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_repeat_interleave_tensor(dtype):
    repeats = torch.tensor([2, 0, 3, 1, 0], dtype=dtype)  # zeros inside and at the end
    check(torch.repeat_interleave, repeats)
    check(lambda r: torch.repeat_interleave(r[::2]), repeats)  # a strided view
    check(lambda r: torch.repeat_interleave(r, output_size=6), repeats)  # no sync
    x = make((5, 3), seed=5)
    check(lambda x, r: x.repeat_interleave(r, dim=0), x, repeats)  # selects by it
    check(lambda x, r: torch.repeat_interleave(x, r, dim=1), x, torch.tensor([1, 0, 2], dtype=dtype))


def test_repeat_interleave_tensor_edges_and_errors():
    check(torch.repeat_interleave, torch.zeros(3, dtype=torch.int64))  # nothing repeated
    check(torch.repeat_interleave, torch.zeros(0, dtype=torch.int64))
    with pytest.raises(RuntimeError, match="repeats can not be negative"):
        torch.repeat_interleave(torch.tensor([1, -1], device="tpu"))
    with pytest.raises(RuntimeError, match="repeat_interleave only accept 1D vector as repeat"):
        torch.repeat_interleave(torch.tensor([[1]], device="tpu"))
    with pytest.raises(NotImplementedError, match="repeat_interleave: repeats must be int64 or int32, got Float"):
        torch.repeat_interleave(torch.tensor([1.0], device="tpu"))
    assert torch.repeat_interleave(torch.tensor([1, 2], device="tpu")).tolist() == [0, 1, 1]  # the process goes on
