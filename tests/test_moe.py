"""Mixture-of-experts building blocks on tpu against PyTorch's CPU results:
torch.nn.functional.grouped_mm (aten::_grouped_mm) in its four shape cases
with autograd, torch.histc, and an expert layer written the way Hugging
Face's grouped_mm experts are (sort by expert, histc, cumsum, grouped_mm).

The CPU kernel of grouped_mm leaves rows (or columns) in no group
undefined; tpu writes 0 there, which is checked on its own. Float32
products compare at rtol/atol 1e-5 (XLA and the CPU sum in other orders)."""
import os
import sys

import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from parity import assert_close, check  # noqa: E402

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
F32 = dict(rtol=1e-5, atol=1e-5)


def make(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype)


def offsets(*ends):
    return torch.tensor(ends, dtype=torch.int32)


def tol(dtype):
    return F32 if dtype == torch.float32 else {}


@pytest.mark.parametrize("dtype", DTYPES)
def test_grouped_mm_rows_of_a_per_expert(dtype):
    # (M, K) x (G, K, N): the MoE forward; one group empty, every row used.
    a, w = make((10, 8), dtype), make((4, 8, 16), dtype, seed=1)
    check(lambda a, w, o: F.grouped_mm(a, w, offs=o), a, w, offsets(3, 3, 7, 10), **tol(dtype))
    # The weight as Hugging Face passes it: (G, N, K) transposed.
    wt = make((4, 16, 8), dtype, seed=2)
    check(lambda a, w, o: F.grouped_mm(a, w.transpose(-2, -1), offs=o), a, wt, offsets(1, 5, 6, 10),
          **tol(dtype))


def test_grouped_mm_rows_past_the_last_offset_are_zero():
    a, w, o = make((9, 8)), make((3, 8, 4), seed=1), offsets(2, 4, 6)
    expected = torch._grouped_mm(a, w, offs=o)
    actual = torch._grouped_mm(a.to("tpu"), w.to("tpu"), offs=o.to("tpu"))
    assert_close(actual[:6], expected[:6], **F32)
    assert actual[6:].cpu().eq(0).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_grouped_mm_contraction_per_group(dtype):
    # (M, K) x (K, N) -> (G, M, N): the weight gradient's case.
    a, b = make((8, 16), dtype), make((16, 8), dtype, seed=1)
    check(lambda a, b, o: torch._grouped_mm(a, b, offs=o), a, b, offsets(4, 4, 12, 16), **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_grouped_mm_columns_of_b_per_group(dtype):
    a, b, o = make((3, 5, 8), dtype), make((8, 24), dtype, seed=1), offsets(8, 8, 24)
    check(lambda a, b, o: torch._grouped_mm(a, b, offs=o), a, b, o, **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_grouped_mm_batched(dtype):
    a, b = make((3, 5, 8), dtype), make((3, 8, 8), dtype, seed=1)
    check(lambda a, b: torch._grouped_mm(a, b), a, b, **tol(dtype))


def test_grouped_mm_backward():
    a, w, o = make((12, 8)), make((3, 8, 16), seed=1), offsets(5, 5, 12)
    g = make((12, 16), seed=2)

    def grads(a, w, o, g):
        a = a.detach().requires_grad_()
        w = w.detach().requires_grad_()
        F.grouped_mm(a, w, offs=o).backward(g)
        return a.grad, w.grad

    check(grads, a, w, o, g, **F32)


@pytest.mark.parametrize("call, message", [
    (lambda a, w, o: torch._grouped_mm(a, w), "offsets"),
    (lambda a, w, o: torch._grouped_mm(a, w, offs=o.long()), "int32"),
    (lambda a, w, o: torch._grouped_mm(a, w.half(), offs=o), "same dtype"),
    (lambda a, w, o: torch._grouped_mm(a.double(), w.double(), offs=o), "(?i)float32, bfloat16 or float16"),
    (lambda a, w, o: torch._grouped_mm(a[:, :4], w, offs=o), "must match"),
    (lambda a, w, o: torch._grouped_mm(a, w, offs=o, bias=torch.zeros(3, 8, device=a.device)), "ias"),
])
def test_grouped_mm_bad_input_raises_and_recovers(call, message):
    a, w, o = make((6, 8)), make((3, 8, 8), seed=1), offsets(2, 4, 6)
    with pytest.raises(RuntimeError, match=message):
        call(a, w, o)  # the CPU's own error ...
    with pytest.raises(RuntimeError, match=message):
        call(a.to("tpu"), w.to("tpu"), o.to("tpu"))  # ... and tpu's
    check(lambda a, w, o: F.grouped_mm(a, w, offs=o), a, w, o, **F32)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_histc_matches_cpu(dtype):
    x = make((1000,), dtype)
    check(lambda x: torch.histc(x, bins=10), x)  # the data's own range
    check(lambda x: torch.histc(x, bins=7, min=-1, max=0.5), x)  # outside values dropped
    check(lambda x: torch.histc(x.view(10, 100)[:, ::3], bins=5, min=-2, max=2), x)  # a strided view
    check(lambda x: torch.histc(x[:0], bins=4, min=0, max=1), x)  # empty
    check(lambda x: torch.histc(x[:1], bins=3), x)  # one value: its range widened by 1 each way


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_histc_half_precision_bins_and_counts_in_float32(dtype):
    # PyTorch's CPU kernel rounds every step to the input dtype (its bfloat16
    # counts past 256 drift); tpu bins and counts in float32, rounded once:
    # the CPU's float32 histogram of the same values, in the input dtype.
    x = make((1000,), torch.float32).to(dtype)
    lo, hi = x.min().item(), x.max().item()
    expected = torch.histc(x.float(), bins=10, min=lo, max=hi).to(dtype)
    assert_close(torch.histc(x.to("tpu"), bins=10), expected, rtol=0, atol=0)


def test_histc_nan_counts_nowhere_and_edges_land_in_bins():
    x = torch.tensor([0.0, 1.0, 2.0, 3.0, float("nan"), 3.0, -0.5, 3.5])
    check(lambda x: torch.histc(x, bins=3, min=0, max=3), x)


def test_histc_of_integer_expert_ids():
    # PyTorch's CPU kernel takes floats only; tpu (like CUDA) counts ints too.
    ids = torch.randint(0, 6, (50,), generator=torch.Generator().manual_seed(0))
    expected = torch.histc(ids.float(), bins=6, min=0, max=5).int()
    assert_close(torch.histc(ids.int().to("tpu"), bins=6, min=0, max=5), expected)


def test_histc_rejects_max_below_min():
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        torch.histc(torch.ones(3, device="tpu"), bins=3, min=2, max=1)


class Experts(torch.nn.Module):
    """Top-k routed experts as Hugging Face's grouped_mm path computes them."""

    def __init__(self, dim=16, hidden=32, experts=4, top_k=2):
        super().__init__()
        self.router = torch.nn.Linear(dim, experts, bias=False)
        self.gate_up = torch.nn.Parameter(torch.randn(experts, 2 * hidden, dim) * 0.1)
        self.down = torch.nn.Parameter(torch.randn(experts, dim, hidden) * 0.1)
        self.experts, self.top_k = experts, top_k

    def forward(self, x):
        weights, ids = torch.topk(self.router(x).softmax(-1), self.top_k, dim=-1)
        ids, weights = ids.reshape(-1), weights.reshape(-1)
        ids_sorted, perm = torch.sort(ids)
        picked = x[perm // self.top_k]
        # histc on the CPU takes floats only; on tpu the ids go as they are.
        counts_in = ids_sorted.float() if x.device.type == "cpu" else ids_sorted.int()
        counts = torch.histc(counts_in, bins=self.experts, min=0, max=self.experts - 1)
        offs = torch.cumsum(counts, dim=0, dtype=torch.int32)
        gate, up = F.grouped_mm(picked, self.gate_up.transpose(-2, -1), offs=offs).chunk(2, dim=-1)
        out = F.grouped_mm(F.silu(gate) * up, self.down.transpose(-2, -1), offs=offs)
        out = out * weights[perm, None]
        return torch.zeros_like(x).index_add(0, perm // self.top_k, out)


def test_expert_layer_forward_and_backward():
    torch.manual_seed(0)
    layer = Experts()
    x = make((24, 16), seed=3)

    def run(x, *params):
        module = Experts()
        for p, value in zip(module.parameters(), params):
            p.data = value
        module.to(x.device)
        y = module(x)
        y.pow(2).sum().backward()
        return (y,) + tuple(p.grad for p in module.parameters())

    check(run, x, *(p.detach() for p in layer.parameters()), rtol=1e-4, atol=1e-5)
