"""Copying and moving tensors and modules as a whole: copy.deepcopy,
torch.save / torch.load, and Module.to keeping tied weights tied. PyTorch
does the storage parts of these as byte copies of untyped storages; the
values must come back exactly as on the CPU."""
import copy
import io

import pytest
import torch
from torch import nn

from parity import assert_close

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int8, torch.int32,
          torch.int64, torch.uint8, torch.bool]


def values(dtype, shape=(3, 5)):
    g = torch.Generator().manual_seed(0)
    return (torch.randn(shape, generator=g) * 10).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_deepcopy_tensor(dtype):
    cpu = values(dtype)
    tpu = cpu.to("tpu")
    copied = copy.deepcopy(tpu)
    assert copied.device == tpu.device and copied.dtype == dtype
    assert copied.untyped_storage().data_ptr() != tpu.untyped_storage().data_ptr()
    assert torch.equal(copied.cpu(), cpu)
    # The copy is independent, and the original still reads as its own type.
    copied.zero_()
    assert torch.equal(tpu.cpu(), cpu)
    assert not copied.cpu().any()


def test_deepcopy_view_keeps_layout_and_shared_storage():
    base = values(torch.float32, (4, 6)).to("tpu")
    view = base.t()[1:, ::2]
    a, b = copy.deepcopy([base, view])  # one memo: the copies share a storage too
    assert (b.stride(), b.storage_offset(), b.shape) == (view.stride(), view.storage_offset(), view.shape)
    assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    assert torch.equal(b.cpu(), view.cpu())


def test_deepcopy_of_never_written_tensor_leaves_it_usable():
    # torch.empty's storage is untyped on the device until first written.
    empty = torch.empty(4, device="tpu")
    copied = copy.deepcopy(empty)
    empty.fill_(2.0)
    copied.fill_(3.0)
    assert torch.equal(empty.cpu(), torch.full((4,), 2.0))
    assert torch.equal(copied.cpu(), torch.full((4,), 3.0))


def test_deepcopy_keeps_requires_grad_and_grad():
    p = values(torch.float32).to("tpu").requires_grad_()
    (p * 2).sum().backward()
    q = copy.deepcopy(p)
    assert q.requires_grad and q.is_leaf
    assert torch.equal(q.grad.cpu(), torch.full((3, 5), 2.0))


def small_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.GELU(), nn.Linear(8, 3))


def test_deepcopy_module_trains_like_cpu():
    cpu = small_model()
    tpu = copy.deepcopy(copy.deepcopy(cpu).to("tpu"))  # a deepcopy made on the device
    for (name, pc), (_, pt) in zip(cpu.state_dict().items(), tpu.state_dict().items()):
        assert pt.device.type == "tpu", name
        assert torch.equal(pt.cpu(), pc), name
    x, y = torch.randn(5, 6), torch.randn(5, 3)
    for model, device in [(cpu, "cpu"), (tpu, "tpu")]:
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            nn.functional.mse_loss(model(x.to(device)), y.to(device)).backward()
            opt.step()
    for (name, pc), (_, pt) in zip(cpu.state_dict().items(), tpu.state_dict().items()):
        assert_close(pt, pc, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_save_and_load(dtype):
    cpu = values(dtype)
    tpu = cpu.to("tpu")
    saved = io.BytesIO()
    torch.save({"t": tpu, "view": tpu[1:, 2]}, saved)
    assert torch.equal(tpu.cpu(), cpu)  # saving does not touch the tensor
    for location, device in [(None, "tpu:0"), ("cpu", "cpu"), ("tpu", "tpu:0")]:
        saved.seek(0)
        loaded = torch.load(saved, map_location=location)
        assert str(loaded["t"].device) == device
        assert torch.equal(loaded["t"].cpu(), cpu)
        assert torch.equal(loaded["view"].cpu(), cpu[1:, 2])
        if device != "cpu":  # loaded on the device, it computes there
            assert_close(loaded["view"].to(torch.float32) * 2, cpu[1:, 2].to(torch.float32) * 2)


def test_cpu_checkpoint_loads_into_tpu_model():
    cpu = small_model()
    saved = io.BytesIO()
    torch.save(cpu.state_dict(), saved)
    saved.seek(0)
    tpu = small_model().to("tpu")
    with torch.no_grad():
        for p in tpu.parameters():
            p.zero_()
    tpu.load_state_dict(torch.load(saved, map_location="tpu"))
    x = torch.randn(4, 6)
    cpu.eval(), tpu.eval()
    assert_close(tpu(x.to("tpu")), cpu(x))


class TiedLM(nn.Module):
    """Embedding and output projection share one Parameter (GPT-2, Qwen)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(11, 6)
        self.mix = nn.Linear(6, 6)
        self.head = nn.Linear(6, 11, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens):
        return self.head(torch.tanh(self.mix(self.embed(tokens))))


def test_module_to_keeps_tied_weights_tied():
    model = TiedLM()
    weight = model.embed.weight
    model.to("tpu")
    assert model.embed.weight is model.head.weight is weight  # moved in place
    assert weight.device.type == "tpu"
    assert len(list(model.parameters())) == 3
    model.to("cpu")
    assert model.embed.weight is model.head.weight is weight and weight.device.type == "cpu"


def test_tied_model_trains_like_cpu():
    cpu, tpu = TiedLM(), TiedLM().to("tpu")
    tokens = torch.randint(0, 11, (4, 7), generator=torch.Generator().manual_seed(1))
    targets = torch.randint(0, 11, (4, 7), generator=torch.Generator().manual_seed(2))
    for model, device in [(cpu, "cpu"), (tpu, "tpu")]:
        opt = torch.optim.AdamW(model.parameters(), lr=0.01)
        for _ in range(5):
            opt.zero_grad()
            logits = model(tokens.to(device))
            nn.functional.cross_entropy(logits.flatten(0, 1), targets.to(device).flatten()).backward()
            opt.step()
    assert tpu.embed.weight is tpu.head.weight
    assert_close(tpu.embed.weight, cpu.embed.weight, rtol=1e-4, atol=1e-5)
    assert_close(tpu.mix.weight, cpu.mix.weight, rtol=1e-4, atol=1e-5)


def test_data_assignment_across_devices():
    t = torch.zeros(2, device="tpu")
    t.data = torch.arange(3.0)  # as for CPU <-> CUDA: the tensor now lives on the CPU
    assert t.device.type == "cpu" and torch.equal(t, torch.arange(3.0))
    t.data = torch.ones(4, device="tpu")
    assert t.device.type == "tpu" and torch.equal(t.cpu(), torch.ones(4))


def test_storage_copy_size_mismatch_is_an_error():
    small = torch.UntypedStorage(8, device="tpu")
    with pytest.raises(RuntimeError, match="size does not match|8-byte storage"):
        torch.UntypedStorage(12, device="tpu").copy_(small)
