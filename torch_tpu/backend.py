"""torch.compile(backend="tpu").

Dynamo hands the backend an FX graph; AOTAutograd (with PyTorch's core ATen
decompositions) splits it into forward and backward graphs of ATen ops.
Each of those is captured once per input signature: its nodes run through
the same dispatcher path and C lowerings as eager ops, but the C runtime
records them into one StableHLO program instead of running them. Later
calls with the same signature run that program: one PJRT execution per
graph, compiled through the same memory and disk caches as eager programs.

Every tensor of a captured graph lives on the tpu: CPU tensors among the
inputs (an optimizer's step counter, say) are copied over, `device=cpu`
arguments become tpu, and outputs the graph declares on the CPU are copied
back after the run.
"""
import functools

import torch
import torch.fx
from torch._decomp import core_aten_decompositions
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func
from torch.fx.passes.split_module import split_module

from . import _C
from . import _capturable
from . import _linalg
from . import _meta
from ._buckets import Buckets

_TPU = "tpu"
_capturable.install()


# PyTorch's core ATen decompositions, less those it gets wrong where the C
# lowering of the op is right; built once, not per compiled graph.
_DECOMPOSITIONS = {op: fn for op, fn in core_aten_decompositions().items() if op not in _meta.WRONG_DECOMPOSITIONS}


def _on_tpu(value):
    if isinstance(value, torch.device) and value.type == "cpu":
        return torch.device(_TPU, _C._current_device())
    if isinstance(value, torch.Tensor) and value.device.type == "cpu":
        return value.to(_TPU)
    return value


_CHECK_ERRORS = torch.ops.aten._linalg_check_errors.default
_COND = torch.ops.higher_order.cond


class _TpuInterpreter(torch.fx.Interpreter):
    """Runs graph nodes with every tensor on the tpu (see the module doc).
    A linalg op's error check (linalg.cholesky, inv, solve: each reads its
    info back) cannot read a value while the program is being captured: the
    check is kept in `checks` and made after each run instead, when the
    values exist, so bad input raises the same error, as inductor's would."""

    def __init__(self, gm):
        super().__init__(gm)
        self.checks = []  # (info, api_name, is_matrix) of each deferred check

    def call_function(self, target, args, kwargs):
        args = torch.fx.node.map_aggregate(args, _on_tpu)
        kwargs = torch.fx.node.map_aggregate(kwargs, _on_tpu)
        if target is torch.ops.higher_order.with_effects and args[1] is _CHECK_ERRORS:
            self.checks.append((args[2], args[3], kwargs.get("is_matrix", True)))
            return args[0], None  # (the ordering token, the check's result)
        if target is _CHECK_ERRORS:
            self.checks.append((args[0], args[1], kwargs.get("is_matrix", True)))
            return None
        if target is _COND:
            return self._cond(*args, **kwargs)
        return super().call_function(target, args, kwargs)

    def _cond(self, pred, true_graph, false_graph, operands):
        """torch.cond. A captured program cannot branch on a value it has
        not computed yet, so it computes both branches and selects each
        output by the predicate. torch.cond's branches are functional (no
        mutation, same output shapes and dtypes), so the result is the taken
        branch's; only its cost is both branches', and random ops in the
        branches draw from the generator for both."""
        if not isinstance(pred, torch.Tensor):
            return self._branch(true_graph if pred else false_graph, operands)
        outs = zip(self._branch(true_graph, operands), self._branch(false_graph, operands))
        return [torch.where(pred, a, b) if isinstance(a, torch.Tensor) else a for a, b in outs]

    def _branch(self, graph, operands):
        branch = _TpuInterpreter(graph)
        outs = branch.run(*operands)
        self.checks.extend(branch.checks)
        return outs

    def get_attr(self, target, args, kwargs):
        return torch.fx.node.map_aggregate(super().get_attr(target, args, kwargs), _on_tpu)


class _Captured:
    """One captured program: its outputs' places in the graph's result."""

    def __init__(self, program, template, tensor_slots, cpu_slots, cpu_inputs, checks):
        self.program = program
        self.checks = checks              # (api_name, is_matrix) per info the program returns last
        self.template = template          # the graph's outputs, tensors as None
        self.tensor_slots = tensor_slots  # where the program's outputs go
        self.cpu_slots = cpu_slots        # outputs the graph declares on the CPU
        # CPU inputs the graph updates in place: written back after each run.
        self.cpu_written = [i for i in program.written_inputs() if i in cpu_inputs]


class CompiledGraph:
    """An AOTAutograd forward or backward graph, run as captured programs,
    one per input signature."""

    def __init__(self, gm, bucket_bound=None):
        # May be called with one list of inputs, which it frees. An instance
        # attribute, so the wrappers dynamo adds (functools.wraps) keep it.
        self._boxed_call = True
        self.gm = gm
        self.programs = {}
        self.calls = _C._GraphCalls()
        self.cpu_outputs = self._cpu_outputs(gm)
        self.buckets = Buckets(gm, bucket_bound) if bucket_bound else None
        if self.buckets and not self.buckets.usable:
            self.buckets = None

    @staticmethod
    def _cpu_outputs(gm):
        out = [n for n in gm.graph.nodes if n.op == "output"][0]
        values = out.args[0] if isinstance(out.args[0], (list, tuple)) else [out.args[0]]
        cpu = set()
        for i, v in enumerate(values):
            val = v.meta.get("val") if isinstance(v, torch.fx.Node) else None
            if isinstance(val, torch.Tensor) and val.device.type == "cpu":
                cpu.add(i)
        return cpu

    def __call__(self, *args):
        if len(args) == 1 and isinstance(args[0], list):
            boxed = args[0]
            args = list(boxed)
            boxed.clear()
        padded = self.buckets.pad(args) if self.buckets else None
        if padded is not None:
            args, real_sizes = padded
        # The program's key (what it depends on: each tensor's dtype,
        # device, view layout and storage size, which inputs share a
        # storage, the other arguments' values) and the tensor inputs, CPU
        # ones copied over.
        key, inputs = self.calls.call(args)
        captured = self.programs.get(key)
        if captured is None:
            captured = self.programs[key] = self._capture(args, inputs)
        given = [a for a in args if isinstance(a, torch.Tensor)] if captured.cpu_written else None
        del args
        outs = captured.program.run(inputs)
        if captured.checks:
            infos, outs = outs[len(outs) - len(captured.checks):], outs[:len(outs) - len(captured.checks)]
            for info, (api_name, is_matrix) in zip(infos, captured.checks):
                torch._linalg_check_errors(info, api_name, is_matrix=is_matrix)
        for i in captured.cpu_written:
            given[i].copy_(inputs[i])
        result = list(captured.template)
        for slot, t in zip(captured.tensor_slots, outs):
            result[slot] = t.cpu() if slot in captured.cpu_slots else t
        return self.buckets.slice(result, real_sizes) if padded is not None else result

    def _capture(self, args, inputs):
        device = inputs[0].device.index if inputs and inputs[0].device.index is not None else _C._current_device()
        tensors = iter(inputs)
        run_args = [next(tensors) if isinstance(a, torch.Tensor) else a for a in args]
        # Capturing draws random offsets for nothing: put the generator back,
        # so the first run draws what any later run from that state would.
        rng_state = torch.tpu.get_rng_state(device)
        _C._capture_begin(device)
        interpreter = _TpuInterpreter(self.gm)
        try:
            outs = interpreter.run(*run_args)
        except BaseException:
            _C._capture_abort(device)
            raise
        finally:
            torch.tpu.set_rng_state(rng_state, device)
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        slots = [i for i, o in enumerate(outs) if isinstance(o, torch.Tensor)]
        template = [None if isinstance(o, torch.Tensor) else o for o in outs]
        infos = [info for info, _, _ in interpreter.checks]
        program = _C._capture_end(device, inputs, [outs[i] for i in slots] + infos)
        cpu_inputs = {i for i, a in enumerate(a for a in args if isinstance(a, torch.Tensor))
                      if a.device.type == "cpu"}
        checks = [(api_name, is_matrix) for _, api_name, is_matrix in interpreter.checks]
        return _Captured(program, template, slots, self.cpu_outputs, cpu_inputs, checks)


# Ops a captured program cannot hold, run eagerly between the programs: those
# computed on the host; while_loop (and the form of it that keeps each step's
# values for its backward), whose trip count the host reads from its
# condition after each step, as a captured program has no loops of its own;
# and a tensor's value read as a number (its backward reads the trip count).
_EAGER_OPS = _linalg.HOST_OPS | {torch.ops.higher_order.while_loop, torch.ops.higher_order.while_loop_stack_output,
                                 torch.ops.aten._local_scalar_dense.default}


def _is_host_op(node):
    return node.op == "call_function" and node.target in _EAGER_OPS


def _has_host_op(gm):
    return any(_is_host_op(n) for n in gm.graph.nodes)


def _compile_graph(gm, example_inputs, bucket_bound=None):
    if not _has_host_op(gm):
        return CompiledGraph(gm, bucket_bound)
    # Cut before and after each host op: the pieces between run as captured
    # programs, the host ops as eager calls, in the graph's order.
    piece, pieces = 0, {}
    for node in gm.graph.nodes:
        host = _is_host_op(node)
        piece += host
        pieces[node] = piece
        piece += host
    split = split_module(gm, None, pieces.__getitem__, keep_original_order=True, tuple_return=True)
    for name, sub in list(split.named_children()):
        if not _has_host_op(sub):
            delattr(split, name)  # a child module's place takes no other object
            setattr(split, name, CompiledGraph(sub, bucket_bound))
    return make_boxed_func(split)


def tpu_backend(gm, example_inputs, options=None, **kwargs):
    """The "tpu" backend (found by dynamo through the torch_dynamo_backends
    entry point, so importing torch_tpu stays cheap). Options:
    `bucket_bound`: pad dynamic dimensions to power-of-two buckets up to
    this size (see torch_tpu/_buckets.py)."""
    options = dict(options or {})
    bucket_bound = options.pop("bucket_bound", None)
    if options:
        raise ValueError(f"torch.compile(backend=\"tpu\"): unknown options {sorted(options)}; "
                         "the only option is bucket_bound")
    if bucket_bound is not None and (not isinstance(bucket_bound, int) or bucket_bound < 2):
        raise ValueError(f"torch.compile(backend=\"tpu\"): bucket_bound must be an int >= 2, "
                         f"got {bucket_bound!r}")
    compile_graph = functools.partial(_compile_graph, bucket_bound=bucket_bound)
    # Inference graphs (an optimizer step runs under no_grad) keep their
    # in-place updates of inputs: the program writes those storages itself,
    # instead of returning new values for an eager copy_ per tensor.
    return aot_autograd(fw_compiler=compile_graph, bw_compiler=compile_graph,
                        inference_compiler=compile_graph,
                        decompositions=_DECOMPOSITIONS,
                        keep_inference_input_mutations=True)(gm, example_inputs, **kwargs)

