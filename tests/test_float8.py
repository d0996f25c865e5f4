"""float8 tensors on tpu against PyTorch's CPU backend.

Conversions compare bit for bit (NaN bits included) from and to every other
dtype, over every float8 bit pattern, the midpoints between neighbours (and
float64 values just off them, where c10's float64 -> float32 -> float8 double
rounding shows), subnormals, the largest finite values, overflow, inf, NaN
and -0.0. The ops PyTorch's CPU kernels take float8 in compare bit for bit
too, except where stated: abs (the CPU's float8 abs keeps the sign of -0.0
and of NaN; tpu's clears it) and float8_e5m2 NaNs moved by data movement ops
(XLA CPU moves float8 through float16, which keeps NaN but not its payload
or sign), both compared as values. _scaled_mm compares with float32's parity
tolerance for float32 results and one unit in the last place for narrower
ones (in practice it matched bit for bit except for float32 sums in another
order, about 1e-6 apart)."""
import os
import sys

import pytest
import torch

import torch_tpu  # noqa: F401

sys.path.insert(0, os.path.dirname(__file__))
from parity import assert_close  # noqa: E402

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
FLOAT8 = [E4M3, E5M2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz]
INT_VIEW = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def bits(t):
    """A tensor's bytes as integers, so that NaN and -0.0 compare exactly."""
    t = t.cpu()
    if t.is_complex():
        t = torch.view_as_real(t)
    return t.view(INT_VIEW[t.element_size()]) if t.is_floating_point() else t


def assert_bits(actual, expected):
    assert actual.device.type == "tpu"
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert torch.equal(bits(actual), bits(expected)), (bits(actual), bits(expected))


def every_value(dtype):
    """All 256 bit patterns of a float8 type."""
    return torch.arange(256, dtype=torch.int32).to(torch.uint8).view(dtype)


def grid(dtype):
    """float64 values that test a conversion to `dtype`: every finite value
    of it, the midpoints between neighbours and values just either side of
    them, the edges of overflow for each float8 type, inf, NaN of both
    signs, -0.0, and float32 subnormals."""
    v = every_value(dtype).double()
    v = v[torch.isfinite(v)].unique()
    mids = (v[1:] + v[:-1]) / 2
    edges = torch.tensor([448.0, 464.0, 479.9, 480.0, 1e6, 57344.0, 61439.0, 61440.0, 65536.0, 240.0, 247.9,
                          248.0, 2.0**-9, 2.0**-10, 2.0**-11, 2.0**-16, 2.0**-17, 2.0**-18, 1e-40, 3e38, 1e300],
                         dtype=torch.float64)
    special = torch.tensor([float("inf"), float("nan"), 0.0, -0.0], dtype=torch.float64)
    x = torch.cat([v, mids, mids * (1 + 2.0**-30), mids * (1 - 2.0**-30), edges, -edges, special, -special])
    return x


SOURCES = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.bool,
           torch.complex64]


@pytest.mark.filterwarnings("ignore:Casting complex values to real")
@pytest.mark.parametrize("dtype", FLOAT8)
def test_conversions_to_float8(dtype):
    x = grid(dtype)
    for source in SOURCES if dtype in (E4M3, E5M2) else [torch.float32, torch.float64, torch.bfloat16]:
        if source.is_floating_point or source.is_complex:
            s = x.to(source)
        elif source == torch.bool:
            s = x != 0
        else:
            s = x[torch.isfinite(x) & (x.abs() < 2.0**31)].to(source)
        assert_bits(s.to("tpu").to(dtype), s.to(dtype))
    # between float8 types, and straight from the host with a dtype
    other = E5M2 if dtype != E5M2 else E4M3
    assert_bits(every_value(other).to("tpu").to(dtype), every_value(other).to(dtype))
    assert_bits(x.float().to("tpu", dtype=dtype), x.float().to(dtype))


@pytest.mark.parametrize("dtype", FLOAT8)
def test_conversions_from_float8(dtype):
    v = every_value(dtype)
    targets = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.bool, torch.complex64]
    for target in targets if dtype in (E4M3, E5M2) else targets[:4]:
        assert_bits(v.to("tpu").to(target), v.to(target))
    # integers from the finite values: NaN and inf follow float32's rule (see README)
    finite = v[torch.isfinite(v.float())]
    for target in [torch.int64, torch.int16, torch.uint8]:
        small = finite[finite.float().abs() < 128] if target == torch.uint8 else finite
        small = small[small.float() >= 0] if target == torch.uint8 else small
        assert_bits(small.to("tpu").to(target), small.to(target))


def test_round_trip_and_shapes():
    for shape in [(), (0,), (0, 3), (5,), (3, 4, 2)]:
        x = torch.randn(shape).mul(100).to(E4M3)
        t = x.to("tpu")
        assert t.dtype == E4M3 and t.shape == x.shape
        assert_bits(t, x)
        assert_bits(t.to(torch.float32), x.to(torch.float32))


def test_unsupported_dtype_is_named():
    with pytest.raises(NotImplementedError, match="Float8_e8m0fnu is not supported on tpu"):
        torch.ones(2, device="tpu").to(torch.float8_e8m0fnu)


def setitem(t, index, value):
    t[index] = value
    return t


@pytest.mark.parametrize("dtype", [E4M3, E5M2])
def test_data_movement_and_views(dtype):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 8, generator=g).mul(20).to(dtype)
    x[0, :4] = torch.tensor([0.0, -0.0, 2.0**-9, -448.0]).to(dtype)
    y = torch.randn(6, 8, generator=g).mul(20).to(dtype)
    if dtype == E4M3:  # both NaNs; e5m2's NaN payloads are checked below as values
        x[1, :2] = torch.tensor([0x7F, 0xFF], dtype=torch.uint8).view(dtype)
    m = torch.randn(6, 8, generator=g) > 0
    i = torch.tensor([4, 0, 4, 2])
    cases = {
        "cat": lambda a, b: torch.cat([a, b[:, :3]], 1),
        "index": lambda a, b: a[i.to(a.device)],
        "index_put": lambda a, b: a.clone().index_put_((i[:2].to(a.device),), b[0]),
        "setitem": lambda a, b: setitem(a.clone(), slice(1, 3), b[:2]),
        "strided": lambda a, b: a[1::2, ::3].contiguous(),
        "transpose": lambda a, b: a.t().contiguous(),
        "roll": lambda a, b: a.roll(3),
        "where": lambda a, b: torch.where(m.to(a.device), a, b),
        "where_scalar": lambda a, b: torch.where(m.to(a.device), a, 0.3),
        "masked_select": lambda a, b: a[m.to(a.device)],
        "pad": lambda a, b: torch.nn.functional.pad(a, (1, 2), value=0.3),
        "uint8_view": lambda a, b: a.view(torch.uint8),
        "float8_view": lambda a, b: a.view(torch.uint8).bitwise_xor(0x80).view(dtype),  # flips the signs
        "bool_view": lambda a, b: m.to(a.device).view(dtype),
        "fill": lambda a, b: a.clone().fill_(-300.3),
        "zero": lambda a, b: a.clone().zero_(),
        "full": lambda a, b: torch.full((2, 3), -0.3, dtype=dtype, device=a.device),
        "mul": lambda a, b: a * b,
        "mul_broadcast": lambda a, b: a * b[2],
        "mul_strided": lambda a, b: a[::2].t() * b[1::2].t(),
        "eq": lambda a, b: a == a.roll(1, 0),
        "ne": lambda a, b: a != b,
        "eq_scalar": lambda a, b: a == 0.3,  # 0.3 rounds to dtype first, as on the CPU
        "isnan": lambda a, b: a.isnan(),
        "any": lambda a, b: a.any(1),
        "bool": lambda a, b: a.bool(),
        "mm": lambda a, b: a[:, :5] @ b[:5, :7],
        "empty": lambda a, b: a[:0] * b[:0],
    }
    for name, fn in cases.items():
        expected = fn(x, y)
        actual = fn(x.to("tpu"), y.to("tpu"))
        assert actual.device.type == "tpu", name
        assert torch.equal(bits(actual), bits(expected)), name
    assert torch.equal(x.to("tpu"), y.to("tpu")) == torch.equal(x, y)
    assert x.to("tpu")[2, 3].item() == x[2, 3].item()
    assert x.to("tpu")[2].tolist() == x[2].tolist()
    # abs as values: the CPU's float8 abs(-0.0) is -0.0
    assert_close(x.to("tpu").abs(), x.abs())


def test_e5m2_nan_moves_as_nan():
    x = every_value(E5M2)
    t = torch.cat([x.to("tpu"), x.to("tpu")[:4]])
    assert torch.equal(t.cpu().isnan(), torch.cat([x, x[:4]]).isnan())


def _tpu(args):
    return [a.to("tpu") if isinstance(a, torch.Tensor) else a for a in args]


SCALED_MM = {
    # name: (mat_a, mat_b, scale_a, scale_b, keyword arguments)
    "tensorwise_f8": lambda a, b: (a, b, torch.tensor(0.37), torch.tensor(1.9), {}),
    "tensorwise_f32": lambda a, b: (a, b, torch.tensor(0.37), torch.tensor(1.9), {"out_dtype": torch.float32}),
    "bias_bf16": lambda a, b: (a, b, torch.tensor(0.5), torch.tensor(2.0),
                               {"bias": torch.randn(24).bfloat16(), "out_dtype": torch.bfloat16}),
    "rowwise_bias_f32": lambda a, b: (a, b, torch.rand(16, 1), torch.rand(1, 24),
                                      {"bias": torch.randn(24), "out_dtype": torch.float32}),
    "scale_result": lambda a, b: (a, b, torch.tensor(1.0), torch.tensor(1.0),
                                  {"scale_result": torch.tensor(4.0), "out_dtype": E5M2}),
    "e4m3_by_e5m2": lambda a, b: (a, b.to(E5M2), torch.tensor(1.0), torch.tensor(1.0), {"out_dtype": torch.float16}),
    "row_major_b": lambda a, b: (a, b.contiguous(), torch.tensor(1.0), torch.tensor(1.0), {"out_dtype": torch.float32}),
    "odd_strided": lambda a, b: (a[1::3, 3:8], b[:5, 2::5], torch.tensor(1.0), torch.tensor(1.0),
                                 {"out_dtype": torch.float32}),
    "empty_k": lambda a, b: (a[:, :0], b[:0], torch.tensor(1.0), torch.tensor(1.0), {"out_dtype": torch.float32}),
}


@pytest.mark.parametrize("case", SCALED_MM)
def test_scaled_mm(case):
    g = torch.Generator().manual_seed(1)
    a = torch.randn(16, 32, generator=g).mul(4).to(E4M3)
    b = torch.randn(24, 32, generator=g).mul(4).to(E4M3).t()  # column-major, as CUDA requires
    torch.manual_seed(2)
    *args, kwargs = SCALED_MM[case](a, b)
    expected = torch._scaled_mm(*args, **kwargs)
    actual = torch._scaled_mm(*_tpu(args), **{k: _tpu([v])[0] for k, v in kwargs.items()})
    if expected.dtype == torch.float32:
        assert_close(actual, expected)
    else:  # one unit in the last place of the output type, or exact
        ulp = torch.finfo(expected.dtype).eps
        assert_close(actual.float(), expected.float(), rtol=ulp, atol=0, exact_dtype=False)
        assert actual.dtype == expected.dtype


def test_errors_name_the_op():
    a = torch.randn(16, 32).to(E4M3).to("tpu")
    b = torch.randn(16, 24).to(E4M3).to("tpu")
    one = torch.tensor(1.0, device="tpu")
    shapes = r"_scaled_mm: mat_a and mat_b shapes cannot be multiplied \(16x32 and 16x24\)"
    with pytest.raises(RuntimeError, match=shapes):
        torch._scaled_mm(a, b, one, one)
    with pytest.raises(ValueError, match="_scaled_mm: invalid scaling configuration"):
        torch._scaled_mm(a, a.t(), one.bfloat16(), one)
    with pytest.raises(NotImplementedError, match="aten::add: float8_e4m3fn tensors are not supported on tpu"):
        a + a
    with pytest.raises(NotImplementedError, match="aten::sum: float8_e4m3fn"):
        a.sum()
    with pytest.raises(RuntimeError, match="Promotion for Float8 Types is not supported"):
        a * a.float()
