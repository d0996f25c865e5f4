/* Each op family file exports one table of its lowerings; registry.c joins
 * them. Adding an op touches only its family's file. */
#ifndef TPU_OPS_FAMILIES_H
#define TPU_OPS_FAMILIES_H

#include "ops/lowering.h"

typedef struct tpu_op_family {
  const tpu_op_entry* entries;
  int count;
} tpu_op_family;

extern const tpu_op_family tpu_ops_elementwise; /* ops/elementwise.c */
extern const tpu_op_family tpu_ops_reduce;      /* ops/reduce.c */
extern const tpu_op_family tpu_ops_linalg;      /* ops/linalg.c */
extern const tpu_op_family tpu_ops_indexing;    /* ops/indexing.c */
extern const tpu_op_family tpu_ops_creation;    /* ops/creation.c */
extern const tpu_op_family tpu_ops_activation;  /* ops/activation.c */
extern const tpu_op_family tpu_ops_loss;        /* ops/loss.c */
extern const tpu_op_family tpu_ops_conv;        /* ops/conv.c */
extern const tpu_op_family tpu_ops_pool;        /* ops/pool.c */
extern const tpu_op_family tpu_ops_resample;    /* ops/resample.c */
extern const tpu_op_family tpu_ops_norm;        /* ops/norm.c */
extern const tpu_op_family tpu_ops_embedding;   /* ops/embedding.c */
extern const tpu_op_family tpu_ops_attention;   /* ops/attention.c */
extern const tpu_op_family tpu_ops_sort;        /* ops/sort.c */
extern const tpu_op_family tpu_ops_foreach;     /* ops/foreach.c */
extern const tpu_op_family tpu_ops_grouped_mm;  /* ops/grouped_mm.c */
extern const tpu_op_family tpu_ops_histogram;   /* ops/histogram.c */
extern const tpu_op_family tpu_ops_weight_norm; /* ops/weight_norm.c */
extern const tpu_op_family tpu_ops_grid_sample; /* ops/grid_sample.c */
extern const tpu_op_family tpu_ops_triangular;  /* ops/triangular.c */
extern const tpu_op_family tpu_ops_distance;    /* ops/distance.c */
extern const tpu_op_family tpu_ops_fold;        /* ops/fold.c */
extern const tpu_op_family tpu_ops_optimizer;   /* ops/optimizer.c */
extern const tpu_op_family tpu_ops_amp;         /* ops/amp.c */
extern const tpu_op_family tpu_ops_rnn_cell;    /* ops/rnn_cell.c */
extern const tpu_op_family tpu_ops_ctc_loss;    /* ops/ctc_loss.c */
extern const tpu_op_family tpu_ops_matrix_exp;  /* ops/matrix_exp.c */
extern const tpu_op_family tpu_ops_factorizations; /* ops/factorizations.c */
extern const tpu_op_family tpu_ops_fft;  /* ops/fft.c */
extern const tpu_op_family tpu_ops_complex;     /* ops/complex.c */
extern const tpu_op_family tpu_ops_eigen;       /* ops/eigen.c */
extern const tpu_op_family tpu_ops_special;     /* ops/special.c */
extern const tpu_op_family tpu_ops_polynomial;  /* ops/polynomial.c */
extern const tpu_op_family tpu_ops_incomplete_gamma; /* ops/incomplete_gamma.c */
extern const tpu_op_family tpu_ops_float8;      /* ops/float8.c */
extern const tpu_op_family tpu_ops_jagged;      /* ops/jagged.c */

#define TPU_OP_FAMILY(name, table) \
  const tpu_op_family name = {table, (int)(sizeof table / sizeof table[0])}

#endif
