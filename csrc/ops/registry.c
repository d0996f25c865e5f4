/* The lowering table: every family's entries, sorted once by name and
 * searched by bisection on each lookup. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ops/families.h"

#define MAX_OPS 1024

static const tpu_op_family* const families[] = {
    &tpu_ops_elementwise, &tpu_ops_reduce,   &tpu_ops_linalg,    &tpu_ops_indexing,
    &tpu_ops_creation,    &tpu_ops_activation, &tpu_ops_loss,    &tpu_ops_conv,
    &tpu_ops_pool,        &tpu_ops_resample,   &tpu_ops_norm,    &tpu_ops_embedding,
    &tpu_ops_attention,   &tpu_ops_sort,       &tpu_ops_foreach, &tpu_ops_grouped_mm,
    &tpu_ops_histogram,   &tpu_ops_weight_norm, &tpu_ops_grid_sample, &tpu_ops_triangular,
    &tpu_ops_distance,    &tpu_ops_fold,       &tpu_ops_optimizer, &tpu_ops_amp,
    &tpu_ops_rnn_cell,    &tpu_ops_ctc_loss,   &tpu_ops_matrix_exp,
    &tpu_ops_factorizations, &tpu_ops_complex, &tpu_ops_fft, &tpu_ops_eigen,
    &tpu_ops_special,
    &tpu_ops_polynomial,
    &tpu_ops_incomplete_gamma,
    &tpu_ops_float8,
    &tpu_ops_jagged,
};

static const tpu_op_entry* sorted[MAX_OPS];
static int sorted_count;
static pthread_once_t sorted_once = PTHREAD_ONCE_INIT;

static int by_name(const void* a, const void* b) {
  return strcmp((*(const tpu_op_entry* const*)a)->name, (*(const tpu_op_entry* const*)b)->name);
}

static void sort_table(void) {
  for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
    for (int i = 0; i < families[f]->count && sorted_count < MAX_OPS; i++)
      sorted[sorted_count++] = &families[f]->entries[i];
  qsort(sorted, (size_t)sorted_count, sizeof sorted[0], by_name);
}

const tpu_op_entry* tpu_op_find(const char* base_name) {
  pthread_once(&sorted_once, sort_table);
  int lo = 0, hi = sorted_count - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    int c = strcmp(base_name, sorted[mid]->name);
    if (c == 0) return sorted[mid];
    if (c < 0) hi = mid - 1; else lo = mid + 1;
  }
  return NULL;
}
