"""Pooling, resampling and edge padding on tpu against PyTorch's CPU
results, forward and backward: max_pool2d (values, indices; kernel,
stride, padding, dilation, ceil_mode; ties, NaN and inf), avg_pool2d
(count_include_pad, ceil_mode, divisor_override), adaptive_avg_pool2d
(output sizes that divide the input or not, larger than it),
adaptive_max_pool2d (values, indices; ties, NaN and inf), their 1-d and 3-d
forms, max_unpool2d/3d, fractional_max_pool2d/3d (the same samples on
both sides; sizes and ratios, ties, NaN and inf, every float dtype),
F.interpolate nearest / nearest-exact / (bi,tri)linear with
align_corners both ways, sizes and scale factors, bicubic, antialiased
bilinear and bicubic, F.grid_sample on 4-d and 5-d input
(bilinear / nearest, zeros / border / reflection padding, with the
grid's gradient), and F.pad reflect /
replicate / constant in 1-3 dims; float32, float64, bfloat16 and integer
inputs where CPU supports them; unbatched, batch 1, odd sizes, empty
batches, channels_last and non-contiguous inputs, and the nn modules.

Max pooling, nearest resampling and padding move values, so without
gradients they must match exactly; float32 sums (avg pooling,
interpolation, gradients that collect several contributions) use rtol 1e-5
/ atol 1e-6 and bfloat16 parity's defaults: the order of additions differs
from PyTorch's."""
import os
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from parity import assert_close  # noqa: E402
from test_nn_conv import check_grad, randn  # noqa: E402

EXACT = dict(rtol=0, atol=0)
F32 = dict(rtol=1e-5, atol=1e-6)
NAN, INF = float("nan"), float("inf")


# ---- max_pool2d ----

# (kernel, stride, padding, dilation, ceil_mode)
MAX_OPTIONS = [
    (2, None, 0, 1, False), (3, 2, 1, 1, False), (3, 2, 1, 2, True), ((2, 3), (1, 2), (1, 1), (2, 1), False),
    (4, 3, 2, 1, True), (1, 1, 0, 1, False),
]


@pytest.mark.parametrize("kernel,stride,padding,dilation,ceil_mode", MAX_OPTIONS)
def test_max_pool2d_options(kernel, stride, padding, dilation, ceil_mode):
    check_grad(lambda x: F.max_pool2d(x, kernel, stride, padding, dilation, ceil_mode, return_indices=True),
               [randn((2, 3, 9, 11))], **F32)


def test_max_pool2d_ties_pick_the_first():
    """Equal values in a window: the first one's index and gradient."""
    x = torch.tensor([[1., 1., 0., 2.], [1., 0., 2., 2.], [-INF, -INF, 3., 3.], [-INF, -INF, 3., 1.]])
    check_grad(lambda x: F.max_pool2d(x, 2, 1, return_indices=True), [x[None, None]], **F32)
    check_grad(lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), [torch.ones(1, 2, 5, 5)], **F32)


def test_max_pool2d_windows_of_the_lowest_value_pick_the_first_inside():
    """A window of -inf (or the dtype's lowest integer) beside padding: the
    first position inside the input, never the padding."""
    check_grad(lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), [torch.full((1, 2, 5, 5), -INF)], **F32)
    lowest = torch.full((1, 2, 5, 5), torch.iinfo(torch.int32).min, dtype=torch.int32)
    check_grad(lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True, return_indices=True), [lowest], **EXACT)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_max_pool2d_large_windows(dtype):
    """Windows of over 64 positions, which lower as one reduce_window
    rather than a slice per position; ties and NaN as in small ones."""
    x = (randn((2, 3, 12, 13)) * 4).round().to(dtype)
    if dtype.is_floating_point:
        x[0, 0, 5, 5] = x[0, 0, 6, 7] = NAN
    tol = F32 if dtype.is_floating_point else EXACT
    check_grad(lambda x: F.max_pool2d(x, 9, 2, 4, return_indices=True), [x],
               needs_grad=[False] if dtype.is_floating_point else None, **tol)
    check_grad(lambda x: F.max_pool2d(x, (5, 13), 3, (2, 6), ceil_mode=True, return_indices=True), [x],
               needs_grad=[False] if dtype.is_floating_point else None, **tol)


def test_max_pool2d_nan_and_inf():
    x = randn((1, 2, 6, 6))
    x[0, 0, 1, 1] = x[0, 0, 1, 2] = NAN
    x[0, 1, 2, 2], x[0, 1, 4, 4] = INF, -INF
    check_grad(lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), [x], needs_grad=[False], **EXACT)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.int64, torch.int32, torch.uint8])
def test_max_pool2d_dtypes(dtype):
    x = (randn((2, 3, 7, 6)) * 20).to(dtype)
    tol = {} if dtype == torch.bfloat16 else EXACT if not dtype.is_floating_point else F32
    check_grad(lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True, return_indices=True), [x], **tol)


def test_max_pool2d_unbatched_channels_last_and_views():
    x = randn((3, 8, 9))
    check_grad(lambda x: F.max_pool2d(x, 2, return_indices=True), [x], **EXACT)  # disjoint windows
    y = randn((2, 3, 8, 9))
    check_grad(lambda y: F.max_pool2d(y.to(memory_format=torch.channels_last), 2, return_indices=True), [y],
               **EXACT)
    check_grad(lambda y: F.max_pool2d(y.transpose(2, 3)[:, :, 1:], 3, 2, 1), [y], **F32)


def test_max_pool1d():
    check_grad(lambda x: F.max_pool1d(x, 3, 2, 1, ceil_mode=True, return_indices=True), [randn((2, 3, 10))],
               **F32)


# ---- avg_pool2d ----

# (kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
AVG_OPTIONS = [
    (2, None, 0, False, True, None), (3, 2, 1, False, False, None), (3, 2, 1, True, True, None),
    ((2, 3), (3, 2), (1, 1), True, True, 5), (4, 3, 2, True, False, None),
]


@pytest.mark.parametrize("kernel,stride,padding,ceil_mode,include_pad,divisor", AVG_OPTIONS)
def test_avg_pool2d_options(kernel, stride, padding, ceil_mode, include_pad, divisor):
    check_grad(lambda x: F.avg_pool2d(x, kernel, stride, padding, ceil_mode, include_pad, divisor),
               [randn((2, 3, 9, 11))], **F32)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_avg_pool2d_dtypes(dtype):
    check_grad(lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True), [randn((1, 2, 7, 8), dtype)])


def test_avg_pool2d_int64_truncates():
    x = torch.randint(-50, 50, (2, 2, 7, 7))
    check_grad(lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False), [x], **EXACT)


def test_avg_pool_1d_unbatched_and_views():
    check_grad(lambda x: F.avg_pool1d(x, 3, 2, 1, ceil_mode=True), [randn((2, 3, 10))], **F32)
    check_grad(lambda x: F.avg_pool2d(x.transpose(1, 2), 2, 1), [randn((3, 7, 5))], **F32)


# ---- adaptive_avg_pool2d ----

@pytest.mark.parametrize("size", [(3, 5), (4, 3), (13, 7), (1, 4), (9, 11)])
def test_adaptive_avg_pool2d_sizes(size):
    check_grad(lambda x: F.adaptive_avg_pool2d(x, size), [randn((2, 3, 9, 11))], **F32)


def test_adaptive_avg_pool2d_keeps_inf_and_nan_in_their_windows():
    x = randn((1, 2, 7, 6))
    x[0, 0, 0, 0], x[0, 1, 6, 5] = NAN, INF
    check_grad(lambda x: F.adaptive_avg_pool2d(x, (3, 4)), [x], needs_grad=[False], **F32)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_adaptive_avg_pool2d_dtypes(dtype):
    check_grad(lambda x: F.adaptive_avg_pool2d(x, (3, 4)), [randn((2, 7, 6), dtype)])


def test_pooling_empty_batch():
    x = randn((0, 3, 6, 6))
    check_grad(lambda x: F.avg_pool2d(x, 2), [x])
    check_grad(lambda x: F.adaptive_avg_pool2d(x, 4), [x])


def test_pooling_modules():
    x = randn((2, 4, 10, 9))
    for module in [nn.MaxPool2d(3, 2, 1, ceil_mode=True), nn.AvgPool2d(2), nn.AdaptiveAvgPool2d((3, 2)),
                   nn.AdaptiveAvgPool2d((1, 1))]:
        check_grad(module, [x], **F32)


# ---- 3-d pooling: the same lowerings over three trailing dims ----

# (kernel, stride, padding, dilation, ceil_mode)
MAX3D_OPTIONS = [(2, None, 0, 1, False), (3, 2, 1, 1, True), ((2, 3, 2), (1, 2, 2), (1, 1, 0), (2, 1, 1), False)]


@pytest.mark.parametrize("kernel,stride,padding,dilation,ceil_mode", MAX3D_OPTIONS)
def test_max_pool3d_options(kernel, stride, padding, dilation, ceil_mode):
    """Values, indices into each D*H*W volume, and the gradient."""
    check_grad(lambda x: F.max_pool3d(x, kernel, stride, padding, dilation, ceil_mode, return_indices=True),
               [randn((2, 3, 6, 7, 5))], **F32)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.int64])
def test_max_pool3d_dtypes_unbatched_and_views(dtype):
    x = (randn((3, 5, 6, 7)) * 20).to(dtype)
    tol = {} if dtype == torch.bfloat16 else EXACT if not dtype.is_floating_point else F32
    check_grad(lambda x: F.max_pool3d(x, 3, 2, 1, ceil_mode=True, return_indices=True), [x], **tol)
    check_grad(lambda y: F.max_pool3d(y.transpose(1, 3)[:, 1:], 2, return_indices=True), [randn((2, 3, 5, 6, 7))],
               **F32)


# (kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
AVG3D_OPTIONS = [(2, None, 0, False, True, None), (3, 2, 1, True, False, None), ((2, 3, 2), (2, 1, 3), (1, 1, 1), True, True, 7)]


@pytest.mark.parametrize("kernel,stride,padding,ceil_mode,include_pad,divisor", AVG3D_OPTIONS)
def test_avg_pool3d_options(kernel, stride, padding, ceil_mode, include_pad, divisor):
    check_grad(lambda x: F.avg_pool3d(x, kernel, stride, padding, ceil_mode, include_pad, divisor),
               [randn((2, 3, 6, 7, 5))], **F32)


@pytest.mark.parametrize("size", [(3, 4, 2), (7, 9, 5), (1, 1, 1), (4, 2, 6)])
def test_adaptive_avg_pool3d_sizes(size):
    check_grad(lambda x: F.adaptive_avg_pool3d(x, size), [randn((2, 3, 6, 7, 5))], **F32)


def test_avg_pools3d_float64_and_unbatched():
    """(PyTorch's CPU avg_pool3d has no bfloat16 kernel to compare with.)"""
    x = randn((2, 5, 6, 7), torch.float64)
    check_grad(lambda x: F.avg_pool3d(x, 3, 2, 1, ceil_mode=True), [x])
    check_grad(lambda x: F.adaptive_avg_pool3d(x, (2, 4, 3)), [x])


def test_pooling3d_empty_batch_and_modules():
    empty = randn((0, 2, 4, 4, 4))
    for fn in [lambda x: F.max_pool3d(x, 2), lambda x: F.avg_pool3d(x, 2), lambda x: F.adaptive_avg_pool3d(x, 3)]:
        check_grad(fn, [empty])
    x = randn((2, 3, 6, 5, 7))
    for module in [nn.MaxPool3d(3, 2, 1), nn.AvgPool3d(2, ceil_mode=True), nn.AdaptiveAvgPool3d((2, 3, 1))]:
        check_grad(module, [x], **F32)


# ---- adaptive_max_pool2d/3d ----

@pytest.mark.parametrize("size", [(3, 5), (4, 3), (13, 7), (1, 1), (9, 11)])
def test_adaptive_max_pool2d_sizes(size):
    """Values, indices into each plane, and the gradient (windows that
    overlap send gradients to shared positions)."""
    check_grad(lambda x: F.adaptive_max_pool2d(x, size, return_indices=True), [randn((2, 3, 9, 11))], **F32)


def test_adaptive_max_pool2d_ties_nan_and_inf():
    """Ties pick the first position in row-major order, a NaN wins (the last
    one), -inf windows still name a position inside the window."""
    ones = torch.ones(1, 2, 5, 7)
    check_grad(lambda x: F.adaptive_max_pool2d(x, (2, 3), return_indices=True), [ones], **F32)
    x = randn((1, 2, 7, 6))
    x[0, 0, 1, 1] = x[0, 0, 2, 0] = NAN
    x[0, 1, :4, :3] = -INF
    x[0, 1, 5, 5] = INF
    check_grad(lambda x: F.adaptive_max_pool2d(x, (3, 4), return_indices=True), [x], needs_grad=[False],
               **EXACT)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_adaptive_max_pool2d_dtypes_unbatched_and_views(dtype):
    check_grad(lambda x: F.adaptive_max_pool2d(x, (3, 4), return_indices=True), [randn((2, 7, 6), dtype)])
    check_grad(lambda y: F.adaptive_max_pool2d(y.transpose(2, 3)[:, 1:], 3), [randn((2, 3, 8, 9))], **F32)


@pytest.mark.parametrize("size", [(3, 4, 2), (7, 9, 5), (1, 1, 1)])
def test_adaptive_max_pool3d_sizes(size):
    check_grad(lambda x: F.adaptive_max_pool3d(x, size, return_indices=True), [randn((2, 3, 6, 7, 5))], **F32)


def test_adaptive_max_pools_empty_batch_and_modules():
    check_grad(lambda x: F.adaptive_max_pool2d(x, 3), [randn((0, 2, 5, 5))])
    x = randn((2, 3, 6, 5, 7))
    for module in [nn.AdaptiveMaxPool3d((2, 3, 1)), nn.AdaptiveMaxPool2d((3, 2))]:
        check_grad(module, [x if isinstance(module, nn.AdaptiveMaxPool3d) else x[:, :, 0]], **F32)


def test_pool_size_lists_of_the_wrong_length_raise():
    """A 2-value kernel for a 3-d pool: PyTorch's own check names the op,
    and the process goes on."""
    x = randn((1, 1, 4, 4, 4)).to("tpu")
    with pytest.raises(RuntimeError, match="max_pool3d"):
        F.max_pool3d(x, (2, 2))
    assert F.max_pool3d(x, 2).shape == (1, 1, 2, 2, 2)


# ---- max_unpool ----

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_max_unpool2d(dtype):
    values, indices = F.max_pool2d(randn((2, 3, 7, 8)), 2, return_indices=True)  # row 6 never a max
    values = values.to(dtype)
    check_grad(lambda v, i: F.max_unpool2d(v, i, 2), [values, indices], **EXACT)
    check_grad(lambda v, i: F.max_unpool2d(v, i, 2, output_size=(7, 8)), [values, indices], **EXACT)
    values, indices = F.max_pool2d(randn((3, 9, 9), seed=1), 3, 2, 1, return_indices=True)  # unbatched, padded
    check_grad(lambda v, i: F.max_unpool2d(v, i, 3, 2, 1), [values.to(dtype), indices], **EXACT)


def test_max_unpool_views_overlaps_3d_empty_and_modules():
    values, indices = F.max_pool2d(randn((2, 3, 6, 6)), 3, 1, return_indices=True)  # windows overlap
    check_grad(lambda v, i: F.max_unpool2d(v, i, 3, 1), [values, indices], **EXACT)
    last = dict(memory_format=torch.channels_last)
    check_grad(lambda v, i: F.max_unpool2d(v.contiguous(**last), i.contiguous(**last), 3, 1), [values, indices],
               **EXACT)
    values, indices = F.max_pool3d(randn((2, 2, 5, 6, 4)), 2, return_indices=True)
    check_grad(lambda v, i: F.max_unpool3d(v, i, 2, output_size=(5, 6, 4)), [values, indices], **EXACT)
    check_grad(nn.MaxUnpool3d(2), [values, indices], **EXACT)
    values, indices = F.max_pool2d(randn((0, 2, 4, 4)), 2, return_indices=True)
    check_grad(nn.MaxUnpool2d(2), [values, indices], **EXACT)


def test_max_unpool_integer_values_and_index_out_of_range():
    values, indices = F.max_pool2d(randn((1, 1, 4, 4)), 2, return_indices=True)
    for device in ("cpu", "tpu"):  # floats only, as PyTorch's kernels
        with pytest.raises(NotImplementedError, match=r"max_unpool2d.* not implemented for"):
            F.max_unpool2d(values.long().to(device), indices.to(device), 2)
    with pytest.raises(RuntimeError, match="invalid max index"):
        F.max_unpool2d(values, indices + 16, 2)
    out = F.max_unpool2d(values.to("tpu"), (indices + 16).to("tpu"), 2)  # as XLA's scatter does
    assert out.shape == (1, 1, 4, 4) and out.count_nonzero().item() == 0


# ---- fractional_max_pool2d/3d ----


def samples(batch, channels, n, dtype=torch.float32, seed=4):
    """fractional pooling's _random_samples, in [0, 1)."""
    return torch.rand(batch, channels, n, generator=torch.Generator().manual_seed(seed)).to(dtype)


def check_fractional(fn, x, s, grad_tol=None):
    """fn(x, s) -> (values, indices) on CPU and on tpu with the same samples
    s, both in x's dtype (ATen places the windows with arithmetic in that
    dtype, rounding every step, so a float32 reference would pool other
    windows): exact values and indices, then x's gradient, whose sums of
    overlapping windows may add in another order (grad_tol; parity's
    defaults when None)."""
    cpu, dev = x.detach().clone().requires_grad_(), x.detach().to("tpu").requires_grad_()
    expected, actual = fn(cpu, s), fn(dev, s.to("tpu"))
    assert_close(actual, expected, **EXACT)
    g = randn(expected[0].shape, seed=9).to(x.dtype)
    expected[0].backward(g)
    actual[0].backward(g.to("tpu"))
    assert_close(dev.grad, cpu.grad, **(grad_tol or {}))


# (kernel, output_size, output_ratio): windows that overlap (kernel past
# the spacing), that just touch, a single window, and ratios.
FRACTIONAL2D = [(2, (5, 7), None), ((3, 2), (6, 4), None), (2, (12, 10), None), (3, 1, None),
                ((1, 2), None, (0.5, 0.5)), (2, None, (0.7, 0.4))]


@pytest.mark.parametrize("kernel,size,ratio", FRACTIONAL2D)
def test_fractional_max_pool2d(kernel, size, ratio):
    x, s = randn((2, 3, 13, 11)), samples(2, 3, 2)
    check_fractional(lambda x, s: F.fractional_max_pool2d(x, kernel, size, ratio, True, _random_samples=s), x, s,
                     F32)


@pytest.mark.parametrize("kernel,size", [(2, (3, 4, 2)), ((3, 2, 2), (2, 5, 3)), (1, (5, 6, 4))])
def test_fractional_max_pool3d(kernel, size):
    x, s = randn((2, 3, 6, 7, 5)), samples(2, 3, 3)
    check_fractional(lambda x, s: F.fractional_max_pool3d(x, kernel, size, None, True, _random_samples=s), x, s,
                     F32)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float16])
def test_fractional_max_pool_dtypes_and_unbatched(dtype):
    """Unbatched inputs read samples [1, C, n]."""
    check_fractional(lambda x, s: F.fractional_max_pool2d(x, 2, (5, 4), return_indices=True, _random_samples=s),
                     randn((3, 9, 8), dtype), samples(1, 3, 2, dtype))
    check_fractional(lambda x, s: F.fractional_max_pool3d(x, 2, (3, 4, 2), return_indices=True, _random_samples=s),
                     randn((2, 5, 7, 6), dtype), samples(1, 2, 3, dtype))


def test_fractional_max_pool_bfloat16_windows_round_every_step():
    """150 rows into 90 windows: bfloat16's (o + u) * alpha rounds, so its
    windows differ from float32's (asserted); the tpu pools bfloat16's."""
    x, s = torch.arange(150.).reshape(1, 1, 150, 1).expand(1, 8, 150, 2).contiguous(), samples(1, 8, 2, seed=0)
    pool = lambda x, s: F.fractional_max_pool2d(x, (2, 1), (90, 2), return_indices=True, _random_samples=s)  # noqa: E731
    in_float32 = pool(x, s.bfloat16().float())[1]
    assert not torch.equal(pool(x.bfloat16(), s.bfloat16())[1], in_float32)
    check_fractional(pool, x.bfloat16(), s.bfloat16())


def test_fractional_max_pool_ties_nan_and_inf():
    """Ties pick the first position, a NaN wins (the last one), a window of
    -inf names its first position."""
    check_fractional(lambda x, s: F.fractional_max_pool2d(x, 3, 4, return_indices=True, _random_samples=s),
                     torch.ones(1, 2, 9, 9), samples(1, 2, 2), F32)
    x = randn((1, 2, 9, 9))
    x[0, 0, 2, 2] = x[0, 0, 2, 3] = x[0, 0, 6, 1] = NAN
    x[0, 1, :5, :5] = -INF
    x[0, 1, 8, 8] = INF
    pool = lambda x, s: F.fractional_max_pool2d(x, 2, 5, return_indices=True, _random_samples=s)  # noqa: E731
    assert_close(pool(x.to("tpu"), samples(1, 2, 2).to("tpu")), pool(x, samples(1, 2, 2)), **EXACT)


def test_fractional_max_pool_views_empty_more_samples_out_and_modules():
    x = randn((2, 3, 9, 10))
    check_fractional(lambda x, s: F.fractional_max_pool2d(x.transpose(2, 3)[:, 1:], 2, (6, 4), return_indices=True,
                                                          _random_samples=s), x, samples(2, 2, 2), F32)
    # Samples for a larger batch: the first rows are used.
    check_fractional(lambda x, s: F.fractional_max_pool2d(x, 2, 4, return_indices=True, _random_samples=s), x,
                     samples(5, 3, 2), F32)
    check_fractional(lambda x, s: F.fractional_max_pool3d(x, 2, 3, return_indices=True, _random_samples=s),
                     randn((0, 2, 5, 5, 5)), samples(1, 2, 3))
    s = samples(2, 3, 2)
    values, indices = torch.empty(0, device="tpu"), torch.empty(0, dtype=torch.long, device="tpu")
    torch.ops.aten.fractional_max_pool2d.output(x.to("tpu"), [3, 2], [5, 6], s.to("tpu"), output=values,
                                                indices=indices)
    expected = torch.ops.aten.fractional_max_pool2d(x, [3, 2], [5, 6], s)
    assert_close((values, indices), expected, **EXACT)
    grad, g = torch.empty(0, device="tpu"), randn(expected[0].shape, seed=9)
    torch.ops.aten.fractional_max_pool2d_backward.grad_input(g.to("tpu"), x.to("tpu"), [3, 2], [5, 6],
                                                             indices, grad_input=grad)
    assert_close(grad, torch.ops.aten.fractional_max_pool2d_backward(g, x, [3, 2], [5, 6], expected[1]), **F32)
    volume = randn((2, 3, 5, 6, 4))
    expected = torch.ops.aten.fractional_max_pool3d(volume, [2, 2, 2], [3, 4, 2], samples(2, 3, 3))
    grad, g = torch.empty(0, device="tpu"), randn(expected[0].shape, seed=9)
    torch.ops.aten.fractional_max_pool3d_backward.grad_input(g.to("tpu"), volume.to("tpu"), [2, 2, 2], [3, 4, 2],
                                                             expected[1].to("tpu"), grad_input=grad)
    assert_close(grad, torch.ops.aten.fractional_max_pool3d_backward(g, volume, [2, 2, 2], [3, 4, 2], expected[1]),
                 **F32)
    # The modules, built on each side around that side's samples.
    check_fractional(lambda x, s: nn.FractionalMaxPool2d(3, output_ratio=(0.5, 0.5), return_indices=True,
                                                         _random_samples=s)(x), x, s, F32)
    check_fractional(lambda x, s: nn.FractionalMaxPool3d(2, (2, 3, 2), return_indices=True, _random_samples=s)(x),
                     randn((2, 3, 5, 6, 4)), samples(2, 3, 3), F32)


def test_fractional_max_pool_compiled():
    """torch.compile(backend="tpu") lowers the same ops, forward and backward."""
    x, x3 = randn((2, 3, 10, 9)), randn((2, 3, 6, 7, 5))
    s, s3 = samples(2, 3, 2), samples(2, 3, 3)

    def pool(x, x3, s, s3):
        return (F.fractional_max_pool2d(x, 2, output_ratio=(0.6, 0.5), _random_samples=s).sum()
                + F.fractional_max_pool3d(x3, 2, (3, 4, 2), _random_samples=s3).square().sum())

    cpu = [x.clone().requires_grad_(), x3.clone().requires_grad_()]
    dev = [x.to("tpu").requires_grad_(), x3.to("tpu").requires_grad_()]
    expected = pool(*cpu, s, s3)
    actual = torch.compile(pool, backend="tpu")(*dev, s.to("tpu"), s3.to("tpu"))
    assert_close(actual, expected, **F32)
    expected.backward()
    actual.backward()
    for c, d in zip(cpu, dev):
        assert_close(d.grad, c.grad, **F32)


# ---- interpolate ----

# (mode, dims, size, scale_factor, recompute_scale_factor)
NEAREST = [
    ("nearest", 2, None, 2, None), ("nearest", 2, (11, 5), None, None), ("nearest", 2, None, (1.7, 0.6), None),
    ("nearest", 2, None, (1.7, 0.6), True), ("nearest", 1, None, 2.5, None), ("nearest", 3, (3, 8, 4), None, None),
    ("nearest-exact", 2, (11, 5), None, None), ("nearest-exact", 2, None, (1.7, 0.6), None),
    ("nearest-exact", 1, None, 2.5, None),
]


@pytest.mark.parametrize("mode,dims,size,scale,recompute", NEAREST)
def test_interpolate_nearest(mode, dims, size, scale, recompute):
    x = randn((2, 3, 5, 7, 6)[:dims + 2])
    check_grad(lambda x: F.interpolate(x, size, scale, mode, recompute_scale_factor=recompute), [x], **F32)


LINEAR_MODES = {1: "linear", 2: "bilinear", 3: "trilinear"}
# (align_corners, dims, size, scale_factor, recompute_scale_factor)
LINEAR = [
    (False, 2, None, 2, None), (False, 2, (11, 5), None, None), (False, 2, None, (1.7, 0.6), None),
    (False, 1, None, 2.5, None), (False, 3, (3, 8, 4), None, None), (True, 2, None, 2, None),
    (True, 2, (11, 5), None, None), (True, 2, None, (1.7, 0.6), True), (True, 2, (5, 1), None, None),
    (True, 1, None, 2.5, None),
]


@pytest.mark.parametrize("align_corners,dims,size,scale,recompute", LINEAR)
def test_interpolate_linear(align_corners, dims, size, scale, recompute):
    x = randn((2, 3, 5, 7, 6)[:dims + 2])
    check_grad(lambda x: F.interpolate(x, size, scale, LINEAR_MODES[dims], align_corners, recompute), [x],
               **F32)


# (align_corners, size, scale_factor): up, down, mixed, the ViT position-embedding resize.
BICUBIC = [(False, None, 2), (False, (3, 4), None), (False, None, (1.7, 0.6)), (True, None, 2),
           (True, (11, 5), None), (True, (5, 1), None), (False, (14, 14), None)]


# Each input gradient sums up to 16 weighted terms per output pixel, which
# the CPU adds in another order: atol 1e-5.
CUBIC_F32 = dict(rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("align_corners,size,scale", BICUBIC)
def test_interpolate_bicubic(align_corners, size, scale):
    x = randn((2, 3, 5, 7))
    check_grad(lambda x: F.interpolate(x, size, scale, "bicubic", align_corners), [x], **CUBIC_F32)


def test_interpolate_bicubic_dtypes_and_views():
    check_grad(lambda x: F.interpolate(x, scale_factor=1.5, mode="bicubic"), [randn((1, 2, 5, 6), torch.float64)])
    check_grad(lambda x: F.interpolate(x, size=(8, 3), mode="bicubic"), [randn((1, 2, 5, 6), torch.bfloat16)])
    y = randn((2, 3, 5, 6))
    check_grad(lambda y: F.interpolate(y.transpose(2, 3), size=(9, 4), mode="bicubic", align_corners=True), [y],
               **CUBIC_F32)


# Antialiased (PIL-style) resizing, as torchvision's Resize does on tensors:
# (mode, align_corners, input shape, size, scale_factor): shrinking by
# fractional and large factors, growing, one dim kept, scale factors.
ANTIALIAS = [("bilinear", False, (2, 3, 17, 23), (7, 5), None), ("bicubic", False, (2, 3, 17, 23), (7, 5), None),
             ("bilinear", False, (1, 2, 8, 8), (20, 13), None), ("bicubic", False, (1, 2, 8, 8), (20, 13), None),
             ("bilinear", True, (2, 3, 17, 23), (7, 23), None), ("bicubic", True, (2, 3, 17, 9), (4, 6), None),
             ("bilinear", False, (1, 1, 30, 31), None, (0.3, 0.45)), ("bicubic", False, (1, 2, 64, 16), (4, 32), None)]


@pytest.mark.parametrize("mode,align_corners,shape,size,scale", ANTIALIAS)
def test_interpolate_antialias(mode, align_corners, shape, size, scale):
    check_grad(lambda x: F.interpolate(x, size, scale, mode, align_corners, antialias=True), [randn(shape)],
               **CUBIC_F32)


def test_interpolate_antialias_dtypes_views_and_uint8():
    check_grad(lambda x: F.interpolate(x, size=(5, 4), mode="bicubic", antialias=True),
               [randn((1, 2, 13, 11), torch.float64)])
    check_grad(lambda x: F.interpolate(x, size=(5, 4), mode="bilinear", antialias=True),
               [randn((1, 2, 13, 11), torch.bfloat16)])
    y = randn((2, 3, 12, 10))
    check_grad(lambda y: F.interpolate(y.transpose(2, 3), size=(4, 5), mode="bilinear", antialias=True), [y],
               **CUBIC_F32)
    check_grad(lambda y: F.interpolate(y.to(memory_format=torch.channels_last), size=(4, 5), mode="bicubic",
                                       antialias=True), [y], **CUBIC_F32)
    # uint8 images take PyTorch's fixed-point kernel on CPU; the tpu asks for floats.
    image = (randn((1, 3, 12, 10)) * 50).abs().to(torch.uint8)
    with pytest.raises(NotImplementedError, match=r"aten::_upsample_bilinear2d_aa.*\(Byte\[1, 3, 12, 10\].*\): uint8 input is not supported on tpu"):
        F.interpolate(image.to("tpu"), size=(4, 5), mode="bilinear", antialias=True)
    assert F.interpolate(image.float().to("tpu"), size=(4, 5), mode="bilinear", antialias=True).shape == (1, 3, 4, 5)


# ---- grid_sample ----


def sample_grid(shape, seed=3):
    # Points up to 30% outside [-1, 1], so every padding mode is exercised.
    return randn(shape, seed=seed).mul(0.75).clamp(-1.3, 1.3)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample(mode, padding, align_corners):
    x, grid = randn((2, 3, 5, 7)), sample_grid((2, 4, 6, 2))
    check_grad(lambda x, g: F.grid_sample(x, g, mode, padding, align_corners), [x, grid],
               **F32)


def test_grid_sample_float64_views_and_single_pixel():
    x, grid = randn((2, 3, 5, 7), torch.float64), sample_grid((2, 4, 6, 2)).double()
    check_grad(lambda x, g: F.grid_sample(x, g, align_corners=True, padding_mode="reflection"), [x, grid])
    check_grad(lambda x, g: F.grid_sample(x.transpose(2, 3), g.flip(1), padding_mode="border"), [x, grid])
    # A 1x1 image: reflection with align_corners folds onto the one pixel.
    check_grad(lambda x, g: F.grid_sample(x[:, :, :1, :1], g, padding_mode="reflection", align_corners=True),
               [x, grid])


def test_grid_sample_affine_grid_and_bicubic_rejected():
    # A spatial transformer: the grid from affine_grid, gradients to theta.
    x, theta = randn((2, 3, 8, 8)), randn((2, 2, 3), seed=5).mul(0.3) + torch.tensor([[1.0, 0, 0], [0, 1, 0]])
    check_grad(lambda x, t: F.grid_sample(x, F.affine_grid(t, (2, 3, 6, 6), align_corners=False),
                                          align_corners=False), [x, theta], **F32)
    with pytest.raises(NotImplementedError, match="bicubic"):
        F.grid_sample(x.to("tpu"), sample_grid((2, 4, 6, 2)).to("tpu"), mode="bicubic")


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_3d(mode, padding, align_corners):
    """5-d input: trilinear (mode "bilinear") or nearest, the grid's (x, y, z)
    reading (W, H, D), with the grid's gradient."""
    x, grid = randn((2, 3, 4, 5, 6)), sample_grid((2, 3, 4, 2, 3))
    check_grad(lambda x, g: F.grid_sample(x, g, mode, padding, align_corners), [x, grid], **F32)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float16])
def test_grid_sample_3d_dtypes(dtype):
    x, grid = randn((2, 3, 4, 5, 3), dtype), sample_grid((2, 2, 3, 4, 3)).to(dtype)
    check_grad(lambda x, g: F.grid_sample(x, g, padding_mode="reflection", align_corners=False), [x, grid])


def test_grid_sample_3d_views_single_voxel_empty_out_and_compiled():
    x, grid = randn((2, 3, 4, 5, 6)), sample_grid((2, 3, 2, 4, 3))
    check_grad(lambda x, g: F.grid_sample(x.transpose(2, 4), g.flip(2), padding_mode="border", align_corners=True),
               [x, grid], **F32)
    check_grad(lambda x, g: F.grid_sample(x[..., :1, :1, :1], g, padding_mode="reflection", align_corners=True),
               [x, grid], **F32)
    check_grad(lambda x, g: F.grid_sample(x, g, align_corners=False), [x[:0], grid[:0]])
    out, expected = torch.empty(0, device="tpu"), torch.ops.aten.grid_sampler_3d(x, grid, 0, 0, False)
    torch.ops.aten.grid_sampler_3d.out(x.to("tpu"), grid.to("tpu"), 0, 0, False, out=out)
    assert_close(out, expected, **F32)
    g = randn(expected.shape, seed=9)
    grads = [torch.empty(0, device="tpu"), torch.empty(0, device="tpu")]
    torch.ops.aten.grid_sampler_3d_backward.out(g.to("tpu"), x.to("tpu"), grid.to("tpu"), 0, 0, False, [True, True],
                                                out0=grads[0], out1=grads[1])
    assert_close(grads, torch.ops.aten.grid_sampler_3d_backward(g, x, grid, 0, 0, False, [True, True]), **F32)

    def warp(x, g):
        return F.grid_sample(x, g, padding_mode="border", align_corners=False).square().sum()

    cpu, dev = [x.clone().requires_grad_(), grid.clone().requires_grad_()], [
        x.to("tpu").requires_grad_(), grid.to("tpu").requires_grad_()]
    expected, actual = warp(*cpu), torch.compile(warp, backend="tpu")(*dev)
    assert_close(actual, expected, **F32)
    expected.backward()
    actual.backward()
    for c, d in zip(cpu, dev):
        assert_close(d.grad, c.grad, **F32)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_interpolate_dtypes(dtype):
    x = randn((1, 2, 5, 6), dtype)
    check_grad(lambda x: F.interpolate(x, scale_factor=1.5, mode="bilinear"), [x])
    check_grad(lambda x: F.interpolate(x, size=(7, 4), mode="nearest"), [x])


def test_interpolate_uint8_nearest_and_channels_last():
    x = (randn((1, 3, 5, 6)) * 50).abs().to(torch.uint8)
    check_grad(lambda x: F.interpolate(x, scale_factor=1.6, mode="nearest"), [x], **EXACT)
    y = randn((2, 3, 5, 6))
    check_grad(lambda y: F.interpolate(y.to(memory_format=torch.channels_last), scale_factor=2, mode="bilinear"),
               [y], **F32)


def test_upsample_modules():
    x = randn((1, 2, 4, 5))
    check_grad(nn.Upsample(scale_factor=2), [x], **F32)
    check_grad(nn.UpsamplingBilinear2d(size=(7, 9)), [x], **F32)


# ---- pad ----

PADS = [(1, (2, 3)), (2, (1, 2, 3, 0)), (2, (-1, 2, 3, -2)), (3, (2, 1, 1, 1, 0, 2))]


@pytest.mark.parametrize("mode,dims,pad", [(m,) + p for m in ["reflect", "replicate"] for p in PADS]
                         + [("constant", 2, (1, 2, -1, 3))])
def test_pad(mode, dims, pad):
    x = randn((2, 3, 5, 6, 4)[:dims + 2])
    check_grad(lambda x: F.pad(x, pad, mode), [x], **F32)


def test_pad_unbatched_integer_and_views():
    check_grad(lambda x: F.pad(x, (2, 2, 1, 1), "reflect"), [randn((3, 4, 5))], **F32)
    check_grad(lambda x: F.pad(x, (1, 2), "replicate"), [torch.arange(12).reshape(2, 6)], **EXACT)
    check_grad(lambda x: F.pad(x.transpose(2, 3), (3, 1, 2, 2), "reflect"), [randn((2, 3, 5, 6))], **F32)


def test_pad_modules():
    x = randn((1, 2, 4, 5))
    check_grad(nn.ReflectionPad2d((1, 2, 3, 1)), [x], **F32)
    check_grad(nn.ReplicationPad1d(3), [x[0]], **F32)
    assert_close(nn.ZeroPad2d(2)(x.to("tpu")), nn.ZeroPad2d(2)(x))
