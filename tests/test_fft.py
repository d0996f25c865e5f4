"""torch.fft on tpu against PyTorch's CPU results: the one-dim transforms
(fft, ifft, rfft, irfft, hfft, ihfft) with n cropping or zero-padding, any
dim and every norm; fft2/fftn/rfftn/irfftn/hfftn/ihfftn over 2 to 5 dims
(more than 3 run in chunks of 3) and unordered dims; float32/float64 and
complex inputs; views; empty and bad inputs; gradients; stft/istft; out=;
and the primitives called directly.

All of them reach the three lowered primitives _fft_r2c, _fft_c2r and
_fft_c2c. Float32 compares with atol 1e-5 times the result's largest
magnitude (an FFT's rounding error grows with the sum it forms), float64
with 1e-12 times it."""
import os
import sys

import pytest
import torch
import torch_tpu

sys.path.insert(0, os.path.dirname(__file__))
from parity import assert_close, to_tpu  # noqa: E402

NORMS = [None, "forward", "ortho"]


def make(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_complex:
        return torch.randn(shape, dtype=dtype, generator=g)
    return torch.randn(shape, generator=g).to(dtype)


def single(dtype):
    return dtype in (torch.float32, torch.complex64)


def compare(actual, expected):
    eps = 1e-5 if single(expected.dtype) else 1e-12
    scale = max(1.0, expected.abs().max().item()) if expected.numel() else 1.0
    assert_close(actual, expected, rtol=10 * eps, atol=eps * scale)


def check_fft(fn, *args, **kwargs):
    expected = fn(*args, **kwargs)
    compare(fn(*to_tpu(args), **kwargs), expected)


# Each one-dim transform on inputs it takes: real ones for rfft/ihfft,
# complex ones (any spectrum, Hermitian or not, as the CPU takes it) for
# irfft/hfft, both for fft/ifft.
ONE_DIM = {
    "fft": [torch.float32, torch.complex64],
    "ifft": [torch.complex64, torch.float32],
    "rfft": [torch.float32],
    "irfft": [torch.complex64],
    "hfft": [torch.complex64],
    "ihfft": [torch.float32],
}


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name", sorted(ONE_DIM))
def test_one_dim(name, norm):
    fn = getattr(torch.fft, name)
    for dtype in ONE_DIM[name]:
        x = make((3, 8, 5), dtype)
        check_fft(fn, x, norm=norm)                 # last dim, odd length
        check_fft(fn, x, dim=1, norm=norm)          # middle dim, even length
        check_fft(fn, x, n=6, dim=-2, norm=norm)    # cropped
        check_fft(fn, x, n=11, dim=0, norm=norm)    # zero-padded


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128, torch.complex64])
def test_dtypes(dtype):
    x = make((4, 10), dtype)
    check_fft(torch.fft.fft, x)
    check_fft(torch.fft.ifft, x, n=7)
    if dtype.is_complex:
        check_fft(torch.fft.irfft, x, n=9)
        check_fft(torch.fft.hfft, x, norm="ortho")
    else:
        check_fft(torch.fft.rfft, x, norm="forward")
        check_fft(torch.fft.ihfft, x)


def test_integer_input_promotes():
    check_fft(torch.fft.fft, torch.arange(6))
    check_fft(torch.fft.rfft, torch.arange(6, dtype=torch.int32))


@pytest.mark.parametrize("norm", NORMS)
def test_multi_dim(norm):
    x = make((3, 4, 5, 6))
    z = make((3, 4, 5, 6), torch.complex64, seed=1)
    check_fft(torch.fft.fft2, z, norm=norm)
    check_fft(torch.fft.ifft2, x, norm=norm)
    check_fft(torch.fft.rfft2, x, norm=norm)
    check_fft(torch.fft.irfft2, z, norm=norm)
    for dim in [(0, 2), (1, 2, 3), (0, 1, 2, 3), (2, 0), (3, 1, 0), (-1, 0, 2, 1)]:
        check_fft(torch.fft.fftn, z, dim=dim, norm=norm)
        check_fft(torch.fft.ifftn, z, dim=dim, norm=norm)
        check_fft(torch.fft.rfftn, x, dim=dim, norm=norm)
        check_fft(torch.fft.irfftn, z, dim=dim, norm=norm)
    check_fft(torch.fft.fftn, x, norm=norm)  # all dims, real input
    check_fft(torch.fft.hfftn, z, dim=(1, 3), norm=norm)
    check_fft(torch.fft.ihfftn, x, dim=(0, 3), norm=norm)


def test_multi_dim_sizes():
    x = make((4, 5, 6, 7), torch.float64)
    z = make((4, 5, 6, 7), torch.complex128, seed=1)
    check_fft(torch.fft.fftn, z, s=(3, 8), dim=(0, 3))
    check_fft(torch.fft.rfftn, x, s=(3, 8, 2, 5))
    check_fft(torch.fft.irfftn, z, s=(6, 3, 4, 10))
    check_fft(torch.fft.irfftn, z, s=(2, 9), dim=(3, 1))
    check_fft(torch.fft.irfft, z, n=1)
    five = make((2, 3, 4, 3, 5), torch.complex128)
    check_fft(torch.fft.fftn, five)  # chunks of 3 and 2
    check_fft(torch.fft.irfftn, five, norm="ortho")


def test_long_signal():
    x = make((2, 1000))
    check_fft(torch.fft.rfft, x)
    check_fft(torch.fft.irfft, torch.fft.rfft(x), n=1000)
    check_fft(torch.fft.fft, x.to(torch.complex64), n=1024)


def test_primitives_directly():
    z = make((3, 7), torch.complex64)
    # A half spectrum longer or shorter than last_dim_size / 2 + 1 is cropped
    # or zero-padded, as irfft does for n (the CPU kernel asserts instead).
    for size in [8, 9, 15, 16]:
        half = size // 2 + 1
        fitted = z[:, :half] if half <= 7 else torch.cat([z, z.new_zeros(3, half - 7)], 1)
        expected = torch._fft_c2r(fitted, [1], 2, size)
        compare(torch._fft_c2r(z.to("tpu"), [-1], 2, size), expected)
    compare(torch._fft_c2c(z.to("tpu"), [0, 1], 1, False), torch._fft_c2c(z, [0, 1], 1, False))
    x = make((3, 7))
    compare(torch._fft_r2c(x.to("tpu"), [1, 0], 0, False), torch._fft_r2c(x, [1, 0], 0, False))


def test_non_contiguous():
    x = make((6, 10))
    z = make((6, 10), torch.complex64)
    check_fft(lambda x: torch.fft.rfft(x.t()), x)
    check_fft(lambda x: torch.fft.fft(x[::2, 1::3], dim=0), x)
    check_fft(lambda z: torch.fft.fftn(z.t()[2:, ::2]), z)
    check_fft(lambda z: torch.fft.irfft(z.t(), dim=0), z)


def test_empty_and_zero_dim():
    check_fft(torch.fft.fftn, torch.tensor(1.5))  # no dims: a copy, as on CPU
    check_fft(torch.fft.fftn, make((3,)), dim=[])
    # A batch with no rows: an empty result (the CPU's MKL refuses it).
    for fn, x in [(torch.fft.fft, make((0, 4))), (torch.fft.rfft, make((0, 4))),
                  (torch.fft.irfft, make((0, 4), torch.complex64))]:
        y = fn(x.to("tpu"), dim=1)
        expected = fn(x.to("meta"), dim=1)
        assert y.shape == expected.shape and y.dtype == expected.dtype
        assert y.cpu().numel() == 0


def test_bad_inputs_raise_as_on_cpu():
    for device in ["cpu", "tpu"]:
        x = make((4,)).to(device)
        with pytest.raises(RuntimeError, match="Invalid number of data points"):
            torch.fft.fft(x, n=0).cpu()
        with pytest.raises(RuntimeError, match="Invalid number of data points"):
            torch.fft.fft(x[:0]).cpu()
        with pytest.raises(RuntimeError, match="Invalid number of data points"):
            torch.fft.irfft(x[:1].to(torch.complex64)).cpu()
        with pytest.raises(IndexError, match="Dimension out of range"):
            torch.fft.fft(x, dim=2).cpu()
        with pytest.raises(IndexError):
            torch.fft.fft(torch.tensor(1.0, device=device)).cpu()
        with pytest.raises(RuntimeError, match="rfftn must transform at least one axis"):
            torch.fft.rfftn(torch.tensor(1.0, device=device)).cpu()
        with pytest.raises(RuntimeError, match="Unsupported dtype Half"):
            torch.fft.rfft(x.half()).cpu()
    # The primitive itself, called on a dtype the frontend would refuse,
    # names the op and the dtype (the CPU's MKL error names the dtype too).
    with pytest.raises(RuntimeError, match=r"aten::_fft_r2c\(BFloat16\[4\].*\): unsupported dtype bfloat16"):
        torch._fft_r2c(make((4,)).bfloat16().to("tpu"), [0], 0, True).cpu()
    assert torch.fft.fft(make((4,)).to("tpu")).shape == (4,)  # the device still works


def test_out():
    z = make((3, 8), torch.complex64)
    expected = torch.fft.fft(z)
    out = torch.empty(3, 8, dtype=torch.complex64, device="tpu")
    result = torch.fft.fft(z.to("tpu"), out=out)
    assert result is out
    compare(out, expected)
    x = make((3, 8))
    out = torch.empty(0, dtype=torch.complex64, device="tpu")
    torch.fft.rfft(x.to("tpu"), norm="ortho", out=out)
    compare(out, torch.fft.rfft(x, norm="ortho"))
    out = torch.empty(3, 14, device="tpu")
    torch.fft.irfft(z.to("tpu"), out=out)
    compare(out, torch.fft.irfft(z))


def grads(fn, x, weight):
    """fn's input gradient for the loss sum(view_as_real(fn(x)) * weight)
    (or sum(fn(x) * weight) for a real result)."""
    x = x.detach().requires_grad_()
    y = fn(x)
    y = torch.view_as_real(y) if y.is_complex() else y
    (y * weight).sum().backward()
    return x.grad


@pytest.mark.parametrize("case", ["rfft", "irfft", "fftn", "rfftn", "irfftn", "fft_complex", "hfft"])
def test_gradients(case):
    real, spectrum = make((4, 6), torch.float64), make((4, 6), torch.complex128, seed=1)
    fn, x = {
        "rfft": (lambda x: torch.fft.rfft(x, norm="ortho"), real),
        "irfft": (lambda x: torch.fft.irfft(x, n=9), spectrum),
        "fftn": (lambda x: torch.fft.fftn(x), real),
        "rfftn": (lambda x: torch.fft.rfftn(x, s=(3, 8), norm="forward"), real),
        "irfftn": (lambda x: torch.fft.irfftn(x), spectrum),
        "fft_complex": (lambda x: torch.fft.ifft(x, dim=0), spectrum),
        "hfft": (lambda x: torch.fft.hfft(x), spectrum),
    }[case]
    out = fn(x)
    weight = make(torch.view_as_real(out).shape if out.is_complex() else out.shape, torch.float64, seed=2)
    expected = grads(fn, x, weight)
    actual = grads(fn, x.to("tpu"), weight.to("tpu"))
    compare(actual, expected)


def test_gradient_through_abs():
    x = make((2, 16))
    fn = lambda x: torch.fft.rfft(x).abs().sum()  # noqa: E731
    expected = torch.autograd.grad(fn(x.requires_grad_()), x)[0]
    t = x.detach().to("tpu").requires_grad_()
    compare(torch.autograd.grad(fn(t), t)[0], expected)


def tpu_kwargs(kwargs):
    return {k: to_tpu(v) for k, v in kwargs.items()}


@pytest.mark.parametrize("center", [True, False])
def test_stft_istft(center):
    signal = make((2, 100))
    window = torch.hann_window(16)
    kwargs = dict(n_fft=16, hop_length=4, window=window, center=center)
    spec = torch.stft(signal, return_complex=True, **kwargs)
    actual = torch.stft(signal.to("tpu"), return_complex=True, **tpu_kwargs(kwargs))
    compare(actual, spec)
    length = 100 if center else None
    # Without centering the first and last frames' edges have a window sum
    # near zero, which istft refuses; they are cropped away here.
    if not center:
        kwargs["window"] = torch.hann_window(16) + 0.1
        spec = torch.stft(signal, return_complex=True, **kwargs)
    back = torch.istft(spec, length=length, **kwargs)
    actual = torch.istft(spec.to("tpu"), length=length, **tpu_kwargs(kwargs))  # overlap-add: unfold_backward
    compare(actual, back)
    if center:
        compare(actual, signal)  # the round trip restores the signal
