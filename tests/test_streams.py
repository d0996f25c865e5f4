"""Streams and events: torch.tpu.Stream/Event, the stream context,
torch.Stream/torch.Event and torch.accelerator on tpu, timing, the patterns
FSDP2 uses, and errors for streams of other devices."""
import threading
import time

import pytest
import torch

import torch_tpu


@pytest.fixture(autouse=True)
def default_stream_after():
    yield
    torch.tpu.set_stream(torch.tpu.default_stream())
    torch_tpu.set_eager_mode("strict")


def test_current_and_default_stream():
    current = torch.tpu.current_stream()
    assert isinstance(current, torch.tpu.Stream) and isinstance(current, torch.Stream)
    assert current.device == torch.device("tpu:0")
    assert current == torch.tpu.default_stream() == torch.tpu.current_stream("tpu:0")
    assert current.stream_id == 0


def test_new_streams_are_distinct_and_on_tpu():
    a, b = torch.tpu.Stream(), torch.tpu.Stream(priority=-1)
    assert a != b and a != torch.tpu.default_stream()
    assert a.device == b.device == torch.device("tpu:0")
    assert torch.tpu.Stream("tpu:0").device_type == a.device_type


def test_stream_context_switches_and_restores_current_stream():
    s = torch.tpu.Stream()
    with torch.tpu.stream(s) as entered:
        assert entered is s
        assert torch.tpu.current_stream() == s
        assert torch.accelerator.current_stream() == s
        inner = torch.tpu.Stream()
        with torch.tpu.stream(inner):
            assert torch.tpu.current_stream() == inner
        assert torch.tpu.current_stream() == s
    assert torch.tpu.current_stream() == torch.tpu.default_stream()
    with torch.tpu.stream(None):  # accepted, as torch.cuda.stream(None)
        assert torch.tpu.current_stream() == torch.tpu.default_stream()


def test_stream_context_restores_on_exceptions():
    s = torch.tpu.Stream()
    with pytest.raises(KeyError):
        with torch.tpu.stream(s):
            raise KeyError("boom")
    assert torch.tpu.current_stream() == torch.tpu.default_stream()


def test_current_stream_is_per_thread():
    s = torch.tpu.Stream()
    seen = []
    with torch.tpu.stream(s):
        worker = threading.Thread(target=lambda: seen.append(torch.tpu.current_stream()))
        worker.start()
        worker.join()
        assert torch.tpu.current_stream() == s
    assert seen == [torch.tpu.default_stream()]


def test_work_under_any_stream_is_ordered():
    """One queue per device: a result made under one stream is read under
    another with no wait at all."""
    s1, s2 = torch.tpu.Stream(), torch.tpu.Stream()
    x = torch.arange(6.0, device="tpu")
    with torch.tpu.stream(s1):
        y = x * 2
    with torch.tpu.stream(s2):
        z = y + 1
    assert z.cpu().tolist() == [1.0, 3.0, 5.0, 7.0, 9.0, 11.0]


def big_matmul_events(n=1024, repeats=3):
    a = torch.randn(n, n, device="tpu")
    (a @ a).cpu()  # compile outside the timed span
    start, end = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        out = a @ a
    end.record()
    return start, end, out


def test_elapsed_time_of_big_matmuls_is_plausible():
    wall = time.perf_counter()
    start, end, out = big_matmul_events()
    end.synchronize()
    wall_ms = (time.perf_counter() - wall) * 1e3
    assert start.query() and end.query()
    ms = start.elapsed_time(end)
    # Three 1024^3 matmuls (6.4 GFLOP) take well over 0.1 ms on any machine
    # this runs on, and the events lie inside the host's own span.
    assert 0.1 < ms <= wall_ms, (ms, wall_ms)
    assert ms == pytest.approx(start.elapsed_time(end))  # stable once complete


def test_work_whose_results_were_dropped_is_waited_for():
    # CUDA-style timing: a loop whose results are discarded. In strict mode
    # that work runs (fused mode drops it unrun, since nothing reads it); the
    # event after it is complete only once it is done, so it is timed, and
    # torch.tpu.synchronize() waits for it. Reference: the same loop with its
    # results kept.
    a = torch.randn(1024, 1024, device="tpu")
    (a @ a).cpu()  # compile outside the timed spans
    kept_start, kept_end, _ = big_matmul_events()
    kept_end.synchronize()
    start, end = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    start.record()
    for _ in range(3):
        a @ a
    end.record()
    assert not end.query()  # three 1024^3 matmuls take milliseconds; this, microseconds
    torch.tpu.synchronize()
    assert end.query()
    # The same work, timed both ways (generous bound: the VM's speed varies).
    assert start.elapsed_time(end) > 0.25 * kept_start.elapsed_time(kept_end)


def test_query_after_synchronize_is_true():
    _, end, _ = big_matmul_events(repeats=1)
    end.synchronize()
    assert end.query()
    e = torch.tpu.Event()
    assert e.query()  # never recorded: nothing to wait for
    e.synchronize()
    e.record()
    torch.tpu.synchronize()
    assert e.query()


def test_event_record_runs_pending_fused_ops():
    x = torch.ones(4, device="tpu")
    with torch_tpu.eager_mode("fused"):
        y = x * 3
        assert torch_tpu.modes.pending_op_count() > 0
        e = torch.tpu.Event()
        e.record()
        assert torch_tpu.modes.pending_op_count() == 0
        e.synchronize()
        assert e.query()
        assert y.cpu().tolist() == [3.0] * 4


def test_stream_methods():
    s = torch.tpu.Stream()
    current = torch.tpu.current_stream()
    x = torch.randn(256, 256, device="tpu") @ torch.randn(256, 256, device="tpu")
    s.wait_stream(current)
    e = current.record_event()
    assert isinstance(e, torch.tpu.Event)
    s.wait_event(e)
    e.wait(s)
    e.wait()
    mine = torch.tpu.Event()
    assert s.record_event(mine) is mine
    s.synchronize()
    assert s.query() and mine.query()
    x.record_stream(s)  # accepted; storage lifetime needs nothing from it
    assert x.cpu().shape == (256, 256)


def test_torch_stream_and_event_and_accelerator():
    s = torch.Stream(device="tpu")
    assert s.device.type == "tpu"
    with s:
        assert torch.tpu.current_stream().stream_id == s.stream_id
    assert torch.tpu.current_stream() == torch.tpu.default_stream()
    start, end = torch.Event(device="tpu", enable_timing=True), torch.Event(device="tpu", enable_timing=True)
    start.record(s)
    a = torch.randn(512, 512, device="tpu")
    b = a @ a
    end.record(s)
    end.synchronize()
    assert end.query() and start.elapsed_time(end) > 0
    s.synchronize()
    assert s.query()
    assert torch.accelerator.current_accelerator().type == "tpu"
    assert torch.accelerator.current_stream().device.type == "tpu"
    torch.accelerator.synchronize()
    torch.accelerator.set_stream(s)
    assert torch.tpu.current_stream().stream_id == s.stream_id
    assert b.cpu().shape == (512, 512)


def test_fsdp2_style_stream_use():
    """The calls FSDP2 makes on its device handle, in its order."""
    handle = torch.get_device_module("tpu")
    assert handle is torch.tpu
    copy_in, gather = handle.Stream(priority=-1), handle.Stream(priority=-1)
    current = handle.current_stream()
    params = [torch.randn(8, 8, device="tpu") for _ in range(3)]
    with handle.stream(copy_in):
        flat = torch.cat([p.flatten() for p in params])
    gather.wait_stream(copy_in)
    with handle.stream(gather):
        gathered = flat * 1.0
        event = handle.Event()
        event.record()
    current.wait_event(event)
    out = gathered.view(3, 8, 8).sum(0)
    expected = sum(p.cpu() for p in params)
    torch.testing.assert_close(out.cpu(), expected)


def test_elapsed_time_errors():
    timed, untimed = torch.tpu.Event(enable_timing=True), torch.tpu.Event()
    with pytest.raises(ValueError, match="must be recorded"):
        timed.elapsed_time(torch.tpu.Event(enable_timing=True))
    timed.record()
    untimed.record()
    with pytest.raises(ValueError, match="enable_timing=True"):
        timed.elapsed_time(untimed)
    with pytest.raises(TypeError, match="torch.Event"):
        timed.elapsed_time(torch.tpu.Stream())


def test_errors_for_streams_of_other_devices():
    cpu = torch.Stream(device="cpu")
    with pytest.raises(ValueError, match="expects a tpu stream, got a stream of cpu"):
        torch.tpu.stream(cpu)
    with pytest.raises(ValueError, match="expects a tpu stream"):
        torch.tpu.set_stream(cpu)
    with pytest.raises(ValueError, match="expects a tpu stream"):
        torch.tpu.Event().record(cpu)
    with pytest.raises(ValueError, match="expects a tpu stream"):
        torch.tpu.Event().wait(cpu)
    with pytest.raises(RuntimeError, match="does not match recording stream's device type"):
        torch.Event(device="tpu").record(cpu)
    with pytest.raises(RuntimeError, match="expected a tpu stream"):
        torch.ones(2, device="tpu").record_stream(cpu)
    with pytest.raises(ValueError, match="expected a tpu device, got cpu"):
        torch.tpu.Stream("cpu")
    with pytest.raises(TypeError, match="expects a torch.Stream"):
        torch.tpu.stream("tpu")


def test_accelerator_graph_replays_its_capture_on_current_values():
    """torch.accelerator.Graph, as a CUDA graph: the capture runs nothing;
    each replay is one program that reads the captured tensors as they are
    then, updates in place those the capture wrote (made before it or in
    it) and draws new random numbers."""
    torch.manual_seed(0)
    w, acc = torch.randn(4, 4), torch.zeros(4)
    w_tpu, acc_tpu, static_in = w.to("tpu"), acc.to("tpu"), torch.zeros(4, device="tpu")
    graph = torch.tpu.Graph()
    assert isinstance(graph, torch.accelerator.Graph)
    assert not torch.tpu.is_current_stream_capturing()
    with graph:
        assert torch.tpu.is_current_stream_capturing()
        out = (w_tpu @ static_in).relu()
        acc_tpu += out
        noise = torch.randn(4, device="tpu")
        del out  # not held: only an intermediate
    hidden = torch.relu(w_tpu @ static_in)  # outside the capture: runs now
    assert torch.equal(acc_tpu.cpu(), acc)
    draws = []
    for step in range(3):
        new_in = torch.full((4,), step - 0.5)
        static_in.copy_(new_in)
        torch_tpu.metrics.reset()
        graph.replay()
        counters = torch_tpu.metrics.counters()
        assert (counters["compile"], counters["execute"]) == (0, 1)
        acc += (w @ new_in).relu()
        assert torch.allclose(acc_tpu.cpu(), acc, rtol=1.3e-6, atol=1e-5)
        draws.append(noise.cpu())
    assert not torch.equal(draws[0], draws[1])
    assert hidden.abs().sum().item() == 0  # computed once, from the zeros
    graph.reset()
    with pytest.raises(RuntimeError, match="holds no capture"):
        graph.replay()
    with torch.tpu.graph(graph):  # a reset graph captures again; torch.cuda.graph's form
        acc_tpu.mul_(0)
    graph.replay()
    assert acc_tpu.abs().sum().item() == 0


def test_host_allocator_and_its_empty_cache():
    """torch.accelerator.empty_host_cache crashed inside PyTorch without a
    host allocator registered for the device."""
    x = torch.ones(1 << 10).pin_memory()
    torch.zeros(2, device="tpu").cpu()
    torch.accelerator.empty_host_cache()
    assert x.is_pinned() and torch.equal(x.to("tpu", non_blocking=True).cpu(), torch.ones(1 << 10))


def test_a_whole_training_step_captured_in_a_graph_trains_as_on_the_cpu():
    """The CUDA-graphs recipe: a warm-up step creates the optimizer's state
    (capturable Adam keeps its step on the device), then forward, backward
    and step are captured once and replayed on new data in static tensors."""
    import copy

    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    model = copy.deepcopy(ref).to("tpu")
    opt = torch.optim.Adam(model.parameters(), lr=0.01, capturable=True)
    ref_opt = torch.optim.Adam(ref.parameters(), lr=0.01)
    batches = [(torch.randn(4, 8), torch.randn(4, 1)) for _ in range(4)]
    static_x, static_y = batches[0][0].to("tpu"), batches[0][1].to("tpu")
    for m, o, x, y in ((model, opt, static_x, static_y), (ref, ref_opt) + batches[0]):
        o.zero_grad(set_to_none=False)
        torch.nn.functional.mse_loss(m(x), y).backward()
        o.step()
    graph = torch.tpu.Graph()
    with graph:
        opt.zero_grad(set_to_none=False)
        loss = torch.nn.functional.mse_loss(model(static_x), static_y)
        loss.backward()
        opt.step()
    for x, y in batches[1:]:
        static_x.copy_(x)
        static_y.copy_(y)
        graph.replay()
        ref_opt.zero_grad()
        expected = torch.nn.functional.mse_loss(ref(x), y)
        expected.backward()
        ref_opt.step()
        assert abs(loss.item() - expected.item()) <= 1e-5 * max(1.0, abs(expected.item()))
    for p, q in zip(model.parameters(), ref.parameters()):
        assert torch.allclose(p.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-6)
