"""In-place writes: a program that overwrites a storage of at least 1 MiB
that it reads is handed that storage's buffer (donated) and writes its
result there instead of into a new allocation. Results match the CPU in
every mode and through views; work enqueued before the write still reads
the old values; and the `in_place_write` counter shows each storage written
in place, also by optimizer steps in eager and compiled form."""
import copy

import pytest
import torch

import torch_tpu
import torch_tpu.metrics
from parity import assert_close

MODES = ["strict", "debug", "fused"]


@pytest.fixture(params=MODES)
def mode(request):
    with torch_tpu.eager_mode(request.param):
        yield request.param


def in_place_writes(fn):
    """How many storages fn() had written in place, awaited."""
    torch.tpu.synchronize()
    before = torch_tpu.metrics.counters()["in_place_write"]
    fn()
    torch.tpu.synchronize()
    return torch_tpu.metrics.counters()["in_place_write"] - before


MIB_OF_FLOATS = (512, 512)  # the smallest storage written in place


def test_an_update_of_a_tensor_is_written_in_place(mode):
    cpu = torch.randn(MIB_OF_FLOATS)
    x = cpu.to("tpu")
    # Fused mode records both ops and runs them as one program: one write.
    assert in_place_writes(lambda: x.add_(1).mul_(2)) == (1 if mode == "fused" else 2)
    assert_close(x, cpu.add_(1).mul_(2))


def test_a_small_storage_gets_a_fresh_buffer(mode):
    cpu = torch.randn(511, 512)  # under 1 MiB: a donation costs more than it saves
    x = cpu.to("tpu")
    assert in_place_writes(lambda: x.add_(1)) == 0
    assert_close(x, cpu.add_(1))


def test_work_enqueued_before_the_write_reads_the_old_values(mode):
    x = torch.ones(1024, 1024, device="tpu")
    product = x @ x  # enqueued first, and slow enough to overlap the write
    total = x.sum()
    x.add_(1)
    assert torch.equal(product.cpu(), torch.full((1024, 1024), 1024.0))
    assert total.item() == 1024 * 1024
    assert torch.equal(x.cpu(), torch.full((1024, 1024), 2.0))


def test_views_see_writes_through_the_shared_storage(mode):
    cpu = torch.arange(512 * 1024.0).reshape(512, 1024) / 1024
    base = cpu.to("tpu")
    row, column = base[1], base[:, 2]
    cpu_row, cpu_column = cpu[1], cpu[:, 2]
    for t, c in ((base, cpu), (row, cpu_row), (column, cpu_column)):
        t.mul_(0.5)
        c.mul_(0.5)
        t.add_(row.mean())
        c.add_(cpu_row.mean())
    assert_close(base, cpu)
    assert_close(row, cpu_row)
    assert_close(column, cpu_column)


def test_an_op_reading_its_own_output_twice(mode):
    cpu = torch.randn(MIB_OF_FLOATS)
    x = cpu.to("tpu")
    x.add_(x).mul_(x)
    assert_close(x, cpu.add_(cpu).mul_(cpu))


def test_a_write_through_another_dtype_view(mode):
    cpu = torch.linspace(-2, 2, 512 * 512)
    x = cpu.to("tpu")
    x.view(torch.int32).add_(1)  # one ulp up: the storage is float32, the view int32
    cpu.view(torch.int32).add_(1)
    assert torch.equal(x.cpu(), cpu)


def test_a_write_into_a_never_written_storage(mode):
    x = torch.empty(MIB_OF_FLOATS, device="tpu")
    x.zero_()
    x[1].add_(5)
    expected = torch.zeros(MIB_OF_FLOATS)
    expected[1] += 5
    assert_close(x, expected)


def _model_and_batch():
    """Two weights of 1 MiB or more (written in place), two biases under it."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 512 * 32), torch.nn.Tanh(), torch.nn.Linear(512 * 32, 16))
    return model, torch.randn(8, 16), torch.randint(0, 16, (8,))


def _train(model, x, y, optimizer, step, steps=3):
    for _ in range(steps):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        step()
    return [p.detach() for p in model.parameters()]


@pytest.mark.parametrize("form", ["strict", "fused", "compiled"])
def test_optimizer_steps_write_parameters_and_state_in_place(form):
    cpu_model, x, y = _model_and_batch()
    tpu_model = copy.deepcopy(cpu_model).to("tpu")
    # SGD with momentum keeps float rounding differences as small as they
    # start (Adam's first steps move a weight by lr whatever its gradient's
    # size, so a gradient near 0 decides its sign on rounding).
    cpu_opt = torch.optim.SGD(cpu_model.parameters(), lr=0.1, momentum=0.9)
    tpu_opt = torch.optim.SGD(tpu_model.parameters(), lr=0.1, momentum=0.9)
    step = torch.compile(tpu_opt.step, backend="tpu") if form == "compiled" else tpu_opt.step
    expected = _train(cpu_model, x, y, cpu_opt, cpu_opt.step, steps=3)
    tx, ty = x.to("tpu"), y.to("tpu")
    with torch_tpu.eager_mode("fused" if form == "fused" else "strict"):
        _train(tpu_model, tx, ty, tpu_opt, step, steps=2)  # the state made, programs compiled
        # The third step updates both weights and their momentum buffers in
        # place. Strict eager SGD's foreach ops write each buffer more than
        # once; fused eager runs the update as one program, as compiled does.
        writes = in_place_writes(lambda: _train(tpu_model, tx, ty, tpu_opt, step, steps=1))
    assert writes > 4 if form == "strict" else writes == 4
    for a, e in zip(tpu_model.parameters(), expected):
        assert_close(a.detach(), e, rtol=1e-4, atol=1e-5)


def test_the_report_counts_in_place_writes():
    x = torch.zeros(MIB_OF_FLOATS, device="tpu")
    x.add_(1)
    torch.tpu.synchronize()
    assert "storages written in place)" in torch_tpu.metrics.report()
