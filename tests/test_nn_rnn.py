"""Recurrent layers on tpu against PyTorch's CPU results, forward and
backward: nn.LSTM, nn.GRU, LSTMCell and GRUCell (on an accelerator device
PyTorch runs their steps through the fused cell ops that
csrc/ops/rnn_cell.c lowers; on the CPU through plain ops), the cell ops
themselves against the cells' equations written out, and a few training
steps."""
import copy
import os
import sys

import pytest
import torch
import torch._dynamo
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from parity import assert_close  # noqa: E402

A = torch.ops.aten
# A sequence's gradients run back through every step: more room than one op.
GRAD_TOL = {torch.float32: (1e-4, 1e-5), torch.float64: (1e-7, 1e-9), torch.bfloat16: (5e-2, 5e-2)}


def make(shape, dtype=torch.float32, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def leaf(x, device):
    return x.detach().to(device).requires_grad_()


def run_both(module, inputs, loss_of):
    """The module and its tpu copy on the same inputs (CPU tensors or None):
    both outputs, then the gradients of every input and parameter after
    loss_of(outputs).backward()."""
    results = []
    for device in ("cpu", "tpu"):
        m = copy.deepcopy(module).to(device)
        xs = [None if x is None else leaf(x, device) for x in inputs]
        out = m(*xs)
        loss_of(out).backward()
        grads = [x.grad for x in xs if x is not None] + [p.grad for p in m.parameters()]
        results.append((out, grads))
    return results


def assert_pair(results, dtype):
    (expected, expected_grads), (actual, actual_grads) = results
    rtol, atol = GRAD_TOL[dtype]
    assert_close(actual, expected, rtol, atol)
    assert len(actual_grads) == len(expected_grads)
    for a, e in zip(actual_grads, expected_grads):
        assert_close(a, e, rtol, atol)


def sequence_loss(out):
    """Uses every output: the sequence, h_n and (LSTM) c_n, so the last
    step gets a gradient for its cell state too."""
    y, state = out
    states = state if isinstance(state, tuple) else (state,)
    return sum((s * s).sum() for s in (y, *states))


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU, nn.RNN])  # nn.RNN: plain ops, for comparison
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("layers,bidirectional", [(1, False), (2, False), (2, True)])
def test_recurrent_layer(cls, bias, layers, bidirectional):
    torch.manual_seed(0)
    module = cls(5, 6, num_layers=layers, bias=bias, batch_first=True, bidirectional=bidirectional)
    assert_pair(run_both(module, [make((3, 4, 5))], sequence_loss), torch.float32)


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU])
def test_recurrent_layer_given_state_and_only_output_used(cls):
    """An initial state (its gradient too), sequence-first input, and a loss
    on the sequence alone: the last step's cell gets no state gradient."""
    torch.manual_seed(1)
    module = cls(3, 4, num_layers=2)
    x, h0, c0 = make((5, 2, 3)), make((2, 2, 4), seed=1), make((2, 2, 4), seed=2)

    class WithState(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = module

        def forward(self, x, h0, c0):
            return self.rnn(x, (h0, c0) if cls is nn.LSTM else h0)

    assert_pair(run_both(WithState(), [x, h0, c0], lambda out: out[0].sin().sum()), torch.float32)


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU])
def test_recurrent_layer_float64_and_non_contiguous_input(cls):
    torch.manual_seed(2)
    module = cls(4, 3).double()
    x = make((4, 6, 3), torch.float64).transpose(0, 2)  # [3, 6, 4], not contiguous
    assert not x.is_contiguous()
    assert_pair(run_both(module, [x], sequence_loss), torch.float64)


@pytest.mark.parametrize("cls", [nn.LSTMCell, nn.GRUCell])
@pytest.mark.parametrize("shape", [(3, 5), (5,), (0, 5)], ids=["batched", "unbatched", "empty batch"])
def test_cell(cls, shape):
    torch.manual_seed(3)
    module = cls(5, 4)
    assert_pair(run_both(module, [make(shape)], lambda out: sum(o.sum() for o in (out if isinstance(out, tuple)
                                                                                 else (out,)))),
                torch.float32)


@pytest.mark.parametrize("cls", [nn.LSTMCell, nn.GRUCell])
def test_cell_bfloat16(cls):
    torch.manual_seed(4)
    module = cls(8, 8).to(torch.bfloat16)
    first = lambda out: out[0] if isinstance(out, tuple) else out  # noqa: E731
    assert_pair(run_both(module, [make((4, 8), torch.bfloat16)], lambda out: first(out).float().square().sum()),
                torch.bfloat16)


# ---- the cell ops, against their equations ----

def lstm_reference(input_gates, hidden_gates, cx, input_bias, hidden_bias):
    gates = input_gates + hidden_gates
    if input_bias is not None:
        gates = gates + input_bias + hidden_bias
    i, f, g, o = gates.chunk(4, 1)
    cy = f.sigmoid() * cx + i.sigmoid() * g.tanh()
    return o.sigmoid() * cy.tanh(), cy


def gru_reference(input_gates, hidden_gates, hx, input_bias, hidden_bias):
    if input_bias is not None:
        input_gates, hidden_gates = input_gates + input_bias, hidden_gates + hidden_bias
    (ir, iz, i_n), (hr, hz, hn) = input_gates.chunk(3, 1), hidden_gates.chunk(3, 1)
    r, z = (ir + hr).sigmoid(), (iz + hz).sigmoid()
    n = (i_n + r * hn).tanh()
    return n + z * (hx - n)


@pytest.mark.parametrize("op,reference,blocks", [(A._thnn_fused_lstm_cell, lstm_reference, 4),
                                                 (A._thnn_fused_gru_cell, gru_reference, 3)],
                         ids=["lstm", "gru"])
@pytest.mark.parametrize("bias", [True, False])
def test_cell_op_against_equations(op, reference, blocks, bias):
    """Non-contiguous gates (a transposed tensor) and state; the gradients
    through the op's backward against autograd through the equations."""
    batch, hidden = 3, 4
    ig = make((blocks * hidden, batch), seed=1).t()
    hg = make((blocks * hidden, batch), seed=2).t()
    state = make((hidden, batch), seed=3).t()
    biases = [make(blocks * hidden, seed=4), make(blocks * hidden, seed=5)] if bias else [None, None]
    cpu = [None if t is None else leaf(t, "cpu") for t in (ig, hg, state, *biases)]
    tpu = [None if t is None else leaf(t, "tpu") for t in (ig, hg, state, *biases)]
    assert not tpu[0].is_contiguous() and not tpu[2].is_contiguous()
    expected = reference(*cpu)
    actual = op(*tpu)
    expected = expected if isinstance(expected, tuple) else (expected,)
    for a, e in zip(actual, expected):
        assert_close(a, e.detach(), *GRAD_TOL[torch.float32])
    loss_weights = [make(e.shape, seed=10 + k) for k, e in enumerate(expected)]
    sum((e * w).sum() for e, w in zip(expected, loss_weights)).backward()
    sum((a * w.to("tpu")).sum() for a, w in zip(actual, loss_weights)).backward()
    for c, t in zip(cpu, tpu):
        if c is not None:
            assert_close(t.grad, c.grad, *GRAD_TOL[torch.float32])


@pytest.mark.parametrize("name,blocks", [("_thnn_fused_lstm_cell", 4), ("_thnn_fused_gru_cell", 3)])
def test_cell_op_bad_shapes(name, blocks):
    op = getattr(A, name)
    gates = torch.zeros(2, blocks * 4, device="tpu")
    with pytest.raises(RuntimeError, match=rf"{name}: expected gates \[batch, {blocks} \* hidden\]"):
        op(gates, gates, torch.zeros(2, 5, device="tpu"))
    with pytest.raises(RuntimeError, match=rf"{name}: expected input_bias of shape \[{blocks * 4}\]"):
        op(gates, gates, torch.zeros(2, 4, device="tpu"), torch.zeros(3, device="tpu"), torch.zeros(3, device="tpu"))
    hy = op(gates, gates, torch.zeros(2, 4, device="tpu"))[0]  # the process goes on
    assert hy.shape == (2, 4)


def test_lstm_language_model_trains():
    """Embedding, two-layer LSTM and a linear head, five SGD steps: the same
    losses and weights as on the CPU."""
    torch.manual_seed(5)
    vocab, steps = 11, 5

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, 8)
            self.lstm = nn.LSTM(8, 16, num_layers=2, batch_first=True)
            self.head = nn.Linear(16, vocab)

        def forward(self, tokens):
            return self.head(self.lstm(self.embed(tokens))[0])

    model = Model()
    generator = torch.Generator().manual_seed(6)
    batches = [torch.randint(0, vocab, (4, 7), generator=generator) for _ in range(steps)]
    losses = {}
    trained = {}
    for device in ("cpu", "tpu"):
        m = copy.deepcopy(model).to(device)
        optimizer = torch.optim.SGD(m.parameters(), lr=0.5)
        losses[device] = []
        for tokens in batches:
            tokens = tokens.to(device)
            loss = F.cross_entropy(m(tokens[:, :-1]).flatten(0, 1), tokens[:, 1:].flatten())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses[device].append(loss.item())
        trained[device] = m
    torch.testing.assert_close(losses["tpu"], losses["cpu"], rtol=1e-5, atol=1e-5)
    for p, q in zip(trained["tpu"].parameters(), trained["cpu"].parameters()):
        assert_close(p.detach(), q.detach(), 1e-4, 1e-5)


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU])
@pytest.mark.parametrize("allow_rnn", [False, True])
def test_compiled(cls, allow_rnn):
    """torch.compile(backend="tpu") of a model holding the layer: by default
    dynamo breaks the graph at it and runs it eagerly (through the cell ops);
    with allow_rnn it traces PyTorch's decomposition into one graph."""
    torch._dynamo.reset()
    torch.manual_seed(7)
    model = nn.Sequential(nn.Linear(3, 4), cls(4, 5, num_layers=2, batch_first=True))

    def run(m, x):
        return m(x)[0].square().sum()

    x = make((2, 6, 3))
    expected = run(model, x)
    expected.backward()
    tpu_model = copy.deepcopy(model).to("tpu")
    tpu_model.zero_grad()
    with torch._dynamo.config.patch(allow_rnn=allow_rnn):
        actual = torch.compile(tpu_model, backend="tpu")
        loss = run(actual, x.to("tpu"))
    loss.backward()
    assert_close(loss, expected.detach(), *GRAD_TOL[torch.float32])
    for p, q in zip(tpu_model.parameters(), model.parameters()):
        assert_close(p.grad, q.grad, *GRAD_TOL[torch.float32])
