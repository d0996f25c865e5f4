"""torch.amp.GradScaler on tpu against CPU: training with fused and foreach
optimizers through an overflowing step (skipped, scale backed off) and
scale growth; and its two ops, _amp_foreach_non_finite_check_and_unscale_
and _amp_update_scale_, called directly."""
import math
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
from parity import assert_close  # noqa: E402

STEPS = 6
OVERFLOW_STEP = 2  # its loss is scaled past float32's range


def train(device, make_opt):
    """Per step: (weight, bias, scale) after the scaler's update."""
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4).to(device)
    opt = make_opt(model.parameters())
    scaler = torch.amp.GradScaler(device, init_scale=2.0 ** 10, growth_interval=2)
    g = torch.Generator().manual_seed(1)
    history = []
    for step in range(STEPS):
        x = torch.randn(16, 8, generator=g).to(device)
        opt.zero_grad()
        loss = model(x).pow(2).mean() * (1e36 if step == OVERFLOW_STEP else 1.0)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        history.append((model.weight.detach().clone(), model.bias.detach().clone(), scaler.get_scale()))
    return history


OPTIMIZERS = {
    "adamw-fused": lambda p: torch.optim.AdamW(p, lr=0.01, fused=True),
    "adamw-foreach": lambda p: torch.optim.AdamW(p, lr=0.01, foreach=True),
    "sgd-fused": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, fused=True),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_training_with_grad_scaler_matches_cpu(name):
    cpu = train("cpu", OPTIMIZERS[name])
    tpu = train("tpu", OPTIMIZERS[name])
    scales = [s for _, _, s in cpu]
    assert scales[OVERFLOW_STEP] < scales[OVERFLOW_STEP - 1], "the overflow did not back the scale off"
    assert max(scales) > scales[0], "the scale never grew"
    for step, ((cw, cb, cs), (tw, tb, ts)) in enumerate(zip(cpu, tpu)):
        assert ts == cs, f"step {step}: scale"
        assert_close(tw, cw, 1e-5, 1e-6)
        assert_close(tb, cb, 1e-5, 1e-6)
    assert torch.equal(tpu[OVERFLOW_STEP][0].cpu(), tpu[OVERFLOW_STEP - 1][0].cpu()), "the overflow step updated"


def gradients():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(4, 3, generator=g), torch.randn(5, generator=g).to(torch.float16),
            torch.randn((), generator=g).to(torch.bfloat16), torch.randn(0, generator=g),
            torch.randn(2, 3, generator=g).t()]  # a transposed view


@pytest.mark.parametrize("bad", [None, math.inf, -math.inf, math.nan])
@pytest.mark.parametrize("found_before", [0.0, 1.0])
@pytest.mark.parametrize("inv_scale", [0.25, 1.0])
def test_non_finite_check_and_unscale(bad, found_before, inv_scale):
    cpu = gradients()
    if bad is not None:
        cpu[1][3] = bad
    tpu = [t.to("tpu") for t in cpu]
    results = []
    for grads, device in [(cpu, "cpu"), (tpu, "tpu")]:
        found = torch.tensor([found_before], device=device)
        torch._amp_foreach_non_finite_check_and_unscale_(grads, found, torch.tensor([inv_scale], device=device))
        results.append(found)
    assert_close(results[1], results[0], 0, 0)
    assert float(results[1]) == (1.0 if bad is not None or found_before else 0.0)
    for t, c in zip(tpu, cpu):
        assert_close(t, c, 0, 0)


@pytest.mark.parametrize("scale,tracker,found", [
    (1024.0, 0, 0.0),        # counts a clean step
    (1024.0, 1, 0.0),        # the interval's last clean step: grows
    (1024.0, 1, 1.0),        # overflow: backs off
    (3e38, 1, 0.0),          # growing would overflow: keeps the scale
    (1024.0, 5, 2.0),        # any nonzero found_inf counts
])
def test_update_scale(scale, tracker, found):
    results = []
    for device in ["cpu", "tpu"]:
        s = torch.tensor([scale], device=device)
        t = torch.tensor([tracker], dtype=torch.int32, device=device)
        returned = torch._amp_update_scale_(s, t, torch.tensor([found], device=device), 2.0, 0.5, 2)
        assert returned is s
        results.append((s, t))
    (cs, ct), (ts, tt) = results
    assert_close(ts, cs, 0, 0)
    assert_close(tt, ct, 0, 0)
