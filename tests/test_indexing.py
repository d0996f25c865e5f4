"""Indexing and shape ops on tpu against PyTorch's CPU results: views (read,
written through, read by ops), cat/stack, index_select, gather, the scatter
family, masked_fill, flip, roll, repeat, tril/triu, padding, narrow_copy,
advanced indexing and index_put."""
import os
import sys

import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from parity import assert_close, check, programs_run  # noqa: E402

FLOATS = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
INTS = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8]
ALL = FLOATS + INTS + [torch.bool]


def make(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype == torch.uint8:
        return torch.randint(0, 6, shape, generator=g).to(dtype)
    if not dtype.is_floating_point:
        return torch.randint(-5, 6, shape, generator=g).to(dtype)
    return torch.randn(shape, generator=g).to(dtype)


def index(values, dtype=torch.int64):
    return torch.tensor(values, dtype=dtype)


def perm_index(shape, dim, seed=0):
    """An index for scatter whose entries along `dim` never repeat, so that
    overwriting scatters have one defined result."""
    g = torch.Generator().manual_seed(seed)
    moved = list(shape)
    n = moved.pop(dim)
    rows = [torch.randperm(n, generator=g) for _ in range(int(torch.tensor(moved).prod()))]
    return torch.stack(rows).reshape(*moved, n).movedim(-1, dim).contiguous()


# ---- views: results, writes through them, reads by ops ----

VIEWS = {
    "view": lambda x: x.view(4, 6),
    "reshape": lambda x: x.reshape(2, -1),
    "permute": lambda x: x.permute(2, 0, 1),
    "transpose": lambda x: x.transpose(0, 2),
    "expand": lambda x: x[:, :1].expand(2, 5, 4),
    "squeeze": lambda x: x[:, :1].squeeze(1),
    "unsqueeze": lambda x: x.unsqueeze(1),
    "flatten": lambda x: x.flatten(1),
    "select": lambda x: x.select(1, 2),
    "int_index": lambda x: x[1],
    "step_slice": lambda x: x[:, ::2],
    "neg_slice": lambda x: x[..., 1:-1],
    "narrow": lambda x: x.narrow(2, 1, 2),
    "split": lambda x: x.split(2, dim=1)[1],
    "chunk": lambda x: x.chunk(2, dim=2)[1],
    "t_of_select": lambda x: x[0].t(),
    "diagonal": lambda x: x[0].diagonal(),
    "unfold": lambda x: x[0].unfold(1, 2, 1),
}


@pytest.mark.parametrize("name", VIEWS)
def test_view_result(name):
    check(VIEWS[name], make((2, 3, 4)))


@pytest.mark.parametrize("name", VIEWS)
def test_view_read_by_op(name):
    check(lambda x: VIEWS[name](x) + 1.5, make((2, 3, 4)))


@pytest.mark.parametrize("name", [n for n in VIEWS if n not in ("expand", "unfold")])
def test_view_write(name):
    def fn(x):
        VIEWS[name](x).add_(1)
        return x

    check(fn, make((2, 3, 4)))


def test_view_write_fill_and_copy():
    def fill(x):
        x[:, ::2] = 1
        return x

    check(fill, make((3, 5)))

    def copy(x, y):
        x[1].copy_(y)
        return x

    check(copy, make((3, 4)), make((4,), seed=1))

    def t_add(x):
        x.t().add_(1)
        return x

    check(t_add, make((3, 4)))

    def chunks(x):
        a, b = x.chunk(2)
        a.fill_(0)
        b.add_(10)
        return x

    check(chunks, make((4, 3)))


def test_view_chain_write():
    def fn(x):
        x.permute(1, 0, 2)[1:, :, ::2].mul_(3)
        return x

    check(fn, make((2, 3, 4)))


# ---- cat / stack ----


@pytest.mark.parametrize("dtype", ALL)
def test_cat_dtypes(dtype):
    check(lambda a, b: torch.cat([a, b]), make((2, 3), dtype), make((4, 3), dtype, seed=1))


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_cat_dims(dim):
    shapes = [[2, 3, 4], [2, 3, 4], [2, 3, 4]]
    for k, s in enumerate(shapes):
        s[dim] = k + 1
    check(lambda a, b, c: torch.cat([a, b, c], dim), *[make(tuple(s), seed=i) for i, s in enumerate(shapes)])


@pytest.mark.parametrize("a,b", [(torch.int32, torch.float32), (torch.uint8, torch.int8),
                                 (torch.bool, torch.int64), (torch.float16, torch.bfloat16),
                                 (torch.bool, torch.float16), (torch.float64, torch.float32)])
def test_cat_promotes(a, b):
    check(lambda x, y: torch.cat([x, y], 1), make((2, 3), a), make((2, 2), b))


def test_cat_empty_inputs():
    # Legacy 1-d empty tensors are skipped whatever the others' rank.
    check(lambda a, e: torch.cat([a, e, a]), make((2, 3)), torch.empty(0))
    check(lambda a, e: torch.cat([e, a], 0), make((2, 3)), torch.empty(0, 3))
    check(lambda e, f: torch.cat([e, f], 1), torch.empty(0, 3), torch.empty(0, 2))
    check(lambda a: torch.cat([a]), make((3,)))


def test_cat_views_and_out():
    check(lambda a, b: torch.cat([a.t(), b[:, ::2]], 1), make((3, 4)), make((4, 6), seed=1))

    def out(a, b, o):
        torch.cat([a, b], out=o)
        return o

    check(out, make((2, 3)), make((1, 3), seed=1), torch.zeros(3, 3))

    def out_view(a, b, o):
        torch.cat([a, b], 1, out=o[:, 1:4])
        return o

    check(out_view, make((2, 1)), make((2, 2), seed=1), torch.zeros(2, 5))


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_stack(dim, dtype):
    check(lambda a, b: torch.stack([a, b], dim), make((2, 3), dtype), make((2, 3), dtype, seed=1))


def test_stack_0d_and_out():
    check(lambda a, b: torch.stack([a, b]), make(()), make((), seed=1))
    check(lambda a, b: torch.hstack([a, b]), make((2, 3)), make((2, 1)))
    check(lambda a, b: torch.vstack([a, b]), make((3,)), make((3,)))

    def out(a, b, o):
        torch.stack([a, b], 1, out=o)
        return o

    check(out, make((3,)), make((3,), seed=1), torch.zeros(3, 2))


# ---- index_select / gather ----


@pytest.mark.parametrize("dtype", ALL)
def test_index_select_dtypes(dtype):
    check(lambda x, i: x.index_select(1, i), make((3, 5), dtype), index([4, 0, 0, 2]))


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("idx_dtype", [torch.int64, torch.int32])
def test_index_select_dims(dim, idx_dtype):
    check(lambda x, i: torch.index_select(x, dim, i), make((3, 4, 5)), index([2, 1, 2], idx_dtype))


def test_index_select_shapes():
    check(lambda x, i: x.index_select(0, i), make((4, 2)), index(3))  # 0-d index
    check(lambda x, i: x.index_select(0, i), make(()), index([0]))  # 0-d self
    check(lambda x, i: x.index_select(1, i), make((3, 4)), index([], torch.int64))
    check(lambda x, i: x.index_select(0, i), make((0, 4)), index([], torch.int64))
    check(lambda x, i: x.t().index_select(0, i), make((3, 4)), index([3, 1]))

    def out(x, i, o):
        torch.index_select(x, 0, i, out=o)
        return o

    check(out, make((4, 3)), index([1, 3]), torch.zeros(2, 3))


@pytest.mark.parametrize("dtype", ALL)
def test_gather_dtypes(dtype):
    check(lambda x, i: x.gather(1, i), make((3, 4), dtype), index([[0, 3, 3], [1, 1, 0], [2, 0, 1]]))


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_gather_dims(dim):
    x = make((3, 4, 5))
    idx = torch.randint(0, x.shape[dim], (2, 3, 4), generator=torch.Generator().manual_seed(1))
    check(lambda x, i: torch.gather(x, dim, i), x, idx)


def test_gather_shapes():
    check(lambda x, i: x.gather(0, i), make(()), index(0))
    check(lambda x, i: x.gather(0, i), make((5,)), index([4, 4, 0]))
    check(lambda x, i: x.gather(1, i), make((3, 4)), torch.empty(3, 0, dtype=torch.int64))
    check(lambda x, i: x.t().gather(0, i), make((3, 4)), index([[1, 2, 0], [3, 3, 3]]))

    def out(x, i, o):
        torch.gather(x, 1, i, out=o)
        return o

    check(out, make((2, 3)), index([[2, 0], [1, 1]]), torch.zeros(2, 2))


# ---- scatter family ----


@pytest.mark.parametrize("dtype", ALL)
def test_scatter_src_dtypes(dtype):
    idx = perm_index((3, 4), 1)[:, :3]
    check(lambda x, i, s: x.scatter(1, i, s), make((3, 4), dtype), idx, make((3, 5), dtype, seed=1))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scatter_dims_value_and_inplace(dim):
    idx = perm_index((4, 3, 5), dim)
    idx = idx.narrow(dim, 0, 2).contiguous()
    check(lambda x, i, s: x.scatter(dim, i, s), make((4, 3, 5)), idx, make((4, 3, 5), seed=1))
    check(lambda x, i: x.scatter(dim, i, 2.5), make((4, 3, 5)), idx)
    check(lambda x, i: x.scatter_(dim, i, -1), make((4, 3, 5), torch.int32), idx)


@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_scatter_reduce_arg(reduce):
    idx = index([[0, 1, 0, 2], [2, 2, 1, 0]])
    check(lambda x, i, s: x.scatter(0, i, s, reduce=reduce), make((3, 4)), idx, make((2, 4), seed=1))
    check(lambda x, i: x.scatter(0, i, 3.0, reduce=reduce), make((3, 4)), idx)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.int32,
                                   torch.int64, torch.uint8])
def test_scatter_add(dtype):
    idx = index([[0, 1, 0, 2, 0], [2, 2, 1, 0, 0]])
    check(lambda x, i, s: x.scatter_add(1, i, s), make((2, 3), dtype), idx, make((2, 6), dtype, seed=1))
    check(lambda x, i, s: x.scatter_add_(0, i, s), make((3, 5), dtype), idx, make((2, 5), dtype, seed=1))


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.int8, torch.uint8])
def test_scatter_reduce(reduce, include_self, dtype):
    idx = index([[0, 1, 0, 3], [3, 3, 1, 0], [0, 0, 0, 1]])
    check(lambda x, i, s: x.scatter_reduce(0, i, s, reduce, include_self=include_self),
          make((4, 4), dtype), idx, make((3, 4), dtype, seed=1))


def test_scatter_shapes_and_views():
    check(lambda x, i, s: x.scatter(0, i, s), make(()), index(0), make((), seed=1))
    check(lambda x, i, s: x.scatter(1, i, s), make((2, 3)), torch.empty(2, 0, dtype=torch.int64),
          make((2, 2)))

    def into_view(x, i, s):
        x[:, 1:].scatter_(1, i, s)
        return x

    check(into_view, make((3, 5)), perm_index((3, 4), 1), make((3, 4), seed=1))

    def from_views(x, i, s):
        return x.t().scatter_add(0, i.t(), s.t())

    check(from_views, make((3, 4)), index([[0, 1, 2, 3], [1, 1, 1, 1]]), make((2, 4), seed=1))

    def out(x, i, s, o):
        torch.scatter(x, 0, i, s, out=o)
        return o

    check(out, make((3, 2)), index([[2, 0]]), make((1, 2), seed=1), torch.zeros(3, 2))


# ---- masked_fill ----


@pytest.mark.parametrize("dtype", ALL)
def test_masked_fill_dtypes(dtype):
    value = True if dtype == torch.bool else 3
    check(lambda x, m: x.masked_fill(m, value), make((3, 4), dtype), make((3, 4), torch.bool, seed=1))


def test_masked_fill_forms():
    x, m = make((3, 4)), make((3, 4), torch.bool, seed=1)
    check(lambda x, m: x.masked_fill(m, -2.5), x, m)
    check(lambda x, m, v: x.masked_fill(m, v), x, m, torch.tensor(7.0))
    check(lambda x, m: x.masked_fill(m, float("-inf")), x, m)
    check(lambda x, m: x.masked_fill(m, 1.5), make((2, 3, 4)), make((4,), torch.bool))  # broadcast mask
    check(lambda x, m: x.masked_fill(m, 0), make(()), torch.tensor(True))
    check(lambda x, m: x.masked_fill(m, 0), make((0, 4)), make((0, 4), torch.bool))
    check(lambda x, m: x.t().masked_fill_(m, 9), x, make((4, 3), torch.bool))
    check(lambda x, m: x.masked_fill_(x > 0, 0), x, m)

    def in_view(x, m):
        x[:, ::2].masked_fill_(m, 5)
        return x

    check(in_view, make((3, 4)), make((3, 2), torch.bool))


# ---- flip / roll / repeat / tril / triu / pad / narrow_copy ----


@pytest.mark.parametrize("dims", [(0,), (1,), (-1,), (0, 2), (0, 1, 2), ()])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int8, torch.bool])
def test_flip(dims, dtype):
    check(lambda x: x.flip(dims), make((2, 3, 4), dtype))


def test_flip_shapes():
    check(lambda x: torch.fliplr(x.t()), make((3, 4)))
    check(lambda x: torch.flipud(x), make((0, 4)))
    check(lambda x: x.flip(0), make(()))


@pytest.mark.parametrize("shifts,dims", [(1, None), (-7, None), (2, 0), ((1, -2), (0, 1)),
                                         ((5, 1), (1, 2)), (0, 1), (-4, -1)])
def test_roll(shifts, dims):
    check(lambda x: torch.roll(x, shifts, dims), make((2, 3, 4)))


def test_roll_dtypes_and_shapes():
    for dtype in [torch.int64, torch.bool, torch.bfloat16]:
        check(lambda x: x.roll(2, 1), make((3, 5), dtype))
    check(lambda x: x.roll(1), make(()))
    check(lambda x: x.roll(3, 0), make((0, 2)))
    check(lambda x: x.t().roll(1, 0), make((3, 5)))


def test_channel_shuffle():
    """F.channel_shuffle and nn.ChannelShuffle over 3-5 dims, dtypes, views,
    an empty batch; a group count that does not divide raises."""
    check(lambda x: torch.nn.functional.channel_shuffle(x, 3), make((2, 6, 3, 4)))
    check(torch.nn.ChannelShuffle(2), make((2, 4, 5)))
    check(lambda x: torch.nn.functional.channel_shuffle(x, 2), make((1, 4, 2, 3, 2), torch.int64))
    check(lambda x: torch.nn.functional.channel_shuffle(x.transpose(2, 3), 4), make((2, 8, 3, 5), torch.bfloat16))
    check(lambda x: torch.nn.functional.channel_shuffle(x, 2), make((0, 4, 3)))
    with pytest.raises(RuntimeError, match="divisible by groups"):
        torch.nn.functional.channel_shuffle(make((2, 6, 3)).to("tpu"), 4)


@pytest.mark.parametrize("reps", [(2,), (1, 3), (2, 1, 2), (0, 2), (2, 2, 2, 1)])
def test_repeat(reps):
    check(lambda x: x.repeat(*reps), make((3,) if len(reps) == 1 else (2, 3)))


def test_repeat_forms():
    check(lambda x: x.repeat(2, 3), make((3,), torch.int32))
    check(lambda x: x.repeat(3), make(()))
    check(lambda x: x.t().repeat(1, 2), make((2, 3), torch.bool))
    check(lambda x: x.repeat_interleave(2, dim=0), make((2, 3)))
    check(lambda x: torch.tile(x, (2,)), make((2, 3)))


@pytest.mark.parametrize("fn", [torch.tril, torch.triu])
@pytest.mark.parametrize("diagonal", [0, 1, -1, 5, -5])
def test_triangle(fn, diagonal):
    check(lambda x: fn(x, diagonal), make((4, 5)))


@pytest.mark.parametrize("fn", ["tril", "triu"])
def test_triangle_forms(fn):
    for dtype in [torch.int64, torch.bool, torch.float16]:
        check(lambda x: getattr(x, fn)(), make((3, 3), dtype))
    check(lambda x: getattr(x, fn)(1), make((2, 3, 4)))  # batched
    check(lambda x: getattr(x, fn)(), make((0, 3)))
    check(lambda x: getattr(x.t(), fn + "_")(), make((4, 3)))

    def out(x, o):
        getattr(torch, fn)(x, out=o)
        return o

    check(out, make((3, 3)), torch.zeros(3, 3))


@pytest.mark.parametrize("pad", [(1, 2), (1, 0, 0, 2), (0, 0, 1, 1, 2, 0), (-1, 1), (2, -2, -1, 0)])
def test_constant_pad(pad):
    check(lambda x: F.pad(x, pad, value=2.5), make((2, 3, 4)))
    check(lambda x: F.pad(x, pad), make((2, 3, 4), torch.int32))


def test_masked_fill_and_constant_pad_are_one_program():
    # PyTorch's composite kernels (a clone or fill, then a write) would win over the fallback.
    x = torch.randn(3, 4).to("tpu")
    mask, value = (x > 0), torch.tensor(2.0).to("tpu")
    assert programs_run(lambda: x.masked_fill(mask, -1.0)) == 1
    assert programs_run(lambda: x.masked_fill(mask, value)) == 1
    assert programs_run(lambda: F.pad(x, (1, 2, 0, 1), value=3.0)) == 1


def test_constant_pad_forms():
    check(lambda x: F.pad(x.t(), (1, 1)), make((3, 4), torch.bfloat16))
    check(lambda x: F.pad(x, (1, 1), value=-1), make((0, 3)))
    check(lambda x: torch.constant_pad_nd(x, (1, 2), True), make((2,), torch.bool))


def test_narrow_copy():
    check(lambda x: x.narrow_copy(1, 1, 2), make((3, 4)))
    check(lambda x: x.narrow_copy(0, -2, 2), make((3, 4), torch.int64))
    check(lambda x: x.t().narrow_copy(0, 0, 0), make((3, 4)))


# ---- advanced indexing ----

INDEXERS = {
    "first": lambda x, i, j: x[i],
    "second": lambda x, i, j: x[:, j],
    "last": lambda x, i, j: x[..., j],
    "pair": lambda x, i, j: x[i, j],
    "broadcast_pair": lambda x, i, j: x[i[:, None], j],
    "separated": lambda x, i, j: x[i, :, j],
    "with_slice": lambda x, i, j: x[1:, j, ::2],
    "0d_index": lambda x, i, j: x[:, i[0]],
    "list_index": lambda x, i, j: x[[0, -1]],
    "int_and_tensor": lambda x, i, j: x[1, j],
}


@pytest.mark.parametrize("name", INDEXERS)
def test_index(name):
    check(INDEXERS[name], make((3, 3, 4)), index([2, -1, 0]), index([0, 2, 1]))


@pytest.mark.parametrize("dtype", ALL)
def test_index_dtypes(dtype):
    check(lambda x, i: x[:, i], make((3, 4), dtype), index([3, 0, 3], torch.int32))


def test_index_shapes_and_views():
    check(lambda x, i: x[i], make((4,)), index([[0, 1], [3, 2]]))
    check(lambda x, i: x[i], make((4, 2)), index([], torch.int64))
    check(lambda x, i: x[i], make((0, 3)), index([], torch.int64))
    check(lambda x, i: x.t()[i], make((3, 4)), index([1, 1, 3]))
    check(lambda x, i: x[:, ::2][i], make((3, 6)), index([2, 0]))
    check(lambda x, i: torch.ops.aten.index.Tensor(x, [None, i]), make((2, 5)), index([4, 0]))
    check(lambda x, i: torch.ops.aten._unsafe_index.Tensor(x, [None, i]), make((2, 5)), index([4, 0]))
    check(lambda x, i, v: torch.ops.aten._unsafe_index_put(x, [i], v, True), make((3, 2)), index([0, 0]),
          make((2, 2), seed=1))

    def out(x, i, o):
        torch.ops.aten.index.Tensor_out(x, [i], out=o)
        return o

    check(out, make((4, 3)), index([3, 1]), torch.zeros(2, 3))


INDEX_KEYS = {
    "rows": lambda i: (i,),
    "cols": lambda i: (slice(None), i),
    "pair": lambda i: (i, i.flip(0)),
    "separated": lambda i: (i, slice(None), i),
}


@pytest.mark.parametrize("name", INDEX_KEYS)
@pytest.mark.parametrize("value", ["scalar", "row", "full"])
def test_index_put(name, value):
    x, i = make((3, 3, 3)), index([2, 0])
    key = INDEX_KEYS[name]
    target_shape = x[key(i)].shape
    v = {"scalar": torch.tensor(4.5), "row": make(target_shape[-1:], seed=2),
         "full": make(target_shape, seed=2)}[value]

    def fn(x, i, v):
        x[key(i)] = v
        return x

    check(fn, x, i, v)


@pytest.mark.parametrize("dtype", ALL)
def test_index_put_dtypes_and_accumulate(dtype):
    i = index([0, 2, 0, 1, 0])

    def acc(x, i, v):
        return x.index_put_((i,), v, accumulate=True)

    if dtype != torch.bool:
        check(acc, make((3, 2), dtype), i, make((5, 2), dtype, seed=1))

    def put(x, i, v):
        return x.index_put((i[1:4],), v)

    check(put, make((3, 2), dtype), i, make((3, 2), dtype, seed=1))


def test_functional_index_put_is_one_program():
    # PyTorch's composite kernel, which would otherwise win over the fallback,
    # clones and then writes: two programs.
    x, i, v = make((5, 3)), torch.tensor([4, 0]), make((2, 3), seed=1)
    check(lambda x, i, v: torch.index_put(x, (i,), v, accumulate=True), x, i, v)
    assert programs_run(lambda: torch.index_put(x.to("tpu"), (i.to("tpu"),), v.to("tpu"))) == 1


def test_index_put_forms():
    def negative(x, i, v):
        x[i] = v
        return x

    check(negative, make((4, 2)), index([-1, -4]), make((2, 2), seed=1))

    def into_view(x, i, v):
        x.t()[i] = v
        return x

    check(into_view, make((3, 4)), index([3, 0]), make((2, 3), seed=1))

    def mask_scalar(x):
        x[x > 0] = 0.5
        return x

    check(mask_scalar, make((3, 4)))

    def mask_rows(x, m):
        x[m] = -1
        return x

    check(mask_rows, make((3, 4)), index([True, False, True], torch.bool))

    def mask_accumulate(x, m, v):
        return x.index_put_((m,), v, accumulate=True)

    check(mask_accumulate, make((2, 3)), make((2, 3), torch.bool, seed=1), torch.tensor(2.0))

    def empty(x, i, v):
        x[i] = v
        return x

    check(empty, make((3, 2)), index([], torch.int64), torch.tensor(1.0))


def test_index_put_mask_with_tensor_values():
    # The k-th true position takes the k-th value: no data-dependent shape.
    def packed(x, v):
        x[x > 0] = v[: int((x > 0).sum().item())]
        return x

    check(packed, make((3, 4)), make((12,), seed=1))

    def cols(x, m, v):
        x[:, m] = v
        return x

    check(cols, make((3, 4)), index([True, False, True, True], torch.bool), make((3, 3), seed=1))
    check(cols, make((3, 4)), index([False, True, False, True], torch.bool), make((1, 2), seed=1))

    def mask_2d(x, m, v):
        x[m] = v
        return x

    check(mask_2d, make((2, 3, 2), torch.int32), index([[True, False, True], [False, False, True]], torch.bool),
          make((3, 2), torch.int32, seed=1))

    def accumulate(x, m, v):
        return x.index_put_((m,), v, accumulate=True)

    check(accumulate, make((4,)), index([True, True, False, True], torch.bool), make((3,), seed=1))


# ---- index_add / index_copy / index_fill / take / masked_scatter ----


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.uint8])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_add(dtype, dim):
    x = make((3, 4, 2), dtype)
    shape = list(x.shape)
    shape[dim] = 5
    i = torch.randint(0, x.shape[dim], (5,), generator=torch.Generator().manual_seed(2))
    check(lambda x, i, s: x.index_add(dim, i, s), x, i, make(tuple(shape), dtype, seed=1))
    check(lambda x, i, s: x.index_add_(dim, i, s, alpha=2), x, i, make(tuple(shape), dtype, seed=1))


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.uint8])
def test_index_reduce(reduce, include_self, dtype):
    x = make((4, 3, 2), dtype)
    i = index([3, 0, 3, 1, 3])  # repeats, and row 2 never reached
    check(lambda x, i, s: x.index_reduce(0, i, s, reduce, include_self=include_self), x, i,
          make((5, 3, 2), dtype, seed=1))
    check(lambda x, i, s: x.index_reduce_(-1, i[:3] % 2, s, reduce, include_self=include_self), x, i,
          make((4, 3, 3), dtype, seed=1))  # in place, last dim
    check(lambda x, i, s: x.t().index_reduce(1, i % 3, s, reduce, include_self=include_self), make((3, 4), dtype), i,
          make((4, 5), dtype, seed=1))  # a view


def test_index_reduce_empty_0d_gradient_and_errors():
    check(lambda x, i, s: x.index_reduce(0, i, s, "amax"), make((3, 0)), index([1]), make((1, 0)))  # empty slices
    check(lambda x, i, s: x.index_reduce(0, i, s, "prod"), make(()), index([0]), make((), seed=1))  # 0-d

    def grad(x, s):
        x, s = x.clone().requires_grad_(), s.clone().requires_grad_()
        y = x.index_reduce(0, torch.tensor([2, 0, 2], device=x.device), s, "mean", include_self=False)
        return torch.autograd.grad(y, (x, s), torch.ones_like(y))

    check(grad, make((3, 4)), make((3, 4), seed=1))
    for device in ("cpu", "tpu"):
        x = torch.zeros(3, 2, device=device)
        with pytest.raises(RuntimeError, match="Expected reduce to be one of prod, mean, amax or amin"):
            x.index_reduce(0, torch.tensor([0], device=device), torch.ones(1, 2, device=device), "sum")
    assert x.index_reduce(0, torch.tensor([1], device="tpu"), torch.ones(1, 2, device="tpu"), "amax").sum().item() == 2


def test_index_copy_and_fill():
    check(lambda x, i, s: x.index_copy(1, i, s), make((3, 4)), index([3, 0]), make((3, 2), seed=1))
    check(lambda x, i, s: x.index_copy_(0, i, s), make((3, 2), torch.int16), index([2, 0, 1]),
          make((3, 2), torch.int16, seed=1))
    check(lambda x, i: x.index_fill(1, i, -1.5), make((3, 4)), index([0, 2]))
    check(lambda x, i: x.index_fill_(0, i, True), make((3, 2), torch.bool), index([1]))
    check(lambda x, i, v: x.index_fill(1, i, v), make((2, 3), torch.int32), index([-1]), torch.tensor(7))
    check(lambda x, i: x.t().index_fill_(0, i, 0), make((3, 4)), index([1, 3]))
    check(lambda x, i: x.index_fill(0, i, 2), make(()), index([0]))


def test_take():
    check(lambda x, i: torch.take(x, i), make((3, 4)), index([[0, 11], [-1, 5]]))
    check(lambda x, i: torch.take(x.t(), i), make((3, 4), torch.int8), index([1, 2, 3]))
    check(lambda x, i: torch.take(x, i), make((3, 4)), index([], torch.int64))


def test_put():
    check(lambda x, i, s: x.put_(i, s), make((3, 4)), index([[0, 11], [-1, 5]]), make((2, 2), seed=1))
    check(lambda x, i, s: x.put(i, s, accumulate=True), make((3, 4), torch.int32), index([1, 1, 2]),
          make((3,), torch.int32, seed=1))
    check(lambda x, i, s: x.t().put_(i, s), make((3, 4)), index([0, 4]), make((2,), seed=1))
    check(lambda x, i, s: x.put_(i, s), make((3,)), index([], torch.int64), make((0,)))


@pytest.mark.parametrize("fn", [torch.tril_indices, torch.triu_indices])
@pytest.mark.parametrize("args", [(3, 3), (4, 3), (3, 5, 1), (5, 3, -2), (3, 4, 9), (3, 4, -9), (0, 3), (1, 1)])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_triangle_indices(fn, args, dtype):
    got = fn(*args, dtype=dtype, device="tpu")
    assert got.device.type == "tpu"
    assert torch.equal(got.cpu(), fn(*args, dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.float16])
def test_masked_scatter(dtype):
    check(lambda x, m, s: x.masked_scatter(m, s), make((3, 4), dtype), make((3, 4), torch.bool, seed=1),
          make((13,), dtype, seed=2))
    check(lambda x, m, s: x.masked_scatter_(m, s), make((2, 3), dtype), make((3,), torch.bool, seed=1),
          make((2, 3), dtype, seed=2))
