"""torch.autocast("tpu"): PyTorch's CUDA op lists apply on tpu."""
import pytest
import torch

from parity import assert_close


def test_default_dtype_is_bfloat16():
    assert torch.get_autocast_dtype("tpu") == torch.bfloat16
    assert torch.bfloat16 in torch.tpu.get_amp_supported_dtype()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_lower_precision_ops_compute_in_low_precision(dtype):
    x = torch.randn(8, 16)
    w = torch.randn(16, 4)
    b = torch.randn(4)
    xt, wt, bt = x.to("tpu"), w.to("tpu"), b.to("tpu")
    with torch.autocast("tpu", dtype=dtype):
        mm = xt @ wt
        lin = torch.nn.functional.linear(xt, wt.t(), bt)
        am = torch.addmm(bt, xt, wt)
    assert mm.dtype == lin.dtype == am.dtype == dtype
    # Same as casting by hand, then running in that dtype (values from CPU).
    assert_close(mm, x.to(dtype) @ w.to(dtype), rtol=2e-2, atol=2e-2)
    assert_close(lin, torch.nn.functional.linear(x.to(dtype), w.t().to(dtype), b.to(dtype)), rtol=2e-2, atol=2e-2)


def test_fp32_ops_and_promotion():
    x = torch.randn(4, 6, device="tpu")
    with torch.autocast("tpu"):
        h = x @ x.t()                      # bfloat16
        assert h.dtype == torch.bfloat16
        assert torch.softmax(h, -1).dtype == torch.float32
        assert torch.log_softmax(h, -1).dtype == torch.float32
        assert h.sum().dtype == torch.float32
        assert torch.addcmul(h.float(), h, h).dtype == torch.float32  # promote to the widest input
    assert (x @ x.t()).dtype == torch.float32  # outside the region nothing changes


def test_autocast_backward_gives_fp32_grads():
    w = torch.randn(6, 3, device="tpu", requires_grad=True)
    x = torch.randn(5, 6, device="tpu")
    with torch.autocast("tpu"):
        loss = (x @ w).float().pow(2).mean()
    loss.backward()
    assert w.grad.dtype == torch.float32
    wc = w.detach().cpu().requires_grad_()
    (x.cpu().bfloat16() @ wc.bfloat16()).float().pow(2).mean().backward()
    assert_close(w.grad, wc.grad, rtol=3e-2, atol=3e-2)
