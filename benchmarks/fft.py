"""Fourier transforms as a user calls them: each case one torch.fft call (or
torch.stft) in strict eager mode on tpu (awaited) and on PyTorch's CPU
backend (pocketfft/MKL), in one run. Prints milliseconds per call (best of
alternating rounds) and tpu's speed relative to CPU.

    python benchmarks/fft.py [--steps 10 --repeats 5]
"""
import argparse

import torch

import torch_tpu  # noqa: F401 (registers the tpu device)
from timing import best_ms


def audio(shape, generator):
    return torch.randn(shape, generator=generator)


def spectrum(shape, generator):
    return torch.complex(torch.randn(shape, generator=generator), torch.randn(shape, generator=generator))


WINDOW = torch.hann_window(400)

# name: (function of (input, window), input maker, input shape)
CASES = {
    "rfft [64, 4096]": (lambda x, w: torch.fft.rfft(x), audio, (64, 4096)),
    "irfft [64, 2049] -> 4096": (lambda x, w: torch.fft.irfft(x, 4096), spectrum, (64, 2049)),
    "fft complex64 [64, 4096]": (lambda x, w: torch.fft.fft(x), spectrum, (64, 4096)),
    "fft2 complex64 [16, 256, 256]": (lambda x, w: torch.fft.fft2(x), spectrum, (16, 256, 256)),
    "rfftn 3-d [8, 64, 64, 64]": (lambda x, w: torch.fft.rfftn(x, dim=(1, 2, 3)), audio, (8, 64, 64, 64)),
    "stft 16 x 1 s at 16 kHz, n_fft 400, hop 160":
        (lambda x, w: torch.stft(x, 400, 160, window=w, return_complex=True), audio, (16, 16000)),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"{'transform':44s} {'tpu ms':>8s} {'cpu ms':>8s} {'tpu vs cpu':>10s}")
    window = WINDOW.to("tpu")
    for name, (fn, make, shape) in CASES.items():
        x = make(shape, torch.Generator().manual_seed(0))
        on_tpu = x.to("tpu")
        sides = {"tpu": lambda: (fn(on_tpu, window), torch.tpu.synchronize()), "cpu": lambda: fn(x, WINDOW)}
        ms, forms = best_ms(sides, args.steps, args.repeats)
        error = (forms["tpu"][0].cpu() - forms["cpu"]).abs().max() / forms["cpu"].abs().max()
        assert error < 1e-5, f"{name}: tpu differs from cpu by {error:.2g} (relative to the largest entry)"
        print(f"{name:44s} {ms['tpu']:8.2f} {ms['cpu']:8.2f} {ms['cpu'] / ms['tpu']:9.2f}x", flush=True)


if __name__ == "__main__":
    main()
