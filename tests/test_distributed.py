"""torch.distributed on tpu tensors: two processes (tests/distributed_worker.py)
join a process group with no backend named, which for the tpu device is the
"tpu" backend, run each collective and three DDP and FSDP2 (fully_shard)
training steps on tpu tensors, and their results are compared with what
the CPU computes: the collectives exactly, the trained parameters with a
single CPU model trained on the whole batches (float32 tolerance)."""
import os
import subprocess
import sys

import torch
from torch.testing import assert_close

sys.path.insert(0, os.path.dirname(__file__))
from distributed_worker import model_and_data  # noqa: E402

WORLD = 2


def run_ranks(tmp_path):
    worker = os.path.join(os.path.dirname(__file__), "distributed_worker.py")
    init = str(tmp_path / "rendezvous")
    outs = [str(tmp_path / f"rank{r}.pt") for r in range(WORLD)]
    ranks = [subprocess.Popen([sys.executable, worker, str(r), str(WORLD), init, outs[r]],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in range(WORLD)]
    for r, p in enumerate(ranks):
        output, _ = p.communicate(timeout=300)
        assert p.returncode == 0, f"rank {r} failed:\n{output}"
    return [torch.load(o) for o in outs]


def test_collectives_and_ddp_on_tpu_tensors(tmp_path):
    results = run_ranks(tmp_path)
    value = torch.arange(6, dtype=torch.float32)
    ranks = [value * (r + 1) for r in range(WORLD)]
    expected = {
        "SUM": sum(ranks), "AVG": sum(ranks) / WORLD, "MAX": torch.stack(ranks).amax(0),
        "PRODUCT": torch.stack(ranks).prod(0),
        "int_sum": torch.tensor([sum(r + 1 for r in range(WORLD)), sum(10 * r for r in range(WORLD))]),
        "broadcast": torch.full((3,), float(WORLD - 1)),
        "all_gather": torch.stack([torch.full((2, 3), float(r)) for r in range(WORLD)]),
        "all_gather_into_tensor": torch.cat([torch.full((2,), float(r + 1)) for r in range(WORLD)]),
    }
    scattered = sum(torch.arange(2.0 * WORLD) * (r + 1) for r in range(WORLD))
    for rank, got in enumerate(results):
        assert got["group"] == "ProcessGroupTPU" and got["tpu_backend"] == "tpu"
        for name, want in expected.items():
            assert_close(got[name], want, rtol=0, atol=0)
        assert_close(got["reduce_scatter_tensor"], scattered[2 * rank:2 * rank + 2], rtol=0, atol=0)
        assert_close(got["scatter"], torch.full((2,), 5.0 + rank), rtol=0, atol=0)
        assert_close(got["all_to_all_single"], torch.tensor([10.0 * r + rank for r in range(WORLD)]), rtol=0, atol=0)
        assert_close(got["all_to_all"], torch.stack([torch.full((2,), 10.0 * r + rank) for r in range(WORLD)]),
                     rtol=0, atol=0)
    assert_close(results[0]["reduce"], sum(ranks), rtol=0, atol=0)
    assert_close(results[0]["gather"], torch.stack([torch.full((2,), float(r)) for r in range(WORLD)]), rtol=0, atol=0)
    assert_close(results[1]["recv"], torch.tensor([7.0, 8.0]), rtol=0, atol=0)

    # one CPU model on the whole batches: DDP averages the ranks' gradients
    model, x, y = model_and_data()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(x.shape[0]):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x[step]), y[step]).backward()
        opt.step()
    for got in results:
        for mode in ("ddp", "fsdp2"):
            for p, want in zip(got[mode], model.parameters()):
                assert_close(p, want.detach(), rtol=1e-5, atol=1e-6)
