"""Normalizations on tpu against PyTorch's CPU results, forward and backward:
batch norm (training with running-stat updates, evaluation, the ATen forms
torch.compile and export use), layer norm, group norm, rms norm, weight
norm, and their nn modules over several steps."""
import copy
import os
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from parity import assert_close, check, programs_run  # noqa: E402

A = torch.ops.aten
# Normalization gradients sum over many elements: bfloat16 needs more room.
GRAD_TOL = {torch.float32: (1e-5, 1e-4), torch.float64: (1e-7, 1e-7), torch.bfloat16: (5e-2, 5e-2)}


def make(shape, dtype=torch.float32, seed=0, positive=False):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
    return (x.abs() + 0.5 if positive else x).to(dtype)


def check_grad(fn, *inputs, seed=1, rtol=None, atol=None):
    """fn on CPU leaves and on tpu copies (None entries stay None): outputs
    and, after backward with one random upstream gradient, every grad."""
    cpu = [x.detach().clone().requires_grad_(x.is_floating_point()) if x is not None else None
           for x in inputs]
    dev = [x.detach().to("tpu").requires_grad_(x.is_floating_point()) if x is not None else None
           for x in inputs]
    expected, actual = fn(*cpu), fn(*dev)
    assert_close(actual, expected, rtol, atol)
    g = make(expected.shape, expected.dtype, seed)
    expected.backward(g)
    actual.backward(g.to("tpu"))
    r, a = GRAD_TOL.get(expected.dtype, (rtol, atol))
    for c, d in zip(cpu, dev):
        if c is not None:
            assert_close(d.grad, c.grad, r if rtol is None else rtol, a if atol is None else atol)


# ---- batch norm ----

@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5), (2, 3, 4, 5), (1, 3, 4, 4), (2, 3, 2, 2, 3)])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm(shape, training):
    mean, var = make(3, seed=5), make(3, seed=6, positive=True)
    check_grad(lambda x, w, b: F.batch_norm(x, mean.to(x.device), var.to(x.device), w, b,
                                            training=training, momentum=0.2, eps=1e-3),
               make(shape), make(3, seed=2), make(3, seed=3))


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_dtypes(dtype, training):
    mean, var = make(4, dtype, 5), make(4, dtype, 6, positive=True)
    check_grad(lambda x, w, b: F.batch_norm(x, mean.to(x.device), var.to(x.device), w, b,
                                            training=training),
               make((3, 4, 5), dtype), make(4, dtype, 2), make(4, dtype, 3))


def test_batch_norm_without_affine_or_stats():
    check_grad(lambda x: F.batch_norm(x, None, None, training=True), make((5, 4, 3)))
    # Only the weight asks for a gradient: the others come back as None.
    check_grad(lambda w: F.batch_norm(make((5, 4, 3)).to(w.device), None, None, w, training=True),
               make(4, seed=2))


def test_batch_norm_non_contiguous():
    check_grad(lambda x, w: F.batch_norm(x.transpose(0, 2), None, None, w, training=True),
               make((5, 4, 6)), make(4, seed=2))


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_running_stats(training):
    """Running stats are written in place by the forward, with momentum and
    the unbiased batch variance."""
    def fn(x, mean, var):
        return F.batch_norm(x, mean, var, training=training, momentum=0.3)
    check(fn, make((4, 3, 5)), make(3, seed=1), make(3, seed=2, positive=True))


@pytest.mark.parametrize("op,args", [
    (A._native_batch_norm_legit, (True, 0.1, 1e-5)),
    (A._native_batch_norm_legit, (False, 0.1, 1e-5)),
    (A._native_batch_norm_legit_no_training, (0.1, 1e-5)),
    (A._batch_norm_with_update, (0.4, 1e-5)),
])
def test_batch_norm_aten_forms_with_stats(op, args):
    """The forms torch.compile and export produce: running stats come first
    when mutated, and match the CPU after the call."""
    x, w, b = make((4, 3, 5)), make(3, seed=1), make(3, seed=2)
    mean, var = make(3, seed=3), make(3, seed=4, positive=True)
    cpu = [t.clone() for t in (x, w, b, mean, var)]
    dev = [t.to("tpu") for t in (x, w, b, mean, var)]
    expected, actual = op(*cpu, *args), op(*dev, *args)
    assert_close(actual[0], expected[0])
    for k in (1, 2):  # saved statistics: evaluation forms keep none on the CPU
        if expected[k].numel():
            assert_close(actual[k], expected[k])
    assert_close(dev[3], cpu[3])
    assert_close(dev[4], cpu[4])


def test_batch_norm_legit_no_stats():
    check(lambda x, w, b: A._native_batch_norm_legit.no_stats(x, w, b, True, 0.1, 1e-5),
          make((4, 3, 5)), make(3, seed=1), make(3, seed=2))


@pytest.mark.parametrize("mask", [[True, True, True], [True, False, False], [False, True, True],
                                  [False, False, True]])
@pytest.mark.parametrize("train", [True, False])
def test_batch_norm_backward_aten(mask, train):
    x, g, w = make((4, 3, 5)), make((4, 3, 5), seed=1), make(3, seed=2)
    mean, var = make(3, seed=3), make(3, seed=4, positive=True)
    save_mean, save_invstd = x.mean((0, 2)), (x.var((0, 2), unbiased=False) + 1e-5).rsqrt()
    args = (g, x, w, mean, var, save_mean, save_invstd, train, 1e-5, mask)
    expected = A.native_batch_norm_backward(*args)
    actual = A.native_batch_norm_backward(*[a.to("tpu") if isinstance(a, torch.Tensor) else a
                                            for a in args])
    reserve = torch.empty(0, dtype=torch.uint8)
    actual_new = A.batch_norm_backward(*[a.to("tpu") if isinstance(a, torch.Tensor) else a
                                         for a in args + (reserve,)])
    for e, a, n in zip(expected, actual, actual_new):
        assert (a is None) == (e is None) == (n is None)
        if e is not None:
            assert_close(a, e, *GRAD_TOL[torch.float32])
            assert_close(n, e, *GRAD_TOL[torch.float32])


@pytest.mark.parametrize("momentum", [0.1, None])
def test_batch_norm2d_module_steps(momentum):
    """nn.BatchNorm2d trained a few steps (running stats and weights), then
    evaluated."""
    torch.manual_seed(0)
    cpu = nn.BatchNorm2d(3, momentum=momentum)
    dev = copy.deepcopy(cpu).to("tpu")
    opt_c = torch.optim.SGD(cpu.parameters(), lr=0.1)
    opt_d = torch.optim.SGD(dev.parameters(), lr=0.1)
    for step in range(3):
        x = make((4, 3, 5, 5), seed=step) * (step + 1)
        g = make((4, 3, 5, 5), seed=10 + step)
        for m, opt, t in ((cpu, opt_c, x), (dev, opt_d, x.to("tpu"))):
            opt.zero_grad()
            m(t).backward(g.to(t.device))
            opt.step()
    for name in ("running_mean", "running_var", "weight", "bias"):
        assert_close(getattr(dev, name).detach(), getattr(cpu, name).detach(), 1e-5, 1e-5)
    assert dev.num_batches_tracked.item() == cpu.num_batches_tracked.item() == 3
    cpu.eval(), dev.eval()
    x = make((2, 3, 5, 5), seed=7)
    assert_close(dev(x.to("tpu")), cpu(x))


def test_batch_norm1d_module():
    torch.manual_seed(0)
    cpu = nn.BatchNorm1d(4)
    dev = copy.deepcopy(cpu).to("tpu")
    check_grad(lambda x: (cpu if x.device.type == "cpu" else dev)(x), make((6, 4, 3)))
    assert_close(dev.running_var, cpu.running_var)


# ---- layer norm ----

LAYER_CASES = ([(shape, normalized, "both") for shape, normalized in
                [((2, 3, 5), (5,)), ((2, 3, 4, 5), (4, 5)), ((7,), (7,)), ((1, 6), (6,)),
                 ((3, 4), (3, 4))]] +
               [((2, 3, 5), (5,), affine) for affine in ("weight", "bias", "none")])


@pytest.mark.parametrize("shape,normalized,affine", LAYER_CASES)
def test_layer_norm(shape, normalized, affine):
    w = make(normalized, seed=2) if affine in ("both", "weight") else None
    b = make(normalized, seed=3) if affine in ("both", "bias") else None
    check_grad(lambda x, w, b: F.layer_norm(x, normalized, w, b, eps=1e-4), make(shape), w, b)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_layer_norm_dtypes(dtype):
    check_grad(lambda x, w, b: F.layer_norm(x, (6,), w, b), make((3, 4, 6), dtype),
               make(6, dtype, 2), make(6, dtype, 3))


def test_layer_norm_non_contiguous_and_empty():
    check_grad(lambda x, w: F.layer_norm(x.transpose(0, 1), (4,), w), make((5, 3, 4)),
               make(4, seed=2))
    check_grad(lambda x, w: F.layer_norm(x, (4,), w), make((0, 4)), make(4, seed=2))


def test_layer_norm_weight_grad_only():
    x = make((3, 5))
    check_grad(lambda w, b: F.layer_norm(x.to(w.device), (5,), w, b), make(5, seed=2),
               make(5, seed=3))


def test_layer_norm_module():
    torch.manual_seed(0)
    cpu = nn.LayerNorm((4, 6))
    nn.init.normal_(cpu.weight), nn.init.normal_(cpu.bias)
    dev = copy.deepcopy(cpu).to("tpu")
    x, g = make((2, 3, 4, 6)), make((2, 3, 4, 6), seed=1)
    cpu(x).backward(g), dev(x.to("tpu")).backward(g.to("tpu"))
    assert_close(dev.weight.grad, cpu.weight.grad, *GRAD_TOL[torch.float32])
    assert_close(dev.bias.grad, cpu.bias.grad, *GRAD_TOL[torch.float32])


# ---- group norm ----

@pytest.mark.parametrize("shape,groups", [((2, 6), 3), ((2, 6, 5), 1), ((3, 6, 4, 3), 3),
                                          ((3, 6, 4, 3), 6), ((1, 6, 2, 2, 2), 2)])
def test_group_norm(shape, groups):
    check_grad(lambda x, w, b: F.group_norm(x, groups, w, b, eps=1e-4), make(shape),
               make(6, seed=2), make(6, seed=3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_group_norm_without_affine(dtype):
    check_grad(lambda x: F.group_norm(x, 2), make((2, 4, 5), dtype))


def test_group_norm_empty_batch_and_half_types():
    check_grad(lambda x, w, b: F.group_norm(x, 2, w, b), make((0, 4, 3)), make(4, seed=2), make(4, seed=3))
    for dtype in (torch.bfloat16, torch.float16):
        check(lambda x: torch.ops.aten.native_group_norm(x, None, None, 2, 6, 4, 3, 1e-5), make((2, 6, 4), dtype))
    # The statistics come out in float32, as PyTorch's meta kernel (and CUDA)
    # gives them, where the CPU keeps float16.
    check(lambda x: torch.ops.aten.native_layer_norm(x, (4,), None, None, 1e-5), make((3, 4), torch.float16),
          exact_dtype=False)
    assert torch.ops.aten.native_layer_norm(make((3, 4), torch.float16).to("tpu"), (4,), None, None,
                                            1e-5)[1].dtype == torch.float32


def test_layer_and_group_norm_forwards_are_one_program():
    # PyTorch's composite kernels, which would otherwise win over the fallback,
    # run two (layer norm) and seven (group norm) programs.
    x, w, b = make((2, 4, 6)).to("tpu"), make(6).to("tpu"), make(6, seed=1).to("tpu")
    assert programs_run(lambda: F.layer_norm(x, (6,), w, b)) == 1
    x, w, b = make((2, 4, 3, 3)).to("tpu"), make(4).to("tpu"), make(4, seed=1).to("tpu")
    assert programs_run(lambda: F.group_norm(x, 2, w, b)) == 1


def test_native_forms_return_their_statistics():
    x = make((2, 6, 5))
    check(lambda x: torch.ops.aten.native_layer_norm(x, (6, 5), None, None, 1e-3), x)
    check(lambda x, w: torch.ops.aten.native_group_norm(x, w, None, 2, 6, 5, 3, 1e-3), x, make(6, seed=1))
    with pytest.raises(RuntimeError, match="group"):
        torch.ops.aten.native_group_norm(x.to("tpu"), None, None, 2, 6, 5, 4, 1e-5)


def test_group_norm_module():
    torch.manual_seed(0)
    cpu = nn.GroupNorm(2, 4)
    nn.init.normal_(cpu.weight), nn.init.normal_(cpu.bias)
    dev = copy.deepcopy(cpu).to("tpu")
    x, g = make((3, 4, 5, 5)), make((3, 4, 5, 5), seed=1)
    xc, xd = x.clone().requires_grad_(), x.to("tpu").requires_grad_()
    cpu(xc).backward(g), dev(xd).backward(g.to("tpu"))
    assert_close(xd.grad, xc.grad, *GRAD_TOL[torch.float32])
    assert_close(dev.weight.grad, cpu.weight.grad, *GRAD_TOL[torch.float32])
    assert_close(dev.bias.grad, cpu.bias.grad, *GRAD_TOL[torch.float32])


# ---- rms norm ----

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("affine", [True, False])
def test_rms_norm(dtype, affine):
    w = make((4, 5), dtype, 2) if affine else None
    check_grad(lambda x, w: F.rms_norm(x, (4, 5), w), make((3, 4, 5), dtype), w)
    check_grad(lambda x, w: F.rms_norm(x, (5,), w[0] if w is not None else None, eps=1e-3),
               make((3, 4, 5), dtype), w)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_rms_norm_half_types_default_eps(dtype):
    # Without eps, the compute dtype's (float32's) epsilon, as PyTorch takes it.
    check_grad(lambda x, w: F.rms_norm(x, (6,), w), make((2, 3, 6), dtype) * 1e-3, make(6, dtype, 2),
               rtol=1e-2, atol=1e-2)


def test_rms_norm_non_contiguous_and_empty():
    check_grad(lambda x, w: F.rms_norm(x.transpose(0, 1), (4,), w), make((5, 3, 4)), make(4, seed=2))
    check_grad(lambda x, w: F.rms_norm(x, (4,), w), make((0, 4)), make(4, seed=2))
    check_grad(lambda x: F.rms_norm(x, (4,)), make((3, 4)).expand(2, 3, 4))


def test_rms_norm_double_backward():
    def weight_grad_of_input_grad(x, w):
        x, w = x.detach().requires_grad_(), w.detach().requires_grad_()
        (gx,) = torch.autograd.grad((F.rms_norm(x, (5,), w) ** 2).sum(), x, create_graph=True)
        return torch.autograd.grad(gx.sum(), w)[0]

    check(weight_grad_of_input_grad, make((3, 5)), make(5, seed=1), rtol=1e-4, atol=1e-5)


def test_rms_norm_is_one_program_each_way():
    # PyTorch's composite rms_norm runs six programs forward and about a
    # dozen backward on devices other than CUDA.
    x, w = make((2, 4, 6)).to("tpu").requires_grad_(), make(6, seed=1).to("tpu").requires_grad_()
    assert programs_run(lambda: F.rms_norm(x, (6,), w)) == 1
    y = F.rms_norm(x, (6,), w)
    assert type(y.grad_fn).__name__ == "FusedRmsNormBackward0"
    g = torch.ones_like(y)
    assert programs_run(lambda: y.backward(g)) == 1
    with torch.inference_mode():
        assert programs_run(lambda: F.rms_norm(x, (6,), w)) == 1
        check(lambda x, w: F.rms_norm(x, (6,), w, eps=1e-2), make((2, 6)), make(6, seed=1))


def test_rms_norm_bad_shapes_name_them():
    x = make((3, 5)).to("tpu")
    with pytest.raises(RuntimeError, match=r"normalized_shape=\[4\].*size\[3, 5\]"):
        F.rms_norm(x, (4,))
    with pytest.raises(RuntimeError, match=r"weight of shape \[4\]"):
        F.rms_norm(x, (5,), make(4).to("tpu"))
    assert_close(F.rms_norm(x, (5,)), F.rms_norm(x.cpu(), (5,)))


def test_rms_norm_module():
    torch.manual_seed(0)
    cpu = nn.RMSNorm(6)
    nn.init.normal_(cpu.weight)
    dev = copy.deepcopy(cpu).to("tpu")
    check_grad(lambda x: (cpu if x.device.type == "cpu" else dev)(x), make((2, 3, 6)))
    assert_close(dev.weight.grad, cpu.weight.grad, *GRAD_TOL[torch.float32])


# ---- weight norm ----


@pytest.mark.parametrize("shape,dim", [((6, 4), 0), ((6, 4), 1), ((8, 3, 5), 0), ((8, 3, 5), 2), ((4, 2, 3, 3), 0)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_weight_norm_interface(shape, dim, dtype):
    v = make(shape, dtype)
    g_shape = [s if d == dim else 1 for d, s in enumerate(shape)]
    g = make(g_shape, dtype, seed=2, positive=True)
    check_grad(lambda v, g: torch._weight_norm(v, g, dim), v, g)
    check(lambda v, g: torch._weight_norm_interface(v, g, dim), v, g)


def test_weight_norm_parametrization_trains():
    # wav2vec2's positional convolution: weight_norm over the kernel dim.
    torch.manual_seed(0)
    conv = nn.utils.parametrizations.weight_norm(nn.Conv1d(4, 4, 3, padding=1, groups=2), name="weight", dim=2)
    tpu_conv = copy.deepcopy(conv).to("tpu")
    x = make((2, 4, 9))
    for module, inp in ((conv, x), (tpu_conv, x.to("tpu"))):
        opt = torch.optim.SGD(module.parameters(), lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            module(inp).pow(2).sum().backward()
            opt.step()
    for (name, p), q in zip(conv.named_parameters(), tpu_conv.parameters()):
        assert_close(q, p, rtol=1e-5, atol=1e-5)
