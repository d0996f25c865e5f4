"""Output shapes for aten ops the tpu lowers whose meta kernel PyTorch
lacks or gets wrong: the fallback runs an op's meta kernel to size its
outputs before lowering it. The recurrent cells' ops (csrc/ops/rnn_cell.c),
which nn.LSTM and nn.GRU call on every accelerator device: PyTorch has none
for the GRU cell, and its LSTM cell's fails on a layer without biases (it
reads the absent biases' device). multi_margin_loss_backward
(csrc/ops/loss.c), which has none. Each is
kept from dynamo: under torch.compile an RNN layer runs eagerly (dynamo
breaks the graph there), and dynamo would otherwise trace the kernel,
called from C++, as a graph of its own on meta tensors."""
import torch
from torch._decomp.decompositions import multi_margin_loss as _decomposed_multi_margin_loss

_aten_meta = torch.library.Library("aten", "IMPL", "Meta")


def _check_cell_sizes(op, blocks, input_gates, hidden_gates, state, input_bias, hidden_bias):
    shapes = f"input_gates {list(input_gates.shape)}, hidden_gates {list(hidden_gates.shape)}, state {list(state.shape)}"
    torch._check(state.ndim == 2 and input_gates.shape == (state.shape[0], blocks * state.shape[1])
                 and hidden_gates.shape == input_gates.shape,
                 lambda: f"{op}: expected gates [batch, {blocks} * hidden] for a state [batch, hidden], got {shapes}")
    for name, bias in (("input_bias", input_bias), ("hidden_bias", hidden_bias)):
        torch._check(bias is None or bias.shape == (input_gates.shape[1],),
                     lambda: f"{op}: expected {name} of shape [{input_gates.shape[1]}], got "
                             f"{list(bias.shape)} for {shapes}")


@torch.compiler.disable
def _lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    _check_cell_sizes("_thnn_fused_lstm_cell", 4, input_gates, hidden_gates, cx, input_bias, hidden_bias)
    return torch.empty_like(cx), torch.empty_like(cx), torch.empty_like(input_gates)


@torch.compiler.disable
def _gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    _check_cell_sizes("_thnn_fused_gru_cell", 3, input_gates, hidden_gates, hx, input_bias, hidden_bias)
    batch, hidden = hx.shape
    return torch.empty_like(hx), input_gates.new_empty((batch, 5 * hidden))


@torch.compiler.disable
def _gru_cell_backward(grad_hy, workspace, has_bias):
    batch, hidden = grad_hy.shape
    torch._check(workspace.shape == (batch, 5 * hidden),
                 lambda: f"_thnn_fused_gru_cell_backward: expected workspace [{batch}, {5 * hidden}] for "
                         f"grad_hy {list(grad_hy.shape)}, got {list(workspace.shape)}")
    gates = [workspace.new_empty((batch, 3 * hidden)) for _ in range(2)]
    biases = [workspace.new_empty(3 * hidden) if has_bias else None for _ in range(2)]
    return gates[0], gates[1], torch.empty_like(grad_hy), biases[0], biases[1]


@torch.compiler.disable
def _multi_margin_loss(self, target, p=1, margin=1, weight=None, reduction=1):
    # PyTorch's meta is its decomposition, whose 'none' gives one loss per
    # sample of atleast_2d(self); its kernels give a 0-d target a 0-d loss.
    loss = _decomposed_multi_margin_loss(self, target, p, margin, weight, reduction)
    return loss.reshape(()) if reduction == 0 and target.ndim == 0 else loss


@torch.compiler.disable
def _multi_margin_loss_backward(grad_output, self, target, p, margin, weight=None, reduction=1):
    torch._check(p in (1, 2), lambda: "multi_margin_loss_backward: only p == 1 and p == 2 supported")
    return torch.empty_like(self)


_aten_meta.impl("_thnn_fused_lstm_cell", _lstm_cell)
_aten_meta.impl("_thnn_fused_gru_cell", _gru_cell)
_aten_meta.impl("_thnn_fused_gru_cell_backward", _gru_cell_backward)
_aten_meta.impl("multi_margin_loss", _multi_margin_loss)
_aten_meta.impl("multi_margin_loss_backward", _multi_margin_loss_backward)
