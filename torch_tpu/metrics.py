"""Runtime counters: compiles, cache hits, executions, transfers, CPU fallbacks."""
from . import _C


def counters():
    """A dict with at least compile, cache_hit, execute, cpu_fallback,
    transfer_to_device and transfer_to_host (plus bytes and per-op fallbacks)."""
    return _C._counters()


def reset():
    _C._reset_counters()


def report():
    """A readable summary of the counters and the plugin in use."""
    c = counters()
    info = _C._runtime_info()
    lines = [
        f"plugin: {info['plugin_path']}",
        f"platform: {info['platform']} {info['platform_version']} "
        f"(PJRT API {info['pjrt_api_version']}, XLA {info['xla_version'] or 'unknown'})",
        f"compiles: {c['compile']} ({c['compile_nanos'] / 1e6:.1f} ms total)",
        f"cache hits: {c['cache_hit']} in memory, {c['disk_cache_hit']} from disk "
        f"({c['disk_cache_write']} programs written to disk)",
        f"executions: {c['execute']}",
        f"to device: {c['transfer_to_device']} transfers, {c['bytes_to_device']} bytes",
        f"to host: {c['transfer_to_host']} transfers, {c['bytes_to_host']} bytes",
        f"cpu fallbacks: {c['cpu_fallback']}",
    ]
    for op, n in sorted(c["cpu_fallback_ops"].items()):
        lines.append(f"  {op}: {n}")
    return "\n".join(lines)
