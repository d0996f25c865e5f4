"""Sorting on tpu against PyTorch's CPU results: sort (stable, descending,
NaN placement), argsort, msort, topk (largest/smallest), kthvalue, mode, and
their gradients; searchsorted and bucketize."""
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
from parity import assert_close, check  # noqa: E402

NAN = float("nan")
DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64, torch.int32,
          torch.int8, torch.uint8, torch.bool]


def make(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if not dtype.is_floating_point:
        # Few distinct values: many ties, which a stable sort must keep in order.
        return torch.randint(0, 4, shape, generator=g).to(dtype)
    return torch.randn(shape, generator=g).round(decimals=1).to(dtype)


def with_nans(x):
    x = x.clone()
    x.view(-1)[:: 5] = NAN
    return x


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("descending", [False, True])
def test_sort_stable(dtype, descending):
    check(lambda x: torch.sort(x, dim=1, descending=descending, stable=True), make((4, 9), dtype))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_sort_dims_with_nan(dim):
    """NaN sorts above every number: last ascending, first descending."""
    x = with_nans(make((5, 6, 7)))
    check(lambda x: torch.sort(x, dim=dim, stable=True), x)
    check(lambda x: torch.sort(x, dim=dim, descending=True, stable=True), x)


def test_sort_infinities_and_signed_zero():
    x = torch.tensor([0.0, float("inf"), -0.0, -float("inf"), NAN, 1.0, -0.0, 0.0])
    check(lambda x: torch.sort(x, stable=True), x)
    check(lambda x: torch.sort(x, descending=True, stable=True), x)


def test_sort_default_overload():
    """Without stable=, the result must still be a valid sort: the values match
    and the indices point at them."""
    x = make((3, 50))
    values, indices = torch.sort(x.to("tpu"), 1, True)
    assert_close(values, torch.sort(x, 1, True).values)
    assert torch.equal(x.gather(1, indices.cpu()), values.cpu())


def test_sort_edge_shapes():
    check(lambda x: torch.sort(x, stable=True), torch.tensor(3.5))
    check(lambda x: torch.sort(x, dim=0, stable=True), make((0, 4)))
    check(lambda x: torch.sort(x, dim=1, stable=True), make((1, 1)))


def test_sort_non_contiguous_and_out():
    check(lambda x: torch.sort(x.t(), dim=1, stable=True), make((6, 5)))

    def out_form(x):
        values = torch.empty(0, dtype=x.dtype, device=x.device)
        indices = torch.empty(0, dtype=torch.long, device=x.device)
        torch.sort(x, dim=0, stable=True, out=(values, indices))
        return values, indices
    check(out_form, make((5, 3), torch.int32))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_argsort_msort(dtype):
    x = make((4, 8), dtype)
    check(lambda x: torch.argsort(x, dim=0, stable=True), x)
    check(lambda x: torch.argsort(x, descending=True, stable=True), x)
    check(lambda x: torch.msort(x), x)


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dim", [0, -1])
def test_topk(largest, dim):
    # Distinct values: PyTorch leaves the order of tied indices open.
    x = torch.randperm(60, generator=torch.Generator().manual_seed(0)).float().view(6, 10)
    check(lambda x: torch.topk(x, 3, dim=dim, largest=largest), x)
    check(lambda x: torch.topk(x.to(torch.int32), 1, dim=dim, largest=largest), x)


def test_topk_ties_nan_and_unsorted():
    """Tied values: the values match and the indices point at them; NaN
    counts as the largest value."""
    x = with_nans(make((4, 12)))
    for largest in (True, False):
        values, indices = torch.topk(x.to("tpu"), 4, largest=largest)
        assert_close(values, torch.topk(x, 4, largest=largest).values)
        assert torch.equal(x.gather(1, indices.cpu()).nan_to_num(99), values.cpu().nan_to_num(99))
    values, indices = torch.topk(x.to("tpu"), 5, sorted=False)
    expected = torch.topk(x, 5, sorted=False).values
    assert_close(values.sort(1).values, expected.sort(1).values)
    check(lambda x: torch.topk(x, 0), make(5))
    check(lambda x: torch.topk(x, 5).values, make(5, torch.bfloat16))


def test_kthvalue():
    x = torch.randperm(42, generator=torch.Generator().manual_seed(1)).double().view(6, 7)
    check(lambda x: torch.kthvalue(x, 3, dim=1), x)
    check(lambda x: torch.kthvalue(x, 6, dim=0, keepdim=True), x)


@pytest.mark.parametrize("dtype", DTYPES)
def test_mode(dtype):
    """The most frequent value (the smallest of equally frequent ones) and
    the last index holding it, as the CPU picks them; few distinct values,
    so counts tie often."""
    x = make((5, 7, 6), dtype, seed=3)
    for dim in (-1, 0, 1):
        for keepdim in (False, True):
            check(lambda x: torch.mode(x, dim, keepdim), x, rtol=0, atol=0)
    check(lambda x: torch.mode(x.transpose(0, 2)[1:], 1), x, rtol=0, atol=0)  # a view
    check(lambda x: torch.mode(x.view(-1)[0]), x, rtol=0, atol=0)  # 0-d
    check(lambda x: torch.mode(x[:0], 1), x, rtol=0, atol=0)  # an empty batch
    # PyTorch's out= form (a composite) accepts CPU, CUDA and XPU tensors only.
    with pytest.raises(RuntimeError, match="mode only supports CPU, CUDA and XPU device type, got: tpu"):
        torch.mode(x.to("tpu"), 2, out=(torch.empty(5, 7, dtype=dtype, device="tpu"),
                                       torch.empty(5, 7, dtype=torch.long, device="tpu")))


def test_mode_of_an_empty_dim_raises():
    for device in ("cpu", "tpu"):
        with pytest.raises(IndexError, match="Expected reduction dim 1 to have non-zero size"):
            torch.mode(torch.zeros(3, 0, device=device), 1)
    assert torch.mode(torch.tensor([2, 2, 1, 1], device="tpu")).values.item() == 1  # the device goes on


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_sort_topk_backward(dtype):
    x = torch.randperm(40, generator=torch.Generator().manual_seed(2)).to(dtype).view(5, 8) / 8
    g = make((5, 8), dtype, seed=3)
    for fn in (lambda x: torch.sort(x, dim=1, descending=True).values,
               lambda x: torch.sort(x, dim=0).values,
               lambda x: torch.topk(x, 3, dim=1).values,
               lambda x: torch.topk(x, 2, dim=0, largest=False).values,
               lambda x: torch.kthvalue(x, 2, dim=1).values):
        cpu, dev = x.clone().requires_grad_(), x.to("tpu").requires_grad_()
        expected, actual = fn(cpu), fn(dev)
        assert_close(actual, expected)
        upstream = g[: expected.shape[0], : expected.shape[1]] if expected.dim() == 2 else g[0, :5]
        expected.backward(upstream)
        actual.backward(upstream.to("tpu"))
        assert_close(dev.grad, cpu.grad)


# ---- searchsorted / bucketize ----

SEARCH_DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.int32, torch.uint8]


@pytest.mark.parametrize("dtype", SEARCH_DTYPES)
@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_and_bucketize(dtype, right):
    boundaries = torch.sort(make((9,), dtype, seed=1)).values  # repeated boundaries included
    values = make((3, 4), dtype, seed=2)
    check(lambda s, v: torch.searchsorted(s, v, right=right), boundaries, values)
    check(lambda s, v: torch.searchsorted(s, v, side="right" if right else "left", out_int32=True),
          boundaries, values)
    check(lambda v, s: torch.bucketize(v, s, right=right), values, boundaries)
    check(lambda v, s: torch.bucketize(v, s, right=right, out_int32=True), values, boundaries)
    check(lambda s: torch.searchsorted(s, 1, right=right), boundaries)  # a Python scalar value
    check(lambda s: torch.bucketize(2, s, right=right), boundaries)


def test_searchsorted_batched_views_empty_and_out():
    seq = torch.sort(make((2, 3, 7), seed=3), dim=-1).values
    values = make((2, 3, 5), seed=4)
    check(torch.searchsorted, seq, values)
    check(lambda s, v: torch.searchsorted(s, v.transpose(1, 2).contiguous().transpose(1, 2)), seq, values)
    check(lambda s, v: torch.searchsorted(s[:, ::2], v[:, ::2]), seq, values)
    check(torch.searchsorted, seq[0, 0], make((0,), seed=5))           # no values
    check(torch.searchsorted, make((0,), seed=6), make((4,), seed=7))  # no boundaries: all 0
    check(lambda s, v: torch.searchsorted(s, v, out=torch.empty(v.shape, dtype=torch.int64, device=v.device)),
          seq, values)
    check(lambda v, s: torch.bucketize(v, s, out=torch.empty(v.shape, dtype=torch.int64, device=v.device)),
          values, seq[0, 0])


def test_searchsorted_nan_values_land_past_every_boundary():
    boundaries = torch.tensor([-1.0, 0.0, 0.0, 1.0, float("inf")])
    values = torch.tensor([NAN, -2.0, 0.0, 5.0, float("inf"), -float("inf"), NAN])
    for right in (False, True):
        check(lambda s, v: torch.searchsorted(s, v, right=right), boundaries, values)
        check(lambda v, s: torch.bucketize(v, s, right=right), values, boundaries)


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_with_a_sorter(right):
    seq = make((2, 3, 7), seed=3)  # unsorted: the sorter orders each row
    seq[0, 0, :3] = seq[0, 0, 3:6]  # ties
    values = torch.cat([make((2, 3, 4), seed=4), seq[..., :2]], dim=-1)  # values equal to boundaries too
    sorter = torch.argsort(seq, dim=-1)
    check(lambda s, v, o: torch.searchsorted(s, v, right=right, sorter=o), seq, values, sorter)
    check(lambda s, v, o: torch.searchsorted(s, v, side="right" if right else "left", sorter=o, out_int32=True),
          seq[1, 2], values[1, 2], sorter[1, 2])
    check(lambda s, o: torch.searchsorted(s, 0.5, right=right, sorter=o), seq[0, 0], sorter[0, 0])


@pytest.mark.parametrize("invert", [False, True])
def test_isin(invert):
    x = torch.tensor([[1, 2, 3], [4, 5, 6]])
    check(lambda x, t: torch.isin(x, t, invert=invert), x, torch.tensor([2, 6, 9]))
    check(lambda x, t: torch.isin(x.t(), t[::2], invert=invert), x, torch.tensor([2, 6, 9]))  # strided views
    check(lambda x: torch.isin(x, 5, invert=invert), x)  # a scalar test element
    check(lambda t: torch.isin(6, t, invert=invert), torch.tensor([2, 6, 9]))  # a scalar element
    check(lambda x, t: torch.isin(x, t, invert=invert), x, torch.tensor([2.0, 3.5]))  # promoted to float
    check(lambda x, t: torch.isin(x, t, invert=invert), torch.tensor([1.0, NAN, 2.5]), torch.tensor([2.5, NAN]))
    check(lambda x, t: torch.isin(x, t, invert=invert), x, torch.tensor([], dtype=torch.int64))  # nothing to find
    check(lambda x, t: torch.isin(x, t, invert=invert), x[:0], torch.tensor([1]))  # empty elements
    check(lambda x, t: torch.isin(x, t, out=torch.empty(x.shape, dtype=torch.bool, device=x.device)),
          x, torch.tensor([4, 1]))


def test_median_and_nanmedian():
    # Distinct values (ties may give another index on the CPU); NaN rows.
    x = torch.randperm(60, generator=torch.Generator().manual_seed(0)).float().view(4, 15) - 30
    x[1, 3] = x[1, 9] = NAN
    x[2] = NAN
    for dim in (0, 1, -1):
        check(lambda t: torch.median(t, dim), x)
        # An all-NaN slice's nanmedian index is the CPU selection's choice.
        check(lambda t: torch.nanmedian(t[[0, 1, 3]], dim, keepdim=True), x)
    assert torch.nanmedian(x.to("tpu"), 1).values[2].isnan().item()
    check(torch.median, x)
    check(torch.nanmedian, x)
    check(torch.median, x[0])
    check(lambda t: t.median(), torch.arange(7).flip(0))  # integers
    check(lambda t: torch.median(t.t()[::2], 1), x)  # a strided view
    check(lambda t: torch.median(t, 0), torch.tensor(3.0))  # 0-d
    check(torch.median, x[:0])  # empty: NaN
    ties = torch.tensor([2.0, 2.0, 1.0, 2.0])
    assert torch.median(ties.to("tpu"), 0).values.item() == 2.0
