/* dot_general, gather, scatter and random bits: the ops whose attributes are
 * structured dimension numbers. */
#include <stdio.h>
#include <string.h>

#include "hlo/builder_impl.h"

/* Appends ", name = [..]" unless the list is empty (the printer omits those). */
static size_t dims_field(char* buf, size_t size, size_t len, const char* name, const int64_t* v,
                         int n, bool* first) {
  if (n == 0 || len >= size) return len;
  char list[256];
  attr_i64_list(list, sizeof list, v, n);
  len += (size_t)snprintf(buf + len, size - len, "%s%s = %s", *first ? "" : ", ", name, list);
  *first = false;
  return len;
}

hlo_value hlo_dot_general(hlo_builder* b, hlo_value lhs, hlo_value rhs, const int64_t* lhs_batch,
                          const int64_t* rhs_batch, int batch_count,
                          const int64_t* lhs_contract, const int64_t* rhs_contract,
                          int contract_count, tpu_dtype result_dtype) {
  hlo_value operands[2] = {lhs, rhs};
  if (!values_valid(b, operands, 2)) return HLO_INVALID;
  const hlo_type* l = hlo_type_of(b, lhs);
  const hlo_type* r = hlo_type_of(b, rhs);
  hlo_type out = {result_dtype, 0, {0}};
  for (int i = 0; i < batch_count; i++) out.dims[out.rank++] = l->dims[lhs_batch[i]];
  for (int side = 0; side < 2; side++) {
    const hlo_type* t = side ? r : l;
    const int64_t* batch = side ? rhs_batch : lhs_batch;
    const int64_t* contract = side ? rhs_contract : lhs_contract;
    for (int i = 0; i < t->rank; i++) {
      bool used = false;
      for (int j = 0; j < batch_count; j++) used = used || batch[j] == i;
      for (int j = 0; j < contract_count; j++) used = used || contract[j] == i;
      if (!used) out.dims[out.rank++] = t->dims[i];
    }
  }
  char attrs[1024];
  size_t len = (size_t)snprintf(attrs, sizeof attrs, "dot_dimension_numbers = #stablehlo.dot<");
  bool first = true;
  len = dims_field(attrs, sizeof attrs, len, "lhs_batching_dimensions", lhs_batch, batch_count, &first);
  len = dims_field(attrs, sizeof attrs, len, "rhs_batching_dimensions", rhs_batch, batch_count, &first);
  len = dims_field(attrs, sizeof attrs, len, "lhs_contracting_dimensions", lhs_contract, contract_count, &first);
  len = dims_field(attrs, sizeof attrs, len, "rhs_contracting_dimensions", rhs_contract, contract_count, &first);
  if (len < sizeof attrs) len += (size_t)snprintf(attrs + len, sizeof attrs - len, ">");
  precision_attr(b, lhs, rhs, attrs, sizeof attrs, len);
  return emit_op(b, "stablehlo.dot_general", operands, 2, attrs, out);
}

hlo_value hlo_gather(hlo_builder* b, hlo_value x, hlo_value indices, const hlo_gather_dims* d,
                     hlo_type result_type) {
  hlo_value operands[2] = {x, indices};
  if (!values_valid(b, operands, 2)) return HLO_INVALID;
  /* Nothing read: StableHLO would still check a slice of 1 against an
   * empty operand dim (an empty matrix's row gather). */
  if (hlo_type_numel(&result_type) == 0)
    return hlo_filled(b, result_type.dtype, result_type.rank, result_type.dims, 0);
  char attrs[1024], sizes[256];
  size_t len = (size_t)snprintf(attrs, sizeof attrs, "dimension_numbers = #stablehlo.gather<");
  bool first = true;
  len = dims_field(attrs, sizeof attrs, len, "offset_dims", d->offset_dims, d->offset_count, &first);
  len = dims_field(attrs, sizeof attrs, len, "collapsed_slice_dims", d->collapsed_slice_dims, d->collapsed_count, &first);
  len = dims_field(attrs, sizeof attrs, len, "start_index_map", d->start_index_map, d->start_index_count, &first);
  attr_i64_array(sizes, sizeof sizes, "slice_sizes", d->slice_sizes, hlo_type_of(b, x)->rank);
  if (len < sizeof attrs)
    snprintf(attrs + len, sizeof attrs - len, "%sindex_vector_dim = %lld>, indices_are_sorted = false, %s",
             first ? "" : ", ", (long long)d->index_vector_dim, sizes);
  return emit_op(b, "stablehlo.gather", operands, 2, attrs, result_type);
}

hlo_value hlo_scatter(hlo_builder* b, hlo_value x, hlo_value indices, hlo_value updates,
                      const hlo_scatter_dims* d, const char* combiner) {
  hlo_value operands[3] = {x, indices, updates};
  if (!values_valid(b, operands, 3)) return HLO_INVALID;
  if (hlo_type_numel(hlo_type_of(b, updates)) == 0) return x; /* nothing written, as with gather */
  hlo_type out = *hlo_type_of(b, x);
  hlo_type s = {out.dtype, 0, {0}};
  hlo_type types[2] = {s, s};
  hlo_value a[2];
  region_begin(b, types, 2, a);
  hlo_value r = combiner ? hlo_binary(b, combiner, a[0], a[1]) : a[1];
  region_end(b, &r, 1);
  char attrs[1024];
  size_t len = (size_t)snprintf(attrs, sizeof attrs, "scatter_dimension_numbers = #stablehlo.scatter<");
  bool first = true;
  len = dims_field(attrs, sizeof attrs, len, "update_window_dims", d->update_window_dims, d->update_window_count, &first);
  len = dims_field(attrs, sizeof attrs, len, "inserted_window_dims", d->inserted_window_dims, d->inserted_count, &first);
  len = dims_field(attrs, sizeof attrs, len, "scatter_dims_to_operand_dims", d->scatter_dims_to_operand_dims, d->scatter_dims_count, &first);
  if (len < sizeof attrs)
    snprintf(attrs + len, sizeof attrs - len,
             "%sindex_vector_dim = %lld>, indices_are_sorted = false, unique_indices = false",
             first ? "" : ", ", (long long)d->index_vector_dim);
  return emit_op(b, "stablehlo.scatter", operands, 3, attrs, out);
}

void hlo_rng_bits(hlo_builder* b, hlo_value state, hlo_type bits_type, hlo_value* out_state,
                  hlo_value* out_bits) {
  *out_state = *out_bits = HLO_INVALID;
  if (!values_valid(b, &state, 1)) return;
  hlo_type results[2] = {*hlo_type_of(b, state), bits_type};
  hlo_value first = new_results(b, results, 2);
  if (first == HLO_INVALID) return;
  emit_op_results(b, "stablehlo.rng_bit_generator", &state, 1,
                  "rng_algorithm = #stablehlo<rng_algorithm THREE_FRY>", results, 2, first);
  *out_state = first;
  *out_bits = first + 1;
}
