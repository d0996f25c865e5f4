"""torch.compile(backend="tpu") against eager tpu and PyTorch's CPU backend:
forward, backward and optimizer steps, in-place updates of inputs, random
ops, new shapes, graph breaks and errors. Tolerances are float32's (see
parity.py) unless stated."""
import copy
import operator

import pytest
import torch
import torch._dynamo
from torch._dynamo.backends.common import aot_autograd

import torch_tpu
from parity import assert_close


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def mlp(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(12, 24), torch.nn.GELU(), torch.nn.LayerNorm(24),
                               torch.nn.Linear(24, 5))


def test_forward_matches_cpu_and_eager():
    model = mlp()
    x = torch.randn(7, 12)
    tpu_model = copy.deepcopy(model).to("tpu")
    compiled = torch.compile(tpu_model, backend="tpu")
    with torch.no_grad():
        expected = model(x)
        assert_close(compiled(x.to("tpu")), expected)
        assert_close(tpu_model(x.to("tpu")), expected)


def test_second_call_compiles_nothing_and_runs_one_program():
    compiled = torch.compile(mlp().to("tpu"), backend="tpu")
    x = torch.randn(7, 12).to("tpu")
    with torch.no_grad():
        compiled(x + 1)
        torch_tpu.metrics.reset()
        compiled(x + 1)
    counters = torch_tpu.metrics.counters()
    assert counters["compile"] == 0
    assert counters["execute"] == 2  # the x + 1 and the whole forward graph


@pytest.mark.parametrize("make_optimizer", [
    lambda p, tpu: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3),
    lambda p, tpu: torch.optim.Adam(p, lr=1e-2),
    # capturable keeps the step counters on the tpu (the CPU has no such mode)
    lambda p, tpu: torch.optim.AdamW(p, lr=1e-2, capturable=tpu),
], ids=["sgd", "adam", "adamw-capturable"])
def test_training_steps_match_cpu(make_optimizer):
    cpu_model = mlp()
    tpu_model = copy.deepcopy(cpu_model).to("tpu")
    compiled = torch.compile(tpu_model, backend="tpu")
    cpu_opt = make_optimizer(cpu_model.parameters(), False)
    tpu_opt = make_optimizer(tpu_model.parameters(), True)
    compiled_step = torch.compile(tpu_opt.step, backend="tpu")
    torch.manual_seed(1)
    for step in range(4):
        x, y = torch.randn(7, 12), torch.randn(7, 5)
        cpu_loss = torch.nn.functional.mse_loss(cpu_model(x), y)
        cpu_loss.backward()
        tpu_loss = torch.nn.functional.mse_loss(compiled(x.to("tpu")), y.to("tpu"))
        tpu_loss.backward()
        for (name, c), t in zip(cpu_model.named_parameters(), tpu_model.parameters()):
            torch.testing.assert_close(t.grad.cpu(), c.grad, rtol=1e-4, atol=1e-5,
                                       msg=lambda m: f"step {step} grad of {name}: {m}")
        cpu_opt.step()
        compiled_step()
        cpu_opt.zero_grad()
        tpu_opt.zero_grad()
        assert abs(tpu_loss.item() - cpu_loss.item()) <= 1e-4 * abs(cpu_loss.item())
    for c, t in zip(cpu_model.parameters(), tpu_model.parameters()):
        torch.testing.assert_close(t.detach().cpu(), c.detach(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("make_optimizer", [
    lambda p: torch.optim.Adam(p, lr=1e-2),
    lambda p: torch.optim.AdamW(p, lr=1e-2, foreach=False),
    lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),  # has no step counters: untouched
], ids=["adam", "adamw-single-tensor", "sgd"])
def test_compiled_step_keeps_its_counters_on_the_tpu(make_optimizer):
    # As dynamo does for CUDA: a compiled step of a fresh optimizer turns on
    # capturable, so counters live on the tpu and a step reads nothing back.
    cpu_model = mlp()
    tpu_model = copy.deepcopy(cpu_model).to("tpu")
    cpu_opt, tpu_opt = make_optimizer(cpu_model.parameters()), make_optimizer(tpu_model.parameters())
    compiled_step = torch.compile(tpu_opt.step, backend="tpu")
    torch.manual_seed(3)
    for step in range(3):
        x = torch.randn(7, 12)
        for model, dev in ((cpu_model, "cpu"), (tpu_model, "tpu")):
            model(x.to(dev)).square().mean().backward()
        cpu_opt.step()
        if step == 2:
            torch.tpu.synchronize()
            torch_tpu.metrics.reset()
        compiled_step()
        if step == 2:
            assert torch_tpu.metrics.counters()["transfer_to_host"] == 0
        cpu_opt.zero_grad()
        tpu_opt.zero_grad()
    has_counters = "capturable" in tpu_opt.param_groups[0]
    assert tpu_opt.param_groups[0].get("capturable", False) == has_counters
    assert not cpu_opt.param_groups[0].get("capturable", False)
    for p in tpu_model.parameters():
        if has_counters:
            assert tpu_opt.state[p]["step"].device.type == "tpu"
    for c, t in zip(cpu_model.parameters(), tpu_model.parameters()):
        torch.testing.assert_close(t.detach().cpu(), c.detach(), rtol=1e-4, atol=1e-5)


def test_an_optimizer_with_state_or_cpu_parameters_stays_as_it_is():
    # dynamo's rule: only a fresh optimizer whose parameters are all on the device.
    started = torch.optim.Adam(mlp().to("tpu").parameters(), lr=1e-2)
    for p in started.param_groups[0]["params"]:
        p.grad = torch.ones_like(p)
    started.step()  # eager: CPU counters
    mixed = torch.optim.Adam([torch.nn.Parameter(torch.ones(3, device="tpu")),
                              torch.nn.Parameter(torch.ones(3))], lr=1e-2)
    for p in mixed.param_groups[0]["params"]:
        p.grad = torch.ones_like(p)
    for opt in (started, mixed):
        torch.compile(opt.step, backend="tpu")()
        assert opt.param_groups[0]["capturable"] is False


def test_decorated_train_step_function():
    cpu_model = mlp()
    tpu_model = copy.deepcopy(cpu_model).to("tpu")
    cpu_opt = torch.optim.SGD(cpu_model.parameters(), lr=0.1)
    tpu_opt = torch.optim.SGD(tpu_model.parameters(), lr=0.1)

    def train_step(model, opt, x, y):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    compiled_step = torch.compile(train_step, backend="tpu")
    torch.manual_seed(2)
    for _ in range(3):
        x, y = torch.randn(7, 12), torch.randint(0, 5, (7,))
        expected = train_step(cpu_model, cpu_opt, x, y)
        actual = compiled_step(tpu_model, tpu_opt, x.to("tpu"), y.to("tpu"))
        assert abs(actual.item() - expected.item()) <= 1e-4 * abs(expected.item())
    for c, t in zip(cpu_model.parameters(), tpu_model.parameters()):
        torch.testing.assert_close(t.detach().cpu(), c.detach(), rtol=1e-4, atol=1e-5)


def test_in_place_update_of_an_input_is_written_back():
    @torch.compile(backend="tpu")
    def bump(x, y):
        x.add_(y)
        return x * 2

    x = torch.arange(6.0).reshape(2, 3)
    xt = x.to("tpu")
    with torch.no_grad():
        out = bump(xt, torch.ones(3).to("tpu"))
    assert_close(xt, x + 1)
    assert_close(out, (x + 1) * 2)


def test_batch_norm_running_stats_update():
    torch.manual_seed(3)
    cpu_model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4),
                                    torch.nn.ReLU())
    tpu_model = copy.deepcopy(cpu_model).to("tpu")
    compiled = torch.compile(tpu_model, backend="tpu")
    for _ in range(3):
        x = torch.randn(2, 3, 6, 6)
        assert_close(compiled(x.to("tpu")), cpu_model(x), rtol=1e-4, atol=1e-4, exact_dtype=True)
    for (name, c), t in zip(cpu_model.named_buffers(), tpu_model.buffers()):
        assert_close(t, c, rtol=1e-5, atol=1e-6), name
    tpu_model.eval(), cpu_model.eval()
    x = torch.randn(2, 3, 6, 6)
    with torch.no_grad():
        assert_close(compiled(x.to("tpu")), cpu_model(x), rtol=1e-4, atol=1e-4)


def test_dropout_draws_new_masks_each_call_and_follows_the_seed():
    @torch.compile(backend="tpu")
    def drop(x):
        return torch.nn.functional.dropout(x, p=0.5, training=True)

    x = torch.ones(4096).to("tpu")
    torch.manual_seed(0)
    torch.tpu.manual_seed(0)
    first, second = drop(x).cpu(), drop(x).cpu()
    for out in (first, second):
        assert set(out.unique().tolist()) <= {0.0, 2.0}
        assert 0.4 < (out == 0).float().mean().item() < 0.6
    assert not torch.equal(first, second)
    torch.tpu.manual_seed(0)
    assert torch.equal(drop(x).cpu(), first)


def test_new_shapes_get_their_own_program():
    compiled = torch.compile(mlp().to("tpu"), backend="tpu", dynamic=False)
    model = mlp()
    with torch.no_grad():
        for batch in (3, 5, 3):
            x = torch.randn(batch, 12)
            assert_close(compiled(x.to("tpu")), model(x))


def test_each_input_layout_sharing_and_value_gets_its_own_program():
    """A compiled graph keys its programs by what they depend on: the inputs'
    view layouts, which share a storage, where they live, and the values of
    non-tensor arguments."""
    from torch_tpu.backend import CompiledGraph

    def f(x, y, k):
        return (x * k + y,)

    graph = CompiledGraph(torch.fx.symbolic_trace(f))
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    ta, tb = a.to("tpu"), b.to("tpu")
    calls = [  # (x, y, k) on the tpu, the programs after the call
        ((ta, tb, 2), 1),          # contiguous
        ((ta, tb, 2), 1),          # the same signature: reused
        ((ta.t(), tb, 2), 2),      # a transposed view
        ((ta, ta, 2), 3),          # x and y share a storage
        ((ta, tb, 3), 4),          # another value of k
        ((ta[1:], tb[1:], 2), 5),  # views at an offset (new shapes)
        ((a, tb, 2), 6),           # a CPU input, copied over
    ]
    for (x, y, k), programs in calls:
        (out,) = graph(x, y, k)
        assert out.device.type == "tpu"
        assert_close(out, x.cpu() * k + y.cpu())
        assert len(graph.programs) == programs


def test_storage_sharing_among_many_inputs_keys_the_program():
    """Which of many inputs share a storage is part of the key (numbered in
    order of first sight), whatever their number."""
    from torch_tpu.backend import CompiledGraph

    fx_graph = torch.fx.Graph()
    total = None
    for i in range(40):  # sum of x_i * (i + 1)
        term = fx_graph.call_function(operator.mul, (fx_graph.placeholder(f"x{i}"), i + 1))
        total = term if total is None else fx_graph.call_function(operator.add, (total, term))
    fx_graph.output((total,))
    graph = CompiledGraph(torch.fx.GraphModule(torch.nn.Module(), fx_graph))
    bases = [torch.randn(3, 4) for _ in range(40)]
    distinct = [b.to("tpu") for b in bases]
    shared = list(distinct)
    shared[39] = distinct[0]  # the last input is the first one's storage
    rows = distinct[0].reshape(12)
    viewed = [rows[0:4].view(1, 4).expand(3, 4)] + distinct[1:]  # a view, another layout
    for args, programs in [(distinct, 1), (distinct, 1), (shared, 2), (viewed, 3), (shared, 3)]:
        (out,) = graph(*args)
        expect = sum(a.cpu() * (i + 1) for i, a in enumerate(args))
        assert_close(out, expect)
        assert len(graph.programs) == programs


def test_host_read_inside_the_function_is_a_graph_break():
    @torch.compile(backend="tpu")
    def scale_by_max(x):
        m = x.max().item()
        return x / m

    x = torch.rand(5) + 0.5
    assert_close(scale_by_max(x.to("tpu")), x / x.max().item())


def test_cond_takes_either_branch_in_one_program_with_gradients():
    """torch.cond on a tensor predicate stays in the graph (no break): one
    program per signature serves both branches, forward and backward."""
    def branchy(x, w):
        return torch.cond(x.sum() > 0, lambda a, b: (a * b).sin(), lambda a, b: (a - b).exp().cos(), (x, w))

    compiled = torch.compile(branchy, backend="tpu", fullgraph=True)
    w = torch.randn(4, 3)
    for i, x in enumerate([torch.rand(4, 3) + 0.1, -torch.rand(4, 3) - 0.1]):
        x_cpu, w_cpu = x.clone().requires_grad_(), w.clone().requires_grad_()
        x_tpu, w_tpu = x.to("tpu").requires_grad_(), w.to("tpu").requires_grad_()
        if i == 1:
            torch_tpu.metrics.reset()
        out = compiled(x_tpu, w_tpu)
        expected = branchy(x_cpu, w_cpu)
        assert_close(out, expected)
        out.square().sum().backward()
        expected.square().sum().backward()
        assert_close(x_tpu.grad, x_cpu.grad)
        assert_close(w_tpu.grad, w_cpu.grad)
    assert torch_tpu.metrics.counters()["compile"] == 0


def test_while_loop_runs_between_programs_with_gradients():
    """while_loop's trip count is read on the host after each step, so the
    graph is cut around it (as around host ops); forward and backward match
    the CPU, and a repeated call compiles nothing."""
    from torch._higher_order_ops.while_loop import while_loop

    def repeated(i, x, w):
        count, y = while_loop(lambda i, y: i < 4, lambda i, y: (i + 1, (y @ w).sin()), (i, x * 2))
        return y.cos() + count

    compiled = torch.compile(repeated, backend="tpu", fullgraph=True)
    # float64: float32 gradients through four products differ by ~1e-5
    x, w = torch.randn(3, 3, dtype=torch.float64), torch.randn(3, 3, dtype=torch.float64)
    # Another trip count gives the backward other shapes (it keeps each
    # step's values): the third call repeats the first's.
    for start in (0, 2, 0):
        x_cpu, w_cpu = x.clone().requires_grad_(), w.clone().requires_grad_()
        x_tpu, w_tpu = x.to("tpu").requires_grad_(), w.to("tpu").requires_grad_()
        torch_tpu.metrics.reset()
        out = compiled(torch.tensor(start).to("tpu"), x_tpu, w_tpu)
        expected = repeated(torch.tensor(start), x_cpu, w_cpu)
        assert_close(out, expected)
        out.sum().backward()
        expected.sum().backward()
        assert_close(x_tpu.grad, x_cpu.grad)
        assert_close(w_tpu.grad, w_cpu.grad)
    assert torch_tpu.metrics.counters()["compile"] == 0


def test_a_number_read_inside_a_full_graph_feeds_the_next_program():
    """With capture_scalar_outputs, .item() stays in the graph: it runs
    between two programs, and its value reaches the second as an argument,
    not a constant, so new values compile nothing."""
    def scaled(x):
        return (x * x.sum().item()).sin()

    compiled = torch.compile(scaled, backend="tpu", fullgraph=True)
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        for i in range(3):
            x = torch.randn(5)
            if i == 2:
                torch_tpu.metrics.reset()
            assert_close(compiled(x.to("tpu")), scaled(x))
    assert torch_tpu.metrics.counters()["compile"] == 0


def test_an_op_without_lowering_raises_and_the_process_keeps_working():
    @torch.compile(backend="tpu")
    def f(x):
        return torch.histogram(x, bins=4).hist + 1

    mode = torch_tpu.get_eager_mode()
    with pytest.raises(Exception, match="histogram"):
        f(torch.randn(3, 3).to("tpu"))
    x = torch.randn(3)
    assert_close(x.to("tpu") * 2, x * 2)
    assert torch_tpu.get_eager_mode() == mode  # the failed capture left the mode as it was


class CausalLM(torch.nn.Module):
    """Embedding, causal self-attention, projection: every position depends
    only on earlier ones, so padding the sequence at its end is exact."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(50, 16)
        self.qkv = torch.nn.Linear(16, 48)
        self.out = torch.nn.Linear(16, 50)

    def forward(self, idx):
        x = self.emb(idx)
        q, k, v = self.qkv(x).unsqueeze(1).chunk(3, dim=-1)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).squeeze(1)
        return self.out(y + x)


def test_bucketed_lengths_compile_once_per_bucket_and_match_unpadded():
    torch.manual_seed(4)
    model = CausalLM().eval()
    compiled = torch.compile(copy.deepcopy(model).to("tpu"), backend="tpu", dynamic=True,
                             options={"bucket_bound": 128})
    torch_tpu.metrics.reset()
    with torch.no_grad():
        for length in range(2, 102):  # 100 lengths in the buckets 2, 4, ..., 128
            idx = torch.randint(0, 50, (2, length))
            out = compiled(idx.to("tpu"))
            assert out.shape == (2, length, 50)
            torch.testing.assert_close(out.cpu(), model(idx), rtol=1e-5, atol=1e-5)
    assert torch_tpu.metrics.counters()["compile"] <= 7


class HeadsAttention(torch.nn.Module):
    """Self-attention as nanoGPT writes it: heads split out of one
    projection by view + transpose, F.scaled_dot_product_attention, and the
    heads merged back with .contiguous().view()."""

    def __init__(self, embed=16, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(embed, 3 * embed)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2)
                   for t in self.qkv(x).split(C, dim=2))
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return y.transpose(1, 2).contiguous().view(B, T, C)


def test_attention_compiles_as_the_fused_form_and_matches_cpu():
    """The traced graph holds the fused attention op, whose output is laid
    out like the query, so dynamo drops the .contiguous() and the .view()
    that follows must see the same layout on the device; forward and
    gradients match the CPU."""
    torch.manual_seed(0)
    model = HeadsAttention()
    tpu_model = copy.deepcopy(model).to("tpu")
    ops = []

    def record_ops(gm, example_inputs):  # an AOTAutograd forward compiler that only looks
        ops.extend(str(n.target) for n in gm.graph.nodes)
        return gm

    torch.compile(copy.deepcopy(tpu_model), backend=aot_autograd(fw_compiler=record_ops))(
        torch.randn(2, 6, 16).to("tpu"))
    assert "aten._scaled_dot_product_fused_attention_overrideable.default" in ops
    x = torch.randn(2, 6, 16)
    expected = model(x)
    actual = torch.compile(tpu_model, backend="tpu")(x.to("tpu"))
    assert_close(actual, expected)
    g = torch.randn_like(expected)
    expected.backward(g)
    actual.backward(g.to("tpu"))
    for (name, p), q in zip(model.named_parameters(), tpu_model.parameters()):
        assert_close(q.grad, p.grad, 1e-5, 1e-5)


def test_bad_backend_options_are_rejected():
    with pytest.raises(Exception, match="bucket_bound"):
        torch.compile(mlp().to("tpu"), backend="tpu", options={"bucket": 8})(torch.randn(2, 12).to("tpu"))
    with pytest.raises(Exception, match="bucket_bound must be an int"):
        torch.compile(mlp().to("tpu"), backend="tpu", options={"bucket_bound": 1})(torch.randn(2, 12).to("tpu"))


def test_whole_storage_results_leave_in_their_computed_shape(tmp_path):
    """On the CPU plugin a program returns a storage it writes whole in the
    value's own shape (XLA CPU does not vectorize a fusion that ends in a
    flatten when a broadcast such as the bias is inside it); the values
    match the CPU and read back as flat storages in the next program."""
    layer = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU())
    x = torch.randn(8, 16)
    compiled = torch.compile(copy.deepcopy(layer).to("tpu"), backend="tpu")
    torch_tpu.metrics.set_dump_dir(tmp_path)
    try:
        with torch.no_grad():
            out = compiled(x.to("tpu"))
            again = out * 2  # an eager op reads the shaped buffer as its flat storage
    finally:
        torch_tpu.metrics.set_dump_dir(None)
    with torch.no_grad():
        assert_close(out, layer(x), 1e-5, 1e-5)
        assert_close(again, layer(x) * 2, 1e-5, 1e-5)
    signatures = [line for p in tmp_path.glob("*.mlir") for line in p.read_text().splitlines()
                  if "func.func public @main" in line]
    assert any("-> (tensor<8x32xf32>)" in s for s in signatures), signatures


def test_a_capture_compiles_its_numbers_and_view_offsets_in(tmp_path):
    """A captured graph's numbers and view offsets are the same on every run,
    so its program takes them as constants: its only parameters are the
    input storages (eager and fused programs take them as parameters, so new
    values reuse the program). Results match the CPU."""
    def fn(x, y):
        return (x[2:, 1:] * 2.5 + 0.75) / y[1:], (x[:, :3].sum(1) - 1.25).clamp(min=0.5)

    x, y = torch.randn(6, 4), torch.randn(5, 3).abs() + 0.5
    compiled = torch.compile(fn, backend="tpu")
    torch_tpu.metrics.set_dump_dir(tmp_path)
    try:
        got = compiled(x.to("tpu"), y.to("tpu"))
    finally:
        torch_tpu.metrics.set_dump_dir(None)
    assert_close(list(got), list(fn(x, y)), 1e-6, 1e-6)
    signatures = [line for p in tmp_path.glob("*.mlir") for line in p.read_text().splitlines()
                  if "func.func public @main" in line]
    assert len(signatures) == 1, signatures
    params = signatures[0].split(") -> ")[0]
    assert params.count(": tensor<") == 2 and "tensor<24xf32>" in params and "tensor<15xf32>" in params, params
