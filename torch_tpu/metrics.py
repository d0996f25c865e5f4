"""Runtime diagnostics: counters (compiles, cache hits, executions,
transfers, CPU fallbacks, recompilations), the reasons for recent
recompilations, program dumps (TORCH_TPU_DUMP_DIR) and a readable report."""
import os

from . import _C
from . import modes

DUMP_ENV_VAR = "TORCH_TPU_DUMP_DIR"


def counters():
    """A dict with at least compile, cache_hit, execute, cpu_fallback,
    transfer_to_device, transfer_to_host and recompile (plus bytes, compile
    time, disk cache hits and writes, and per-op fallbacks)."""
    return _C._counters()


def reset():
    """Zeroes the counters and forgets the recompilation reasons."""
    _C._reset_counters()


def recompile_reasons():
    """Why ops compiled again, oldest first, the latest 64: each names the op
    and the first difference from its previous signature, e.g.
    "aten::add.Tensor: input 0 dim 1 changed 128 -> 256"."""
    return list(_C._recompile_reasons())


def set_dump_dir(path):
    """Writes each program built from now on into `path` (created if
    missing) as <cache key hash>.mlir: a header naming the key, then the
    StableHLO text. None or "" stops."""
    if path:
        os.makedirs(path, exist_ok=True)
    _C._dump_configure(os.fspath(path) if path else "")


def _configure():
    set_dump_dir(os.environ.get(DUMP_ENV_VAR, ""))


def report():
    """A readable summary: the plugin, the counters, the recompilation
    reasons, the eager mode and the fused ops waiting to run."""
    c = counters()
    info = _C._runtime_info()
    lines = [
        f"plugin: {info['plugin_path']}",
        f"platform: {info['platform']} {info['platform_version']} "
        f"(PJRT API {info['pjrt_api_version']}, XLA {info['xla_version'] or 'unknown'})",
        f"eager mode: {modes.get_eager_mode()} ({modes.pending_op_count()} fused ops pending)",
        f"compiles: {c['compile']} ({c['compile_nanos'] / 1e6:.1f} ms total)",
        f"cache hits: {c['cache_hit']} in memory, {c['disk_cache_hit']} from disk "
        f"({c['disk_cache_write']} programs written to disk; {c['program_unload']} unloaded "
        "to bound their memory maps)",
        f"executions: {c['execute']} ({c['in_place_write']} storages written in place)",
        f"to device: {c['transfer_to_device']} transfers, {c['bytes_to_device']} bytes",
        f"to host: {c['transfer_to_host']} transfers, {c['bytes_to_host']} bytes",
        f"cpu fallbacks: {c['cpu_fallback']}",
    ]
    for op, n in sorted(c["cpu_fallback_ops"].items()):
        lines.append(f"  {op}: {n}")
    reasons = recompile_reasons()
    shown = f", latest {len(reasons)}" if len(reasons) < c["recompile"] else ""
    lines.append(f"recompilations: {c['recompile']}{shown}")
    lines.extend(f"  {reason}" for reason in reasons)
    return "\n".join(lines)
