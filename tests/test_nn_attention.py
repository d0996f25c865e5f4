"""scaled_dot_product_attention on tpu against PyTorch's CPU results, forward
and backward: causal, boolean and float masks, scale, grouped-query heads,
fully masked rows, dtypes, seeded dropout (checked against the mask the
same seed draws), native_dropout_backward; nn.MultiheadAttention training,
and the inference fast paths of nn.MultiheadAttention,
nn.TransformerEncoderLayer and nn.TransformerEncoder (nested tensors)."""
import contextlib
import copy
import os
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(__file__))
from parity import assert_close, check  # noqa: E402

GRAD_TOL = {torch.float32: (1e-5, 1e-5), torch.float64: (1e-7, 1e-7), torch.bfloat16: (3e-2, 3e-2)}


def make(shape, dtype=torch.float32, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def check_attention(q, k, v, seed=9, tpu_backend=None, **kwargs):
    """SDPA on CPU and tpu (tensor kwargs moved along), the tpu's form
    chosen with sdpa_kernel(tpu_backend) if given: output and the gradients
    of q, k, v after one random upstream gradient."""
    def run(device):
        leaves = [t.detach().to(device).requires_grad_() for t in (q, k, v)]
        kw = {n: a.to(device) if isinstance(a, torch.Tensor) else a for n, a in kwargs.items()}
        with sdpa_kernel(tpu_backend) if device == "tpu" and tpu_backend else contextlib.nullcontext():
            return leaves, F.scaled_dot_product_attention(*leaves, **kw)
    cpu, expected = run("cpu")
    dev, actual = run("tpu")
    assert_close(actual, expected)
    g = make(expected.shape, expected.dtype, seed)
    expected.backward(g)
    actual.backward(g.to("tpu"))
    for c, d in zip(cpu, dev):
        assert_close(d.grad, c.grad, *GRAD_TOL[c.dtype])


Q, K, V = make((2, 3, 5, 8), seed=1), make((2, 3, 7, 8), seed=2), make((2, 3, 7, 4), seed=3)
MASKS = {
    "none": {},
    "causal": {"is_causal": True},
    "bool": {"attn_mask": make((5, 7), seed=4) > -0.5},
    "bool_per_head": {"attn_mask": make((2, 3, 5, 7), seed=4) > -0.5},
    "float": {"attn_mask": make((2, 1, 5, 7), seed=5)},
    "scale": {"scale": 0.3},
    "causal_scale": {"is_causal": True, "scale": 2.0},
}


@pytest.mark.parametrize("name", sorted(MASKS))
def test_sdpa(name):
    check_attention(Q, K, V, **MASKS[name])


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
@pytest.mark.parametrize("name", ["none", "causal", "bool"])
def test_sdpa_dtypes(dtype, name):
    check_attention(Q.to(dtype), K.to(dtype), V.to(dtype), **MASKS[name])


def test_sdpa_float_mask_dtype_matches():
    check_attention(Q.double(), K.double(), V.double(), attn_mask=make((5, 7), torch.float64))


def test_sdpa_grouped_query():
    check_attention(make((2, 6, 5, 8), seed=6), K, V, enable_gqa=True)
    check_attention(make((2, 6, 5, 8), seed=6), K, V, enable_gqa=True, is_causal=True)


def test_sdpa_shapes():
    check_attention(make((5, 8)), make((6, 8), seed=1), make((6, 3), seed=2))  # no batch
    check_attention(make((1, 1, 1, 4)), make((1, 1, 1, 4), seed=1), make((1, 1, 1, 4), seed=2))
    # Non-contiguous: heads split out of a (batch, seq, heads * dim) projection.
    x = make((2, 5, 3 * 8), seed=3)
    check_attention(x.view(2, 5, 3, 8).transpose(1, 2), K[:, :, :5], V[:, :, :5], is_causal=True)


def test_sdpa_fully_masked_row():
    """A query that sees no key gives zeros (PyTorch's safe softmax)."""
    mask = torch.ones(5, 7, dtype=torch.bool)
    mask[2] = False
    check_attention(Q, K, V, attn_mask=mask)


FUSED_FORM = "ScaledDotProductFusedAttentionOverrideableBackward0"


def sdpa_form(*args, **kwargs):
    """The autograd node SDPA on tpu leaves: which form ran."""
    leaves = [t.to("tpu").requires_grad_() for t in args]
    return F.scaled_dot_product_attention(*leaves, **kwargs).grad_fn.name()


QH, KH, VH = Q.bfloat16(), K.bfloat16(), V.bfloat16()


def test_sdpa_takes_the_fused_form_where_it_fits():
    """One op each way (products in the inputs' dtype, scores and softmax in
    float32, only the log-sum-exp saved) for float16, bfloat16 and float32
    4-d inputs without dropout and with as many key/value heads as query
    heads; PyTorch's math form otherwise, and for float64."""
    assert sdpa_form(QH, KH, VH) == FUSED_FORM
    assert sdpa_form(QH.half(), KH.half(), VH.half()) == FUSED_FORM
    assert sdpa_form(Q, K, V, is_causal=True) == FUSED_FORM
    assert sdpa_form(QH, KH, VH, attn_mask=MASKS["bool"]["attn_mask"].to("tpu")) == FUSED_FORM
    assert sdpa_form(Q.double(), K.double(), V.double()) != FUSED_FORM
    assert sdpa_form(QH, KH, VH, dropout_p=0.5) != FUSED_FORM
    assert sdpa_form(make((2, 6, 5, 8), torch.bfloat16), KH, VH, enable_gqa=True) != FUSED_FORM
    assert sdpa_form(QH[0], KH[0], VH[0]) != FUSED_FORM  # 3-d
    mask = make((5, 7), torch.bfloat16, seed=4).to("tpu").requires_grad_()
    assert sdpa_form(QH, KH, VH, attn_mask=mask) != FUSED_FORM


@pytest.mark.parametrize("name", sorted(MASKS))
def test_sdpa_math_form_forced(name):
    """The math form forced for float32 (sdpa_kernel(MATH)) against the
    CPU, every mask and scale (the other mask tests run the fused form)."""
    with sdpa_kernel(SDPBackend.MATH):
        assert sdpa_form(Q, K, V) != FUSED_FORM
    check_attention(Q, K, V, tpu_backend=SDPBackend.MATH, **MASKS[name])


def test_sdpa_fused_form_forced_for_float64():
    """float64 takes the math form unless sdpa_kernel(OVERRIDEABLE) forces
    the fused one, whose backward then works from a float32 log-sum-exp."""
    q, k, v = (t.double() for t in (Q, K, V))
    with sdpa_kernel(SDPBackend.OVERRIDEABLE):
        assert sdpa_form(q, k, v) == FUSED_FORM
    check_attention(q, k, v, tpu_backend=SDPBackend.OVERRIDEABLE, is_causal=True)


def test_sdpa_kernel_context_chooses_the_form():
    """torch.nn.attention.sdpa_kernel as on CUDA: MATH forces the math form,
    OVERRIDEABLE (the fused form) alone raises where it does not fit."""
    with sdpa_kernel(SDPBackend.MATH):
        assert sdpa_form(QH, KH, VH) != FUSED_FORM
    with sdpa_kernel(SDPBackend.OVERRIDEABLE):
        assert sdpa_form(QH, KH, VH) == FUSED_FORM
        with pytest.raises(RuntimeError, match="(?i)no viable backend|no available kernel"):
            sdpa_form(QH, KH, VH, dropout_p=0.5)
    assert sdpa_form(QH, KH, VH) == FUSED_FORM


def test_sdpa_mask_gradient_takes_the_math_form():
    mask = make((2, 1, 5, 7), seed=5)
    outs, grads = [], []
    for device in ("cpu", "tpu"):
        m = mask.to(device, copy=True).requires_grad_()
        out = F.scaled_dot_product_attention(Q.to(device), K.to(device), V.to(device), attn_mask=m)
        out.backward(make(out.shape, seed=9).to(device))
        outs.append(out)
        grads.append(m.grad)
    assert_close(outs[1], outs[0])
    assert_close(grads[1], grads[0], *GRAD_TOL[torch.float32])


def test_sdpa_output_is_laid_out_like_the_query():
    """As CUDA's fused kernels do: heads split out of [B, T, H * E] give an
    output whose transpose back is a view, and code that relies on that
    (`.transpose(1, 2).view(B, T, H * E)`) runs as on CUDA."""
    x = make((2, 5, 3 * 8), torch.bfloat16, seed=3).to("tpu")
    q = x.view(2, 5, 3, 8).transpose(1, 2)
    out = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    assert out.stride() == q.stride()
    merged = out.transpose(1, 2).view(2, 5, 24)
    xc = x.cpu().view(2, 5, 3, 8).transpose(1, 2)
    expected = F.scaled_dot_product_attention(xc, xc, xc, is_causal=True).transpose(1, 2).reshape(2, 5, 24)
    assert_close(merged, expected)


@pytest.mark.parametrize("sizes", [(0, 7), (5, 0), (0, 0)])
def test_sdpa_empty_sequences(sizes):
    """No queries, or no keys (a row with nothing to attend to gives zeros,
    as PyTorch's math form)."""
    length, keys = sizes
    shapes = ((2, 3, length, 8), (2, 3, keys, 8), (2, 3, keys, 4))
    check_attention(*(make(shape, torch.bfloat16, seed) for seed, shape in enumerate(shapes)))


def test_sdpa_fused_form_bad_shapes_name_the_op():
    """The fused op called directly with a key of another head count."""
    q, k = make((1, 2, 3, 4)).to("tpu"), make((1, 3, 3, 4)).to("tpu")
    with pytest.raises(Exception, match="_scaled_dot_product_fused_attention_overrideable"):
        torch.ops.aten._scaled_dot_product_fused_attention_overrideable(q, k, k)[0].cpu()
    x = make((1, 2, 3, 4)).to("tpu")  # the process keeps working
    assert_close(F.scaled_dot_product_attention(x, x, x), F.scaled_dot_product_attention(*[x.cpu()] * 3))


def test_sdpa_dropout_seeded():
    """dropout_p > 0: the same seed draws the same mask, and the result is
    attention with that mask applied to the weights (drawn the same way as
    F.dropout on weights of that shape), forward and backward."""
    p = 0.4
    dev = [t.to("tpu").requires_grad_() for t in (Q, K, V)]
    torch.manual_seed(123)
    actual = F.scaled_dot_product_attention(*dev, dropout_p=p)
    torch.manual_seed(123)
    again = F.scaled_dot_product_attention(*[t.detach() for t in dev], dropout_p=p)
    assert torch.equal(actual.cpu(), again.cpu())
    torch.manual_seed(123)
    keep = F.dropout(torch.ones(2, 3, 5, 7, device="tpu"), p).cpu()  # 0 or 1 / (1 - p)
    assert 0 < (keep == 0).float().mean() < 1
    cpu = [t.clone().requires_grad_() for t in (Q, K, V)]
    weights = torch.softmax(cpu[0] @ cpu[1].transpose(-2, -1) / 8 ** 0.5, dim=-1)
    expected = (weights * keep) @ cpu[2]
    assert_close(actual, expected)
    g = make(expected.shape, seed=9)
    expected.backward(g)
    actual.backward(g.to("tpu"))
    for c, d in zip(cpu, dev):
        assert_close(d.grad, c.grad, *GRAD_TOL[torch.float32])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_native_dropout_backward(dtype):
    grad = make((4, 6), dtype)
    mask = make((4, 6), seed=1) > 0
    expected = torch.ops.aten.native_dropout_backward(grad, mask, 1.25)
    actual = torch.ops.aten.native_dropout_backward(grad.to("tpu"), mask.to("tpu"), 1.25)
    assert_close(actual, expected)


def test_multihead_attention_module():
    """Training path: SDPA's math form under autograd."""
    torch.manual_seed(0)
    cpu = nn.MultiheadAttention(8, 2, batch_first=True)
    dev = copy.deepcopy(cpu).to("tpu")
    x = make((2, 5, 8))
    mask = torch.triu(torch.ones(5, 5, dtype=torch.bool), 1)
    out_c, weights_c = cpu(x, x, x, attn_mask=mask)
    out_d, weights_d = dev(*[x.to("tpu")] * 3, attn_mask=mask.to("tpu"))
    assert_close(out_d, out_c)
    assert_close(weights_d, weights_c)
    g = make(out_c.shape, seed=1)
    out_c.backward(g), out_d.backward(g.to("tpu"))
    assert_close(dev.in_proj_weight.grad, cpu.in_proj_weight.grad, *GRAD_TOL[torch.float32])


MHA_MASKS = {
    "none": {},
    "causal": {"attn_mask": torch.triu(torch.ones(5, 5, dtype=torch.bool), 1)},
    "key_padding": {"key_padding_mask": torch.tensor([[False] * 4 + [True], [False] * 5])},
    "both": {"attn_mask": torch.triu(torch.ones(5, 5, dtype=torch.bool), 1),
             "key_padding_mask": torch.tensor([[False] * 3 + [True] * 2, [False] * 5])},
    # A batch that sees no key: NaN there, as PyTorch's kernel gives.
    "fully_masked": {"key_padding_mask": torch.tensor([[True] * 5, [False] * 4 + [True]])},
}


@pytest.mark.parametrize("name", sorted(MHA_MASKS))
@pytest.mark.parametrize("weights", ["none", "average", "per_head"])
def test_multihead_attention_inference(name, weights):
    """Evaluation without autograd takes PyTorch's fast path,
    _native_multi_head_attention, one program here."""
    torch.manual_seed(0)
    cpu = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    nn.init.normal_(cpu.in_proj_bias), nn.init.normal_(cpu.out_proj.bias)
    dev = copy.deepcopy(cpu).to("tpu")
    x = make((2, 5, 8))
    kwargs = {"need_weights": weights != "none", "average_attn_weights": weights == "average"}
    with torch.no_grad():
        out_c, weights_c = cpu(x, x, x, **kwargs, **MHA_MASKS[name])
        out_d, weights_d = dev(*[x.to("tpu")] * 3, **kwargs,
                               **{n: m.to("tpu") for n, m in MHA_MASKS[name].items()})
    assert_close(out_d, out_c, 1e-5, 1e-5)
    if weights_c is not None:
        assert_close(weights_d, weights_c)


@pytest.mark.parametrize("mask_type", [None, 0, 1, 2])
def test_native_multi_head_attention_aten(mask_type):
    """Separate key and value inputs, each mask layout, float masks read as
    "nonzero is masked"."""
    q, k, v = make((2, 5, 8)), make((2, 5, 8), seed=1), make((2, 5, 8), seed=2)
    params = [make((24, 8), seed=3), make(24, seed=4), make((8, 8), seed=5), make(8, seed=6)]
    mask = {None: None, 0: make((5, 5), seed=7) > 0.5, 1: make((2, 5), seed=7) > 0.8,
            2: (make((2, 2, 5, 5), seed=7) > 0.5).float() * -1e4}[mask_type]
    args = [q, k, v, 8, 2, *params, mask, True, mask_type is None, mask_type]
    expected = torch.ops.aten._native_multi_head_attention(*args)
    actual = torch.ops.aten._native_multi_head_attention(
        *[a.to("tpu") if isinstance(a, torch.Tensor) else a for a in args])
    assert_close(actual[0], expected[0], 1e-5, 1e-5)
    assert_close(actual[1], expected[1])


@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_encoder_layer_inference(activation, norm_first):
    """Evaluation without autograd takes _transformer_encoder_layer_fwd."""
    torch.manual_seed(0)
    cpu = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, activation=activation,
                                     norm_first=norm_first).eval()
    dev = copy.deepcopy(cpu).to("tpu")
    x = make((2, 5, 8))
    causal = torch.triu(torch.ones(5, 5, dtype=torch.bool), 1)
    with torch.no_grad():
        assert_close(dev(x.to("tpu")), cpu(x), 1e-5, 1e-5)
        assert_close(dev(x.to("tpu"), src_mask=causal.to("tpu")), cpu(x, src_mask=causal), 1e-5, 1e-5)


def test_transformer_encoder_inference_with_padding():
    """A key padding mask (nested tensors off: tpu has none)."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)
    cpu = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    dev = copy.deepcopy(cpu).to("tpu")
    x = make((2, 5, 8))
    padding = torch.tensor([[False] * 3 + [True] * 2, [False] * 5])
    with torch.no_grad():
        assert_close(dev(x.to("tpu"), src_key_padding_mask=padding.to("tpu")),
                     cpu(x, src_key_padding_mask=padding), 1e-5, 1e-5)


PADDINGS = {  # True: padded; rows keep 4, 6 and 1 of 6 positions
    "suffixes": [[False] * 4 + [True] * 2, [False] * 6, [False] + [True] * 5],
    # No row keeps the last position: padded back to the input's length.
    "every row padded at the end": [[False] * 4 + [True] * 2, [False] * 5 + [True], [False] + [True] * 5],
    # Not a suffix: PyTorch leaves the nested path for the padded one.
    "a gap": [[False] * 4 + [True] * 2, [False, True] + [False] * 4, [False] + [True] * 5],
}


@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("activation,final_norm", [("relu", False), ("gelu", True)])
def test_transformer_encoder_inference_nested_fast_path(padding, activation, final_norm):
    """With nested tensors on (the default; PyTorch takes them for
    batch-first layers that normalize after each sublayer) the unpadded
    rows are packed into a nested tensor on the input's device: padded
    positions come out zero (or the final norm of zero), as on CPU."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, activation=activation)
    cpu = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8) if final_norm else None).eval()
    dev = copy.deepcopy(cpu).to("tpu")
    x, mask = make((3, 6, 8)), torch.tensor(PADDINGS[padding])
    with torch.no_grad():
        expected = cpu(x, src_key_padding_mask=mask)
        actual = dev(x.to("tpu"), src_key_padding_mask=mask.to("tpu"))
    assert_close(actual, expected, 1e-5, 1e-5)
    if padding != "a gap" and not final_norm:
        assert not actual.cpu()[mask].any()


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.bfloat16, 3e-2)])
def test_transformer_encoder_inference_nested_fast_path_dtypes(dtype, tol):
    torch.manual_seed(0)
    cpu = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), 1).eval().to(dtype)
    dev = copy.deepcopy(cpu).to("tpu")
    x, mask = make((3, 6, 8), dtype), torch.tensor(PADDINGS["suffixes"])
    with torch.no_grad():
        assert_close(dev(x.to("tpu"), src_key_padding_mask=mask.to("tpu")),
                     cpu(x, src_key_padding_mask=mask), tol, tol)


def test_nested_tensor_from_mask_ops():
    """The mask check, packing and padding back, each against CPU; masks
    that are not prefixes, or do not match the input, raise naming the op."""
    x = make((3, 6, 8))
    for rows in PADDINGS.values():
        keep = torch.tensor(rows).logical_not()
        assert (torch._nested_tensor_from_mask_left_aligned(x.to("tpu"), keep.to("tpu"))
                == torch._nested_tensor_from_mask_left_aligned(x, keep))
        expected = torch._nested_tensor_from_mask(x, keep, mask_check=False)
        actual = torch._nested_tensor_from_mask(x.to("tpu"), keep.to("tpu"), mask_check=False)
        assert actual.is_nested and actual.device.type == "tpu"
        assert torch.equal(torch.ops.aten._nested_tensor_size(actual), torch.ops.aten._nested_tensor_size(expected))
        assert_close(actual.to_padded_tensor(0.0, (3, 7, 8)), expected.to_padded_tensor(0.0, (3, 7, 8)))
    gap = torch.tensor(PADDINGS["a gap"]).logical_not()
    with pytest.raises(RuntimeError, match="_nested_tensor_from_mask: each row of the mask must keep a prefix"):
        torch._nested_tensor_from_mask(x.to("tpu"), gap.to("tpu"))
    with pytest.raises(RuntimeError, match=r"_nested_tensor_from_mask: expected the mask \[N, L\] = \[3, 6\]"):
        torch._nested_tensor_from_mask(x.to("tpu"), gap[:, :5].to("tpu"))
    with pytest.raises(RuntimeError, match="_nested_tensor_from_mask_left_aligned: expected a bool mask"):
        torch._nested_tensor_from_mask_left_aligned(x.to("tpu"), gap.float().to("tpu"))
    torch.ones(2, device="tpu").cpu()  # the device still works


def test_fused_attention_forms_with_an_empty_batch():
    q = make((0, 5, 8))
    params = [make((24, 8), seed=3), make(24, seed=4), make((8, 8), seed=5), make(8, seed=6)]
    check(lambda q, *p: torch.ops.aten._native_multi_head_attention(q, q, q, 8, 2, *p, None, False)[0],
          q, *params)
    layer = [make((16, 8), seed=7), make(16, seed=8), make((8, 16), seed=9), make(8, seed=10)]
    norms = [torch.ones(8), torch.zeros(8), torch.ones(8), torch.zeros(8)]
    check(lambda q, *p: torch.ops.aten._transformer_encoder_layer_fwd(
        q, 8, 2, *p[:4], False, False, 1e-5, *p[4:8], *p[8:], None, None), q, *params, *norms, *layer)


def test_fused_attention_heads_must_divide_embed_dim():
    q = make((1, 5, 6))
    params = [make((18, 6), seed=3), make(18, seed=4), make((6, 6), seed=5), make(6, seed=6)]
    for dev in ["cpu", "tpu"]:
        with pytest.raises(RuntimeError):
            torch.ops.aten._native_multi_head_attention(
                *[t.to(dev) for t in (q, q, q)], 6, 4, *[p.to(dev) for p in params], None, True, False)
