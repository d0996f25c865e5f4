/* Builder op for sorting with PyTorch's order. */
#ifndef TPU_HLO_SORT_OPS_H
#define TPU_HLO_SORT_OPS_H

#include "hlo/builder.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sorts `count` values of one shape along `dim` by the first of them,
 * stably, ascending or descending, with NaN above every number as in
 * PyTorch (last ascending, first descending). out_sorted[i] is xs[i] in
 * that order. */
void hlo_sort(hlo_builder* b, const hlo_value* xs, int count, int dim, bool descending,
              hlo_value* out_sorted);

#ifdef __cplusplus
}
#endif

#endif
