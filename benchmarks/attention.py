"""F.scaled_dot_product_attention, forward and backward, causal, at a
GPT-2-like shape: on tpu in its fused form (its default, forced all the same
with sdpa_kernel(SDPBackend.OVERRIDEABLE); one op each way, the products in
the inputs' dtype) and in PyTorch's math form (forced with
sdpa_kernel(SDPBackend.MATH): half inputs cast to float32, the probabilities
kept), and on PyTorch's CPU backend, in one run. (No PyTorch CUDA side: with
the tpu device registered, PyTorch's autograd refuses CUDA tensors; see
gpt2_step.py.) Prints milliseconds per forward+backward (best of alternating
rounds) and each side's ratio to the tpu math form.

    python benchmarks/attention.py [--batch 4 --heads 12 --tokens 256 --head-dim 64]
"""
import argparse
import contextlib

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import torch_tpu  # noqa: F401 (registers the tpu device)
from timing import best_ms


def make_side(device, dtype, shape, backend, sync):
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(shape, generator=generator).to(device, dtype).requires_grad_() for _ in range(3))
    grad = torch.randn(shape, generator=generator).to(device, dtype)

    def step():
        with sdpa_kernel(backend) if backend is not None else contextlib.nullcontext():
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        form = out.grad_fn.name()
        out.backward(grad)
        sync(q.grad)
        q.grad = k.grad = v.grad = None
        return form
    return step


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    shape = (args.batch, args.heads, args.tokens, args.head_dim)
    read_back = lambda t: t.sum().item()  # noqa: E731 (waits for the device's work)
    print(f"scaled_dot_product_attention, causal, q/k/v {list(shape)}, forward + backward, "
          f"ms (tpu is {torch.tpu.get_device_name()})")
    for dtype in (torch.float32, torch.bfloat16):
        sides = {"tpu fused form": make_side("tpu", dtype, shape, SDPBackend.OVERRIDEABLE, read_back),
                 "tpu math form": make_side("tpu", dtype, shape, SDPBackend.MATH, read_back),
                 "PyTorch CPU": make_side("cpu", dtype, shape, None, lambda t: None)}
        ms, forms = best_ms(sides, args.steps, args.repeats)
        for name in sides:
            print(f"  {str(dtype)[6:]:9} {name:15} {ms[name]:9.2f} ms  {ms['tpu math form'] / ms[name]:5.2f}x "
                  f"the math form  ({forms[name]})", flush=True)


if __name__ == "__main__":
    main()
