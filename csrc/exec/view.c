/* Views as StableHLO: dense views are slices of the flat storage, dense
 * permutations (transposes) add a transpose, broadcast (stride 0) dims add
 * a broadcast, and anything else gathers or scatters by computed index. */
#include "exec/view.h"

#include <stdlib.h>

#include "exec/runtime_impl.h"

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
  if (tpu_dtype_size(sd) != tpu_dtype_size(view->dtype))
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
  if (lo < 0 || hi >= view_storage_numel(view))
    return TPU_ERROR(TPU_INVALID_ARGUMENT,
                     "%s: view (offset %lld, elements %lld..%lld) lies outside its storage of %lld elements",
                     what, (long long)view->offset, (long long)lo, (long long)hi,
                     (long long)view_storage_numel(view));
  return NULL;
}

view_class view_class_of(const tpu_tensor* view) {
  if (!is_dense(view)) return VIEW_STRIDED;
  if (view->offset == 0 && view_numel(view) == view_storage_numel(view)) return VIEW_WHOLE;
  return VIEW_SLICE;
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

/* If the compact strides are a permutation of dense strides, fills `order`
 * (compact dims from largest stride to smallest) and returns true. */
static bool dense_permutation(const compact_view* c, int64_t* order) {
  for (int i = 0; i < c->rank; i++) order[i] = i;
  for (int i = 1; i < c->rank; i++)
    for (int j = i; j > 0 && c->strides[order[j - 1]] < c->strides[order[j]]; j--) {
      int64_t t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  int64_t expected = 1;
  for (int i = c->rank - 1; i >= 0; i--) {
    if (c->strides[order[i]] != expected) return false;
    expected *= c->sizes[order[i]];
  }
  return true;
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

hlo_value view_read(hlo_builder* b, hlo_value storage, hlo_value offset, const tpu_tensor* view,
                    view_class cls) {
  storage = hlo_bitcast_convert(b, storage, view->dtype);
  int64_t numel = view_numel(view);
  if (cls == VIEW_WHOLE) return hlo_reshape(b, storage, view->rank, view->sizes);
  if (cls == VIEW_SLICE || numel == 0)
    return hlo_reshape(b, numel ? dense_run(b, storage, offset, numel)
                                : hlo_slice(b, storage, (int64_t[]){0}, (int64_t[]){0}, (int64_t[]){1}),
                       view->rank, view->sizes);
  compact_view c = compact(view);
  int64_t order[TPU_MAX_RANK];
  hlo_value stored;
  if (dense_permutation(&c, order)) {
    int64_t sorted[TPU_MAX_RANK], inverse[TPU_MAX_RANK];
    for (int i = 0; i < c.rank; i++) {
      sorted[i] = c.sizes[order[i]];
      inverse[order[i]] = i;
    }
    stored = hlo_reshape(b, dense_run(b, storage, offset, c.numel), c.rank, sorted);
    stored = hlo_transpose(b, stored, inverse);
  } else {
    hlo_value indices = flat_indices(b, offset, &c);
    int64_t collapsed = 0, slice = 1;
    hlo_gather_dims g = {NULL, 0, &collapsed, 1, &collapsed, 1, c.rank, &slice};
    stored = hlo_gather(b, storage, indices, &g, hlo_type_make(view->dtype, c.rank, c.sizes));
  }
  /* Put back size-1 and broadcast dims. */
  int64_t bdims[TPU_MAX_RANK];
  int k = 0;
  for (int d = 0; d < view->rank; d++)
    if (c.keep[d]) bdims[k++] = d;
  return hlo_broadcast_in_dim(b, stored, view->rank, view->sizes, bdims);
}

hlo_value view_write(hlo_builder* b, hlo_value storage, hlo_value offset, hlo_value value,
                     const tpu_tensor* view, view_class cls, tpu_dtype storage_dtype,
                     int64_t storage_numel) {
  value = hlo_bitcast_convert(b, value, storage_dtype);
  int64_t numel = view_numel(view);
  if (cls == VIEW_WHOLE) return hlo_reshape(b, value, 1, &storage_numel);
  if (numel == 0) return storage;
  if (cls == VIEW_SLICE)
    return hlo_dynamic_update_slice(b, storage, hlo_reshape(b, value, 1, &numel), &offset);
  compact_view c = compact(view);
  /* Drop size-1 dims; a broadcast (stride 0) output is rejected by PyTorch
   * before it gets here, so every kept dim is a real one. */
  value = hlo_reshape(b, value, c.rank, c.sizes);
  int64_t order[TPU_MAX_RANK];
  if (dense_permutation(&c, order)) {
    value = hlo_reshape(b, hlo_transpose(b, value, order), 1, &c.numel);
    return hlo_dynamic_update_slice(b, storage, value, &offset);
  }
  hlo_value indices = flat_indices(b, offset, &c);
  int64_t inserted = 0;
  hlo_scatter_dims s = {NULL, 0, &inserted, 1, &inserted, 1, c.rank};
  return hlo_scatter(b, storage, indices, value, &s, NULL);
}
