"""F.ctc_loss with tensor lengths keeps them on the device. PyTorch's
composite reads tensor lengths back to the host on every device but CUDA
and passes them to _ctc_loss as int lists, which the tpu compiles into the
program: a program per combination of lengths. Here, as on CUDA, they stay
tensors (_ctc_loss.Tensor, lowered in csrc/ops/ctc_loss.c with the lengths
as runtime values), then the loss is reduced as the composite does."""
import torch

_aten_autograd_tpu = torch.library.Library("aten", "IMPL", "AutogradPrivateUse1")


def _integral(t):
    return not (t.is_floating_point() or t.is_complex() or t.dtype == torch.bool)


def _ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=1, zero_infinity=False):
    torch._check(_integral(input_lengths), lambda: "input_lengths must be integral")
    torch._check(_integral(target_lengths), lambda: "target_lengths must be integral")
    batched = log_probs.dim() == 3
    log_probs = log_probs if batched else log_probs.unsqueeze(1)
    device = log_probs.device
    target_lengths = target_lengths.to(device)
    loss, _ = torch.ops.aten._ctc_loss.Tensor(log_probs, targets.to(device, torch.long), input_lengths.to(device),
                                               target_lengths, blank, zero_infinity)
    if zero_infinity:
        loss = torch.where(loss == float("inf"), loss.new_zeros(()), loss)
    if reduction == 1:  # mean over samples of each loss over its target length
        return (loss / target_lengths.clamp_min(1)).mean()
    if reduction == 2:
        return loss.sum()
    return loss if batched else loss.squeeze(0)


_aten_autograd_tpu.impl("ctc_loss.Tensor", _ctc_loss)
