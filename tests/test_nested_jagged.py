"""Jagged nested tensors (torch.nested, layout=torch.jagged) on tpu against
PyTorch's CPU backend: the two kernels under their padding
(_jagged_to_padded_dense_forward and _padded_dense_to_jagged_forward,
csrc/ops/jagged.c) with empty rows, rows cut at max_length, int32 offsets,
non-contiguous values and the length read back when it is not given; then
the common workflows: Linear/relu/softmax, to_padded_tensor,
nested_tensor_from_jagged, reductions and softmax over the ragged dim,
scaled_dot_product_attention on jagged q/k/v (the math form over strided
nested tensors, torch_tpu/csrc/nested.cpp) and their gradients, and a small
torch.compile. Tolerances are parity.py's per dtype unless stated."""
import os
import sys
import warnings

import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from parity import assert_close, check  # noqa: E402

J2P = torch.ops.aten._jagged_to_padded_dense_forward
P2J = torch.ops.aten._padded_dense_to_jagged_forward
# Row lengths 2, 0, 5, 3: an empty row, and a row longer than S = 4.
OFFSETS = torch.tensor([0, 2, 2, 7, 10])


def make(shape, dtype=torch.float32, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def jagged(rows, device, requires_grad=False):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.nested.nested_tensor([r.to(device) for r in rows], layout=torch.jagged, device=device,
                                          requires_grad=requires_grad)


ROWS = [make((n, 6), seed=n) for n in (2, 0, 5, 3)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_jagged_to_padded(dtype):
    values = make((10, 3), dtype)
    check(J2P, values, [OFFSETS], [4], -1.5)  # rows cut at 4, padding after
    check(J2P, values, [OFFSETS], [7])  # default padding 0
    check(J2P, values[:, 1], [OFFSETS.int()], [5], 2.0)  # 1-d values, int32 offsets


def test_jagged_to_padded_shapes_and_views():
    values = make((10, 2, 3))
    check(J2P, values, [OFFSETS], [6], 0.25)  # trailing dims kept
    check(lambda v, o: J2P(v.t(), [o], [5]), make((4, 10)), OFFSETS)  # transposed values
    check(lambda v, o: J2P(v[::2], [o], [4]), make((20, 3)), OFFSETS)  # stepped rows
    check(J2P, make((0, 3)), [torch.zeros(4, dtype=torch.long)], [2], 7.0)  # every row empty
    check(J2P, make((10, 3)), [OFFSETS], [0])
    check(J2P, make((4, 3)).to(torch.int64), [torch.tensor([0, 1, 4])], [3], 9.0)  # integer values
    check(J2P, make((4,)) > 0, [torch.tensor([0, 3, 4])], [2], 1.0)  # bool


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_padded_to_jagged(dtype):
    padded = make((4, 5, 3), dtype)
    check(P2J, padded, [OFFSETS], 10)
    check(P2J, padded, [OFFSETS])  # length read back: offsets[-1]
    check(lambda p, o: P2J(p.transpose(1, 2), [o]), make((4, 3, 6)), OFFSETS.int())  # non-contiguous


def test_padded_to_jagged_edges():
    check(P2J, make((3, 4)), [torch.tensor([0, 1, 1, 4])])  # 2-d padded: 1-d values
    check(P2J, make((2, 4, 2, 3)), [torch.tensor([0, 4, 6])], 6)
    check(P2J, make((3, 2, 3)), [torch.zeros(4, dtype=torch.long)])  # every row empty
    # Rows longer than the padded width: the CPU's error when the length is
    # read back; with total_L given nothing is read back and, as on CUDA,
    # the entries past the width are zero (the CPU raises).
    with pytest.raises(RuntimeError, match="found batch item of length 5 when max length specified by padded input is 4"):
        P2J(make((4, 4, 3)).to("tpu"), [OFFSETS.to("tpu")])
    padded = make((4, 4, 3))
    assert_close(P2J(padded.to("tpu"), [OFFSETS.to("tpu")], 10), P2J(F.pad(padded, (0, 0, 0, 1)), [OFFSETS], 10))


def test_bad_input_errors():
    values, offsets = make((10, 3)).to("tpu"), OFFSETS.to("tpu")
    with pytest.raises((RuntimeError, NotImplementedError, AssertionError), match="one jagged dim"):
        J2P(values, [offsets, offsets], [4, 4])
    with pytest.raises(NotImplementedError, match=r"_padded_dense_to_jagged_forward\(\): only one jagged dim is "
                                                  r"supported .* got 2 offsets tensors for padded of shape \[4, 5, 3\]"):
        P2J(make((4, 5, 3)).to("tpu"), [offsets, offsets])
    with pytest.raises(RuntimeError, match=r"expected padded dim >= 2, but padded.dim\(\) == 1"):
        P2J(make((4,)).to("tpu"), [offsets])


def test_njt_padding_and_workflows():
    # to_padded_tensor (with a shorter output_size: rows cut), and the
    # Linear/relu/softmax chain over the last dim, sum/mean/softmax over the
    # ragged dim (an empty row's mean is NaN on both).
    linear = torch.nn.Linear(6, 4)
    for device_fn in (lambda nt: nt.to_padded_tensor(-1.0),
                      lambda nt: nt.to_padded_tensor(0.5, output_size=(4, 3, 6)),
                      lambda nt: nt.sum(dim=1), lambda nt: nt.mean(dim=1),
                      lambda nt: F.softmax(nt, dim=1).to_padded_tensor(0.0)):
        assert_close(device_fn(jagged(ROWS, "tpu")), device_fn(jagged(ROWS, "cpu")))
    cpu_out = F.softmax(F.relu(linear(jagged(ROWS, "cpu"))), dim=-1)
    tpu_out = F.softmax(F.relu(linear.to("tpu")(jagged(ROWS, "tpu"))), dim=-1)
    assert_close(tpu_out.values(), cpu_out.values())
    # nested_tensor_from_jagged with offsets (max_seqlen known or not).
    values = make((10, 6))
    for kwargs in ({}, {"max_seqlen": 5}):
        cpu = torch.nested.nested_tensor_from_jagged(values, OFFSETS, **kwargs).to_padded_tensor(0.0)
        tpu = torch.nested.nested_tensor_from_jagged(values.to("tpu"), OFFSETS.to("tpu"), **kwargs)
        assert_close(tpu.to_padded_tensor(0.0), cpu)


def test_njt_gradients():
    def run(device):
        linear = torch.nn.Linear(6, 4).to(device)
        torch.nn.init.constant_(linear.bias, 0.1)
        with torch.no_grad():
            linear.weight.copy_(make((4, 6), seed=5))
        nt = jagged(ROWS, device, requires_grad=True)
        padded = F.softmax(F.layer_norm(F.relu(linear(nt)), (4,)), dim=1).to_padded_tensor(0.0)
        (padded * make(padded.shape, seed=3).to(device)).sum().backward()
        return padded, nt.grad.values(), linear.weight.grad
    assert_close(run("tpu"), run("cpu"), rtol=1e-5, atol=1e-5)
    # The values' gradient through nested_tensor_from_jagged and padding.
    leaves = [make((10, 6)).to(d).requires_grad_() for d in ("cpu", "tpu")]
    for leaf in leaves:
        offsets = OFFSETS.to(leaf.device)
        padded = torch.nested.nested_tensor_from_jagged(leaf, offsets, max_seqlen=5).to_padded_tensor(0.0)
        (padded * padded).sum().backward()
    assert_close(leaves[1].grad, leaves[0].grad)


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors is in prototype stage")
def test_njt_attention():
    # As PyTorch's nested tensor tutorial: project, split heads with
    # transpose(1, 2), attend, merge. The tpu takes the math form, as CPU.
    heads, head_dim = 2, 4
    rows = [make((n, heads * head_dim), seed=n) for n in (3, 5, 1)]

    def run(device):
        q, k, v = (jagged([r * s for r in rows], device, requires_grad=True) for s in (1.0, 0.5, -1.0))
        split = [x.unflatten(-1, (heads, head_dim)).transpose(1, 2) for x in (q, k, v)]
        out = F.scaled_dot_product_attention(*split).transpose(1, 2).flatten(-2)
        (out.values() * make(out.values().shape, seed=4).to(device)).sum().backward()
        return out.values(), q.grad.values(), k.grad.values(), v.grad.values()
    assert_close(run("tpu"), run("cpu"))


def test_compile_over_jagged():
    linear = torch.nn.Linear(6, 4)
    expected = F.softmax(linear(jagged(ROWS, "cpu")), dim=1).to_padded_tensor(0.0)
    linear = linear.to("tpu")
    fn = torch.compile(lambda nt: F.softmax(linear(nt), dim=1).to_padded_tensor(0.0), backend="tpu")
    assert_close(fn(jagged(ROWS, "tpu")), expected)
