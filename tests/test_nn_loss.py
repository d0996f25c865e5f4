"""Losses on tpu against PyTorch's CPU results, forward and backward:
cross_entropy (class-index and probability targets, weights, ignore_index,
label smoothing, 1-D to 5-D inputs), nll_loss, mse_loss, l1_loss,
smooth_l1_loss, huber_loss, binary_cross_entropy and its logits form,
multi_margin_loss, multilabel_margin_loss and ctc_loss; every
reduction, float dtypes CPU supports, non-contiguous and empty inputs, and
the nn modules."""
import os
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from parity import assert_close, check, programs_run  # noqa: E402

REDUCTIONS = ["none", "mean", "sum"]
NAN = float("nan")


def gen(seed):
    return torch.Generator().manual_seed(seed)


def randn(shape, dtype=torch.float32, seed=0):
    return torch.randn(shape, generator=gen(seed)).to(dtype)


def targets(shape, classes, ignore=None, seed=1):
    """Class indices; every third one is `ignore` when given."""
    t = torch.randint(0, classes, shape, generator=gen(seed))
    if ignore is not None:
        t.view(-1)[::3] = ignore
    return t


def check_grad(fn, inputs, consts=(), rtol=None, atol=None):
    """fn(*inputs, *consts) and the gradients of `inputs`, on CPU and on
    tpu, for a random upstream gradient."""
    cpu = [x.detach().clone().requires_grad_() for x in inputs]
    dev = [x.detach().to("tpu").requires_grad_() for x in inputs]
    expected = fn(*cpu, *consts)
    actual = fn(*dev, *[c.to("tpu") if isinstance(c, torch.Tensor) else c for c in consts])
    assert_close(actual, expected, rtol, atol)
    g = torch.randn(expected.shape, generator=gen(9)).to(expected.dtype)
    expected.backward(g)
    actual.backward(g.to("tpu"))
    for c, d in zip(cpu, dev):
        assert_close(d.grad, c.grad, rtol, atol)


# ---- cross_entropy with class-index targets (log_softmax + nll_loss) ----

# (input shape, target shape): unbatched, 2-D (nll_loss), 4-D (nll_loss2d),
# 3-D and 5-D (reshaped to nll_loss2d), batch of 1.
CE_SHAPES = [((5,), ()), ((6, 5), (6,)), ((2, 5, 3, 4), (2, 3, 4)), ((2, 5, 7), (2, 7)),
             ((2, 4, 2, 3, 2), (2, 2, 3, 2)), ((1, 3), (1,))]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shapes", CE_SHAPES, ids=lambda s: "x".join(map(str, s[0])) or "0d")
def test_cross_entropy_shapes(shapes, reduction):
    x_shape, t_shape = shapes
    classes = x_shape[0] if len(x_shape) == 1 else x_shape[1]
    t = targets(t_shape, classes, ignore=None if t_shape == () else -100)
    check_grad(lambda x, t: F.cross_entropy(x, t, reduction=reduction), [randn(x_shape)], [t])


# weight, ignore_index, label_smoothing in combination, 2-D and 4-D.
CE_OPTIONS = [dict(), dict(weight=True), dict(ignore_index=2), dict(weight=True, ignore_index=1),
              dict(label_smoothing=0.2), dict(label_smoothing=0.1, ignore_index=0)]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("opts", CE_OPTIONS, ids=str)
@pytest.mark.parametrize("rank", [2, 4])
def test_cross_entropy_options(rank, opts, reduction):
    x_shape, t_shape = ((7, 4), (7,)) if rank == 2 else ((2, 4, 3, 3), (2, 3, 3))
    kw = dict(opts, reduction=reduction)
    consts = [targets(t_shape, 4, ignore=kw.get("ignore_index"))]
    if kw.pop("weight", False):
        consts.append(torch.tensor([0.5, 2.0, 1.0, 0.25]))
        check_grad(lambda x, t, w: F.cross_entropy(x, t, weight=w, **kw), [randn(x_shape)], consts)
    else:
        check_grad(lambda x, t: F.cross_entropy(x, t, **kw), [randn(x_shape)], consts)


# Label smoothing with class weights and mean reduction goes through
# aten::masked_select (one sync to count the kept targets).
def test_cross_entropy_weight_label_smoothing_mean():
    w = torch.tensor([0.5, 2.0, 1.0, 0.25])
    check_grad(lambda x, t, w: F.cross_entropy(x, t, weight=w, label_smoothing=0.1),
               [randn((7, 4))], [targets((7,), 4, ignore=-100), w])


@pytest.mark.parametrize("reduction", ["none", "sum"])
def test_cross_entropy_weight_label_smoothing(reduction):
    w = torch.tensor([0.5, 2.0, 1.0, 0.25])
    kw = dict(label_smoothing=0.1, reduction=reduction)
    check_grad(lambda x, t, w: F.cross_entropy(x, t, weight=w, **kw),
               [randn((7, 4))], [targets((7,), 4, ignore=-100), w])


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float16])
def test_cross_entropy_dtypes(dtype):
    w = torch.tensor([0.5, 2.0, 1.0, 0.25, 1.5]).to(dtype)
    check_grad(lambda x, t, w: F.cross_entropy(x, t, weight=w, ignore_index=3),
               [randn((6, 5), dtype)], [targets((6,), 5), w])
    check_grad(lambda x, t: F.cross_entropy(x, t, reduction="none"),
               [randn((2, 5, 3, 2), dtype)], [targets((2, 3, 2), 5, ignore=-100)])


def test_cross_entropy_all_ignored_mean_is_nan():
    t = torch.full((4,), -100)
    out = check(lambda x, t: F.cross_entropy(x, t), randn((4, 3)), t)
    assert torch.isnan(out.cpu())


def test_cross_entropy_empty_batch():
    check_grad(lambda x, t: F.cross_entropy(x, t, reduction="sum"), [randn((0, 4))],
               [torch.zeros(0, dtype=torch.long)])
    check(lambda x, t: F.cross_entropy(x, t), randn((0, 4)), torch.zeros(0, dtype=torch.long))


def test_cross_entropy_noncontiguous():
    x = randn((5, 8))
    t = targets((8,), 5, ignore=-100)
    check_grad(lambda x, t: F.cross_entropy(x.t(), t), [x], [t])
    x4 = randn((2, 3, 4, 6))
    check_grad(lambda x, t: F.cross_entropy(x.permute(0, 3, 1, 2)[:, ::2], t), [x4],
               [targets((2, 3, 4), 3)])


def test_cross_entropy_large_logits():
    # log_softmax gives -inf-free but very negative values: no NaN in the picks.
    x = torch.tensor([[1000.0, -1000.0, 0.0], [-1e30, 0.0, 1e30]])
    check_grad(lambda x, t: F.cross_entropy(x, t, reduction="none"), [x], [torch.tensor([1, 0])])


# ---- cross_entropy with probability targets (a composite) ----

@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("opts", [dict(), dict(label_smoothing=0.3), dict(weight=True)], ids=str)
def test_cross_entropy_probability_targets(opts, reduction):
    kw = dict(opts, reduction=reduction)
    w = [torch.tensor([0.5, 2.0, 1.0, 0.25])] if kw.pop("weight", False) else []
    for x_shape in [(6, 4), (2, 4, 3, 2)]:
        p = torch.softmax(randn(x_shape, seed=3), 1)
        check_grad(lambda x, p, *w: F.cross_entropy(x, p, *w, **kw), [randn(x_shape), p], w)


# ---- nll_loss called directly ----

@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss(reduction):
    w = torch.tensor([1.0, 0.0, 2.0, 0.5, 3.0])
    check_grad(lambda x, t, w: F.nll_loss(F.log_softmax(x, 1), t, weight=w, ignore_index=4,
                                          reduction=reduction),
               [randn((9, 5))], [targets((9,), 5), w])
    check_grad(lambda x, t: F.nll_loss(x, t, reduction=reduction), [randn((5,))], [torch.tensor(2)])


# An ignored target adds exactly nothing, even where self holds -inf or NaN
# at the ignored class (CPU skips it; a product with weight 0 would be NaN).
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss_ignored_entries_with_inf(reduction):
    x = randn((6, 4))
    x[0, 1], x[3, 1], x[4, 2] = -float("inf"), NAN, float("inf")
    t = torch.tensor([1, 0, 2, 1, 3, 1])
    check(lambda x, t: F.nll_loss(x, t, ignore_index=1, reduction=reduction), x, t)
    check(lambda x, t, w: F.nll_loss(x, t, weight=w, ignore_index=1, reduction=reduction), x, t,
          torch.tensor([0.5, 2.0, 1.0, 0.25]))


# CPU's nll_loss accepts uint8 class indices too (PyTorch's meta kernel,
# which gives tpu its output types, does not; the glue works around that).
def test_nll_loss_byte_targets():
    t = targets((6,), 4).to(torch.uint8)
    check_grad(lambda x, t: F.nll_loss(x, t, ignore_index=1), [randn((6, 4))], [t])
    check_grad(lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1), [randn((6, 4))], [t])


# CPU's nll_loss2d (targets with spatial dims) rejects uint8; so does tpu.
def test_nll_loss2d_byte_targets_are_rejected():
    x, t = randn((2, 4, 3)), targets((2, 3), 4).to(torch.uint8)
    with pytest.raises(RuntimeError, match="Long but found Byte"):
        F.cross_entropy(x, t)
    with pytest.raises(RuntimeError, match="int32/int64"):
        F.cross_entropy(x.to("tpu"), t.to("tpu")).cpu()  # fused mode reports it at the sync


def test_nll_loss_total_weight_outputs():
    x, t, w = randn((6, 4)), targets((6,), 4, ignore=-100), torch.tensor([0.5, 2.0, 1.0, 0.25])
    for reduction in range(3):
        check(lambda x, t, w: torch.ops.aten.nll_loss_forward(x, t, w, reduction, -100), x, t, w)
        check(lambda x, t: torch.ops.aten.nll_loss2d_forward(x, t, None, reduction, 1),
              randn((2, 4, 3, 2)), targets((2, 3, 2), 4))


def test_cross_entropy_module():
    w = torch.tensor([0.5, 2.0, 1.0, 0.25, 1.0])
    kw = dict(ignore_index=2, label_smoothing=0.15, reduction="sum")
    cpu, dev = nn.CrossEntropyLoss(weight=w, **kw), nn.CrossEntropyLoss(weight=w.to("tpu"), **kw)
    x, t = randn((8, 5)), targets((8,), 5)
    xc, xd = x.clone().requires_grad_(), x.to("tpu").requires_grad_()
    expected, actual = cpu(xc, t), dev(xd, t.to("tpu"))
    assert_close(actual, expected)
    expected.backward()
    actual.backward()
    assert_close(xd.grad, xc.grad)
    plain = nn.CrossEntropyLoss(ignore_index=1)
    check_grad(lambda x, t: plain(x, t), [randn((3, 5, 4))], [targets((3, 4), 5)])


# ---- pointwise regression losses ----

POINTWISE = {
    "mse": F.mse_loss,
    "l1": F.l1_loss,
    "smooth_l1": F.smooth_l1_loss,
    "smooth_l1_beta": lambda x, y, **kw: F.smooth_l1_loss(x, y, beta=0.5, **kw),
    "smooth_l1_beta0": lambda x, y, **kw: F.smooth_l1_loss(x, y, beta=0.0, **kw),
    "huber": F.huber_loss,
    "huber_delta": lambda x, y, **kw: F.huber_loss(x, y, delta=0.3, **kw),
}


def pair(shape, dtype, seed=0):
    """Input and target with some differences exactly 0, +-0.5, +-1 (the
    beta/delta boundaries)."""
    x, y = randn(shape, torch.float64, seed), randn(shape, torch.float64, seed + 1)
    d = torch.tensor([0.0, 0.5, -0.5, 1.0, -1.0], dtype=torch.float64)
    n = min(5, x.numel())
    x.view(-1)[:n] = y.view(-1)[:n] + d[:n]
    return x.to(dtype), y.to(dtype)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", sorted(POINTWISE))
def test_pointwise_loss(name, reduction):
    x, y = pair((4, 6), torch.float32)
    check_grad(lambda x, y: POINTWISE[name](x, y, reduction=reduction), [x, y])


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", sorted(POINTWISE))
def test_pointwise_loss_dtypes(name, dtype):
    x, y = pair((3, 5), dtype, seed=4)
    check_grad(lambda x, y: POINTWISE[name](x, y, reduction="mean"), [x, y])


@pytest.mark.parametrize("name", ["mse", "smooth_l1", "huber"])
def test_pointwise_loss_noncontiguous_broadcast_empty(name):
    fn = POINTWISE[name]
    x, y = pair((6, 4), torch.float32, seed=2)
    check_grad(lambda x, y: fn(x.t()[:, ::2], y[::2].t(), reduction="mean"), [x, y])
    with pytest.warns(UserWarning, match="target size"):
        check_grad(lambda x, y: fn(x, y, reduction="sum"), [randn((3, 1, 4))],
                   [randn((5, 4), seed=1)])
    check(lambda x, y: fn(x, y), randn((0, 3)), randn((0, 3)))  # mean of nothing: nan
    check_grad(lambda x, y: fn(x, y, reduction="sum"), [randn((0, 3)), randn((0, 3))])


@pytest.mark.parametrize("module", [nn.MSELoss(), nn.L1Loss(reduction="sum"),
                                    nn.SmoothL1Loss(beta=0.7),
                                    nn.HuberLoss(delta=2.0, reduction="none")], ids=repr)
def test_pointwise_loss_module(module):
    x, y = pair((2, 3, 4), torch.float32, seed=5)
    check_grad(lambda x, y: module(x, y), [x, y])


# ---- binary cross entropy ----

def probs(shape, dtype=torch.float32, seed=0):
    return torch.rand(shape, generator=gen(seed)).clamp(0.02, 0.98).to(dtype)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_cross_entropy(weighted, reduction):
    x, y = probs((4, 5)), probs((4, 5), seed=1)
    w = [torch.rand(5, generator=gen(2))] if weighted else []
    check_grad(lambda x, y, *w: F.binary_cross_entropy(x, y, *w, reduction=reduction), [x], [y] + w)


# The target's gradient is -logit(input) (times the upstream gradient).
def test_binary_cross_entropy_target_grad():
    check_grad(lambda x, y: F.binary_cross_entropy(x, y), [probs((4, 5)), probs((4, 5), seed=1)])


def test_binary_cross_entropy_log_clamp():
    # log(0) is clamped at -100 as in ATen; gradients stay finite.
    x = torch.tensor([0.0, 1.0, 0.5, 1e-30])
    y = torch.tensor([1.0, 0.0, 0.3, 1.0])
    check(lambda x, y: F.binary_cross_entropy(x, y, reduction="none"), x, y)
    check_grad(lambda x, y: F.binary_cross_entropy(x, y), [torch.tensor([0.3, 0.9, 0.5])],
               [torch.tensor([1.0, 0.0, 1.0])])


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float16])
def test_binary_cross_entropy_dtypes(dtype):
    check_grad(lambda x, y: F.binary_cross_entropy(x, y), [probs((3, 4), dtype)],
               [probs((3, 4), dtype, 1)])


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("opts", ["plain", "weight", "pos_weight", "both"])
def test_bce_with_logits(opts, reduction):
    x, y = randn((4, 5)) * 3, probs((4, 5), seed=1)
    w = torch.rand(5, generator=gen(2)) if opts in ("weight", "both") else None
    pw = torch.rand(5, generator=gen(3)) * 3 if opts in ("pos_weight", "both") else None

    def fn(x, y):
        return F.binary_cross_entropy_with_logits(
            x, y, weight=None if w is None else w.to(x.device),
            pos_weight=None if pw is None else pw.to(x.device), reduction=reduction)
    check_grad(fn, [x, y])


def test_bce_with_logits_extremes_and_broadcast_weights():
    # Large logits of both signs (exp overflows unless |x| is taken), a
    # weight and pos_weight that broadcast over the batch.
    x = torch.tensor([[-120.0, -20.0, 0.0, 20.0, 120.0], [3.0, -3.0, 1e-4, -1e-4, 50.0]])
    y = torch.tensor([[0.0, 1.0, 0.5, 0.0, 1.0], [1.0, 0.0, 1.0, 0.0, 0.25]])
    w, pw = torch.rand(1, 5, generator=gen(4)), torch.rand(5, generator=gen(5)) * 4
    check_grad(lambda x, y, w, pw: F.binary_cross_entropy_with_logits(x, y, w, pos_weight=pw), [x, y], [w, pw])


def test_bce_with_logits_is_one_program():
    # PyTorch's composite kernel, which would otherwise win over the fallback, runs six.
    x, y = randn((4, 5)).to("tpu"), probs((4, 5), seed=1).to("tpu")
    pw = torch.rand(5, generator=gen(3)).to("tpu")
    assert programs_run(lambda: F.binary_cross_entropy_with_logits(x, y, pos_weight=pw)) == 1


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_bce_with_logits_dtypes_and_module(dtype):
    pw = torch.full((3,), 2.0, dtype=dtype)
    x, y = randn((2, 4, 3), dtype), probs((2, 4, 3), dtype, 1)
    check_grad(lambda x, y, pw: nn.BCEWithLogitsLoss(pos_weight=pw)(x, y), [x, y], [pw])
    check_grad(lambda x, y: nn.BCELoss(reduction="sum")(torch.sigmoid(x), y), [x], [y])


# ---- multi_margin_loss ----

# (input shape, target shape): batched, unbatched with a 0-d or 1-element target.
MARGIN_SHAPES = [((6, 5), (6,)), ((5,), ()), ((5,), (1,))]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("shapes", MARGIN_SHAPES, ids=str)
def test_multi_margin_loss(shapes, p, reduction):
    (shape, target_shape), classes = shapes, shapes[0][-1]
    x = randn(shape) * 0.5  # margins of 1 hit some classes and miss others
    t = targets(target_shape, classes)
    weight = torch.rand(classes, generator=gen(3)) + 0.5
    check_grad(lambda x, t: F.multi_margin_loss(x, t, p=p, reduction=reduction), [x], [t])
    check_grad(lambda x, t, w: F.multi_margin_loss(x, t, p=p, margin=0.6, weight=w, reduction=reduction), [x],
               [t, weight])


def test_multi_margin_loss_dtypes_views_empty_module_and_errors():
    x, t = randn((4, 6), torch.float64) * 0.5, targets((4,), 6)
    check_grad(lambda x, t: F.multi_margin_loss(x, t, p=2), [x], [t])
    check_grad(lambda x, t: F.multi_margin_loss(x.t(), t), [randn((6, 4)) * 0.5], [t])  # non-contiguous
    # An empty batch: PyTorch's CPU kernel returns uninitialized memory for
    # 'sum' and 'mean' (torch 2.13), so the sums are checked as sums.
    empty, no_targets = torch.zeros(0, 3, device="tpu"), torch.zeros(0, dtype=torch.long, device="tpu")
    assert F.multi_margin_loss(empty, no_targets, reduction="sum").item() == 0
    assert F.multi_margin_loss(empty, no_targets, reduction="none").shape == (0,)
    check_grad(nn.MultiMarginLoss(margin=0.5), [randn((4, 6))], [t])
    for device in ("cpu", "tpu"):
        x = torch.zeros(4, 6, device=device)
        with pytest.raises(ValueError, match="only p == 1 and p == 2 supported"):
            F.multi_margin_loss(x, t.to(device), p=3)
        with pytest.raises(RuntimeError, match="(inconsistent target|target tensor should be 1-D with) size"):
            F.multi_margin_loss(x, t[:3].to(device))
    assert F.multi_margin_loss(x, t.to("tpu")).item() == pytest.approx(5 / 6)  # 5 classes a margin away, over 6


# ---- multilabel_margin_loss ----

# Each row lists its classes up to the first -1: a duplicate, classes after
# the -1 (ignored), a full row without -1, a row that lists nothing, a single
# class. (The CPU kernel rejects entries below -1 or past the classes
# anywhere in the row.)
MULTILABEL_TARGETS = torch.tensor([[3, 3, 1, -1, 2, 4], [0, 1, 2, 3, 4, 5], [-1, 2, 0, 0, 0, 0],
                                   [5, -1, 4, 3, 0, 1], [2, 0, -1, -1, -1, -1]])


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("rows", [slice(None), 0, slice(1, 2)], ids=["batch", "unbatched", "batch_of_1"])
def test_multilabel_margin_loss(rows, reduction):
    """Values, is_target (exact) and the gradient; margins of 1 between
    values of spread 0.5 count some pairs and not others. An unbatched
    'none' is 0-d, as the CPU kernel makes it."""
    x, t = (randn((5, 6)) * 0.5)[rows], MULTILABEL_TARGETS[rows]
    check_grad(lambda x, t: F.multilabel_margin_loss(x, t, reduction=reduction), [x], [t])
    number = {"none": 0, "mean": 1, "sum": 2}[reduction]
    actual = torch.ops.aten.multilabel_margin_loss_forward(x.to("tpu"), t.to("tpu"), number)
    assert_close(actual[1], torch.ops.aten.multilabel_margin_loss_forward(x, t, number)[1], rtol=0, atol=0)


def test_multilabel_margin_loss_dtypes_views_empty_out_and_module():
    """(PyTorch's CPU kernel has float and double only.)"""
    t = MULTILABEL_TARGETS
    check_grad(lambda x, t: F.multilabel_margin_loss(x, t), [randn((5, 6), torch.float64) * 0.5], [t])
    check_grad(lambda x, t: F.multilabel_margin_loss(x.t(), t, reduction="sum"), [randn((6, 5)) * 0.5], [t])
    x = torch.tensor([[0.2, NAN, 0.1, float("inf"), -float("inf"), 0.3]])  # NaN counts nothing; inf wins
    check_grad(lambda x, t: F.multilabel_margin_loss(x, t, reduction="none"), [x], [torch.tensor([[0, 4, -1, 0, 0, 0]])])
    # An empty batch: PyTorch's CPU kernel returns uninitialized memory for
    # 'sum' and 'mean' (torch 2.13), so the sum is checked as a sum.
    empty, no_targets = torch.zeros(0, 4, device="tpu"), torch.zeros(0, 4, dtype=torch.long, device="tpu")
    assert F.multilabel_margin_loss(empty, no_targets, reduction="sum").item() == 0
    assert F.multilabel_margin_loss(empty, no_targets, reduction="none").shape == (0,)
    x = randn((5, 6)) * 0.5
    loss, is_target = torch.empty(0, device="tpu"), torch.empty(0, device="tpu")
    torch.ops.aten.multilabel_margin_loss_forward.output(x.to("tpu"), t.to("tpu"), 0, output=loss,
                                                         is_target=is_target)
    expected = torch.ops.aten.multilabel_margin_loss_forward(x, t, 0)
    assert_close((loss, is_target), expected)
    g, grad = randn((5,), seed=9), torch.empty(0, device="tpu")
    torch.ops.aten.multilabel_margin_loss_backward.grad_input(g.to("tpu"), x.to("tpu"), t.to("tpu"), 0, is_target,
                                                              grad_input=grad)
    assert_close(grad, torch.ops.aten.multilabel_margin_loss_backward(g, x, t, 0, expected[1]))
    check_grad(nn.MultiLabelMarginLoss(reduction="sum"), [x], [t])


def test_multilabel_margin_loss_compiled():
    """Under torch.compile the forward stays one node, lowered in C, and its
    backward is multilabel_margin_loss_backward: PyTorch's decomposition of
    the forward counts target entries after the first -1, which these
    targets have."""
    x, t = randn((5, 6)) * 0.5, MULTILABEL_TARGETS
    cpu, dev = x.clone().requires_grad_(), x.to("tpu").requires_grad_()
    expected = F.multilabel_margin_loss(cpu, t)
    actual = torch.compile(F.multilabel_margin_loss, backend="tpu")(dev, t.to("tpu"))
    assert_close(actual, expected)
    expected.backward()
    actual.backward()
    assert_close(dev.grad, cpu.grad)


# ---- ctc_loss ----

# T = 12 steps, N = 5 samples, C = 6 classes (blank 0): repeated labels
# (which need a blank between them), an empty target, inputs shorter than
# T, and a sample whose target cannot fit its 3 steps (inf loss; NaN
# gradients on CPU and tpu alike, or zeros with zero_infinity).
CTC_TARGETS = torch.tensor([[1, 1, 2, 3, 3], [4, 5, 4, 0, 0], [0, 0, 0, 0, 0], [2, 2, 2, 2, 0], [5, 1, 5, 0, 0]])
CTC_INPUT_LENGTHS = [12, 10, 7, 12, 3]
CTC_TARGET_LENGTHS = [5, 3, 0, 4, 3]


def ctc_args(lengths_as, layout, rows=slice(None)):
    """Targets padded [N, S] or concatenated, and the lengths as lists or
    integer tensors (moved to the device with the other tensors)."""
    tl = CTC_TARGET_LENGTHS[rows]
    t = CTC_TARGETS[rows]
    t = t if layout == "padded" else torch.cat([row[:n] for row, n in zip(t, tl)])
    il = CTC_INPUT_LENGTHS[rows]
    if lengths_as == "tensor":
        return t, torch.tensor(il), torch.tensor(tl, dtype=torch.int32)
    return t, il, tl


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("layout", ["padded", "concatenated"])
@pytest.mark.parametrize("lengths_as", ["list", "tensor"])
def test_ctc_loss(lengths_as, layout, reduction):
    possible = slice(0, 4)
    check_grad(lambda x, *a: F.ctc_loss(x.log_softmax(2), *a, reduction=reduction),
               [randn((12, 4, 6))], ctc_args(lengths_as, layout, possible))
    check_grad(lambda x, *a: F.ctc_loss(x.log_softmax(2), *a, reduction=reduction, zero_infinity=True),
               [randn((12, 5, 6))], ctc_args(lengths_as, layout))
    check_grad(lambda x, *a: F.ctc_loss(x.log_softmax(2), *a, reduction=reduction),  # inf, NaN grads
               [randn((12, 5, 6))], ctc_args(lengths_as, layout))


def test_ctc_loss_forms_dtypes_and_blank():
    t, il, tl = ctc_args("list", "padded", slice(0, 4))
    # float64; log_probs transposed from [N, T, C]; blank the last class
    check_grad(lambda x, *a: F.ctc_loss(x.log_softmax(2), *a), [randn((12, 4, 6), torch.float64)], (t, il, tl))
    check_grad(lambda x, *a: F.ctc_loss(x.transpose(0, 1).log_softmax(2), *a), [randn((4, 12, 6))], (t, il, tl))
    check_grad(lambda x, *a: F.ctc_loss(x.log_softmax(2), *a, blank=5), [randn((12, 4, 6))],
               (torch.where(t == 5, 0, t), il, tl))
    # unbatched: log_probs [T, C] and one target; an input with no steps
    check_grad(lambda x, t: F.ctc_loss(x.log_softmax(1), t, [10], [4], reduction="sum"), [randn((12, 6))],
               [CTC_TARGETS[0, :4]])
    check_grad(lambda x, *a: F.ctc_loss(x.log_softmax(2), *a, reduction="none"), [randn((6, 2, 6))],
               (CTC_TARGETS[1:3], [0, 0], [3, 0]))
    check_grad(nn.CTCLoss(blank=0, zero_infinity=True), [randn((12, 5, 6)).log_softmax(2)],
               ctc_args("tensor", "concatenated"))


def test_ctc_loss_tensor_lengths_reuse_the_program():
    """Lengths given as tensors (on the device or the host) are runtime
    values: other lengths of the same shapes run the same programs (strict
    mode, where each op is its own program)."""
    import torch_tpu
    import torch_tpu.metrics
    x = randn((12, 4, 6), seed=4).to("tpu").log_softmax(2)
    t = CTC_TARGETS[:4].to("tpu")
    with torch_tpu.eager_mode("strict"):
        F.ctc_loss(x, t, torch.tensor([12, 10, 7, 12], device="tpu"), torch.tensor([5, 3, 0, 4], device="tpu"))
        compiles = torch_tpu.metrics.counters()["compile"]
        for il, tl, device in (([11, 9, 8, 12], [4, 3, 1, 2], "tpu"), ([12, 12, 12, 12], [5, 5, 5, 5], "cpu")):
            expected = F.ctc_loss(x.cpu(), t.cpu(), torch.tensor(il), torch.tensor(tl))
            actual = F.ctc_loss(x, t, torch.tensor(il, device=device), torch.tensor(tl, device=device))
            assert_close(actual, expected)
        assert torch_tpu.metrics.counters()["compile"] == compiles


def test_ctc_loss_errors():
    t = CTC_TARGETS[:2]
    for device in ("cpu", "tpu"):
        x = randn((8, 2, 6)).log_softmax(2).to(device)
        with pytest.raises(RuntimeError, match="Expected input_lengths to have value at most 8"):
            F.ctc_loss(x, t.to(device), [9, 3], [5, 3])
        with pytest.raises(RuntimeError, match="Expected tensor to have size at least 6 at dimension 1"):
            F.ctc_loss(x, t.to(device), [8, 3], [6, 3])
        with pytest.raises(RuntimeError, match="must not be empty"):
            F.ctc_loss(x[:0], t.to(device), [0, 0], [5, 3])
    with pytest.raises(RuntimeError, match=r"aten::_ctc_loss\.Tensor\(Float\[8, 2, 6\].*\): expected input_lengths as an integer tensor of 2 entries"):
        F.ctc_loss(x, t.to("tpu"), torch.tensor([8, 3, 1], device="tpu"), torch.tensor([5, 3], device="tpu"))
    assert F.ctc_loss(x, t.to("tpu"), [8, 3], [5, 2]).isfinite().item()  # the device still works
