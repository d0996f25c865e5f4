"""Output shapes for aten ops the tpu lowers whose meta kernel PyTorch
lacks or gets wrong: the fallback runs an op's meta kernel to size its
outputs before lowering it. The recurrent cells' ops (csrc/ops/rnn_cell.c),
which nn.LSTM and nn.GRU call on every accelerator device: PyTorch has none
for the GRU cell, and its LSTM cell's fails on a layer without biases (it
reads the absent biases' device). multi_margin_loss_backward,
multilabel_margin_loss_forward (PyTorch's, its decomposition, gives an
unbatched 'none' loss shape [1] where its CPU kernel gives 0-d, and counts
target entries after the first -1: pytorch/pytorch#189552), multilabel_margin_loss_backward
(csrc/ops/loss.c),
fractional_max_pool3d_backward (csrc/ops/pool.c), _logcumsumexp, geqrf and
CTC loss with tensor lengths and its backward, which have none. Each is
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


@torch.compiler.disable
def _multilabel_margin_loss_forward(self, target, reduction):
    torch._check(self.ndim == 0 or (self.ndim <= 2 and self.shape[-1] != 0),
                 lambda: f"multilabel_margin_loss: expected a non-empty vector or matrix with an optional "
                         f"empty batch, got input of shape {list(self.shape)}")
    torch._check(target.numel() == self.numel() and (target.shape == self.shape or self.ndim < 2 and target.ndim <= 1),
                 lambda: f"multilabel_margin_loss: expected a target of the input's shape {list(self.shape)}, "
                         f"got {list(target.shape)}")
    loss = self.new_empty(self.shape[:1] if reduction == 0 and self.ndim == 2 else ())
    return loss, torch.empty_like(self)


@torch.compiler.disable
def _multilabel_margin_loss_backward(grad_output, self, target, reduction, is_target):
    torch._check(target.shape == self.shape and is_target.shape == self.shape,
                 lambda: f"multilabel_margin_loss_backward: expected target and is_target of self's shape "
                         f"{list(self.shape)}, got {list(target.shape)} and {list(is_target.shape)}")
    return torch.empty_like(self)


@torch.compiler.disable
def _fractional_max_pool3d_backward(grad_output, self, kernel_size, output_size, indices):
    torch._check(grad_output.shape == indices.shape,
                 lambda: f"fractional_max_pool3d_backward: expected grad_output of the indices' shape "
                         f"{list(indices.shape)}, got {list(grad_output.shape)}")
    return torch.empty_like(self)


@torch.compiler.disable
def _logcumsumexp(self, dim):
    return torch.empty_like(self)


@torch.compiler.disable
def _geqrf(self):
    torch._check(self.ndim >= 2, lambda: f"geqrf: expected a matrix or a batch of them, got shape {list(self.shape)}")
    return torch.empty_like(self), self.new_empty((*self.shape[:-2], min(self.shape[-2:])))


@torch.compiler.disable
def _ctc_loss_with_tensor_lengths(log_probs, targets, input_lengths, target_lengths, blank=0, zero_infinity=False):
    # log_alpha [N, T, 2S + 1] for S the targets' padded width, or all of
    # them when concatenated: the lengths stay on the device (csrc/ops/ctc_loss.c).
    torch._check(log_probs.ndim == 3, lambda: f"ctc_loss: expected log_probs [T, N, C], got {list(log_probs.shape)}")
    width = targets.shape[1] if targets.ndim == 2 else targets.numel()
    frames, batch = log_probs.shape[:2]
    return log_probs.new_empty((batch,)), log_probs.new_empty((batch, frames, 2 * width + 1))


@torch.compiler.disable
def _ctc_loss_backward(grad, log_probs, *args):
    return torch.empty_like(log_probs)


def _resizing_outs(meta, names):
    """The out= overload's meta kernel from the functional one's: resizes
    the out= arguments `names` to the returns' shapes."""
    def resize(*args, **outs):
        returns = meta(*args)
        for name, like in zip(names, returns if isinstance(returns, tuple) else (returns,)):
            outs[name].resize_(like.shape)
        return outs[names[0]] if len(names) == 1 else tuple(outs[name] for name in names)
    return torch.compiler.disable(resize)


_aten_meta.impl("_thnn_fused_lstm_cell", _lstm_cell)
_aten_meta.impl("_thnn_fused_gru_cell", _gru_cell)
_aten_meta.impl("_thnn_fused_gru_cell_backward", _gru_cell_backward)
_aten_meta.impl("multi_margin_loss", _multi_margin_loss)
_aten_meta.impl("multi_margin_loss_backward", _multi_margin_loss_backward)
_aten_meta.impl("multilabel_margin_loss_forward", _multilabel_margin_loss_forward)
_aten_meta.impl("_ctc_loss.Tensor", _ctc_loss_with_tensor_lengths)
_aten_meta.impl("_ctc_loss_backward", _ctc_loss_backward)
_aten_meta.impl("_ctc_loss_backward.Tensor", _ctc_loss_backward)
# Decompositions torch 2.13 gets wrong where the C lowering of the op is
# right (multilabel_margin_loss_forward: pytorch/pytorch#189552). Kept out
# of torch.compile's decomposition table (torch_tpu/backend.py), and
# dropped where PyTorch also registers them as the op's Autograd and Meta
# Python kernels, which the compile tracer prefers to the dispatcher's, so
# a compiled graph keeps the op (and its backward).
WRONG_DECOMPOSITIONS = (torch.ops.aten.multilabel_margin_loss_forward.default,
                        torch.ops.aten.multilabel_margin_loss_forward.output)
for _overload in WRONG_DECOMPOSITIONS:
    for _key in (torch._C.DispatchKey.Autograd, torch._C.DispatchKey.Meta):
        _overload.py_kernels.pop(_key, None)
    _overload._dispatch_cache.clear()
for _name, _meta, _out_overload, _outs in (
        ("multilabel_margin_loss_backward", _multilabel_margin_loss_backward, "grad_input", ("grad_input",)),
        ("fractional_max_pool3d_backward", _fractional_max_pool3d_backward, "grad_input", ("grad_input",)),
        ("_logcumsumexp", _logcumsumexp, "out", ("out",)),
        ("geqrf", _geqrf, "a", ("a", "tau"))):
    _aten_meta.impl(_name, _meta)
    _aten_meta.impl(f"{_name}.{_out_overload}", _resizing_outs(_meta, _outs))
