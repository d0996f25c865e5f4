"""The persistent compile cache, exercised across processes."""
import json
import os
import subprocess
import sys

import pytest
import torch

SCRIPT = r"""
import json, os, sys, time, torch, torch_tpu
time.sleep(float(os.environ.get("TEST_PAUSE", "0")))  # stands in for building a model
x = torch.arange(12.0, device="tpu").reshape(3, 4)
y = (x @ x.t() + 1).softmax(-1).sum(0)
print(json.dumps({"values": y.cpu().tolist(), "counters": torch_tpu.metrics.counters(),
                  "stats": torch_tpu.cache.stats()}))
"""


def process_env(cache_dir, **env):
    # Strict mode unless env says: the counts below are of its per-op programs.
    return dict(os.environ, TORCH_TPU_CACHE_DIR=str(cache_dir), TORCH_TPU_EAGER_MODE="strict",
                **{k: str(v) for k, v in env.items()})


def run(cache_dir, **env):
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         env=process_env(cache_dir, **env), timeout=180)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def cache_files(cache_dir):
    return sorted(p for p in os.listdir(cache_dir) if p.endswith(".xla"))


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """A cache directory filled by one cold run."""
    cache_dir = tmp_path_factory.mktemp("cache")
    cold = run(cache_dir)
    return cache_dir, cold


def test_second_process_compiles_nothing(warm):
    cache_dir, cold = warm
    assert cold["counters"]["compile"] > 0
    assert cold["counters"]["disk_cache_write"] == cold["counters"]["compile"]
    hot = run(cache_dir)
    assert hot["counters"]["compile"] == 0
    assert hot["counters"]["disk_cache_hit"] == cold["counters"]["compile"]
    assert hot["values"] == cold["values"]
    assert hot["stats"]["entries"] == len(cache_files(cache_dir)) > 0


def test_other_xla_flags_compile_afresh(warm):
    # XLA_FLAGS change what XLA compiles (here fast math), so a process with
    # other flags never loads the files made without them, and makes its own.
    cache_dir, cold = warm
    other = run(cache_dir, XLA_FLAGS="--xla_cpu_enable_fast_math=true")
    assert other["counters"]["compile"] == cold["counters"]["compile"]
    assert other["counters"]["disk_cache_hit"] == 0
    assert len(cache_files(cache_dir)) == 2 * cold["counters"]["compile"]
    again = run(cache_dir, XLA_FLAGS="--xla_cpu_enable_fast_math=true")
    assert again["counters"]["compile"] == 0
    assert again["values"] == other["values"]


def test_warm_start_prefetches_the_last_sessions_programs(tmp_path):
    cold = run(tmp_path)
    n = cold["counters"]["compile"]
    assert n >= 2 and cold["counters"]["disk_cache_prefetched"] == 0
    # By the first op (after the pause) the loader thread has them all.
    warm = run(tmp_path, TEST_PAUSE=2)
    assert warm["counters"]["compile"] == 0
    assert warm["counters"]["disk_cache_prefetched"] == warm["counters"]["disk_cache_hit"] == n
    assert warm["values"] == cold["values"]
    off = run(tmp_path, TEST_PAUSE=2, TORCH_TPU_CACHE_PREFETCH=0)
    assert off["counters"]["disk_cache_prefetched"] == 0 and off["counters"]["disk_cache_hit"] == n
    # Files last used long before the newest are an earlier session's: not
    # prefetched, loaded when asked for.
    files = cache_files(tmp_path)
    stale = files[: len(files) // 2]
    long_ago = os.path.getmtime(tmp_path / files[-1]) - 1000
    for name in stale:
        os.utime(tmp_path / name, (long_ago, long_ago))
    mixed = run(tmp_path, TEST_PAUSE=2)
    assert mixed["counters"]["disk_cache_prefetched"] == n - len(stale)
    assert mixed["counters"]["disk_cache_hit"] == n and mixed["counters"]["compile"] == 0
    assert mixed["values"] == cold["values"]
    # Executables not yet taken count against the memory maps' budget: the
    # loader stops at half of it (here after its first file).
    bounded = run(tmp_path, TEST_PAUSE=2, TORCH_TPU_MAX_PROGRAM_MAPS=1)
    assert bounded["counters"]["disk_cache_prefetched"] == 1
    assert bounded["counters"]["disk_cache_hit"] == n and bounded["counters"]["compile"] == 0
    assert bounded["values"] == cold["values"]


def damage(data, how):
    if how == "truncate":
        return data[: len(data) // 2]
    if how == "corrupt":
        return data[:-40] + bytes(b ^ 0xFF for b in data[-40:])
    if how == "foreign":  # the same program made by another plugin build
        return data[:12] + bytes([data[12] ^ 0x01]) + data[13:]
    return b""


def test_damaged_files_are_ignored_and_replaced(tmp_path):
    first = run(tmp_path)
    names = cache_files(tmp_path)
    kinds = ["truncate", "corrupt", "foreign", "empty"]
    assert len(names) >= len(kinds)
    for i, name in enumerate(names):
        path = tmp_path / name
        path.write_bytes(damage(path.read_bytes(), kinds[i % len(kinds)]))
    second = run(tmp_path)
    assert second["values"] == first["values"]
    assert second["counters"]["compile"] == first["counters"]["compile"]  # every damaged one recompiled
    assert second["counters"]["disk_cache_hit"] == 0
    third = run(tmp_path)  # and replaced by a good file
    assert third["counters"]["compile"] == 0


def test_size_bound_evicts_least_recently_used(tmp_path):
    full = run(tmp_path)
    sizes = sorted((tmp_path / n).stat().st_size for n in cache_files(tmp_path))
    for name in cache_files(tmp_path):
        (tmp_path / name).unlink()
    bound = sum(sizes) - sizes[0] // 2  # room for all but about one program
    bounded = run(tmp_path, TORCH_TPU_CACHE_MAX_BYTES=bound)
    assert bounded["stats"]["bytes"] <= bound
    assert bounded["stats"]["entries"] == len(sizes) - 1
    assert bounded["values"] == full["values"]


def test_concurrent_processes_share_a_directory(tmp_path):
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=process_env(tmp_path)) for _ in range(3)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert all(r["values"] == results[0]["values"] for r in results)
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
    assert run(tmp_path)["counters"]["compile"] == 0


def test_clear_and_stats_and_off(tmp_path):
    code = ("import torch, torch_tpu; (torch.ones(3, device='tpu') * 2).cpu(); "
            "s = torch_tpu.cache.stats(); assert s['entries'] > 0 and s['dir'], s; "
            "torch_tpu.cache.clear(); s = torch_tpu.cache.stats(); assert s['entries'] == 0, s; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, TORCH_TPU_CACHE_DIR=str(tmp_path)), timeout=180)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
    off = run("")
    assert off["stats"]["dir"] == "" and off["counters"]["disk_cache_write"] == 0


# Several shapes and modes through a cache whose executables may hold 8
# memory maps (two small programs, three maps each): the rest are unloaded
# and reloaded (from disk, or recompiled when the disk cache is off) at their
# next use, with the same results.
MANY_PROGRAMS = r"""
import json, torch, torch_tpu
step = torch.compile(lambda x: (x * 2 + 1).exp().sum(0) / x.abs().max(), backend="tpu", dynamic=False)
out = []
for mode in ("strict", "fused", "compiled"):
    with torch_tpu.eager_mode("strict" if mode == "compiled" else mode):
        for rnd in range(2):
            for n in (1, 3, 5):
                x = torch.linspace(-1, 1, n * 4, device="tpu").reshape(n, 4)
                y = step(x) if mode == "compiled" else (x * 2 + 1).exp().sum(0) / x.abs().max()
                out.append(y.cpu().tolist())
print(json.dumps({"values": out, "counters": torch_tpu.metrics.counters()}))
"""


@pytest.mark.parametrize("disk", [True, False], ids=["disk-cache", "no-disk-cache"])
def test_loaded_programs_are_bounded_and_reload(tmp_path, disk):
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(tmp_path) if disk else "", TORCH_TPU_MAX_PROGRAM_MAPS="8")
    out = subprocess.run([sys.executable, "-c", MANY_PROGRAMS], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    want = []
    for _ in range(3):
        for _ in range(2):
            for n in (1, 3, 5):
                x = torch.linspace(-1, 1, n * 4).reshape(n, 4)
                want.append(((x * 2 + 1).exp().sum(0) / x.abs().max()).tolist())
    assert len(got["values"]) == len(want)
    for g, w in zip(got["values"], want):
        torch.testing.assert_close(torch.tensor(g), torch.tensor(w), rtol=1e-5, atol=1e-6)
    counters = got["counters"]
    assert counters["program_unload"] > 0
    # A reload comes from the disk cache when there is one, else a compile.
    reloads = counters["disk_cache_hit"] if disk else counters["compile"]
    assert reloads > counters["program_unload"] // 2
