"""Embeddings on tpu against PyTorch's CPU results: embedding (padding_idx,
scale_grad_by_freq, max_norm's renormalization) and its backward, embedding_bag in sum/mean/max modes
with offsets, include_last_offset, padding_idx and per_sample_weights, and
their backwards, the nn modules, and one_hot."""
import copy
import os
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from parity import assert_close, check  # noqa: E402

GRAD_TOL = {torch.float32: (1e-5, 1e-5), torch.float64: (1e-7, 1e-7), torch.bfloat16: (2e-2, 2e-2)}


def make(shape, dtype=torch.float32, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def check_grad(fn, *inputs, seed=1):
    """fn on CPU leaves and on tpu copies (floating inputs require grad; None
    stays None): the output and, after one random upstream gradient, every
    grad."""
    def leaves(device):
        return [None if x is None else
                x.detach().to(device).requires_grad_(x.is_floating_point()) for x in inputs]
    cpu, dev = leaves("cpu"), leaves("tpu")
    expected, actual = fn(*cpu), fn(*dev)
    assert_close(actual, expected)
    g = make(expected.shape, expected.dtype, seed)
    expected.backward(g)
    actual.backward(g.to("tpu"))
    for c, d in zip(cpu, dev):
        if c is not None and c.requires_grad:
            assert_close(d.grad, c.grad, *GRAD_TOL[c.dtype])


INDICES = torch.tensor([[1, 2, 0, 4], [0, 0, 9, 3], [4, 4, 4, 1]])


@pytest.mark.parametrize("padding_idx", [None, 0, 4, -1])
@pytest.mark.parametrize("scale_grad_by_freq", [False, True])
def test_embedding(padding_idx, scale_grad_by_freq):
    check_grad(lambda w, i: F.embedding(i, w, padding_idx=padding_idx,
                                        scale_grad_by_freq=scale_grad_by_freq),
               make((10, 5)), INDICES)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_embedding_dtypes(dtype):
    check_grad(lambda w, i: F.embedding(i, w, padding_idx=2), make((10, 3), dtype),
               INDICES.to(torch.int32))


def test_embedding_edge_cases():
    check_grad(lambda w, i: F.embedding(i, w), make((6, 4)), torch.tensor(3))
    check_grad(lambda w, i: F.embedding(i, w), make((6, 4)), torch.zeros(0, dtype=torch.long))
    check_grad(lambda w, i: F.embedding(i, w.t()), make((4, 6)), torch.tensor([[5, 0], [1, 5]]))


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, float("inf")])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_embedding_renorm(norm_type, dtype):
    """Rows named (once or more) and over max_norm shrink in place; others,
    and rows under it, stay."""
    weight = make((10, 4), dtype) * 2
    indices = torch.tensor([[1, 2, 2], [7, 1, 0]])
    check(lambda w, i: torch.embedding_renorm_(w, i, 1.5, norm_type), weight, indices)
    check(lambda w, i: torch.embedding_renorm_(w, i, 1.5, norm_type), weight, torch.zeros(0, dtype=torch.int64))
    check(lambda w, i: torch.embedding_renorm_(w, i, 100.0, norm_type), weight, indices)  # none over


def test_embedding_max_norm_module_trains():
    """nn.Embedding(max_norm=) renormalizes the looked-up rows before each
    lookup: outputs, weights and gradients over three SGD steps."""
    torch.manual_seed(3)
    cpu = nn.Embedding(12, 5, max_norm=1.0)
    cpu.weight.data *= 3
    tpu = copy.deepcopy(cpu).to("tpu")
    batches = [torch.randint(0, 12, (4, 3), generator=torch.Generator().manual_seed(k)) for k in range(3)]
    for module in (cpu, tpu):
        optimizer = torch.optim.SGD(module.parameters(), lr=0.1)
        module.outputs = []
        for indices in batches:
            out = module(indices.to(module.weight.device))
            out.square().sum().backward()
            optimizer.step()
            optimizer.zero_grad()
            module.outputs.append(out.detach())
    for a, e in zip(tpu.outputs, cpu.outputs):
        assert_close(a, e, *GRAD_TOL[torch.float32])
    assert_close(tpu.weight.detach(), cpu.weight.detach(), *GRAD_TOL[torch.float32])


def test_embedding_dense_backward_aten():
    g = make((3, 4, 5))
    for padding_idx in (-1, 4):
        for by_freq in (False, True):
            check(lambda g, i: torch.ops.aten.embedding_dense_backward(g, i, 10, padding_idx,
                                                                        by_freq), g, INDICES)


def test_embedding_module():
    torch.manual_seed(0)
    cpu = nn.Embedding(10, 5, padding_idx=3)
    dev = copy.deepcopy(cpu).to("tpu")
    i = torch.tensor([[3, 1, 3], [2, 9, 1]])
    out_c, out_d = cpu(i), dev(i.to("tpu"))
    assert_close(out_d, out_c)
    g = make(out_c.shape)
    out_c.backward(g), out_d.backward(g.to("tpu"))
    assert_close(dev.weight.grad, cpu.weight.grad)
    assert dev.weight.grad.cpu()[3].abs().sum() == 0


# ---- embedding_bag ----

BAG_INDICES = torch.tensor([1, 2, 0, 4, 5, 5, 2, 7, 2])
OFFSETS = torch.tensor([0, 2, 2, 5])  # bag 1 is empty


def bag_case(mode, include_last_offset, padding_idx, weighted):
    offsets = torch.cat([OFFSETS, torch.tensor([9])]) if include_last_offset else OFFSETS
    sample_weights = make(9, seed=4) if weighted else None

    def fn(w, i, o, s):
        return F.embedding_bag(i, w, o, mode=mode, include_last_offset=include_last_offset,
                               padding_idx=padding_idx, per_sample_weights=s)
    return fn, (make((10, 3)), BAG_INDICES, offsets, sample_weights)


BAG_CASES = ([(mode, last, pad, False) for mode in ("sum", "mean", "max")
              for last in (False, True) for pad in (None, 2)] +
             [("sum", last, pad, True) for last in (False, True) for pad in (None, 2)])


@pytest.mark.parametrize("mode,include_last_offset,padding_idx,weighted", BAG_CASES)
def test_embedding_bag(mode, include_last_offset, padding_idx, weighted):
    fn, inputs = bag_case(mode, include_last_offset, padding_idx, weighted)
    check_grad(fn, *inputs)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_2d_input_and_dtypes(mode):
    """2-d indices are fixed-size bags; int32 indices, float64 weights."""
    check_grad(lambda w, i: F.embedding_bag(i, w, mode=mode), make((10, 4), torch.float64),
               INDICES.to(torch.int32))


def test_embedding_bag_bfloat16():
    check_grad(lambda w, i, o: F.embedding_bag(i, w, o, mode="mean"),
               make((10, 4), torch.bfloat16), BAG_INDICES, OFFSETS)


def test_embedding_bag_max_ties():
    """Equal entries: the gradient goes to the first index that holds the max."""
    w = torch.tensor([[1.0, 2.0], [1.0, 0.0], [0.0, 2.0]])
    check_grad(lambda w, i, o: F.embedding_bag(i, w, o, mode="max"), w,
               torch.tensor([2, 0, 1, 1, 0]), torch.tensor([0, 3]))


def test_embedding_bag_forward_only():
    """Without grad, F.embedding_bag takes _embedding_bag_forward_only."""
    w = make((10, 3))
    for mode in ("sum", "mean", "max"):
        check(lambda w, i, o: F.embedding_bag(i, w, o, mode=mode), w, BAG_INDICES, OFFSETS)


def test_embedding_bag_outputs_aten():
    """offset2bag and bag_size, which the backward reads."""
    def fn(w, i, o):
        out, offset2bag, bag_size, _ = torch.ops.aten._embedding_bag(w, i, o, False, 1)
        return out, offset2bag, bag_size
    check(fn, make((10, 3)), BAG_INDICES, OFFSETS)


@pytest.mark.parametrize("mode", [1, 2])
def test_embedding_bag_dense_backward_aten(mode):
    """The backward torch.compile graphs call, fed the CPU forward's bags."""
    w, grad = make((10, 3)), make((4, 3), seed=1)
    for padding_idx in (-1, 2):
        _, offset2bag, bag_size, max_indices = torch.ops.aten._embedding_bag(
            w, BAG_INDICES, OFFSETS, False, mode, False, None, False, padding_idx)
        check(lambda *a: torch.ops.aten._embedding_bag_dense_backward(*a, 10, False, mode, None,
                                                                      padding_idx),
              grad, BAG_INDICES, offset2bag, bag_size, max_indices)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_module(mode):
    torch.manual_seed(0)
    cpu = nn.EmbeddingBag(10, 4, mode=mode)
    dev = copy.deepcopy(cpu).to("tpu")
    opt_c = torch.optim.SGD(cpu.parameters(), lr=0.5)
    opt_d = torch.optim.SGD(dev.parameters(), lr=0.5)
    for step in range(2):
        for m, opt, device in ((cpu, opt_c, "cpu"), (dev, opt_d, "tpu")):
            opt.zero_grad()
            out = m(BAG_INDICES.to(device), OFFSETS.to(device))
            (out * make(out.shape, seed=step).to(device)).sum().backward()
            opt.step()
    assert_close(dev.weight.detach(), cpu.weight.detach())


# ---- one_hot ----

def test_one_hot():
    i = torch.tensor([[1, 2], [0, 4]])
    check(lambda i: F.one_hot(i, 6), i)
    check(lambda i: F.one_hot(i), i)
    check(lambda i: F.one_hot(i, 3), torch.zeros(0, dtype=torch.long))
