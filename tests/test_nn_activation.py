"""Activations on tpu against PyTorch's CPU results, forward and backward:
relu, threshold, gelu (exact and tanh), silu, sigmoid, tanh, softplus,
leaky_relu, elu/selu/celu, hardtanh/relu6, hardswish, hardsigmoid, mish,
logsigmoid, hardshrink, softshrink, prelu, glu, rrelu; every dtype CPU supports,
values on the kernels' boundaries, NaN, non-contiguous and empty inputs,
in-place variants on non-leaves, and the nn modules."""
import copy
import os
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from parity import assert_close, check  # noqa: E402

FLOATS = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
NAN = float("nan")

# Values where the kernels switch branch: 0, +-0.5 (shrink), +-1 (hardtanh,
# threshold), +-3 (hardswish/hardsigmoid), large ones (softplus threshold,
# saturating exp).
EDGES = [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 3.0, -3.0, 6.0, 20.0, 25.0, -30.0, 90.0, -90.0]


def make(shape, dtype, seed=0, scale=3.0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g, dtype=torch.float64) * scale
    flat = x.view(-1)
    n = min(len(EDGES), flat.numel())
    flat[:n] = torch.tensor(EDGES[:n], dtype=torch.float64)
    return x.to(dtype)


def check_grad(fn, *inputs, rtol=None, atol=None, seed=1):
    """fn's output and the gradients of every input, on CPU and on tpu, for
    a random upstream gradient."""
    cpu = [x.detach().clone().requires_grad_() for x in inputs]
    dev = [x.detach().to("tpu").requires_grad_() for x in inputs]
    expected, actual = fn(*cpu), fn(*dev)
    assert_close(actual, expected, rtol, atol)
    g = torch.randn(expected.shape, generator=torch.Generator().manual_seed(seed))
    g = g.to(expected.dtype)
    expected.backward(g)
    actual.backward(g.to("tpu"))
    for c, d in zip(cpu, dev):
        assert_close(d.grad, c.grad, rtol, atol)


ACTIVATIONS = {
    "relu": F.relu,
    "threshold": lambda x: F.threshold(x, 1.0, -2.0),
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "softplus": F.softplus,
    "softplus_beta": lambda x: F.softplus(x, beta=2.0, threshold=6.0),
    "leaky_relu": F.leaky_relu,
    "leaky_relu_slope": lambda x: F.leaky_relu(x, negative_slope=-0.3),
    "elu": F.elu,
    "elu_alpha": lambda x: F.elu(x, alpha=0.4),
    "selu": F.selu,
    "celu": lambda x: F.celu(x, alpha=1.5),
    "hardtanh": F.hardtanh,
    "hardtanh_bounds": lambda x: F.hardtanh(x, -0.5, 3.0),
    "relu6": F.relu6,
    "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid,
    "mish": F.mish,
    "logsigmoid": F.logsigmoid,
    "hardshrink": F.hardshrink,
    "softshrink": lambda x: F.softshrink(x, 1.0),
    "prelu": lambda x: F.prelu(x, torch.tensor([0.25], device=x.device, dtype=x.dtype)),
    "softsign": F.softsign,
    "tanhshrink": F.tanhshrink,
    "glu": lambda x: F.glu(x[..., :6]),
    "glu_dim0": lambda x: F.glu(x[:4], dim=0),
}

# float64 and float16 go through the same code as float32 and bfloat16;
# they are checked on the ops with transcendental functions.
WIDE_AND_HALF = ["gelu", "gelu_tanh", "silu", "softplus_beta", "elu", "mish", "logsigmoid",
                 "hardswish", "sigmoid", "tanh", "glu"]
DTYPE_CASES = ([(n, d) for n in sorted(ACTIVATIONS) for d in (torch.float32, torch.bfloat16)] +
               [(n, d) for n in WIDE_AND_HALF for d in (torch.float64, torch.float16)])


@pytest.mark.parametrize("name,dtype", DTYPE_CASES)
def test_activation_forward_backward(name, dtype):
    check_grad(ACTIVATIONS[name], make((5, 7), dtype))


@pytest.mark.parametrize("name", ["relu", "gelu_tanh", "softplus_beta", "elu", "hardtanh_bounds",
                                  "prelu", "logsigmoid", "glu_dim0"])
def test_activation_noncontiguous(name):
    fn = ACTIVATIONS[name]
    check_grad(lambda x: fn(x.transpose(0, 1)[::2]), make((6, 9), torch.float32, seed=3))


@pytest.mark.parametrize("name", ["relu", "gelu", "silu", "hardswish", "elu", "leaky_relu",
                                  "softplus", "logsigmoid"])
def test_activation_empty_and_0d(name):
    fn = ACTIVATIONS[name]
    check_grad(fn, make((0, 4), torch.float32))
    check_grad(fn, torch.tensor(-0.7))


# NaN in, NaN out: the clamping kernels must not drop it.
@pytest.mark.parametrize("name", ["relu", "hardtanh", "relu6", "hardsigmoid", "hardswish",
                                  "leaky_relu", "elu", "gelu", "silu", "softplus", "mish",
                                  "logsigmoid", "softshrink", "hardshrink", "threshold"])
def test_activation_nan(name):
    x = torch.tensor([NAN, 1.0, -1.0, NAN])
    out = check(ACTIVATIONS[name], x)
    assert torch.isnan(out.cpu()[0])


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.int8])
def test_integer_relu_hardtanh(dtype):
    x = torch.arange(-6, 6).to(dtype)
    check(F.relu, x)
    check(lambda x: F.hardtanh(x, -2, 3), x)
    check(lambda x: F.threshold(x, 1, 7), x)


# ---- in-place variants on non-leaves: backward reads the result ----

INPLACE = {
    "relu": lambda x: F.relu(x, inplace=True),
    "relu_method": lambda x: x.relu_(),
    "threshold": lambda x: F.threshold(x, 0.5, 0.0, inplace=True),
    "leaky_relu": lambda x: F.leaky_relu(x, 0.1, inplace=True),
    "elu": lambda x: F.elu(x, 0.7, inplace=True),
    "selu": lambda x: F.selu(x, inplace=True),
    "celu": lambda x: F.celu(x, 2.0, inplace=True),
    "hardtanh": lambda x: F.hardtanh(x, -2.0, 2.0, inplace=True),
    "relu6": lambda x: F.relu6(x, inplace=True),
    "hardswish": lambda x: F.hardswish(x, inplace=True),
    "hardsigmoid": lambda x: F.hardsigmoid(x, inplace=True),
    "silu": lambda x: F.silu(x, inplace=True),
    "mish": lambda x: F.mish(x, inplace=True),
    "sigmoid": lambda x: x.sigmoid_(),
    "tanh": lambda x: x.tanh_(),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", sorted(INPLACE))
def test_activation_inplace_on_nonleaf(name, dtype):
    fn = INPLACE[name]
    check_grad(lambda x: fn(x * 1.5), make((4, 6), dtype))


@pytest.mark.parametrize("name", ["relu", "leaky_relu", "hardtanh", "elu"])
def test_inplace_through_view(name):
    fn = INPLACE[name]

    def through_view(x):
        y = x * 1.0
        fn(y[:, 1:4:2])
        return y
    check_grad(through_view, make((4, 5), torch.float32, seed=4))


def test_leaky_relu_inplace_negative_slope_is_rejected():
    # PyTorch refuses in-place leaky_relu backward with a negative slope.
    x = make((3, 4), torch.float32).to("tpu").requires_grad_()
    y = F.leaky_relu(x * 1.0, -0.2, inplace=True)
    with pytest.raises(RuntimeError, match="negative slope"):
        y.sum().backward()


# ---- backward ops called directly ----

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_backward_ops_direct(dtype):
    g, x = make((4, 5), dtype, seed=7), make((4, 5), dtype, seed=8)
    y = torch.sigmoid(x)
    aten = torch.ops.aten
    check(lambda g, x: aten.threshold_backward(g, x, 0.5), g, x)
    check(lambda g, y: aten.sigmoid_backward(g, y), g, y)
    check(lambda g, y: aten.tanh_backward(g, y), g, torch.tanh(x))
    check(lambda g, x: aten.gelu_backward(g, x, approximate="tanh"), g, x)
    check(lambda g, x: aten.elu_backward(g, 1.0, 1.0507, 1.2, False, x), g, x)
    check(lambda g, y: aten.elu_backward(g, 1.0, 1.0, 1.0, True, y), g, F.elu(x))
    check(lambda g, x: aten.softplus_backward(g, x, 0.5, 2.0), g, x)
    check(lambda g, x: aten.hardtanh_backward(g, x, -1.0, 1.0), g, x)
    check(lambda g, x: aten.log_sigmoid_backward(g, x, torch.exp(-x.abs())), g, x)
    check(lambda g, x: aten.hardshrink_backward(g, x, 0.5), g, x)
    check(lambda g, x: aten.softshrink_backward(g, x, 0.5), g, x)


# Inside (0, 1), its edges, outside it and NaN: where logit and its backward
# switch between the formula, the eps clamp, 0, inf and NaN.
LOGIT_X = [0.3, 0.5, 0.97, 0.0, 1.0, 0.05, 0.95, -0.2, 1.3, NAN, 0.001, 0.62]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("eps", [None, 0.0, 0.05, 0.1])
def test_logit_forward_backward(eps, dtype):
    x = torch.tensor(LOGIT_X, dtype=dtype).reshape(3, 4)
    check_grad(lambda x: torch.logit(x, eps), x)
    check_grad(lambda x: torch.logit(x.t()[1:], eps), x)  # through a view


def test_logit_of_integers_is_float():
    check(torch.logit, torch.tensor([0, 1, 2]))
    check(lambda x: torch.logit(x, 0.25), torch.tensor([0, 1, 2], dtype=torch.int32))


def test_log_sigmoid_forward_buffer():
    check(lambda x: torch.ops.aten.log_sigmoid_forward(x), make((3, 4), torch.float32))


def test_glu_odd_dimension_is_rejected_and_module_matches():
    with pytest.raises(RuntimeError, match="even"):
        F.glu(torch.ones(3, 5, device="tpu"))
    check_grad(nn.GLU(dim=1), make((2, 6, 3), torch.float32))
    check_grad(F.glu, make((0, 4), torch.float32))


def test_gelu_rejects_unknown_approximation():
    with pytest.raises(RuntimeError, match="approximate"):
        F.gelu(torch.ones(3, device="tpu"), approximate="fast")


# ---- modules ----

MODULES = [
    lambda: nn.GELU(approximate="tanh"),
    lambda: nn.ReLU(inplace=True),
    lambda: nn.SiLU(inplace=True),
    lambda: nn.Softplus(beta=2.0, threshold=5.0),
    lambda: nn.LeakyReLU(0.2, inplace=True),
    lambda: nn.ELU(alpha=0.5, inplace=True),
    lambda: nn.Hardtanh(-0.3, 0.4),
    lambda: nn.Tanh(),
    lambda: nn.Threshold(0.1, 20.0),
]


@pytest.mark.parametrize("make_module", MODULES, ids=lambda m: repr(m()))
def test_module_after_linear(make_module):
    """A linear layer then the activation, so in-place modules act on a
    non-leaf; compares the output and the layer's parameter gradients."""
    torch.manual_seed(0)
    cpu = nn.Sequential(nn.Linear(6, 8), make_module())
    dev = copy.deepcopy(cpu).to("tpu")
    x = make((5, 6), torch.float32, seed=5, scale=1.0)
    expected, actual = cpu(x), dev(x.to("tpu"))
    assert_close(actual, expected)
    expected.pow(2).sum().backward()
    actual.pow(2).sum().backward()
    # Saturating derivatives (1 - tanh^2) magnify the forward's last-ulp
    # differences (XLA's tanh is within ~2 ulp), hence 1e-4.
    for pc, pd in zip(cpu.parameters(), dev.parameters()):
        assert_close(pd.grad, pc.grad, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_prelu_channels(dtype):
    """PReLU with one slope per channel: the weight's gradient is summed
    over the other dims."""
    w = torch.tensor([0.1, -0.2, 0.3, 0.25], dtype=dtype)
    check_grad(lambda x, w: F.prelu(x, w), make((2, 4, 3, 3), dtype, seed=6), w)
    module = nn.PReLU(4).to(dtype)
    dev = copy.deepcopy(module).to("tpu")
    x = make((3, 4, 5), dtype, seed=2)
    assert_close(dev(x.to("tpu")), module(x))
    module(x).sum().backward()
    dev(x.to("tpu")).sum().backward()
    assert_close(dev.weight.grad, module.weight.grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_rrelu_evaluation(dtype):
    """Out of training the slope is (lower + upper) / 2: a leaky relu."""
    check_grad(lambda x: F.rrelu(x, 0.1, 0.3, training=False), make((4, 6), dtype))
    check_grad(lambda x: nn.RReLU().eval()(x.t()), make((6, 4), dtype))  # a view
    check(lambda x: F.rrelu_(x, training=False), make((3, 5), dtype))
    check(lambda x: F.rrelu(x, training=False), torch.zeros(0, 3, dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_rrelu_training(dtype):
    """Each element <= 0 takes its own slope from [lower, upper), the others
    stay; the gradient is that slope (1 above 0); a seed draws them again.
    (The draws are the tpu generator's, not the CPU's.)"""
    x = make((64, 64), dtype, seed=2).to("tpu").requires_grad_()
    torch.manual_seed(0)
    y = F.rrelu(x, 0.1, 0.3, training=True)
    y.backward(torch.ones_like(y))
    negative = x.detach() <= 0
    slopes = (y.detach() / x.detach())[negative & (x.detach() != 0)].cpu()
    assert slopes.min() >= 0.1 and slopes.max() < 0.3 and slopes.std() > 0.04  # spread over the range
    assert torch.equal(y.detach()[~negative].cpu(), x.detach()[~negative].cpu())
    assert_close(x.grad[negative & (x.detach() != 0)], slopes, 1e-6, 1e-6)
    assert (x.grad[~negative] == 1).all()
    torch.manual_seed(0)
    assert torch.equal(F.rrelu(x.detach(), 0.1, 0.3, training=True).cpu(), y.detach().cpu())
    z = x.detach().clone()
    F.rrelu_(z, 0.1, 0.3, training=True)  # in place
    assert ((z / x.detach())[negative & (x.detach() != 0)].cpu() >= 0.1).all()
