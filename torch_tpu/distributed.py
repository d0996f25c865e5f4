"""torch.distributed on tpu tensors: the "tpu" c10d backend.

`dist.init_process_group("tpu")` (or no backend name: "tpu" is the default
for the tpu device) gives a process group whose collectives take tpu
tensors, one process per device as with NCCL, so DistributedDataParallel,
`all_reduce`, `broadcast`, `all_gather` and the rest run unchanged.

Each collective stages through the host: it waits for the tensors, copies
them to the CPU, runs gloo's collective between the processes over the
same rendezvous store, and writes the results back into the tpu tensors.
That works on every plugin and needs nothing from it; collectives that run
on the devices themselves (stablehlo.all_reduce across replicas) are the
faster path this leaves for later. Every call completes before it returns,
so its work object is already done; `async_op=True` is accepted.
"""
import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future

BACKEND = "tpu"


def _completed(result):
    """A work object whose future already holds `result` (what DDP's
    reducer reads back: the tensors it reduced)."""
    future = torch.futures.Future()
    future.set_result(result)
    return _create_work_from_future(future)


def _on_host(tensors):
    return [t.cpu() for t in tensors]


def _write_back(tensors, host):
    for t, h in zip(tensors, host):
        if t is not h:
            t.copy_(h)


class ProcessGroupTPU(dist.ProcessGroup):
    """Collectives over tpu (and CPU) tensors, staged through a gloo group
    on the host (see the module doc)."""

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self._host = dist.ProcessGroupGloo(store, rank, size, timeout)
        self._name = self._description = ""

    def getBackendName(self):
        return BACKEND

    # The group's name and description, which PyTorch's base class keeps
    # in its backends (this group has none of its own): DeviceMesh reads them.
    def setGroupName(self, name):
        self._name = name

    def getGroupName(self):
        return self._name

    def setGroupDesc(self, description):
        self._description = description

    def getGroupDesc(self):
        return self._description

    def _allreduce_on_host(self, host, opts):
        """gloo's all-reduce of each host tensor in place, with opts'
        reduction; gloo has no AVG, so that sums and divides after."""
        average = opts.reduceOp == dist.ReduceOp.AVG
        gloo_opts = dist.AllreduceOptions()
        gloo_opts.reduceOp = dist.ReduceOp.SUM if average else opts.reduceOp
        gloo_opts.timeout = opts.timeout
        for h in host:
            self._host.allreduce([h], gloo_opts).wait()
            if average:
                h.div_(self.size())

    def allreduce(self, tensors, opts):
        host = _on_host(tensors)
        self._allreduce_on_host(host, opts)
        _write_back(tensors, host)
        return _completed(tensors)

    def allreduce_coalesced(self, tensors, opts):
        return self.allreduce(tensors, opts)

    def broadcast(self, tensors, opts):
        host = _on_host(tensors)
        self._host.broadcast(host, opts).wait()
        _write_back(tensors, host)
        return _completed(tensors)

    def _into_lists(self, collective, output_lists, inputs, opts):
        """gloo's `collective` (allgather, gather) into host copies of the
        output lists, written back after."""
        host_outputs = [[torch.empty_like(o, device="cpu") for o in outputs] for outputs in output_lists]
        collective(host_outputs, _on_host(inputs), opts).wait()
        for outputs, host in zip(output_lists, host_outputs):
            _write_back(outputs, host)
        return _completed(output_lists)

    def allgather(self, output_lists, inputs, opts):
        return self._into_lists(self._host.allgather, output_lists, inputs, opts)

    def all_gather_single(self, output, input, opts):
        host = torch.empty_like(output, device="cpu")
        self._host.allgather([list(host.chunk(self.size()))], [input.cpu()], opts).wait()
        output.copy_(host)
        return _completed([output])

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts):
        for output, input in zip(outputs, inputs):
            self.all_gather_single(output, input, opts)
        return _completed(outputs)

    def gather(self, output_lists, inputs, opts):
        return self._into_lists(self._host.gather, output_lists, inputs, opts)

    def scatter(self, outputs, input_lists, opts):
        host = [torch.empty_like(o, device="cpu") for o in outputs]
        self._host.scatter(host, [_on_host(inputs) for inputs in input_lists], opts).wait()
        _write_back(outputs, host)
        return _completed(outputs)

    def reduce(self, tensors, opts):
        # an all-reduce, whose results only the root keeps
        host = _on_host(tensors)
        self._allreduce_on_host(host, opts)
        if self.rank() == opts.rootRank:
            _write_back(tensors, host)
        return _completed(tensors)

    def reduce_scatter(self, outputs, input_lists, opts):
        # each rank's share reduced over every rank: one all-reduce of all
        # the shares, of which each rank keeps its own
        for output, inputs in zip(outputs, input_lists):
            host = torch.stack(_on_host(inputs))
            self._allreduce_on_host([host], opts)
            output.copy_(host[self.rank()])
        return _completed(outputs)

    def reduce_scatter_single(self, output, input, opts):
        return self.reduce_scatter([output], [list(input.chunk(self.size()))], opts)

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts):
        return self.reduce_scatter(outputs, [list(t.chunk(self.size())) for t in inputs], opts)

    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes, opts):
        host = torch.empty_like(output, device="cpu")
        self._host.alltoall_base(host, input.cpu(), output_split_sizes, input_split_sizes, opts).wait()
        output.copy_(host)
        return _completed([output])

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts):
        return self.all_to_all_single(output, input, output_split_sizes, input_split_sizes, opts)

    def alltoall(self, outputs, inputs, opts):
        host = [torch.empty_like(o, device="cpu") for o in outputs]
        self._host.alltoall(host, _on_host(inputs), opts).wait()
        _write_back(outputs, host)
        return _completed(outputs)

    def barrier(self, opts):
        self._host.barrier(opts).wait()
        return _completed([])

    def send(self, tensors, dst, tag):
        self._host.send(_on_host(tensors), dst, tag).wait()
        return _completed(tensors)

    def recv(self, tensors, src, tag):
        host = [torch.empty_like(t, device="cpu") for t in tensors]
        self._host.recv(host, src, tag).wait()
        _write_back(tensors, host)
        return _completed(tensors)


def _create_process_group(store, rank, size, timeout):
    return ProcessGroupTPU(store, rank, size, timeout)


def _register():
    if BACKEND.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND, _create_process_group, devices=[BACKEND])
