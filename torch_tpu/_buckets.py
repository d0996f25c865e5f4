"""Bucketed dimensions for compiled graphs (opt-in, `options={"bucket_bound": N}`).

With dynamic shapes dynamo hands over graphs whose sizes are symbols. Each
symbol's value is rounded up to a bucket (the next power of two, at most
N): tensor inputs are zero-padded at the end of those dimensions, integer
inputs take the bucket value, and outputs are sliced back to the real size.
So a graph is captured and compiled once per bucket instead of once per
size. This is exact when positions along the dimension do not affect each
other's results before that position, as in causal attention over a
sequence or per-sample work over a batch; a reduction over the padded
dimension (a mean loss, batch norm) would see the zeros. Sizes above N run
unpadded, one program each.
"""
import torch
import torch.nn.functional as F


def _symbol(size):
    """The symbol a size is; None for a constant; False for an expression."""
    if not isinstance(size, torch.SymInt):
        return None
    expr = size.node.expr
    if expr.is_Symbol:
        return expr
    return False if expr.free_symbols else None


class Buckets:
    """Which inputs and outputs of one graph carry which size symbols."""

    def __init__(self, gm, bound):
        self.bound = bound
        self.usable = True
        self.int_args = {}     # input index -> symbol
        self.tensor_dims = {}  # input index -> [(dim, symbol)]
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        for i, node in enumerate(placeholders):
            val = node.meta.get("val")
            if isinstance(val, torch.SymInt):
                self._note(self.int_args, i, _symbol(val))
            elif isinstance(val, torch.Tensor):
                dims = [(d, _symbol(s)) for d, s in enumerate(val.shape)]
                self.usable &= all(s is not False for _, s in dims)
                dims = [(d, s) for d, s in dims if s]
                if dims:
                    self.tensor_dims[i] = dims
        known = set(self.int_args.values()) | {s for dims in self.tensor_dims.values() for _, s in dims}
        self.out_dims = {}     # output index -> [(dim, symbol)]
        output = [n for n in gm.graph.nodes if n.op == "output"][0]
        values = output.args[0] if isinstance(output.args[0], (list, tuple)) else [output.args[0]]
        for k, v in enumerate(values):
            val = v.meta.get("val") if isinstance(v, torch.fx.Node) else None
            if isinstance(val, torch.Tensor):
                dims = [(d, _symbol(s)) for d, s in enumerate(val.shape)]
                self.usable &= all(s is not False and (s is None or s in known) for _, s in dims)
                dims = [(d, s) for d, s in dims if s]
                if dims:
                    self.out_dims[k] = dims
            elif isinstance(val, torch.SymInt):
                self.usable = False  # a size computed from the padded ones
        self.usable &= bool(known)

    def _note(self, table, index, symbol):
        if symbol is False:
            self.usable = False
        elif symbol is not None:
            table[index] = symbol

    def _bucket(self, size):
        if size > self.bound:
            return None
        return min(1 << (size - 1).bit_length(), self.bound)

    def pad(self, args):
        """The arguments padded to their buckets and each symbol's real
        size; None when a size is over the bound."""
        real = {s: args[i] for i, s in self.int_args.items()}
        for i, dims in self.tensor_dims.items():
            for d, s in dims:
                real.setdefault(s, args[i].shape[d])
        bucket = {s: self._bucket(v) for s, v in real.items()}
        if any(b is None for b in bucket.values()):
            return None
        padded = list(args)
        for i, s in self.int_args.items():
            padded[i] = bucket[s]
        for i, dims in self.tensor_dims.items():
            t = args[i]
            widths = [0, 0] * t.dim()
            for d, s in dims:
                widths[2 * (t.dim() - 1 - d) + 1] = bucket[s] - t.shape[d]
            if any(widths):
                # Padded on the host: a device-side pad would be a new
                # program for every input size, which is what buckets avoid.
                padded[i] = F.pad(t.cpu(), widths).to(t.device)
        return padded, real

    def slice(self, outputs, real):
        for k, dims in self.out_dims.items():
            t = outputs[k]
            for d, s in dims:
                t = t.narrow(d, 0, real[s])
            outputs[k] = t
        return outputs
