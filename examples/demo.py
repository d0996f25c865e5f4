"""A short computation on the tpu device: prints what it ran on and the result."""
import torch
import torch_tpu

info = torch_tpu._C._runtime_info()
print(f"plugin:   {info['plugin_path']}")
print(f"platform: {info['platform']} {info['platform_version']}")
print(f"PJRT API: {info['pjrt_api_version']}   XLA: {info['xla_version'] or 'not reported'}")
print(f"device:   {torch.tpu.get_device_name()} x {torch.tpu.device_count()}")

torch.manual_seed(0)
x = torch.randn(4, 3, device="tpu")
w = torch.randn(3, 2, device="tpu")
y = torch.softmax(x @ w + 1, dim=-1)
print("softmax(x @ w + 1) on tpu:")
print(y)
expected = torch.softmax(x.cpu() @ w.cpu() + 1, dim=-1)
print("max |tpu - cpu| =", (y.cpu() - expected).abs().max().item())
print(torch_tpu.metrics.report())
