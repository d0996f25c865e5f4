"""Complex tensors on tpu against PyTorch's CPU results: transfers, the
views between complex and float storage (view_as_real, view_as_complex,
.real, .imag), lazy conjugates, arithmetic with complex, real and Python
complex operands, the ops that build and measure complex numbers, products,
reductions, data movement, autograd, and a LLaMA-style rotary embedding.

complex64 compares with parity's float32 tolerances (rtol 1.3e-6, atol
1e-5; looser where a transcendental or a long sum is involved, stated at
the test), complex128 with 1e-7."""
import os
import sys

import pytest
import torch

import torch_tpu

sys.path.insert(0, os.path.dirname(__file__))
from parity import assert_close, check  # noqa: E402

COMPLEX = [torch.complex64, torch.complex128]


def make(shape, dtype=torch.complex64, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_complex:
        real = torch.float64 if dtype == torch.complex128 else torch.float32
        return torch.complex(torch.randn(shape, generator=g, dtype=real), torch.randn(shape, generator=g, dtype=real))
    return torch.randn(shape, generator=g).to(dtype)


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("shape", [(), (0, 3), (5,), (3, 4, 2)])
def test_round_trip(dtype, shape):
    z = make(shape, dtype)
    t = z.to("tpu")
    assert t.dtype == dtype and t.shape == z.shape
    assert torch.equal(t.cpu(), z)
    assert torch.equal(t.clone().cpu(), z)


@pytest.mark.filterwarnings("ignore:Casting complex values to real")
@pytest.mark.parametrize("dtype", COMPLEX)
def test_non_contiguous_and_conversions(dtype):
    z = make((4, 6), dtype)
    check(lambda x: x.mT.contiguous(), z)
    check(lambda x: x[:, ::2] + 0, z)
    real = make((4, 6), torch.float32)
    check(lambda x: x.to(dtype), real)  # imaginary part zero
    check(lambda x: x.to(torch.float64), z)  # drops the imaginary part (PyTorch warns once)
    check(lambda x: x.to(torch.bool), torch.tensor([0j, 1j, 1 + 0j, 0j], dtype=dtype))
    check(lambda x: x.to(torch.complex128 if dtype == torch.complex64 else torch.complex64), z)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_view_as_real_and_complex_read_and_write(dtype):
    z = make((3, 4), dtype)
    check(torch.view_as_real, z)
    check(lambda x: torch.view_as_real(x[1:, ::2]), z)
    check(lambda x: (x.real, x.imag), z)
    pairs = torch.view_as_real(z).clone()
    check(torch.view_as_complex, pairs)
    check(lambda p: torch.view_as_complex(p[1:]), pairs)

    def write_real_view(x):
        torch.view_as_real(x).mul_(2)
        x.imag.zero_()
        x.real[0].fill_(7)
        return x

    check(write_real_view, z)

    def write_complex_view(p):
        torch.view_as_complex(p).mul_(1j)
        return p

    check(write_complex_view, pairs)


def test_fresh_storage_written_through_the_other_view():
    # storage whose first write comes through a view of the other element type
    cpu = torch.empty(3, dtype=torch.complex64)
    t = torch.empty(3, dtype=torch.complex64, device="tpu")
    values = torch.arange(6.0).reshape(3, 2)
    torch.view_as_real(cpu).copy_(values)
    torch.view_as_real(t).copy_(values.to("tpu"))
    assert torch.equal(t.cpu(), cpu)
    p = torch.zeros(8, device="tpu")
    torch.view_as_complex(p.view(4, 2)).copy_(torch.tensor([1 + 2j, 3j, -1, 0.5 - 0.5j]))
    assert torch.equal(p.cpu(), torch.tensor([1.0, 2, 0, 3, -1, 0, 0.5, -0.5]))


def test_lazy_conjugate_and_negative_bits():
    z = make((3, 4))
    check(lambda x: x.conj(), z)
    check(lambda x: x.conj().resolve_conj(), z)
    check(lambda x: x.conj().imag, z)  # a negative view
    check(lambda x: x.conj().imag * 2, z)
    check(lambda x: x.conj_physical(), z)
    check(lambda x: x.conj_physical_(), z)
    check(lambda x: x.conj() @ x.mT, z)  # mm takes the conjugate unresolved
    check(lambda x: torch.dot(x[0].conj(), x[1]), z)
    check(lambda x: torch.empty_like(x).conj().copy_(x), z)
    check(lambda x: torch.zeros_like(x).copy_(x.conj()), z)

    t = z.to("tpu")
    host = torch.empty(3, 4, dtype=torch.complex64).conj()
    host.copy_(t)  # tpu -> a conjugate CPU view
    assert torch.equal(host, z)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_arithmetic(dtype):
    a, b = make((3, 4), dtype), make((3, 4), dtype, seed=1)
    for fn in (torch.add, torch.sub, torch.mul, torch.div):
        check(fn, a, b)
    check(lambda x, y: torch.add(x, y, alpha=2 - 1j), a, b)
    check(lambda x, y: torch.sub(x, y, alpha=3), a, b)
    check(lambda x: x * (2 + 3j), a)
    check(lambda x: (1 - 1j) / x, a)
    check(lambda x: x + 1j, a)
    check(lambda x, y: x.mul_(y), a, b)
    check(lambda x: x.add_(0.5j), a)
    check(lambda x, y: x == y, a, a.clone())
    check(lambda x, y: x != y, a, b)


def test_promotion_with_real_operands():
    z = make((3, 4))
    check(lambda x, y: x * y, z, make((4,), torch.float32))           # broadcast
    check(lambda x, y: x + y, z, make((3, 4), torch.float64))         # complex64 + float64 -> complex128
    check(lambda x, y: x * y, z, torch.arange(4))                     # int64
    check(lambda x: x * 2j, make((3, 4), torch.float64))              # float64 * complex scalar -> complex128
    check(lambda x: x * 2j, torch.arange(6).reshape(2, 3))            # int * complex scalar -> complex64
    check(lambda x, y: x * y, make((3, 4), torch.float32), torch.tensor(1 + 2j, dtype=torch.complex64))


@pytest.mark.parametrize("dtype", COMPLEX)
def test_unary(dtype):
    z = make((4, 5), dtype)
    z[0, 0] = 0
    loose = dict(rtol=1e-5, atol=1e-5) if dtype == torch.complex64 else {}
    for fn in (torch.neg, torch.abs, torch.angle, torch.sgn, torch.reciprocal):
        check(fn, z)
    for fn in (torch.exp, torch.log, torch.sqrt, torch.sin, torch.cos, torch.tanh, torch.sigmoid,
               torch.nn.functional.silu):
        check(fn, z[1:], **loose)
    check(torch.sinc, z, **loose)  # 1 at 0

    def sinc_gradient(x):
        x = x.detach().requires_grad_()
        torch.sinc(x).abs().sum().backward()
        return x.grad
    check(sinc_gradient, z[1:], **loose)
    check(lambda x: x ** 2, z, **loose)
    check(lambda x: x ** 0.5, z[1:], **loose)
    check(lambda x, y: x ** y, z[1:], make((3, 5), dtype, seed=2), **loose)
    check(torch.isnan, torch.tensor([1j, complex("nan"), complex(0, float("nan"))], dtype=dtype))
    check(torch.isfinite, torch.tensor([1j, complex("inf"), complex(0, float("nan"))], dtype=dtype))


def test_angle_of_real_numbers():
    x = torch.tensor([-2.0, -0.0, 0.0, 3.0, float("nan"), float("-inf")])
    check(torch.angle, x)
    check(torch.angle, torch.tensor([-3, 0, 4]))


@pytest.mark.parametrize("real", [torch.float32, torch.float64])
def test_complex_and_polar(real):
    a, b = make((3, 4), real), make((4,), real, seed=1)
    check(torch.complex, a, b)
    check(torch.polar, a.abs(), b)
    out = torch.empty(3, 4, dtype=torch.complex128 if real == torch.float64 else torch.complex64)
    check(lambda x, y, o: torch.complex(x, y.expand(3, 4), out=o), a, b, out)


def test_products():
    a, b = make((3, 5)), make((5, 2), seed=1)
    check(torch.mm, a, b)
    check(torch.matmul, make((2, 3, 5)), make((2, 5, 4), seed=1))
    check(lambda x, y: torch.addmm(x, a.to(x.device), b.to(x.device), beta=1j, alpha=2), make((3, 2), seed=2), b)
    check(torch.mv, a, make((5,), seed=3))
    check(torch.vdot, make((6,)), make((6,), seed=1))  # conjugates its first operand
    check(torch.dot, make((6,)), make((6,), seed=1))


@pytest.mark.parametrize("dtype", COMPLEX)
def test_reductions(dtype):
    z = make((3, 4, 5), dtype)
    check(lambda x: x.sum(), z)
    check(lambda x: x.sum((0, 2)), z)
    check(lambda x: x.mean(1, keepdim=True), z)
    check(lambda x: x.prod(2), z, rtol=1e-5, atol=1e-5)
    check(lambda x: x.sum(0), make((0, 3), dtype))


@pytest.mark.parametrize("dtype", COMPLEX)
def test_scans_norms_and_more_math(dtype):
    z = make((3, 6), dtype)
    check(lambda x: x.cumsum(1), z)
    check(lambda x: x.cumprod(0), z, rtol=1e-5, atol=1e-5)
    check(lambda x: torch.trace(x[:, :3]), z)
    check(lambda x: torch.linalg.vector_norm(x, dim=1), z)
    check(lambda x: torch.linalg.vector_norm(x, ord=1), z)
    check(lambda x: torch.linalg.vector_norm(x, ord=float("inf"), dim=0), z)
    check(lambda x: x.norm(), z)
    check(lambda x: torch.dist(x, x * 2), z)
    check(lambda x: torch.linalg.matrix_norm(x), z)
    check(lambda x: (x.var(1), x.std(), torch.var_mean(x, 0, correction=0), torch.std_mean(x, 1)), z)
    check(lambda x: (x.log10(), x.log2(), torch.exp2(x)), z, rtol=1e-5, atol=1e-5)
    check(lambda x: torch.addcmul(x, x, x.conj(), value=2j), z)
    check(lambda x: torch.addcdiv(x, x, x + 1, value=0.5), z)
    w = make((3, 6), dtype, seed=1)
    check(lambda x, w: (torch.lerp(x, x * 2j, w), torch.lerp(x, x.flip(0), 0.7), torch.lerp(x[:, ::2], x[:, 1::2], 0.25j)), z, w)
    check(lambda x, w: x.lerp_(w, w.conj()), z, w)
    check(lambda x: (torch.logsumexp(x * 30, 1), torch.logsumexp(x.T, (0, 1), keepdim=True)), z, rtol=1e-5, atol=1e-5)
    edges = z.clone()
    edges[0, 0], edges[1] = complex(float("inf"), 0), complex(float("-inf"), 0)
    check(lambda x: torch.logsumexp(x, 1), edges)

    def logsumexp_gradient(x):
        x = x.detach().requires_grad_()
        torch.view_as_real(torch.logsumexp(x, 1)).sum().backward()
        return x.grad
    check(logsumexp_gradient, z, rtol=1e-5, atol=1e-5)


def test_scatter_and_index_writes():
    z = make((4, 5))
    index = torch.tensor([[0, 2, 1, 0, 4]] * 2)
    check(lambda x, i: torch.zeros_like(x).scatter_add(1, i, x[:2]), z, index)
    check(lambda x, i: x.scatter(1, i, 1j), z, index)
    check(lambda x: x.index_put((torch.tensor([0, 2, 0], device=x.device),), torch.tensor(1j, device=x.device),
                                accumulate=True), z)
    check(lambda x: x.index_add(0, torch.tensor([1, 1, 3], device=x.device), x[:3], alpha=2), z)
    check(lambda x: x.masked_scatter(x.real > 0, x * 1j), z)
    check(lambda x: x.put(torch.tensor([1, 3, 1], device=x.device), x[0, :3], accumulate=True), z)
    check(lambda x: x.index_fill(1, torch.tensor([2, 0], device=x.device), 2 - 1j), z)
    check(lambda x: x.index_copy(1, torch.tensor([2, 0], device=x.device), x[:, 3:]), z)


def test_data_movement():
    z = make((4, 5))
    check(lambda x: torch.cat([x, x * 1j], 0), z)
    check(lambda x: torch.stack([x, x.conj()], 2), z)
    check(lambda x: x.flip(1), z)
    check(lambda x: x.roll(2, 1), z)
    check(lambda x: x.index_select(1, torch.tensor([4, 0, 2], device=x.device)), z)
    check(lambda x: x.gather(1, torch.tensor([[0, 1]] * 4, device=x.device)), z)
    check(lambda x: x[torch.tensor([3, 1], device=x.device)], z)
    check(lambda x: torch.nn.functional.pad(x, (1, 2)), z)
    check(lambda x: x.tril(), z)
    check(lambda x: torch.where(x.real > 0, x, 1j), z)
    check(lambda x: x.masked_fill(x.imag < 0, 2 + 2j), z)
    check(lambda x: torch.full((2, 3), 1 - 2j, device=x.device), z)
    check(lambda x: torch.zeros(2, dtype=x.dtype, device=x.device), z)
    check(lambda x: torch.take(x, torch.tensor([0, 7, 19], device=x.device)), z)
    check(lambda x: x.masked_select(x.real > 0), z)
    check(lambda x: torch.eye(3, 4, dtype=x.dtype, device=x.device), z)
    check(lambda x: torch.linalg.cross(x[:, :3], x[:, 2:]), z)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_pads_patches_and_shuffles(dtype):
    z = make((2, 4, 4, 5), dtype)
    F = torch.nn.functional
    for mode in ("reflect", "replicate"):
        check(lambda x: F.pad(x[0, 0], (2, 1), mode=mode), z)
        check(lambda x: F.pad(x[0], (2, 1, 1, 2), mode=mode), z)
        check(lambda x: F.pad(x, (1, 1, 2, 1, 1, 2), mode=mode), z)
    check(lambda x: F.unfold(x, 2, stride=(1, 2)), z)
    check(lambda x: F.fold(F.unfold(x, 2), (4, 5), 2), z)
    check(lambda x: F.channel_shuffle(x, 2), z)
    w = z.clone().requires_grad_()  # the pads' backwards sum complex gradients
    grads = []
    for x in (w, w.detach().to("tpu").requires_grad_()):
        (F.pad(x[0], (2, 1, 1, 2), mode="reflect").abs().sum() + F.pad(x[1], (1, 1, 1, 1), mode="replicate").real.sum()).backward()
        grads.append(x.grad)
    assert_close(grads[1], grads[0])


@pytest.mark.parametrize("dtype", COMPLEX)
def test_truth_tests_and_predicates(dtype):
    z = make((3, 4), dtype)
    z[0, 1] = 0
    z[2, 2] = 1j  # nonzero with a zero real part
    check(lambda x: (x.all(), x.all(1), x.any(), x.any(0)), z)
    check(lambda x: (torch.count_nonzero(x), torch.count_nonzero(x, dim=0), x.nonzero()), z)
    check(lambda x: (x.logical_not(), x.logical_and(x.real), x.logical_or(0 * x), x.logical_xor(x.imag)), z)
    big = torch.finfo(torch.float32 if dtype == torch.complex64 else torch.float64).max
    special = torch.tensor([complex(big, big), complex(float("inf"), 0), complex(0, -float("inf")),
                            complex(float("nan"), 1), 1 + 1j], dtype=dtype)
    check(lambda x: (torch.isinf(x), torch.isnan(x), torch.isfinite(x)), special)  # |big + big j| overflows


def test_order_comparisons_raise():
    t = make((3,)).to("tpu")
    with pytest.raises(RuntimeError):
        t < t
    assert torch.equal((t + 1).cpu(), t.cpu() + 1)  # the process keeps working


def test_unlowered_op_says_so_and_falls_back():
    z = make((3, 4))
    t = z.to("tpu")
    with pytest.raises(NotImplementedError, match="logcumsumexp.*complex numbers.*cpu_fallback"):
        torch.logcumsumexp(t, 1)
    with torch_tpu.cpu_fallback():
        assert_close(torch.logcumsumexp(t, 1), torch.logcumsumexp(z, 1))
    assert_close(t * 2, z * 2)


# ---- sinh, cosh and the inverse functions ----
# They follow the C library's csinh, casin, ... that PyTorch's CPU kernels
# call. Compared part by part (view_as_real), so a small part of a large
# result is held to its own relative error: complex64 to rtol 2e-6
# (observed worst 4.3e-7), complex128 to 2e-15 (observed worst 7.3e-16).
ELEMENTARY = ["sinh", "cosh", "asin", "acos", "atan", "asinh", "acosh", "atanh"]
PART_TOLERANCES = {torch.complex64: dict(rtol=2e-6, atol=1e-30), torch.complex128: dict(rtol=2e-15, atol=1e-300)}


def elementary_points(dtype):
    """Values in all four quadrants over many scales, near the branch points
    +-1 and +-i, on both axes with zeros of either sign, and large ones."""
    g = torch.Generator().manual_seed(0)
    points = []
    for scale in (1e-6, 1e-3, 0.1, 0.7, 1, 3, 30, 1e4, 1e9, 1e30):
        parts = (torch.rand(2, 40, generator=g, dtype=torch.float64) * 2 - 1) * scale
        points.append(torch.complex(parts[0], parts[1]))
    mixed = torch.logspace(-7, 12, 12, dtype=torch.float64)
    mixed = torch.cat([mixed, -mixed])
    re, im = torch.meshgrid(mixed, mixed, indexing="ij")
    points.append(torch.complex(re.flatten(), im.flatten()))
    steps = [0, 1e-20, 1e-9, 1e-6, 1e-3, 0.1]
    steps += [-d for d in steps]
    points.append(torch.tensor([c + complex(dx, dy) for c in (1, -1, 1j, -1j) for dx in steps for dy in steps]))
    line = torch.cat([torch.linspace(-3, 3, 25, dtype=torch.float64), torch.tensor([1e10, -1e10, 1e20])])
    zero = torch.zeros_like(line)
    for re, im in ((line, zero), (line, -zero), (zero, line), (-zero, line)):
        points.append(torch.complex(re, im))
    return torch.cat(points).to(dtype)


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("name", ELEMENTARY)
def test_elementary_functions(name, dtype):
    fn = getattr(torch, name)
    tolerances = dict(PART_TOLERANCES[dtype])
    if name == "acos" and dtype == torch.complex128:
        # PyTorch's vectorized complex128 acos, pi/2 - asin(z), loses a real
        # part that is tiny beside pi/2 (2.8666e-13 for acos(34863.65 + 1e-8j),
        # where the value is 2.8683e-13, as ours): an absolute bound there
        tolerances["atol"] = 1e-15
    check(lambda x: torch.view_as_real(fn(x)), elementary_points(dtype), **tolerances)


def matching_parts(actual, expected, rtol, zero_signs=True, atol=0.0):
    """Per element: both parts close where the CPU's is finite and nonzero,
    else equal, zeros with their signs (unless not zero_signs), NaN where NaN."""
    a, e = torch.view_as_real(actual.cpu()), torch.view_as_real(expected)
    same = ((a == e) & ((torch.signbit(a) == torch.signbit(e)) | (not zero_signs))) | (a.isnan() & e.isnan())
    regular = e.isfinite() & (e != 0)
    return torch.where(regular, torch.isclose(a, e, rtol=rtol, atol=atol), same).all(-1)


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("name", ELEMENTARY)
def test_elementary_functions_special_values(name, dtype):
    # C99 Annex G's table as glibc fills it in: every combination of signed
    # zeros, +-1 (branch points), infinities and NaN matches exactly
    fn = getattr(torch, name)
    values = [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0, float("inf"), -float("inf"), float("nan")]
    z = torch.tensor([complex(a, b) for a in values for b in values], dtype=dtype)
    expected, actual = fn(z), fn(z.to("tpu"))
    # PyTorch's vectorized complex128 acos is pi/2 - asin(z), whose zero
    # imaginary parts are all +0; ours are cacos's (acos(x + 0i) = acos(x) - 0i)
    zero_signs = not (name == "acos" and dtype == torch.complex128)
    good = matching_parts(actual, expected, PART_TOLERANCES[dtype]["rtol"], zero_signs)
    bad = [(v, e, a) for v, e, a, ok in zip(z.tolist(), expected.tolist(), actual.cpu().tolist(), good) if not ok]
    assert not bad, f"(z, cpu, tpu): {bad}"


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("name", ELEMENTARY)
def test_elementary_functions_shapes_and_variants(name, dtype):
    fn, tolerances = getattr(torch, name), PART_TOLERANCES[dtype]
    z = make((4, 6), dtype)
    check(lambda x: torch.view_as_real(fn(x)), z[0, 1].clone(), **tolerances)  # 0-d
    check(fn, make((0, 3), dtype))
    check(lambda x: torch.view_as_real(fn(x.mT[:, ::2])), z, **tolerances)  # non-contiguous
    check(lambda x: getattr(x[1:], name + "_")(), z, **tolerances)  # in place, through a view
    check(lambda x, o: torch.view_as_real(fn(x, out=o[:, 1])), z, torch.zeros(4, 2, 6, dtype=dtype), **tolerances)


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("name", ELEMENTARY)
def test_elementary_functions_backward(name, dtype):
    # PyTorch's complex backward formulas (asin's grad * (1 - z^2).rsqrt().conj(),
    # ...) on tpu against the CPU
    fn = getattr(torch, name)
    z = make((3, 5), dtype, seed=3)
    weight = make((3, 5), dtype, seed=4)
    grads = []
    for dev in ("cpu", "tpu"):
        x = z.to(dev, copy=True).requires_grad_()
        (fn(x) * weight.to(dev)).real.sum().backward()
        grads.append(x.grad)
    loose = dict(rtol=1e-5, atol=1e-5) if dtype == torch.complex64 else dict(rtol=1e-12, atol=1e-12)
    assert_close(grads[1], grads[0], **loose)


def test_autograd_through_complex_ops():
    z = make((3, 4))
    w = make((3, 4), seed=1)

    def loss(x, y):
        return ((x * y).abs() + torch.angle(x * 1j) + (x.conj() / y).real).sum()

    grads = []
    for dev in ("cpu", "tpu"):
        x = z.to(dev, copy=True).requires_grad_()
        loss(x, w.to(dev)).backward()
        grads.append(x.grad)
    assert_close(grads[1], grads[0], rtol=1e-5, atol=1e-5)


def rotary(x, freqs_cis):
    """LLaMA's rotary embedding: pairs of features as complex numbers, turned
    by each position's angles."""
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    turned = xc * freqs_cis[None, :, None, :]
    return torch.view_as_real(turned).flatten(3).type_as(x)


def rotary_freqs(dim, positions, theta=10000.0):
    freqs = 1.0 / theta ** (torch.arange(0, dim, 2).float() / dim)
    angles = torch.outer(torch.arange(positions).float(), freqs)
    return torch.polar(torch.ones_like(angles), angles)


def test_rotary_embedding_forward_and_backward():
    B, T, H, D = 2, 6, 3, 8
    x = make((B, T, H, D), torch.float32)
    weight = make((B, T, H, D), torch.float32, seed=1)
    results = []
    for dev in ("cpu", "tpu"):
        freqs = rotary_freqs(D, T).to(dev)  # built on the device: polar there
        xd = x.to(dev, copy=True).requires_grad_()
        out = rotary(xd, freqs)
        (out * weight.to(dev)).sum().backward()
        results.append((out.detach(), xd.grad))
    assert_close(results[1], results[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_randn_draws_complex_normals(dtype):
    # as PyTorch draws them: each part normal with variance 1/2, so E|z|^2 = 1
    z = torch.randn(200_000, dtype=dtype, device="tpu").cpu()
    assert z.dtype == dtype
    parts = torch.view_as_real(z).double()
    assert parts.mean(0).abs().max() < 0.01
    assert (parts.var(0) - 0.5).abs().max() < 0.01
    assert abs(torch.corrcoef(parts.T)[0, 1]) < 0.01
    shifted = torch.empty(50_000, dtype=dtype, device="tpu").normal_(2.0, 3.0).cpu()
    assert abs(shifted.mean().real - 2) < 0.05 and abs(shifted.mean().imag) < 0.05
    assert abs(shifted.abs().pow(2).mean() - 4 - 9) < 0.3  # |mean|^2 + std^2


def test_save_load_and_deepcopy():
    import copy
    import io

    z = make((3, 4))
    t = z.to("tpu")
    buf = io.BytesIO()
    torch.save({"z": t}, buf)
    buf.seek(0)
    loaded = torch.load(buf)
    assert loaded["z"].device.type == "tpu"
    assert torch.equal(loaded["z"].cpu(), z)
    assert torch.equal(torch.view_as_real(loaded["z"]).cpu(), torch.view_as_real(z))
    buf.seek(0)
    assert torch.equal(torch.load(buf, map_location="cpu")["z"], z)
    assert torch.equal(copy.deepcopy(t).cpu(), z)


def test_compiled_rotary_embedding_and_complex_scalars():
    B, T, H, D = 2, 6, 3, 8
    x = make((B, T, H, D), torch.float32)
    freqs = rotary_freqs(D, T)
    compiled = torch.compile(rotary, backend="tpu")
    xd = x.to("tpu").requires_grad_()
    out = compiled(xd, freqs.to("tpu"))
    out.sum().backward()
    xc = x.clone().requires_grad_()
    expected = rotary(xc, freqs)
    expected.sum().backward()
    assert_close(out.detach(), expected.detach(), rtol=1e-5, atol=1e-5)
    assert_close(xd.grad, xc.grad, rtol=1e-5, atol=1e-5)

    z = make((5,))
    scaled = torch.compile(lambda v: torch.view_as_real(v.conj() * (1 + 2j)), backend="tpu")
    assert_close(scaled(z.to("tpu")), torch.view_as_real(z.conj() * (1 + 2j)))


# ---- logaddexp ----
# PyTorch's CPU kernel: max + log1p(exp(min - max)) by real part. Its
# imaginary part can cancel, so values compare as complex numbers (|error|
# against |value|): complex64 to 1e-6 (observed worst 1.8e-7), complex128
# to 1e-13 (observed 9.3e-15).
LOGADDEXP_TOLERANCES = {torch.complex64: dict(rtol=1e-6, atol=1e-6), torch.complex128: dict(rtol=1e-13, atol=1e-13)}


@pytest.mark.parametrize("dtype", COMPLEX)
def test_logaddexp(dtype):
    g = torch.Generator().manual_seed(5)
    n = 300
    # real parts from 1e-3 to 30 apart (the CPU's own complex64 kernel gives
    # NaN where exp(min - max) underflows, at about 88 apart)
    scale = torch.logspace(-3, 1.5, n, dtype=torch.float64)
    x = torch.complex(torch.randn(n, generator=g, dtype=torch.float64) * scale, torch.randn(n, generator=g, dtype=torch.float64) * 3)
    y = torch.complex(torch.randn(n, generator=g, dtype=torch.float64) * scale.flip(0), torch.randn(n, generator=g, dtype=torch.float64) * 3)
    x, y = x.to(dtype), y.to(dtype)
    tolerances = LOGADDEXP_TOLERANCES[dtype]
    check(torch.logaddexp, x, y, **tolerances)
    check(torch.logaddexp, x[:0], y[:0])
    check(torch.logaddexp, x[3], y[4], **tolerances)  # 0-d
    check(lambda a, b: torch.logaddexp(a.view(20, 15).mT, b.view(20, 15)[:, :1].mT), x, y, **tolerances)  # broadcast views
    check(lambda a, b: torch.logaddexp(a, b, out=a), x, y, **tolerances)  # into an operand
    check(lambda a, b, o: torch.logaddexp(a, b, out=o[::2]), x, y, torch.zeros(2 * n, dtype=dtype), **tolerances)
    real = torch.float32 if dtype == torch.complex64 else torch.float64
    check(torch.logaddexp, x, torch.randn(n, generator=g, dtype=real), **tolerances)  # promoted


@pytest.mark.parametrize("dtype", COMPLEX)
def test_logaddexp_special_values(dtype):
    # infinite and NaN real parts with finite imaginary ones match, zeros with
    # their signs; infinite imaginary parts are not covered (XLA's complex exp
    # and log1p have their own special values there)
    inf, nan = float("inf"), float("nan")
    z = torch.tensor([complex(a, b) for a in (0.0, -0.0, 1.0, -1.0, 2.5, inf, -inf, nan) for b in (0.0, -0.0, 1.0, -1.0, 2.5)],
                     dtype=dtype)
    i, j = torch.meshgrid(torch.arange(len(z)), torch.arange(len(z)), indexing="ij")
    x, y = z[i.flatten()], z[j.flatten()]
    expected, actual = torch.logaddexp(x, y), torch.logaddexp(x.to("tpu"), y.to("tpu"))
    # the CPU's complex64 rounds logaddexp(1j, -1j)'s zero imaginary part to 6e-8
    atol = 1e-7 if dtype == torch.complex64 else 0.0
    good = matching_parts(actual, expected, LOGADDEXP_TOLERANCES[dtype]["rtol"], atol=atol)
    bad = [(a, b, e, t) for a, b, e, t, ok in zip(x.tolist(), y.tolist(), expected.tolist(), actual.cpu().tolist(), good) if not ok]
    assert not bad, f"(x, y, cpu, tpu): {bad}"


@pytest.mark.parametrize("dtype", COMPLEX)
def test_logaddexp_backward(dtype):
    x, y, w = make((3, 5), dtype, seed=6), make((3, 5), dtype, seed=7), make((3, 5), dtype, seed=8)
    grads = []
    for dev in ("cpu", "tpu"):
        a, b = x.to(dev, copy=True).requires_grad_(), y.to(dev, copy=True).requires_grad_()
        (torch.logaddexp(a, b) * w.to(dev)).real.sum().backward()
        grads.append((a.grad, b.grad))
    loose = dict(rtol=1e-5, atol=1e-5) if dtype == torch.complex64 else dict(rtol=1e-12, atol=1e-12)
    assert_close(grads[1], grads[0], **loose)
