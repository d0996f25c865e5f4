"""The tpu device itself: autoload, torch.tpu, copies, memory, metrics,
errors and the CPU fallback switch."""
import json
import os
import platform
import resource
import subprocess
import sys

import pytest
import torch

import torch_tpu
from parity import assert_close


def test_autoload_without_importing_torch_tpu():
    code = "import torch; x = torch.ones(3, device='tpu'); print(x.device, (x + 1).sum().item())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "tpu:0 6.0"


def test_device_module():
    assert torch.tpu.is_available()
    n = torch.tpu.device_count()
    assert n >= 1
    assert torch.tpu.current_device() == 0
    name = torch.tpu.get_device_name()
    assert name.startswith(torch_tpu._C._runtime_info()["platform"])
    if n > 1:
        torch.tpu.set_device(1)
        try:
            assert torch.tpu.current_device() == 1
            assert torch.empty(2, device="tpu").device == torch.device("tpu:1")
        finally:
            torch.tpu.set_device(0)
    torch.tpu.synchronize()
    torch.tpu.init()  # nothing to do: started at import
    x = torch.empty(1, device=f"tpu:{n - 1}")
    with torch.tpu.device_of(x):
        assert torch.tpu.current_device() == n - 1
    assert torch.tpu.current_device() == 0
    states = torch.tpu.get_rng_state_all()
    first = torch.rand(3, device="tpu")
    torch.tpu.set_rng_state_all(states)
    assert len(states) == n and torch.equal(torch.rand(3, device="tpu").cpu(), first.cpu())


def test_tensor_and_module_helpers():
    x = torch.arange(4.0)
    t = x.tpu()
    assert t.is_tpu and not x.is_tpu
    m = torch.nn.Linear(2, 2).tpu()
    assert all(p.device.type == "tpu" for p in m.parameters())


def test_printing_matches_cpu():
    x = torch.tensor([[1.5, -2.0], [3.25, float("nan")]])
    text = repr(x.to("tpu"))
    assert text.endswith("device='tpu:0')")
    assert repr(x)[len("tensor("):-1] in text


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64,
                                   torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool])
def test_round_trip_all_dtypes(dtype):
    x = (torch.randn(3, 5) * 10).to(dtype)
    assert torch.equal(x.to("tpu").cpu(), x)


@pytest.mark.parametrize("shape", [(), (0,), (3, 0, 2), (7,), (2, 3, 4)])
def test_round_trip_shapes(shape):
    x = torch.randn(shape)
    assert torch.equal(x.to("tpu").cpu(), x)


def test_copy_non_contiguous_both_ways():
    base = torch.randn(6, 8)
    t = base.to("tpu")
    # tpu view -> host
    assert torch.equal(t[1::2, ::3].cpu(), base[1::2, ::3])
    assert torch.equal(t.t().cpu(), base.t())
    # host view -> tpu view, the rest of the storage kept
    src = torch.randn(8, 6).t()  # non-contiguous host source
    t[:, :].copy_(src)
    assert torch.equal(t.cpu(), src)
    t.t()[::2].copy_(torch.zeros(4, 6))
    expect = src.clone()
    expect.t()[::2] = 0
    assert torch.equal(t.cpu(), expect)
    # tpu -> non-contiguous host destination, with a dtype change
    dst = torch.empty(8, 6, dtype=torch.float64).t()
    dst.copy_(t)
    assert torch.equal(dst, expect.double())


def test_device_to_device_copy_and_item():
    a = torch.randn(4, 4, device="tpu")
    b = torch.empty(4, 4, device="tpu", dtype=torch.float64)
    b.copy_(a.t())
    assert torch.equal(b.cpu(), a.cpu().t().double())
    if torch.tpu.device_count() > 1:
        c = a.to("tpu:1")
        assert c.device == torch.device("tpu:1") and torch.equal(c.cpu(), a.cpu())
    assert a[1, 2].item() == a.cpu()[1, 2].item()
    assert torch.tensor(7, device="tpu").item() == 7


def test_pinned_memory_and_non_blocking_copies():
    # Code written for CUDA pins host batches and copies without blocking.
    src = torch.randn(5, 3)
    pinned = src.pin_memory()
    assert pinned.is_pinned() and not src.is_pinned() and torch.equal(pinned, src)
    on_device = pinned.to("tpu", non_blocking=True)
    back = (on_device * 2).to("cpu", non_blocking=True)
    assert back.is_pinned()  # as from CUDA: a non-blocking copy to the host lands in pinned memory
    torch.tpu.synchronize()
    assert torch.equal(back, src * 2)
    assert torch.equal((on_device * 2).t().to("cpu", torch.float64, non_blocking=True), src.t().double() * 2)
    assert torch.equal(torch.ones(2, 2, pin_memory=True), torch.ones(2, 2))
    batches = list(torch.utils.data.DataLoader(torch.utils.data.TensorDataset(src), batch_size=2, pin_memory=True))
    assert all(b.is_pinned() for (b,) in batches)
    assert torch.equal(torch.cat([b.to("tpu", non_blocking=True) for (b,) in batches]).cpu(), src)


def test_views_share_storage_and_writes_go_through():
    x = torch.zeros(4, 6, device="tpu")
    v = x.view(2, 12)
    v[1].fill_(3.0)
    x[:, 1] = 5.0
    expect = torch.zeros(4, 6)
    expect.view(2, 12)[1] = 3.0
    expect[:, 1] = 5.0
    assert torch.equal(x.cpu(), expect)
    assert x.data_ptr() == v.data_ptr()


def test_memory_accounting():
    torch.tpu.synchronize()
    before = torch.tpu.memory_allocated()
    x = torch.empty(1024, device="tpu")
    assert torch.tpu.memory_allocated() == before + 4096
    torch.tpu.reset_peak_memory_stats()
    peak = torch.tpu.max_memory_allocated()
    del x
    assert torch.tpu.memory_allocated() == before
    assert torch.tpu.max_memory_allocated() == peak


def test_memory_statistics_as_torch_accelerator_reports_them():
    """torch.accelerator's device-agnostic memory functions (which asserted
    inside PyTorch before the allocator was a DeviceAllocator) and the
    torch.cuda-shaped ones read the same counts."""
    torch.tpu.synchronize()
    torch.tpu.reset_accumulated_memory_stats()
    torch.accelerator.reset_peak_memory_stats()
    before = torch.tpu.memory_stats()
    x, y = torch.empty(1000, device="tpu"), torch.empty(24, dtype=torch.int8, device="tpu")
    stats = torch.accelerator.memory_stats()
    assert stats["allocated_bytes.all.current"] == before["allocated_bytes.all.current"] + 4024
    assert stats["allocated_bytes.all.allocated"] == before["allocated_bytes.all.allocated"] + 4024
    assert stats["allocation.all.current"] == before["allocation.all.current"] + 2
    assert stats["num_device_alloc"] == before["num_device_alloc"] + 2
    del x
    after = torch.tpu.memory_stats("tpu:0")
    assert after["allocated_bytes.all.freed"] == before["allocated_bytes.all.freed"] + 4000
    assert after["allocation.all.freed"] == before["allocation.all.freed"] + 1
    assert after["allocated_bytes.all.peak"] >= before["allocated_bytes.all.current"] + 4024
    assert torch.tpu.memory_allocated() == torch.accelerator.memory_allocated() == torch.tpu.memory_reserved()
    assert torch.tpu.max_memory_reserved() == torch.tpu.max_memory_allocated() == after["allocated_bytes.all.peak"]
    free, total = torch.tpu.mem_get_info()
    assert 0 < free <= total and (free, total) != (0, 0)
    summary = torch.tpu.memory_summary()
    assert summary.startswith("tpu:0 memory: ") and f"in {after['allocation.all.current']} storages" in summary
    torch.tpu.empty_cache()
    torch.accelerator.empty_cache()
    del y
    with pytest.raises(RuntimeError, match=r"tpu:7 is not a valid device"):
        torch.tpu.memory_stats(7)
    with pytest.raises(RuntimeError, match=r"tpu:7 is not a valid device"):
        torch.tpu.mem_get_info(7)


def test_metrics_and_runtime_scalars_do_not_recompile():
    keys = torch_tpu.metrics.counters()
    for k in ("compile", "cache_hit", "execute", "cpu_fallback", "transfer_to_device", "transfer_to_host"):
        assert k in keys
    with torch_tpu.eager_mode("strict"):  # a program per op signature
        x = torch.randn(5, 3, device="tpu")
        y = x * 1.5 + 2.0  # compile these signatures once
        compiles = torch_tpu.metrics.counters()["compile"]
        for value in (3.0, -1.25, 1e6):
            y = x * value + value
            assert_close(y, x.cpu() * value + value)
        assert torch_tpu.metrics.counters()["compile"] == compiles
    assert "compiles:" in torch_tpu.metrics.report()


def test_rng_state_and_seeds():
    torch.manual_seed(123)
    a = torch.randn(100, device="tpu")
    state = torch.tpu.get_rng_state()
    b = torch.randn(100, device="tpu")
    torch.tpu.set_rng_state(state)
    c = torch.randn(100, device="tpu")
    assert torch.equal(b.cpu(), c.cpu()) and not torch.equal(a.cpu(), b.cpu())
    torch.tpu.manual_seed_all(5)
    assert torch.tpu.initial_seed() == 5
    assert isinstance(torch.tpu.seed(), int)


UNLOWERED = lambda x: torch.histogram(x, bins=4).hist  # noqa: E731  (an op nobody lowers: PyTorch's is CPU-only)


def test_unlowered_op_raises_not_implemented_naming_it():
    x = torch.rand(3, device="tpu")
    with pytest.raises(NotImplementedError, match="histogram.*TORCH_TPU_CPU_FALLBACK"):
        UNLOWERED(x)
    assert (x + 1).shape == (3,)  # the process keeps working


def test_cpu_fallback_context_counts_per_op():
    x = torch.rand(3, device="tpu")
    def fallback_count():
        ops = torch_tpu.metrics.counters()["cpu_fallback_ops"]
        return sum(n for op, n in ops.items() if op.startswith("aten::histogram"))

    before = fallback_count()
    with torch_tpu.cpu_fallback():
        y = UNLOWERED(x)
    assert y.device.type == "tpu"
    assert_close(y, UNLOWERED(x.cpu()))
    assert fallback_count() == before + 1
    with pytest.raises(NotImplementedError):
        UNLOWERED(x)


def test_custom_op_named_like_an_aten_op_is_not_lowered_as_it():
    # Only aten ops take the lowering of the same name: mylib::add is not
    # aten::add. With the CPU fallback it runs its own CPU kernel, and
    # every call after the first (served from the fallback's per-operator
    # cache) does the same.
    lib = torch.library.Library("torch_tpu_test", "DEF")
    lib.define("add(Tensor a, Tensor b) -> Tensor")
    lib.impl("add", lambda a, b: a - b, "CPU")
    x, y = torch.rand(4), torch.rand(4)
    with pytest.raises(NotImplementedError, match="torch_tpu_test::add has no tpu lowering"):
        torch.ops.torch_tpu_test.add(x.to("tpu"), y.to("tpu"))
    with torch_tpu.cpu_fallback():
        for _ in range(2):
            out = torch.ops.torch_tpu_test.add(x.to("tpu"), y.to("tpu"))
            assert out.device.type == "tpu"
            assert_close(out, x - y, rtol=0, atol=0)


def test_cpu_fallback_environment_variable():
    code = ("import torch; x = torch.rand(3, device='tpu'); y = torch.histogram(x, bins=4); "
            "import torch_tpu; print(torch_tpu.metrics.counters()['cpu_fallback'])")
    env = dict(os.environ, TORCH_TPU_CPU_FALLBACK="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"


# The niced-thread count, then each thread's nice value over the main
# thread's, from /proc (field 19 of stat, the 17th after the name).
THREAD_NICES = ("import json, os, torch; "
                "n = lambda t: int(open(f'/proc/self/task/{t}/stat').read().rsplit(')', 1)[1].split()[16]); "
                "main = n(os.getpid()); "
                "print(json.dumps([torch.tpu.get_device_properties()['worker_threads_niced'], "
                "[n(t) - main for t in os.listdir('/proc/self/task')]]))")


def run_fresh(code, variable, value):
    """The JSON that `code` prints last in a fresh process with environment
    `variable` set to `value` (None: unset), or its failed CompletedProcess."""
    env = dict(os.environ)
    env.pop(variable, None)
    if value is not None:
        env[variable] = value
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    return json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else out


def thread_nices(worker_nice):
    """(niced count, each thread's nice over the main thread's) in a fresh
    process, or its failed CompletedProcess."""
    return run_fresh(THREAD_NICES, "TORCH_TPU_CPU_WORKER_NICE", worker_nice)


@pytest.mark.skipif(not sys.platform.startswith("linux") or torch.tpu.get_device_properties()["platform"] != "cpu",
                    reason="per-thread nice values: the CPU plugin on Linux")
def test_cpu_plugin_threads_yield_to_the_issuing_thread():
    count, nices = thread_nices(None)  # the default, 10
    assert count > 0 and nices.count(10) == count
    assert set(nices) == {0, 10}  # the plugin's threads and nothing else
    count, nices = thread_nices("3")
    assert count > 0 and nices.count(3) == count and set(nices) == {0, 3}
    count, nices = thread_nices("0")
    assert count == 0 and set(nices) == {0}
    for bad in ("high", "-1", "20"):
        out = thread_nices(bad)
        assert out.returncode != 0
        assert f"TORCH_TPU_CPU_WORKER_NICE={bad!r}: expected an integer from 0" in out.stderr


def test_invalid_device_index():
    bad = torch.tpu.device_count() + 3
    with pytest.raises(RuntimeError, match=f"tpu:{bad} is not a valid device"):
        torch.zeros(2, device=f"tpu:{bad}")
    with pytest.raises(RuntimeError, match="not a valid device"):
        torch.tpu.set_device(bad)
    assert torch.zeros(2, device="tpu").sum().item() == 0


def test_mixed_devices_error():
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(3, device="tpu") + torch.ones(3)
    # 0-d CPU tensors are allowed, as on CUDA
    assert_close(torch.ones(3, device="tpu") + torch.tensor(2.0), torch.full((3,), 3.0))


def test_shape_mismatch_error_names_shapes():
    with pytest.raises(RuntimeError, match=r"size of tensor a \(3\) must match the size of tensor b \(4\)"):
        torch.ones(3, device="tpu") + torch.ones(4, device="tpu")
    assert torch.ones(2, device="tpu").sum().item() == 2


@pytest.mark.parametrize("mode", ["debug", "strict", "fused"])
def test_lowering_error_names_the_op_once(mode):
    # The glue, the runtime and the lowering each know the op; the message
    # names it once, with the call's arguments, and points at the lowering.
    x = torch.ones(4, device="tpu")
    with torch_tpu.eager_mode(mode):
        with pytest.raises(RuntimeError) as info:
            torch.ops.aten._fft_r2c(x, [0], 7, True)
    message = str(info.value)
    assert message.startswith("aten::_fft_r2c(Float[4], [0], 7, True): normalization 7 is not one of"), message
    assert message.count("_fft_r2c") == 1, message
    assert "(fft.c:" in message, message  # where the lowering refused, not the builder's helper
    assert torch.ones(2, device="tpu").sum().item() == 2


def test_ops_from_several_threads_at_once():
    import threading

    errors = []

    def worker(seed):
        try:
            g = torch.Generator().manual_seed(seed)
            for _ in range(20):
                x = torch.randn(16, 8, generator=g)
                y = torch.randn(8, 4, generator=g)
                got = ((x.to("tpu") @ y.to("tpu")) * 2 + 1).cpu()
                torch.testing.assert_close(got, x @ y * 2 + 1, rtol=1e-5, atol=1e-5)
        except Exception as e:  # noqa: BLE001  (reported below)
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_many_distinct_runtime_scalars_in_one_call():
    # 200 views at different offsets: one runtime offset each, more distinct
    # values than the device-side scalar cache has slots.
    big = torch.randn(30000)
    views = [big.to("tpu")[i:i + 1] for i in range(0, 2000, 10)]
    assert torch.equal(torch.cat(views).cpu(), torch.cat([big[i:i + 1] for i in range(0, 2000, 10)]))


# Page faults (ru_minflt) of each of ten rounds of a 64 MiB block the
# plugin allocates and frees, after REFAULT_WARMUP rounds; on the CPU plugin
# device memory is the host's malloc. "output": a tpu tensor made and freed
# (a program writes every byte of its output); "scratch": a compiled program
# whose 64 MiB product is a temporary, which the plugin's worker threads
# allocate (glibc maps such a block afresh for a thread with an arena of its
# own, whatever its mmap settings).
REFAULT_ROUNDS = 10
REFAULT_WARMUP = 15
REFAULT_BLOCKS = {
    "output": ("def round():\n"
               "    t = torch.ones(16 << 20, device='tpu')\n"
               "    assert t[-1].item() == 1.0\n"
               "    del t\n"
               "    torch.tpu.synchronize()\n"),
    "scratch": ("x, w = torch.ones(4096, 64, device='tpu'), torch.ones(64, 4096, device='tpu')\n"
                "product_sum = torch.compile(lambda x, w: (x @ w).relu().sum(), backend='tpu')\n"
                "def round():\n"
                "    assert product_sum(x, w).item() == 64 * 4096 * 4096\n"),
}
REFAULTS = ("import json, resource, torch\n"
            "def faults():\n"
            "    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
            "{block}"
            f"for _ in range({REFAULT_WARMUP}): round()\n"
            "counts = []\n"
            f"for _ in range({REFAULT_ROUNDS}):\n"
            "    start = faults()\n"
            "    round()\n"
            "    counts.append(faults() - start)\n"
            "print(json.dumps([torch.tpu.get_device_properties()['keeps_freed_host_memory'], counts]))")


def refaulting_rounds(block, keep):
    """(whether the runtime keeps freed memory, how many of REFAULTS' rounds
    of REFAULT_BLOCKS[block] faulted in over half a block) in a fresh
    process, or its failed CompletedProcess."""
    out = run_fresh(REFAULTS.format(block=REFAULT_BLOCKS[block]), "TORCH_TPU_CPU_KEEP_FREED_MEMORY", keep)
    if not isinstance(out, list):
        return out
    half_block = (64 << 20) // resource.getpagesize() // 2
    return out[0], sum(count > half_block for count in out[1])


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc" or torch.tpu.get_device_properties()["platform"] != "cpu",
                    reason="the host memory policy: the CPU plugin on glibc")
@pytest.mark.parametrize("block", list(REFAULT_BLOCKS))
def test_cpu_plugin_keeps_freed_host_memory(block):
    kept, rounds = refaulting_rounds(block, "1")
    # Mostly, not always: a freed block that smaller ones were cut from
    # makes the heap grow by one more (the round faults the new block in),
    # in most of the first rounds and rarely after REFAULT_WARMUP (runs of
    # "scratch": growth in 4 of rounds 6-15 and in 1 of rounds 16-100; the
    # process then held 7 blocks more than after round 1).
    assert kept and rounds <= REFAULT_ROUNDS // 2, f"{rounds} of {REFAULT_ROUNDS} rounds faulted a block in"
    for glibc_policy in (None, "0"):  # the default leaves glibc's policy alone
        kept, rounds = refaulting_rounds(block, glibc_policy)
        assert not kept and rounds == REFAULT_ROUNDS, f"only {rounds} rounds faulted a block in"
    for bad in ("yes", "2") if block == "output" else ():  # the setting's parsing: once
        out = refaulting_rounds(block, bad)
        assert out.returncode != 0
        assert f"TORCH_TPU_CPU_KEEP_FREED_MEMORY={bad!r}: expected 1" in out.stderr


def test_untyped_storage_resize_keeps_its_bytes_as_on_the_cpu():
    """UntypedStorage.resize_ (FSDP2 frees parameters to 0 bytes and grows
    them back): growing and shrinking keep the leading bytes, as on the CPU."""
    for device in ("cpu", "tpu"):
        storage = torch.arange(4.0, device=device).untyped_storage()
        storage.resize_(32)
        grown = torch.empty(0, device=device).set_(storage, 0, (8,), (1,))
        assert storage.nbytes() == 32 and grown[:4].cpu().tolist() == [0.0, 1.0, 2.0, 3.0]
        storage.resize_(8)
        assert torch.empty(0, device=device).set_(storage, 0, (2,), (1,)).cpu().tolist() == [0.0, 1.0]
        storage.resize_(0)
        assert storage.nbytes() == 0
        storage.resize_(16)
        refilled = torch.empty(0, device=device).set_(storage, 0, (4,), (1,)).fill_(3)
        assert refilled.cpu().tolist() == [3.0] * 4
