"""Eager modes: the Python API (set/get, the context manager, sync, the
environment variable, bad names) and results that match the CPU in every
mode, for single ops and for a small MLP's training steps."""
import copy
import os
import subprocess
import sys
import threading

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
from parity import assert_close  # noqa: E402

import torch_tpu  # noqa: E402
import torch_tpu.metrics  # noqa: E402

MODES = ["strict", "debug", "fused"]


@pytest.fixture(autouse=True)
def strict_after():
    yield
    torch_tpu.set_eager_mode("strict")


def test_default_is_strict_and_set_get():
    assert torch_tpu.get_eager_mode() == "strict"
    for mode in MODES:
        torch_tpu.set_eager_mode(mode)
        assert torch_tpu.get_eager_mode() == mode


def test_exported_from_the_package():
    for name in ("set_eager_mode", "get_eager_mode", "eager_mode", "sync"):
        assert getattr(torch_tpu, name) is getattr(torch_tpu.modes, name)


@pytest.mark.parametrize("bad", ["fast", "", "Fused", "lazy"])
def test_bad_names_raise_naming_the_allowed_ones(bad):
    with pytest.raises(ValueError, match="use one of: strict, debug, fused"):
        torch_tpu.set_eager_mode(bad)
    assert torch_tpu.get_eager_mode() == "strict"


def test_non_string_mode_is_a_type_error():
    with pytest.raises(TypeError, match="strict, debug or fused"):
        torch_tpu.set_eager_mode(2)


def test_context_manager_restores_the_previous_mode():
    torch_tpu.set_eager_mode("debug")
    with torch_tpu.eager_mode("fused"):
        assert torch_tpu.get_eager_mode() == "fused"
        with torch_tpu.eager_mode("strict"):
            assert torch_tpu.get_eager_mode() == "strict"
        assert torch_tpu.get_eager_mode() == "fused"
    assert torch_tpu.get_eager_mode() == "debug"


def test_context_manager_restores_on_exceptions():
    with pytest.raises(KeyError):
        with torch_tpu.eager_mode("fused"):
            x = torch.ones(3, device="tpu") * 2
            raise KeyError("boom")
    assert torch_tpu.get_eager_mode() == "strict"
    assert torch_tpu.modes.pending_op_count() == 0  # leaving fused ran them
    assert x.cpu().tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(ValueError):
        with torch_tpu.eager_mode("nope"):
            pass
    assert torch_tpu.get_eager_mode() == "strict"


def test_fused_ops_wait_for_a_sync_point():
    x = torch.arange(6.0, device="tpu")
    with torch_tpu.eager_mode("fused"):
        y = (x * 3 + 1).relu()
        assert torch_tpu.modes.pending_op_count() >= 2
        assert torch_tpu.modes.pending_op_count("tpu:0") == torch_tpu.modes.pending_op_count()
        torch_tpu.sync()
        assert torch_tpu.modes.pending_op_count() == 0
        z = y - 1
        assert torch_tpu.modes.pending_op_count() >= 1
        torch.tpu.synchronize()  # flushes too
        assert torch_tpu.modes.pending_op_count() == 0
        w = z * z
        assert w.sum().item() == sum((3 * v + 1 - 1) ** 2 for v in range(6))  # a host read flushes
        assert torch_tpu.modes.pending_op_count() == 0


def test_sync_takes_a_device_and_rejects_others():
    torch_tpu.sync(0)
    torch_tpu.sync("tpu")
    torch_tpu.sync(torch.device("tpu:0"))
    with pytest.raises(ValueError, match="expected a tpu device"):
        torch_tpu.sync("cpu")
    with pytest.raises(RuntimeError, match="is not a valid device"):
        torch_tpu.sync(torch.tpu.device_count())


def test_strict_and_debug_record_nothing():
    for mode in ("strict", "debug"):
        with torch_tpu.eager_mode(mode):
            torch.ones(4, device="tpu") + 1
            assert torch_tpu.modes.pending_op_count() == 0


def run_env(mode, code="import torch_tpu; print(torch_tpu.get_eager_mode())"):
    env = dict(os.environ, TORCH_TPU_EAGER_MODE=mode)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=180)


@pytest.mark.parametrize("mode", MODES)
def test_environment_variable_sets_the_mode(mode):
    out = run_env(mode)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-1] == mode


def test_bad_environment_variable_fails_the_import_clearly():
    out = run_env("turbo")
    assert out.returncode != 0
    assert "TORCH_TPU_EAGER_MODE='turbo'" in out.stderr
    assert "use one of: strict, debug, fused" in out.stderr


def ops(x, y):
    """A few ops of different families, with a view and an in-place write."""
    a = torch.matmul(x, y.t()) + 0.5
    b = torch.softmax(a, dim=-1)
    c = b[:, 1:3].sum(dim=0)
    d = x.clone()
    d[0].mul_(2.0)
    return a, b, c, d.relu().mean(), torch.cat([x, y]).amax(0)


@pytest.mark.parametrize("mode", MODES)
def test_ops_match_cpu(mode):
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(5, 4, generator=g), torch.randn(6, 4, generator=g)
    expected = ops(x, y)
    with torch_tpu.eager_mode(mode):
        actual = ops(x.to("tpu"), y.to("tpu"))
        assert_close(actual, expected)


def make_mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 3))


def train(model, device, steps, optimizer=None):
    g = torch.Generator().manual_seed(1)
    optimizer = optimizer or torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(steps):
        x, y = torch.randn(4, 8, generator=g), torch.randint(0, 3, (4,), generator=g)
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("mode", MODES)
def test_mlp_training_steps_match_cpu(mode):
    cpu_model = make_mlp()
    tpu_model = copy.deepcopy(cpu_model).to("tpu")
    expected = train(cpu_model, "cpu", 3)
    with torch_tpu.eager_mode(mode):
        actual = train(tpu_model, "tpu", 3)
    # A few float32 ulps per op, grown through 3 Adam steps.
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5)
    for p_tpu, p_cpu in zip(tpu_model.parameters(), cpu_model.parameters()):
        assert_close(p_tpu, p_cpu, rtol=1e-4, atol=1e-5)


def test_fused_training_loop_compiles_once():
    model = make_mlp().to("tpu")
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    with torch_tpu.eager_mode("fused"):
        # The first steps build the programs: the backward, and the forward
        # after the first (state-making) and after a later optimizer step.
        train(model, "tpu", 3, optimizer)
        before = torch_tpu.metrics.counters()["compile"]
        train(model, "tpu", 3, optimizer)
        assert torch_tpu.metrics.counters()["compile"] == before


def test_fused_step_cuts_at_backward_and_optimizer_step():
    model = make_mlp().to("tpu")
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = torch.randn(4, 8).to("tpu"), torch.tensor([0, 2, 1, 0]).to("tpu")
    executed = []
    with torch_tpu.eager_mode("fused"):
        for _ in range(3):
            start = torch_tpu.metrics.counters()["execute"]
            optimizer.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            forward_ops = torch_tpu.modes.pending_op_count()
            loss.backward()  # its first op, on autograd's thread, runs the forward
            backward_ops = torch_tpu.modes.pending_op_count()
            optimizer.step()  # runs the backward first
            step_ops = torch_tpu.modes.pending_op_count()
            loss.item()  # ran with the forward: the step's ops stay pending
            assert torch_tpu.modes.pending_op_count() == step_ops
            executed.append(torch_tpu.metrics.counters()["execute"] - start)
    assert forward_ops > 0 and backward_ops > 0 and step_ops > 0
    assert executed[1:] == [2, 2]  # the previous step's update with this forward; the backward
    torch_tpu.sync()
    assert torch_tpu.modes.pending_op_count() == 0


def test_fused_graph_is_cut_when_another_thread_records():
    a = torch.arange(4.0).to("tpu")
    with torch_tpu.eager_mode("fused"):
        b = a + 1
        assert torch_tpu.modes.pending_op_count() == 1
        out = {}

        def worker():
            out["c"] = b * 2
            out["pending"] = torch_tpu.modes.pending_op_count()

        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        assert out["pending"] == 1  # the main thread's add ran; the multiply waits
        assert out["c"].cpu().tolist() == [2.0, 4.0, 6.0, 8.0]
        assert b.cpu().tolist() == [1.0, 2.0, 3.0, 4.0]


def launched_steps(x, sync):
    """Ops whose graphs torch_tpu.sync() hands to the launcher thread: the
    next graph reads the last one's results (through a transposed view),
    writes them in place and through a view of another element type, and
    the host writes a storage a launched graph reads."""
    y = x * 2 + 1
    sync()
    z = y.t() @ y
    sync()
    y.add_(z.sum(0))
    sync()
    y.view(torch.int32).bitwise_and_(-65536)  # keeps the float's top 16 bits
    sync()
    w = y.t() * 3
    sync()
    x.copy_(torch.full((3, 4), 0.5))
    return y, z, w, x + 1


def test_launched_graphs_match_cpu():
    cpu = torch.arange(12.0).reshape(3, 4) / 7
    expected = launched_steps(cpu.clone(), lambda: None)
    with torch_tpu.eager_mode("fused"):
        start = torch_tpu.metrics.counters()["execute"]
        got = launched_steps(cpu.to("tpu"), torch_tpu.sync)
        assert torch_tpu.metrics.counters()["execute"] - start >= 5  # each sync ran a graph
        for g, e in zip(got, expected):
            assert_close(g, e, rtol=1e-6, atol=1e-6)


def test_launched_graphs_are_seen_by_events_and_free_their_storages():
    x = torch.randn(64, 64).to("tpu")
    torch.tpu.synchronize()
    base = torch.tpu.memory_allocated()
    with torch_tpu.eager_mode("fused"):
        for _ in range(20):
            x = (x @ x).tanh()
            torch_tpu.sync()
        done = torch.tpu.Event()
        done.record()  # waits for nothing, but covers the launched graphs
        done.synchronize()
        assert done.query()
        expected = x.cpu()
    assert torch.tpu.memory_allocated() == base  # only x, which replaced the first x
    assert_close((x @ x).tanh(), (expected @ expected).tanh(), rtol=1e-5, atol=1e-5)


def test_launched_graphs_on_two_devices_match_cpu():
    """Each device has its own launched graph: a copy between devices reads
    one device's launched result into the other's pending graph."""
    cpu = torch.linspace(-1, 1, 12).reshape(3, 4)
    expected = ((cpu * 2).exp() + 1).sum(0)
    with torch_tpu.eager_mode("fused"):
        a = cpu.to("tpu:0") * 2
        torch_tpu.sync("tpu:0")
        b = a.to("tpu:1").exp()
        torch_tpu.sync()  # every device
        c = (b + 1).to("tpu:2").sum(0)
        assert c.device == torch.device("tpu:2")
        assert_close(c, expected, rtol=1e-6, atol=1e-6)


def test_a_launched_graph_counts_its_execution_when_handed_over():
    """The metrics do not lag behind the launcher thread: the execution is
    counted when torch_tpu.sync() hands the graph over."""
    x = torch.ones(3).to("tpu")
    with torch_tpu.eager_mode("fused"):
        for _ in range(10):
            start = torch_tpu.metrics.counters()["execute"]
            x = x + 1
            torch_tpu.sync()
            assert torch_tpu.metrics.counters()["execute"] == start + 1
    assert x.cpu().tolist() == [11.0, 11.0, 11.0]
