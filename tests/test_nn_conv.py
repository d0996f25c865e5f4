"""Convolutions on tpu against PyTorch's CPU results, forward and backward
(input, weight and bias gradients): conv1d/2d/3d with stride, padding
(ints, "same", "valid"), dilation, groups (depthwise too) and bias or not;
conv_transpose1d/2d with stride, padding, output_padding, dilation and
groups; few features per group (stems, depthwise, narrow groups); float32, float64, bfloat16, float16; batch 1, odd and empty
batches, channels_last and non-contiguous inputs, frozen inputs or weights
(convolution_backward's output_mask), and the nn modules. Also F.unfold /
F.fold (im2col / col2im): kernel, dilation, padding and stride, overlapping
blocks and patches, dtypes, unbatched, views, empty batches, modules.

Float32 tolerances are rtol 1e-4 / atol 1e-4: XLA's CPU convolution sums
in another order than PyTorch's CPU kernels, over up to a few hundred
terms per output. bfloat16/float16 use parity's defaults with atol scaled
the same way (both sides accumulate in float32 and round once)."""
import os
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from parity import assert_close  # noqa: E402

F32 = dict(rtol=1e-4, atol=1e-4)
TOL = {torch.float32: F32, torch.float64: {}, torch.bfloat16: dict(rtol=2e-2, atol=5e-2),
       torch.float16: dict(rtol=2e-3, atol=5e-3)}


def randn(shape, dtype=torch.float32, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def check_grad(fn, inputs, rtol=None, atol=None, needs_grad=None):
    """fn(*inputs) on CPU and on tpu, then the gradients of the inputs that
    need them (all floating ones unless `needs_grad` says) for a random
    upstream gradient of fn's first result. fn may return a tuple (its
    other results are compared, not differentiated)."""
    if needs_grad is None:
        needs_grad = [x.is_floating_point() for x in inputs]
    dtype = next((x.dtype for x in inputs if x.is_floating_point()), inputs[0].dtype)
    cpu = [x.detach().to(reference_dtype(x.dtype)).requires_grad_(g) for x, g in zip(inputs, needs_grad)]
    dev = [x.detach().to("tpu").requires_grad_(g) for x, g in zip(inputs, needs_grad)]
    expected, actual = fn(*cpu), fn(*dev)
    assert_close(actual, rounded(expected, dtype), rtol, atol)
    if isinstance(expected, tuple):
        expected, actual = expected[0], actual[0]
    if not any(needs_grad):
        return
    g = randn(expected.shape, seed=9).to(dtype)
    expected.backward(g.to(expected.dtype))
    actual.backward(g.to("tpu"))
    for c, d in zip(cpu, dev):
        if c.requires_grad:
            assert d.grad is not None, "tpu gradient missing"
            assert_close(d.grad, rounded(c.grad, dtype), rtol, atol)


def reference_dtype(dtype):
    """What the CPU reference computes in: float32 for the half types (from
    the same rounded values, rounded once at the end, as both sides do).
    PyTorch's own bfloat16 conv3d weight gradient reads memory it never
    wrote (torch 2.13: right only while the allocator hands it zeroed
    pages), so it cannot be the reference."""
    return torch.float32 if dtype in (torch.bfloat16, torch.float16) else dtype


def rounded(value, dtype):
    """A reference result (tensor or tuple) in the inputs' dtype."""
    if isinstance(value, tuple):
        return tuple(rounded(v, dtype) for v in value)
    return value.to(dtype) if isinstance(value, torch.Tensor) and value.is_floating_point() else value


# ---- conv2d ----

# (stride, padding, dilation, groups, bias)
CONV2D_OPTIONS = [
    (1, 0, 1, 1, True), (2, 1, 1, 1, False), (3, 1, 2, 1, True), ((2, 1), (1, 0), (1, 2), 1, True),
    (1, 4, 1, 1, True),  # padding > kernel
    (1, 1, 1, 2, True), (2, 1, 1, 3, False), (2, 1, 2, 6, False),  # groups, depthwise
]


@pytest.mark.parametrize("stride,padding,dilation,groups,bias", CONV2D_OPTIONS)
def test_conv2d_options(stride, padding, dilation, groups, bias):
    x, w = randn((2, 6, 9, 11)), randn((12, 6 // groups, 3, 3), seed=1)
    inputs = [x, w] + ([randn((12,), seed=2)] if bias else [])
    check_grad(lambda x, w, *b: F.conv2d(x, w, b[0] if b else None, stride, padding, dilation, groups),
               inputs, **F32)


@pytest.mark.parametrize("kernel,dilation", [((3, 3), 1), ((4, 2), 1), ((3, 4), 2)])
def test_conv2d_same_padding(kernel, dilation):
    x, w = randn((1, 3, 8, 7)), randn((4, 3) + kernel, seed=1)
    check_grad(lambda x, w: F.conv2d(x, w, padding="same", dilation=dilation), [x, w], **F32)


def test_conv2d_valid_padding_and_rectangular_kernel():
    x, w, b = randn((3, 2, 10, 5)), randn((5, 2, 4, 2), seed=1), randn((5,), seed=2)
    check_grad(lambda x, w, b: F.conv2d(x, w, b, stride=(3, 2), padding="valid"), [x, w, b], **F32)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float16])
def test_conv2d_dtypes(dtype):
    x, w, b = randn((2, 4, 7, 7), dtype), randn((6, 2, 3, 3), dtype, seed=1), randn((6,), dtype, seed=2)
    check_grad(lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1, groups=2), [x, w, b], **TOL[dtype])


def test_conv2d_integer():
    x = torch.randint(-5, 6, (2, 3, 6, 5))
    w = torch.randint(-3, 4, (4, 3, 3, 3))
    check_grad(lambda x, w: F.conv2d(x, w, stride=2, padding=1), [x, w], rtol=0, atol=0)


def test_conv2d_unbatched_batch_one_and_one_pixel():
    check_grad(lambda x, w: F.conv2d(x, w, stride=2), [randn((3, 7, 6)), randn((2, 3, 3, 3), seed=1)], **F32)
    check_grad(lambda x, w: F.conv2d(x, w), [randn((1, 3, 1, 1)), randn((2, 3, 1, 1), seed=1)], **F32)
    check_grad(lambda x, w: F.conv2d(x, w, padding=1), [randn((1, 1, 3, 3)), randn((1, 1, 3, 3), seed=1)],
               **F32)


def test_conv2d_empty_batch():
    x, w, b = randn((0, 3, 6, 6)), randn((4, 3, 3, 3), seed=1), randn((4,), seed=2)
    check_grad(lambda x, w, b: F.conv2d(x, w, b, padding=1), [x, w, b], **F32)


def test_conv2d_channels_last_and_strided_views():
    x, w, b = randn((2, 4, 9, 8)), randn((6, 4, 3, 3), seed=1), randn((6,), seed=2)

    def channels_last(x, w, b):
        return F.conv2d(x.to(memory_format=torch.channels_last), w.to(memory_format=torch.channels_last), b,
                        padding=1)

    check_grad(channels_last, [x, w, b], **F32)
    check_grad(lambda x, w: F.conv2d(x.transpose(2, 3)[:, :, ::2], w.transpose(0, 1), stride=2),
               [x, randn((4, 6, 3, 3), seed=3)], **F32)


# Small images under large windows (the last stages of an image network, and
# the input grad of a strided convolution into them), with enough features
# that the lowering computes them as one matrix product of patches:
# (input shape, weight shape, stride, padding, dilation)
SMALL_IMAGE_CASES = [
    ((8, 64, 2, 2), (32, 64, 3, 3), 1, 1, 1),  # 3x3 over 2x2
    ((8, 64, 1, 1), (64, 64, 3, 3), 1, 1, 1),  # 3x3 over one pixel
    ((16, 32, 4, 4), (64, 32, 3, 3), 2, 1, 1),  # stride 2 down to 2x2 (its input grad)
    ((32, 64, 2, 2), (32, 64, 3, 2), (2, 1), (1, 0), 1),  # rectangular, mixed stride
    ((8, 32, 2, 2), (32, 32, 3, 3), 1, 2, 2),  # dilated, padded
    ((16, 64, 2), (32, 64, 5), 1, 2, 1),  # conv1d
    ((4, 32, 2, 2, 2), (16, 32, 3, 3, 3), 1, 1, 1),  # conv3d
]


@pytest.mark.parametrize("x_shape,w_shape,stride,padding,dilation", SMALL_IMAGE_CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_convolution_of_a_small_image_under_a_large_window(x_shape, w_shape, stride, padding, dilation,
                                                           dtype):
    conv = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}[len(x_shape)]
    x, w, bias = randn(x_shape, dtype), randn(w_shape, dtype, seed=1), randn(w_shape[:1], dtype, seed=2)
    check_grad(lambda x, w, b: conv(x, w, b, stride, padding, dilation), [x, w, bias], **TOL[dtype])


@pytest.mark.parametrize("stride,padding,output_padding", [(2, 1, 1), (1, 1, 0), (3, 0, 2)])
def test_conv_transpose2d_of_a_small_image(stride, padding, output_padding):
    x, w = randn((32, 64, 1, 2)), randn((64, 32, 3, 3), seed=1)
    check_grad(lambda x, w: F.conv_transpose2d(x, w, None, stride, padding, output_padding), [x, w], **F32)


# Few input features per group under a small window (RGB stems, depthwise
# and narrow grouped convolutions), which the lowering sums tap by tap (up
# to 72 taps, ungrouped only at stride 1 from up to 4 features), and the
# weight grads of grouped ones (the ungrouped one's diagonal blocks up to 64
# outputs, dots batched over the groups past that):
# (input shape, weight shape, stride, padding, dilation, groups)
FEW_FEATURE_CASES = [
    ((2, 3, 9, 8), (8, 3, 3, 3), 1, 1, 1, 1),  # RGB stem
    ((2, 1, 7, 6), (4, 1, 5, 5), 1, 3, 2, 1),  # one feature, dilated, padding past the window
    ((2, 4, 6, 7), (5, 4, 3, 3), 1, 0, 1, 1),  # 36 taps, no padding
    ((2, 3, 9, 8), (8, 3, 3, 3), 2, 1, 1, 1),  # ungrouped and strided: XLA's convolution
    ((3, 8, 7, 6), (8, 1, 3, 3), 1, 1, 1, 8),  # depthwise
    ((3, 8, 7, 6), (16, 1, 3, 3), 2, 1, 1, 8),  # depthwise, two outputs per feature, strided
    ((2, 6, 9, 7), (6, 1, 7, 7), 1, 3, 1, 6),  # depthwise 7x7
    ((2, 6, 9, 9), (6, 1, 3, 3), 3, 2, 2, 6),  # depthwise, stride 3, dilated
    ((2, 16, 6, 6), (16, 8, 3, 3), 1, 1, 1, 2),  # groups of 8: 72 taps
    ((2, 32, 6, 6), (32, 16, 3, 3), 2, 1, 1, 2),  # groups of 16: XLA's convolution forward
    ((2, 12, 8, 7), (6, 2, 3, 2), (2, 1), (1, 0), (1, 2), 6),  # groups of 2, mixed options
    ((2, 8, 5, 6), (66, 4, 3, 3), (1, 2), 1, 1, 2),  # 66 outputs: weight grad as dots batched over groups
    ((2, 8, 11), (8, 2, 3), 2, 1, 1, 4),  # conv1d
    ((2, 4, 4, 5, 4), (8, 1, 3, 3, 3), 1, 1, 1, 4),  # conv3d depthwise
    ((1, 4, 5, 4, 6), (6, 2, 2, 3, 2), (1, 2, 1), 1, 1, 2),  # conv3d grouped
]


@pytest.mark.parametrize("x_shape,w_shape,stride,padding,dilation,groups", FEW_FEATURE_CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
def test_convolution_with_few_features_per_group(x_shape, w_shape, stride, padding, dilation, groups,
                                                 dtype):
    conv = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}[len(x_shape)]
    x, w, bias = randn(x_shape, dtype), randn(w_shape, dtype, seed=1), randn(w_shape[:1], dtype, seed=2)
    check_grad(lambda x, w, b: conv(x, w, b, stride, padding, dilation, groups), [x, w, bias], **TOL[dtype])


@pytest.mark.parametrize("groups", [1, 2, 4])
def test_conv_transpose2d_with_few_features_per_group(groups):
    """Its forward is a strided convolution's input grad: taps over a dilated input."""
    x, w = randn((2, 4, 5, 4)), randn((4, 8 // groups, 3, 3), seed=1)
    check_grad(lambda x, w: F.conv_transpose2d(x, w, None, 2, 1, 1, groups), [x, w], **F32)


def test_conv2d_integer_taps():
    x = torch.randint(-5, 6, (2, 3, 6, 5))
    w = torch.randint(-3, 4, (4, 3, 3, 3))
    check_grad(lambda x, w: F.conv2d(x, w, padding=1), [x, w], rtol=0, atol=0)
    check_grad(lambda x, w: F.conv2d(x, w, padding=1, groups=3), [x, torch.randint(-3, 4, (6, 1, 3, 3))],
               rtol=0, atol=0)


def test_grouped_conv2d_empty_batch_and_non_contiguous():
    x, w = randn((0, 8, 6, 6)), randn((8, 2, 3, 3), seed=1)
    check_grad(lambda x, w: F.conv2d(x, w, padding=1, groups=4), [x, w], **F32)
    x = randn((2, 6, 8, 8))
    check_grad(lambda x, w: F.conv2d(x.transpose(2, 3)[:, :, 1::2], w.transpose(2, 3), padding=1, groups=3),
               [x, randn((6, 2, 3, 3), seed=1)], **F32)


@pytest.mark.parametrize("needs_grad", [[False, True, True], [True, False, False], [True, True, False]])
def test_conv2d_frozen_arguments(needs_grad):
    """Only some gradients wanted: convolution_backward's output_mask."""
    x, w, b = randn((2, 3, 7, 7)), randn((4, 3, 3, 3), seed=1), randn((4,), seed=2)
    check_grad(lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1), [x, w, b], needs_grad=needs_grad,
               **F32)


# ---- conv1d / conv3d ----

@pytest.mark.parametrize("stride,padding,dilation,groups", [(2, 1, 1, 2), (3, 2, 2, 1), (1, "same", 2, 4)])
def test_conv1d(stride, padding, dilation, groups):
    x, w, b = randn((2, 4, 13)), randn((8, 4 // groups, 3), seed=1), randn((8,), seed=2)
    check_grad(lambda x, w, b: F.conv1d(x, w, b, stride, padding, dilation, groups), [x, w, b], **F32)


def test_conv3d():
    x, w, b = randn((1, 2, 5, 6, 7)), randn((4, 2, 3, 2, 3), seed=1), randn((4,), seed=2)
    check_grad(lambda x, w, b: F.conv3d(x, w, b, stride=(1, 2, 2), padding=1), [x, w, b], **F32)


# ---- conv_transpose ----

# (stride, padding, output_padding, dilation, groups, bias)
CONV_T_OPTIONS = [
    (1, 0, 0, 1, 1, True), (2, 1, 1, 1, 1, True), (3, 2, 2, 1, 1, False), (2, 1, 0, 2, 1, True),
    ((2, 3), (0, 1), (1, 2), (1, 2), 1, True), (1, 3, 0, 1, 1, False),  # padding > kernel: crops
    (2, 1, 1, 1, 2, True), (1, 1, 0, 1, 6, False),  # groups, depthwise
]


@pytest.mark.parametrize("stride,padding,output_padding,dilation,groups,bias", CONV_T_OPTIONS)
def test_conv_transpose2d_options(stride, padding, output_padding, dilation, groups, bias):
    x, w = randn((2, 6, 5, 7)), randn((6, 4 // groups if groups < 6 else 1, 3, 3), seed=1)
    out_channels = w.shape[1] * groups
    inputs = [x, w] + ([randn((out_channels,), seed=2)] if bias else [])
    check_grad(lambda x, w, *b: F.conv_transpose2d(x, w, b[0] if b else None, stride, padding, output_padding,
                                                   groups, dilation), inputs, **F32)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_conv_transpose2d_dtypes(dtype):
    x, w, b = randn((1, 4, 4, 5), dtype), randn((4, 3, 3, 3), dtype, seed=1), randn((3,), dtype, seed=2)
    check_grad(lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1), [x, w, b],
               **TOL[dtype])


def test_conv_transpose1d():
    x, w, b = randn((2, 4, 9)), randn((4, 3, 4), seed=1), randn((6,), seed=2)
    check_grad(lambda x, w, b: F.conv_transpose1d(x, w, b, stride=3, padding=1, output_padding=2, groups=2),
               [x, w, b], **F32)


def test_conv_transpose2d_frozen_input():
    x, w = randn((2, 3, 4, 4)), randn((3, 2, 3, 3), seed=1)
    check_grad(lambda x, w: F.conv_transpose2d(x, w, stride=2), [x, w], needs_grad=[False, True], **F32)


# ---- modules ----

@pytest.mark.parametrize("padding_mode", ["zeros", "reflect"])
def test_conv2d_module(padding_mode):
    torch.manual_seed(0)
    cpu = nn.Conv2d(3, 8, 3, stride=2, padding=1, padding_mode=padding_mode)
    dev = nn.Conv2d(3, 8, 3, stride=2, padding=1, padding_mode=padding_mode).to("tpu")
    dev.load_state_dict(cpu.state_dict())
    x = randn((2, 3, 11, 10))
    expected, actual = cpu(x), dev(x.to("tpu"))
    assert_close(actual, expected, **F32)
    expected.square().sum().backward()
    actual.square().sum().backward()
    for p, q in zip(cpu.parameters(), dev.parameters()):
        assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-3)


def test_conv_transpose2d_module_and_output_size():
    torch.manual_seed(0)
    cpu = nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1)
    dev = nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1).to("tpu")
    dev.load_state_dict(cpu.state_dict())
    x = randn((1, 4, 5, 6))
    expected = cpu(x, output_size=[10, 12])
    actual = dev(x.to("tpu"), output_size=[10, 12])
    assert_close(actual, expected, **F32)
    expected.sum().backward()
    actual.sum().backward()
    for p, q in zip(cpu.parameters(), dev.parameters()):
        assert_close(q.grad, p.grad, **F32)


# ---- unfold / fold (im2col / col2im) ----

# (kernel, dilation, padding, stride)
FOLD_OPTIONS = [(3, 1, 0, 1), ((2, 3), (2, 1), (1, 2), (2, 3)), (4, 1, 0, 4), (1, 1, 1, 2), (3, 2, 2, 1)]


@pytest.mark.parametrize("kernel,dilation,padding,stride", FOLD_OPTIONS)
def test_unfold_and_fold(kernel, dilation, padding, stride):
    """unfold copies blocks (exact); fold sums overlapping ones (and each is
    the other's gradient). (4, 1, 0, 4): non-overlapping patches, as vision
    transformers cut them."""
    x = randn((2, 3, 8, 9))
    check_grad(lambda x: F.unfold(x, kernel, dilation, padding, stride), [x], rtol=0, atol=0)
    cols = F.unfold(x, kernel, dilation, padding, stride)
    check_grad(lambda c: F.fold(c, (8, 9), kernel, dilation, padding, stride), [cols], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_unfold_fold_dtypes_unbatched_and_views(dtype):
    """Parity's default tolerances: the gradients (and fold) sum, in float32
    here and in bfloat16 on the CPU. (The CPU has no integer im2col.)"""
    x = (randn((3, 7, 6)) * 10).to(dtype)
    check_grad(lambda x: F.unfold(x, 3, padding=1), [x])
    check_grad(lambda c: F.fold(c, (7, 6), 3, padding=1), [F.unfold(x, 3, padding=1)])
    y = randn((2, 4, 9, 8))
    check_grad(lambda y: F.unfold(y.transpose(2, 3)[:, 1:], 2, stride=2), [y], rtol=0, atol=0)


def test_unfold_fold_empty_batch_and_modules():
    check_grad(lambda x: F.unfold(x, 2), [randn((0, 2, 5, 5))])
    x = randn((2, 3, 6, 7))
    unfold, fold = nn.Unfold((2, 3), stride=(1, 2)), nn.Fold((6, 7), (2, 3), stride=(1, 2))
    check_grad(lambda x: fold(unfold(x)), [x], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("shape,dim,size,step", [((10,), 0, 3, 2), ((4, 11, 3), 1, 4, 3), ((5, 7), -1, 2, 2),
                                                  ((6,), 0, 2, 4), ((3, 0), 0, 2, 1), ((7,), 0, 7, 1)])
def test_tensor_unfold_backward(dtype, shape, dim, size, step):
    """Tensor.unfold's backward (unfold_backward) adds overlapping windows
    back; gaps (step > size) get zeros."""
    check_grad(lambda x: x.unfold(dim, size, step) * 1, [randn(shape, dtype)])


def test_fold_with_a_wrong_column_count_raises():
    """PyTorch's own shape check names fold's sizes; the process goes on."""
    cols = randn((1, 12, 5)).to("tpu")
    with pytest.raises(RuntimeError, match="expected input.size"):
        F.fold(cols, (4, 4), 2)
    assert F.fold(randn((1, 12, 9)).to("tpu"), (4, 4), 2).shape == (1, 3, 4, 4)
