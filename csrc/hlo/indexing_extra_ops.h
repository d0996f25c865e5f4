/* Builder ops for indexing and random lowerings: sort. */
#ifndef TPU_HLO_INDEXING_EXTRA_OPS_H
#define TPU_HLO_INDEXING_EXTRA_OPS_H

#include "hlo/builder.h"

/* Sorts `count` values of one shape along `dim` by the first of them,
 * ascending and stable; out_sorted[i] is xs[i] in that order. */
void hlo_sort_by_first(hlo_builder* b, const hlo_value* xs, int count, int dim,
                       hlo_value* out_sorted);

#endif
