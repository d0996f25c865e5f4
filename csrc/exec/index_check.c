/* Debug mode's index bounds check. XLA clamps an out-of-range gather index
 * and drops an out-of-range scatter update, where PyTorch's CPU raises. In
 * debug mode, which awaits every op anyway, the indices of the ops below
 * are read back before the op runs, so one out of range raises at the call
 * that passed it. Strict and fused modes keep XLA's behaviour: a check there
 * would be a device-to-host read per op, the sync those modes exist to avoid.
 * Ops that reach these through decomposition are covered by them
 * (embedding is index_select, cross_entropy is nll_loss); the _unsafe_
 * forms, which decompositions emit with indices they computed, are not. */
#include "exec/index_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/op_plan.h"
#include "exec/view.h"

typedef enum indexed_dim {
  DIM_ARG,     /* the int argument `dim` names the dimension */
  DIM_FIXED,   /* dimension `dim` */
  DIM_ENTRY,   /* a list of indices: entry j indexes dimension j */
  DIM_CLASSES, /* nll_loss: dimension 1, or 0 for 1-d input */
  DIM_NUMEL,   /* the flattened tensor */
  DIM_PLANE,   /* one flattened output plane: the product of int-list argument `dim` */
} indexed_dim;

typedef struct index_rule {
  const char* op;        /* base name */
  int data;              /* argument holding the indexed tensor */
  int index;             /* argument holding the index tensor (or list) */
  indexed_dim which;
  int dim;               /* DIM_ARG, DIM_PLANE: its argument; DIM_FIXED: the dimension */
  bool negative_ok;      /* -size..-1 count from the end */
  int ignore;            /* argument holding a value to skip (ignore_index), or -1 */
  tpu_status_code code;  /* what the CPU raises: IndexError or RuntimeError */
} index_rule;

static const index_rule rules[] = {
    {"index_select", 0, 2, DIM_ARG, 1, false, -1, TPU_OUT_OF_RANGE},
    {"gather", 0, 2, DIM_ARG, 1, false, -1, TPU_INVALID_ARGUMENT},
    {"scatter", 0, 2, DIM_ARG, 1, false, -1, TPU_INVALID_ARGUMENT},
    {"scatter_add", 0, 2, DIM_ARG, 1, false, -1, TPU_INVALID_ARGUMENT},
    {"scatter_reduce", 0, 2, DIM_ARG, 1, false, -1, TPU_INVALID_ARGUMENT},
    {"index_add", 0, 2, DIM_ARG, 1, false, -1, TPU_INVALID_ARGUMENT},
    {"index_copy", 0, 2, DIM_ARG, 1, false, -1, TPU_OUT_OF_RANGE},
    {"index_fill", 0, 2, DIM_ARG, 1, true, -1, TPU_OUT_OF_RANGE},
    {"index_reduce", 0, 2, DIM_ARG, 1, false, -1, TPU_OUT_OF_RANGE},
    {"index", 0, 1, DIM_ENTRY, 0, true, -1, TPU_OUT_OF_RANGE},
    {"index_put", 0, 1, DIM_ENTRY, 0, true, -1, TPU_OUT_OF_RANGE},
    {"_index_put_impl", 0, 1, DIM_ENTRY, 0, true, -1, TPU_OUT_OF_RANGE},
    {"take", 0, 1, DIM_NUMEL, 0, true, -1, TPU_OUT_OF_RANGE},
    {"put", 0, 1, DIM_NUMEL, 0, true, -1, TPU_OUT_OF_RANGE},
    {"multi_margin_loss", 0, 1, DIM_CLASSES, 0, false, -1, TPU_INVALID_ARGUMENT},
    {"nll_loss_forward", 0, 1, DIM_CLASSES, 0, false, 4, TPU_OUT_OF_RANGE},
    {"nll_loss2d_forward", 0, 1, DIM_CLASSES, 0, false, 4, TPU_OUT_OF_RANGE},
    {"_embedding_bag", 0, 1, DIM_FIXED, 0, false, -1, TPU_INVALID_ARGUMENT},
    {"_embedding_bag_forward_only", 0, 1, DIM_FIXED, 0, false, -1, TPU_INVALID_ARGUMENT},
    {"max_unpool2d", 0, 1, DIM_PLANE, 2, false, -1, TPU_INVALID_ARGUMENT},
    {"max_unpool3d", 0, 1, DIM_PLANE, 2, false, -1, TPU_INVALID_ARGUMENT},
};

static const index_rule* rule_for(const char* name) {
  char base[64];
  op_base_name(name, base, sizeof base);
  for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
    if (strcmp(rules[i].op, base) == 0) return &rules[i];
  return NULL;
}

static const tpu_tensor* tensor_arg(const tpu_op_call* call, int i) {
  if (i >= call->arg_count || call->args[i].kind != TPU_ARG_TENSOR) return NULL;
  return call->args[i].u.tensor.buffer ? &call->args[i].u.tensor : NULL;
}

static bool is_index_dtype(tpu_dtype dtype) {
  return dtype == TPU_I64 || dtype == TPU_I32 || dtype == TPU_I16 || dtype == TPU_I8 || dtype == TPU_U8;
}

static int64_t read_int(const void* data, tpu_dtype dtype, int64_t k) {
  switch (dtype) {
    case TPU_I32: return ((const int32_t*)data)[k];
    case TPU_I16: return ((const int16_t*)data)[k];
    case TPU_I8: return ((const int8_t*)data)[k];
    case TPU_U8: return ((const uint8_t*)data)[k];
    default: return ((const int64_t*)data)[k];
  }
}

/* Checks every value of `index` against `size`, the extent of `what`. */
static tpu_status check_values(const index_rule* r, const tpu_tensor* index, const char* what, int64_t size,
                               const int64_t* ignore) {
  int64_t n = view_numel(index);
  if (n == 0 || !is_index_dtype(index->dtype)) return NULL; /* PyTorch's own checks name a bad dtype */
  void* host = malloc((size_t)n * tpu_dtype_size(index->dtype));
  if (!host) return TPU_ERROR(TPU_OUT_OF_MEMORY, "out of host memory reading %lld indices", (long long)n);
  tpu_status status = tpu_tensor_to_host(index, host);
  for (int64_t k = 0; !status && k < n; k++) {
    int64_t v = read_int(host, index->dtype, k);
    if ((ignore && v == *ignore) || (v >= 0 && v < size) || (r->negative_ok && v < 0 && v >= -size)) continue;
    status = TPU_ERROR(r->code,
                       "%s %lld is out of bounds for %s with size %lld (found by debug mode's index check; "
                       "strict and fused modes, like XLA, clamp or drop out-of-range indices)",
                       r->which == DIM_CLASSES ? "target" : "index", (long long)v, what, (long long)size);
  }
  free(host);
  return status;
}

static tpu_status check_dim(const index_rule* r, const tpu_tensor* data, const tpu_tensor* index, int dim,
                            const int64_t* ignore) {
  if (dim < 0) dim += data->rank;
  if (data->rank > 0 && (dim < 0 || dim >= data->rank)) return NULL; /* PyTorch's own checks name it */
  int64_t size = data->rank == 0 ? 1 : data->sizes[dim]; /* a 0-d tensor indexes as one element */
  char what[48];
  snprintf(what, sizeof what, r->which == DIM_CLASSES ? "the classes (dimension %d)" : "dimension %d",
           data->rank == 0 ? 0 : dim);
  return check_values(r, index, what, size, ignore);
}

tpu_status index_check(const tpu_op_call* call) {
  const index_rule* r = rule_for(call->name);
  const tpu_tensor* data = r ? tensor_arg(call, r->data) : NULL;
  if (!data) return NULL;
  int64_t ignore_value = 0;
  const int64_t* ignore = NULL;
  if (r->ignore >= 0 && r->ignore < call->arg_count && call->args[r->ignore].kind == TPU_ARG_INT) {
    ignore_value = call->args[r->ignore].u.i;
    ignore = &ignore_value;
  }
  switch (r->which) {
    case DIM_ENTRY: {
      if (r->index >= call->arg_count || call->args[r->index].kind != TPU_ARG_TENSOR_LIST) return NULL;
      const tpu_arg* list = &call->args[r->index];
      for (int j = 0; j < list->u.tensors.count && j < data->rank; j++) {
        const tpu_tensor* index = &list->u.tensors.items[j];
        if (!index->buffer) continue;
        TPU_RETURN_IF_ERROR(check_dim(r, data, index, j, NULL));
      }
      return NULL;
    }
    case DIM_NUMEL: {
      const tpu_tensor* index = tensor_arg(call, r->index);
      return index ? check_values(r, index, "the flattened input", view_numel(data), NULL) : NULL;
    }
    case DIM_PLANE: {
      const tpu_tensor* index = tensor_arg(call, r->index);
      if (!index || r->dim >= call->arg_count || call->args[r->dim].kind != TPU_ARG_INT_LIST) return NULL;
      int64_t size = 1;
      for (int k = 0; k < call->args[r->dim].u.ints.count; k++) size *= call->args[r->dim].u.ints.items[k];
      return check_values(r, index, "an output plane", size, NULL);
    }
    case DIM_ARG: {
      const tpu_tensor* index = tensor_arg(call, r->index);
      if (!index || r->dim >= call->arg_count || call->args[r->dim].kind != TPU_ARG_INT) return NULL;
      return check_dim(r, data, index, (int)call->args[r->dim].u.i, ignore);
    }
    case DIM_FIXED:
    case DIM_CLASSES: {
      const tpu_tensor* index = tensor_arg(call, r->index);
      int dim = r->which == DIM_FIXED ? r->dim : data->rank == 1 ? 0 : 1;
      return index ? check_dim(r, data, index, dim, ignore) : NULL;
    }
  }
  return NULL;
}
