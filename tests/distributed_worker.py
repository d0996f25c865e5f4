"""One rank of tests/test_distributed.py: `python distributed_worker.py RANK
WORLD INIT_FILE OUT_FILE`. Runs collectives and a few DDP and FSDP2
training steps on tpu tensors through the "tpu" process group and saves
what it got (as CPU tensors) for the test to compare with the CPU's."""
import os
import sys

import torch
import torch.distributed as dist


def model_and_data():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(3, 8, 8, generator=g), torch.randn(3, 8, 1, generator=g)
    return model, x, y


def main(rank, world, init_file, out_file):
    dist.init_process_group(init_method="file://" + init_file, rank=rank, world_size=world)
    got = {"group": type(dist.group.WORLD).__name__, "tpu_backend": dist.get_default_backend_for_device("tpu")}
    value = torch.arange(6, dtype=torch.float32, device="tpu") * (rank + 1)
    for op in ("SUM", "AVG", "MAX", "PRODUCT"):
        t = value.clone()
        dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
        got[op] = t.cpu()
    counts = torch.tensor([rank + 1, 10 * rank], device="tpu")
    dist.all_reduce(counts)
    got["int_sum"] = counts.cpu()
    t = torch.full((3,), float(rank), device="tpu")
    dist.broadcast(t, src=world - 1)
    got["broadcast"] = t.cpu()
    parts = [torch.empty(2, 3, device="tpu") for _ in range(world)]
    dist.all_gather(parts, torch.full((2, 3), float(rank), device="tpu"))
    got["all_gather"] = torch.stack([p.cpu() for p in parts])
    gathered = torch.empty(world * 2, device="tpu")
    dist.all_gather_into_tensor(gathered, torch.full((2,), float(rank + 1), device="tpu"))
    got["all_gather_into_tensor"] = gathered.cpu()
    mine = torch.empty(2, device="tpu")
    dist.reduce_scatter_tensor(mine, torch.arange(2.0 * world, device="tpu") * (rank + 1))
    got["reduce_scatter_tensor"] = mine.cpu()
    t = value.clone()
    dist.reduce(t, dst=0)
    got["reduce"] = t.cpu()
    gathered_list = [torch.empty(2, device="tpu") for _ in range(world)] if rank == 0 else None
    dist.gather(torch.full((2,), float(rank), device="tpu"), gathered_list, dst=0)
    got["gather"] = torch.stack([g.cpu() for g in gathered_list]) if rank == 0 else None
    piece = torch.empty(2, device="tpu")
    dist.scatter(piece, [torch.full((2,), 5.0 + r, device="tpu") for r in range(world)] if rank == 0 else None, src=0)
    got["scatter"] = piece.cpu()
    exchanged = torch.empty(world, device="tpu")
    dist.all_to_all_single(exchanged, torch.arange(world, dtype=torch.float32, device="tpu") + 10 * rank)
    got["all_to_all_single"] = exchanged.cpu()
    received_list = [torch.empty(2, device="tpu") for _ in range(world)]
    dist.all_to_all(received_list, [torch.full((2,), 10.0 * rank + r, device="tpu") for r in range(world)])
    got["all_to_all"] = torch.stack([t.cpu() for t in received_list])
    if rank == 0:
        dist.send(torch.tensor([7.0, 8.0], device="tpu"), dst=1)
    elif rank == 1:
        received = torch.empty(2, device="tpu")
        dist.recv(received, src=0)
        got["recv"] = received.cpu()
    work = dist.all_reduce(torch.ones(2, device="tpu"), async_op=True)
    work.wait()
    dist.barrier()

    # DDP: each rank trains on its share of every batch
    model, x, y = model_and_data()
    ddp = torch.nn.parallel.DistributedDataParallel(model.to("tpu"))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    share = x.shape[1] // world
    for step in range(x.shape[0]):
        xs = x[step, rank * share:(rank + 1) * share].to("tpu")
        ys = y[step, rank * share:(rank + 1) * share].to("tpu")
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(xs), ys).backward()
        opt.step()
    got["ddp"] = [p.detach().cpu() for p in model.parameters()]

    # FSDP2: each rank holds half of every parameter, gathered for the
    # forward and backward, the gradients reduce-scattered
    from torch.distributed.fsdp import fully_shard

    model, x, y = model_and_data()
    model.to("tpu")
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(x.shape[0]):
        opt.zero_grad()
        xs = x[step, rank * share:(rank + 1) * share].to("tpu")
        torch.nn.functional.mse_loss(model(xs), y[step, rank * share:(rank + 1) * share].to("tpu")).backward()
        opt.step()
    got["fsdp2"] = [p.full_tensor().detach().cpu() for p in model.parameters()]
    dist.destroy_process_group()
    torch.save(got, out_file)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4])
    # The results are saved: skip the interpreter's teardown, where rank 0
    # (the rendezvous store's server) was once aborted by a C++ thread still
    # running at exit ("terminate called without an active exception",
    # 1 run of 4 in a day's CI runs, after every check had passed).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
