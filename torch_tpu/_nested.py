"""nn.TransformerEncoder's fast path for padded batches. In evaluation
without autograd, given a src_key_padding_mask, PyTorch packs the batch into
a nested tensor (`_nested_tensor_from_mask`), runs each layer's one-op form
(`_transformer_encoder_layer_fwd`) on it and pads the result back with zeros
(`to_padded_tensor`); it has kernels for these on CPU and CUDA only. On the
tpu the nested tensor is PyTorch's own (a buffer and host-side sizes; its
accessors and padding come from torch_tpu/csrc/nested.cpp), and a layer pads
it, runs the dense layer's lowering (csrc/ops/attention.c) with the padding
as the key mask, and packs the rows back: padded positions neither attend
nor are attended to, and come out zero, as on CPU."""
import torch

_aten_tpu = torch.library.Library("aten", "IMPL", "PrivateUse1")
_aten_nested_tpu = torch.library.Library("aten", "IMPL", "NestedTensorPrivateUse1")


def _check_padded_batch(op, t, mask):
    torch._check(t.dim() == 3, lambda: f"aten::{op}: expected the input [N, L, D], got shape {list(t.shape)}")
    torch._check(mask.dtype == torch.bool,
                 lambda: f"aten::{op}: expected a bool mask (True for the positions kept), got {mask.dtype}")
    torch._check(mask.shape == t.shape[:2],
                 lambda: f"aten::{op}: expected the mask [N, L] = {list(t.shape[:2])} for an input of shape "
                         f"{list(t.shape)}, got {list(mask.shape)}")


def _left_aligned(mask):
    """Whether each row of `mask` (True: kept) is a run of Trues, then Falses."""
    return not bool((mask[:, 1:] & ~mask[:, :-1]).any())


def _pack(padded, lengths):
    """The nested tensor of each row's first `lengths[i]` positions."""
    return torch._nested_tensor_from_tensor_list([padded[i, :n] for i, n in enumerate(lengths)])


def _nested_tensor_from_mask_left_aligned(t, mask):
    _check_padded_batch("_nested_tensor_from_mask_left_aligned", t, mask)
    return _left_aligned(mask)


def _nested_tensor_from_mask(t, mask, mask_check=True):
    """Each row's first n positions, n its count of kept positions (as CPU
    takes them when the mask is not checked)."""
    _check_padded_batch("_nested_tensor_from_mask", t, mask)
    torch._check(not mask_check or _left_aligned(mask),
                 lambda: "aten::_nested_tensor_from_mask: each row of the mask must keep a prefix of its "
                         "positions (True then False); pass mask_check=False to take the first n positions "
                         "of a row that keeps n")
    return _pack(t, mask.sum(1).tolist())


# The layer's arguments after src: embed_dim, num_heads, the weights and
# options up to the last feed-forward bias, then mask and mask_type.
_LAYER_ARGS = 17


def _transformer_encoder_layer_fwd(src, *args):
    layer, mask = args[:_LAYER_ARGS], (args[_LAYER_ARGS:] + (None,))[0]
    torch._check(mask is None,
                 lambda: "aten::_transformer_encoder_layer_fwd: a nested input takes no attention mask (as on "
                         "CPU); its padding is the mask. Pass a padded tensor with the masks instead")
    lengths = torch.ops.aten._nested_tensor_size(src)[:, 0]
    padded = torch.ops.aten.to_padded_tensor(src, 0.0)
    padding = torch.arange(padded.shape[1]) >= lengths[:, None]
    out = torch.ops.aten._transformer_encoder_layer_fwd(padded, *layer, padding.to(padded.device), 1)
    return _pack(out, lengths.tolist())


_aten_tpu.impl("_nested_tensor_from_mask_left_aligned", _nested_tensor_from_mask_left_aligned)
_aten_tpu.impl("_nested_tensor_from_mask", _nested_tensor_from_mask)
_aten_nested_tpu.impl("_transformer_encoder_layer_fwd", _transformer_encoder_layer_fwd)
