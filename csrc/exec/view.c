/* Views as StableHLO: dense views are slices of the flat storage, dense
 * permutations (transposes) add a transpose, boxes (nested strides) are
 * dynamic slices of the storage seen as a dense array, broadcast (stride 0)
 * dims add a broadcast, and anything else gathers or scatters by computed
 * index, which XLA runs element by element. */
#include "exec/view.h"

#include <stdlib.h>

#include "exec/runtime_impl.h"
#include "hlo/complex_ops.h"

int64_t view_numel(const tpu_tensor* view) {
  int64_t n = 1;
  for (int d = 0; d < view->rank; d++) n *= view->sizes[d];
  return n;
}

void view_contiguous_strides(int rank, const int64_t* sizes, int64_t* out_strides) {
  int64_t s = 1;
  for (int d = rank - 1; d >= 0; d--) {
    out_strides[d] = s;
    s *= sizes[d] > 1 ? sizes[d] : 1;
  }
}

int64_t view_storage_numel(const tpu_tensor* view) {
  tpu_dtype sd = buffer_storage_dtype(view->buffer, view->dtype);
  return (int64_t)(view->buffer->nbytes / tpu_dtype_size(sd));
}

/* Elements of the view's dtype the storage holds: where views are
 * found, in the view's own units. */
static int64_t view_elements(const tpu_tensor* view) {
  return (int64_t)(view->buffer->nbytes / tpu_dtype_size(view->dtype));
}

/* Whether a view of `view_dtype` can read `storage_dtype` storage: the same
 * element size (a reinterpretation), or a complex type and the type of its
 * parts either way round (view_as_real, view_as_complex). */
static bool viewable(tpu_dtype view_dtype, tpu_dtype storage_dtype) {
  if (tpu_dtype_size(view_dtype) == tpu_dtype_size(storage_dtype)) return true;
  return tpu_dtype_real_part(view_dtype) == tpu_dtype_real_part(storage_dtype) &&
         tpu_dtype_is_complex(view_dtype) != tpu_dtype_is_complex(storage_dtype);
}

/* The flat storage in elements of `dtype`: complex numbers as their parts
 * interleaved, interleaved parts as complex numbers, or reinterpreted. */
static hlo_value storage_as(hlo_builder* b, hlo_value storage, tpu_dtype dtype) {
  if (storage == HLO_INVALID) return storage;
  tpu_dtype from = hlo_type_of(b, storage)->dtype;
  if (tpu_dtype_size(from) == tpu_dtype_size(dtype)) return hlo_bitcast_convert(b, storage, dtype);
  int64_t n = hlo_type_of(b, storage)->dims[0];
  if (tpu_dtype_is_complex(from)) {
    int64_t column[2] = {n, 1}, flat = 2 * n;
    hlo_value parts[2] = {hlo_reshape(b, hlo_real(b, storage), 2, column),
                          hlo_reshape(b, hlo_imag(b, storage), 2, column)};
    return hlo_reshape(b, hlo_concatenate(b, parts, 2, 1), 1, &flat);
  }
  int64_t pairs[2] = {n / 2, 2}, half = n / 2;
  hlo_value paired = hlo_reshape(b, storage, 2, pairs);
  hlo_value parts[2];
  for (int64_t i = 0; i < 2; i++)
    parts[i] = hlo_reshape(b, hlo_slice(b, paired, (int64_t[]){0, i}, (int64_t[]){half, i + 1}, (int64_t[]){1, 1}),
                           1, &half);
  return hlo_complex(b, parts[0], parts[1]);
}

static bool is_dense(const tpu_tensor* view) {
  int64_t expected = 1;
  for (int d = view->rank - 1; d >= 0; d--) {
    if (view->sizes[d] == 1) continue;
    if (view->strides[d] != expected) return false;
    expected *= view->sizes[d];
  }
  return true;
}

tpu_status view_check(const tpu_tensor* view, const char* what) {
  if (!view->buffer)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "%s: a tensor has no tpu storage", what);
  if (view->rank < 0 || view->rank > TPU_MAX_RANK)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "%s: rank %d is over the limit of %d", what, view->rank,
                     TPU_MAX_RANK);
  tpu_dtype sd = buffer_storage_dtype(view->buffer, view->dtype);
  if (!viewable(view->dtype, sd) || view->buffer->nbytes % tpu_dtype_size(view->dtype) != 0)
    return TPU_ERROR(TPU_UNIMPLEMENTED,
                     "%s: a %s view of %s storage is not supported (element sizes differ)", what,
                     tpu_dtype_name(view->dtype), tpu_dtype_name(sd));
  int64_t lo = view->offset, hi = view->offset;
  for (int d = 0; d < view->rank; d++) {
    if (view->sizes[d] < 0)
      return TPU_ERROR(TPU_INVALID_ARGUMENT, "%s: negative size %lld", what, (long long)view->sizes[d]);
    if (view->sizes[d] == 0) return NULL;
    int64_t span = (view->sizes[d] - 1) * view->strides[d];
    if (span < 0) lo += span; else hi += span;
  }
  if (lo < 0 || hi >= view_elements(view))
    return TPU_ERROR(TPU_INVALID_ARGUMENT,
                     "%s: view (offset %lld, elements %lld..%lld) lies outside its storage of %lld elements",
                     what, (long long)view->offset, (long long)lo, (long long)hi,
                     (long long)view_elements(view));
  return NULL;
}

/* The view without broadcast (stride 0) and size-1 dims: what is actually
 * stored. keep[d] says which view dims survive. */
typedef struct compact_view {
  int rank;
  int64_t sizes[TPU_MAX_RANK];
  int64_t strides[TPU_MAX_RANK];
  bool keep[TPU_MAX_RANK];
  int64_t numel;
} compact_view;

static compact_view compact(const tpu_tensor* view) {
  compact_view c = {0};
  c.numel = 1;
  for (int d = 0; d < view->rank; d++) {
    c.keep[d] = view->sizes[d] != 1 && view->strides[d] != 0;
    if (!c.keep[d]) continue;
    c.sizes[c.rank] = view->sizes[d];
    c.strides[c.rank] = view->strides[d];
    c.rank++;
    c.numel *= view->sizes[d];
  }
  return c;
}

/* Compact dims from largest stride to smallest. */
static void stride_order(const compact_view* c, int64_t* order) {
  for (int i = 0; i < c->rank; i++) order[i] = i;
  for (int i = 1; i < c->rank; i++)
    for (int j = i; j > 0 && c->strides[order[j - 1]] < c->strides[order[j]]; j--) {
      int64_t t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
}

/* Whether the compact strides, taken in `order`, are a permutation of dense strides. */
static bool dense_permutation(const compact_view* c, const int64_t* order) {
  int64_t expected = 1;
  for (int i = c->rank - 1; i >= 0; i--) {
    if (c->strides[order[i]] != expected) return false;
    expected *= c->sizes[order[i]];
  }
  return true;
}

/* The storage seen as a dense array whose dim i steps by the i-th largest
 * stride (plus a last dim of the smallest stride's length when that is over
 * 1), padded to whole rows, and the view as a box in it: sizes[i] elements
 * from the offset's digit in dim i. */
typedef struct box_layout {
  int rank;
  int64_t dims[TPU_MAX_RANK];
  int64_t steps[TPU_MAX_RANK]; /* elements per index of each dim */
  int64_t sizes[TPU_MAX_RANK];
  int64_t padded_numel;
} box_layout;

/* Whether the view is such a box: each stride a multiple of the next
 * smaller one, and the view inside one row of each dim at its offset. */
static bool box_of(const tpu_tensor* view, const compact_view* c, const int64_t* order, box_layout* box) {
  int k = c->rank;
  int64_t smallest = k ? c->strides[order[k - 1]] : 0;
  box->rank = k + (smallest > 1);
  if (k == 0 || smallest <= 0 || box->rank > TPU_MAX_RANK) return false;
  int64_t rest = view->offset;
  for (int i = 0; i < k; i++) {
    int64_t step = c->strides[order[i]], outer = i ? c->strides[order[i - 1]] : 0;
    if (i && outer % step != 0) return false;
    box->dims[i] = i ? outer / step : 0;
    box->steps[i] = step;
    box->sizes[i] = c->sizes[order[i]];
    if (i && rest / step + box->sizes[i] > box->dims[i]) return false;
    rest %= step;
  }
  if (smallest > 1) {
    box->dims[k] = smallest;
    box->steps[k] = 1;
    box->sizes[k] = 1;
  }
  int64_t row = box->steps[0];
  box->dims[0] = (view_elements(view) + row - 1) / row; /* view_check keeps the box inside */
  box->padded_numel = box->dims[0] * row;
  return true;
}

/* A view that is not dense: its compact dims in stride order, and the
 * layout facts reads and writes use. */
typedef struct strided_view {
  compact_view c;
  int64_t order[TPU_MAX_RANK];   /* compact dims by stride, largest first */
  int64_t sorted[TPU_MAX_RANK];  /* their sizes in that order */
  int64_t inverse[TPU_MAX_RANK]; /* from stride order back to compact order */
  bool dense;                    /* a permutation of a dense run */
} strided_view;

static strided_view strided_of(const tpu_tensor* view) {
  strided_view v;
  v.c = compact(view);
  stride_order(&v.c, v.order);
  for (int i = 0; i < v.c.rank; i++) {
    v.sorted[i] = v.c.sizes[v.order[i]];
    v.inverse[v.order[i]] = i;
  }
  v.dense = dense_permutation(&v.c, v.order);
  return v;
}

view_class view_class_of(const tpu_tensor* view) {
  if (is_dense(view))
    return view->offset == 0 && view_numel(view) == view_elements(view) ? VIEW_WHOLE : VIEW_SLICE;
  strided_view v = strided_of(view);
  if (v.dense && view->offset == 0 && v.c.numel == view_elements(view)) return VIEW_PERMUTED;
  box_layout box;
  return !v.dense && box_of(view, &v.c, v.order, &box) ? VIEW_BOX : VIEW_STRIDED;
}

bool view_class_has_offset(view_class cls) { return cls != VIEW_WHOLE && cls != VIEW_PERMUTED; }

bool view_class_has_strides(view_class cls) {
  return cls == VIEW_STRIDED || cls == VIEW_BOX || cls == VIEW_PERMUTED;
}

/* i64 indices into the flat storage, shaped like the compact view. */
static hlo_value flat_indices(hlo_builder* b, hlo_value offset, const compact_view* c) {
  hlo_type t = hlo_type_make(TPU_I64, c->rank, c->sizes);
  hlo_value index = hlo_broadcast_in_dim(b, offset, c->rank, c->sizes, NULL);
  for (int d = 0; d < c->rank; d++) {
    hlo_value step = hlo_binary(b, "multiply", hlo_iota(b, t, d),
                                hlo_constant_like(b, hlo_iota(b, t, d), (double)c->strides[d]));
    index = hlo_binary(b, "add", index, step);
  }
  return index;
}

static hlo_value dense_run(hlo_builder* b, hlo_value storage, hlo_value offset, int64_t numel) {
  return hlo_dynamic_slice(b, storage, &offset, &numel);
}

/* The flat storage (`numel` elements) as the box layout's dense array. */
static hlo_value box_array(hlo_builder* b, hlo_value storage, int64_t numel, const box_layout* box) {
  if (box->padded_numel > numel) {
    int64_t low = 0, high = box->padded_numel - numel, interior = 0;
    storage = hlo_pad(b, storage, hlo_constant(b, hlo_type_of(b, storage)->dtype, 0), &low, &high, &interior);
  }
  return hlo_reshape(b, storage, box->rank, box->dims);
}

/* The box's start in each dim: the offset's digits, computed on the device
 * since offsets are runtime values. */
static void box_starts(hlo_builder* b, hlo_value offset, const box_layout* box, hlo_value* starts) {
  for (int i = 0; i < box->rank; i++) {
    starts[i] = hlo_binary(b, "divide", offset, hlo_constant_i64(b, TPU_I64, box->steps[i]));
    if (i) starts[i] = hlo_binary(b, "remainder", starts[i], hlo_constant_i64(b, TPU_I64, box->dims[i]));
  }
}

hlo_value view_read(hlo_builder* b, hlo_value storage, hlo_value offset, const tpu_tensor* view,
                    view_class cls) {
  storage = storage_as(b, storage, view->dtype);
  int64_t numel = view_numel(view);
  if (cls == VIEW_WHOLE) return hlo_reshape(b, storage, view->rank, view->sizes);
  if (cls == VIEW_SLICE || numel == 0)
    return hlo_reshape(b, numel ? dense_run(b, storage, offset, numel)
                                : hlo_slice(b, storage, (int64_t[]){0}, (int64_t[]){0}, (int64_t[]){1}),
                       view->rank, view->sizes);
  strided_view v = strided_of(view);
  const compact_view* c = &v.c;
  hlo_value stored;
  box_layout box;
  if (cls == VIEW_BOX && box_of(view, c, v.order, &box)) {
    hlo_value starts[TPU_MAX_RANK];
    box_starts(b, offset, &box, starts);
    hlo_value array = box_array(b, storage, hlo_type_of(b, storage)->dims[0], &box);
    stored = hlo_reshape(b, hlo_dynamic_slice(b, array, starts, box.sizes), c->rank, v.sorted);
    stored = hlo_transpose(b, stored, v.inverse);
  } else if (v.dense) {
    hlo_value run = cls == VIEW_PERMUTED ? storage : dense_run(b, storage, offset, c->numel);
    stored = hlo_reshape(b, run, c->rank, v.sorted);
    stored = hlo_transpose(b, stored, v.inverse);
  } else {
    hlo_value indices = flat_indices(b, offset, c);
    int64_t collapsed = 0, slice = 1;
    hlo_gather_dims g = {NULL, 0, &collapsed, 1, &collapsed, 1, c->rank, &slice};
    stored = hlo_gather(b, storage, indices, &g, hlo_type_make(view->dtype, c->rank, c->sizes));
  }
  /* Put back size-1 and broadcast dims. */
  int64_t bdims[TPU_MAX_RANK];
  int k = 0;
  for (int d = 0; d < view->rank; d++)
    if (c->keep[d]) bdims[k++] = d;
  return hlo_broadcast_in_dim(b, stored, view->rank, view->sizes, bdims);
}

hlo_value view_write(hlo_builder* b, hlo_value storage, hlo_value offset, hlo_value value,
                     const tpu_tensor* view, view_class cls, tpu_dtype storage_dtype,
                     int64_t storage_numel) {
  if (tpu_dtype_size(view->dtype) != tpu_dtype_size(storage_dtype)) /* written in the view's units */
    return storage_as(b, view_write(b, storage_as(b, storage, view->dtype), offset, value, view, cls, view->dtype,
                                    view_elements(view)),
                      storage_dtype);
  value = hlo_bitcast_convert(b, value, storage_dtype);
  int64_t numel = view_numel(view);
  if (cls == VIEW_WHOLE) return hlo_reshape(b, value, 1, &storage_numel);
  if (numel == 0) /* an empty view of a class written whole (permuted) has no storage read */
    return storage == HLO_INVALID ? hlo_reshape(b, value, 1, &storage_numel) : storage;
  if (cls == VIEW_SLICE)
    return hlo_dynamic_update_slice(b, storage, hlo_reshape(b, value, 1, &numel), &offset);
  strided_view v = strided_of(view);
  const compact_view* c = &v.c;
  /* Drop size-1 dims; a broadcast (stride 0) output is rejected by PyTorch
   * before it gets here, so every kept dim is a real one. */
  value = hlo_reshape(b, value, c->rank, c->sizes);
  box_layout box;
  if (cls == VIEW_BOX && box_of(view, c, v.order, &box)) {
    hlo_value starts[TPU_MAX_RANK];
    box_starts(b, offset, &box, starts);
    value = hlo_reshape(b, hlo_transpose(b, value, v.order), box.rank, box.sizes);
    hlo_value array = hlo_dynamic_update_slice(b, box_array(b, storage, storage_numel, &box), value, starts);
    hlo_value flat = hlo_reshape(b, array, 1, &box.padded_numel);
    return box.padded_numel > storage_numel
               ? hlo_slice(b, flat, (int64_t[]){0}, &storage_numel, (int64_t[]){1})
               : flat;
  }
  if (v.dense) {
    value = hlo_reshape(b, hlo_transpose(b, value, v.order), 1, &c->numel);
    return cls == VIEW_PERMUTED ? value : hlo_dynamic_update_slice(b, storage, value, &offset);
  }
  hlo_value indices = flat_indices(b, offset, c);
  int64_t inserted = 0;
  hlo_scatter_dims s = {NULL, 0, &inserted, 1, &inserted, 1, c->rank};
  return hlo_scatter(b, storage, indices, value, &s, NULL);
}
