/* Hermitian eigendecomposition (_linalg_eigh: torch.linalg.eigh, eigvalsh)
 * and singular value decomposition (_linalg_svd: torch.linalg.svd, svdvals
 * and what PyTorch builds on them: pinv, matrix_rank, cond, matrix_norm of
 * ord 2 and 'nuc') by Jacobi rotations, all matrices of a batch at once.
 *
 * Both rotate N/2 disjoint pairs of indices a round (N even: an odd size
 * gets a zero row and column, which never rotate), chosen by the circle
 * method so that the N - 1 rounds of a sweep meet every pair once. A round
 * is elementwise work on rows: each row combined with its partner's,
 * gathered (rows are contiguous; columns would be slow to gather). Sweeps
 * run in a loop until converged (at most MAX_SWEEPS); each sweep is an
 * inner loop whose round count drops to zero once nothing is left to do.
 *
 * eigh: two-sided Jacobi on the Hermitian matrix taken from the UPLO
 * triangle. A round turns the rows of A by R, takes the conjugate transpose
 * ((R A)^H = A R^H) and turns the rows again (R A R^H), then gives each
 * pair's diagonal its exact update and zeroes its off-diagonal entries. The
 * eigenvalues are the diagonal, the eigenvectors the conjugated rows of the
 * turned identity. Sweeps stop when the off-diagonal part is below N eps
 * times the Frobenius norm.
 * svd: one-sided (Hestenes) Jacobi on the columns of A (of A^T when A is
 * wide), kept as rows: each rotation makes two of them orthogonal, so the
 * singular values are their norms, U their normalized selves and V the
 * turned identity. Complex rows turn by the rotation of |<p, q>| with its
 * phase on the sines (a unitary turn), so svd takes complex matrices too;
 * so does eigh, by the rotation of |a_pq| with a_pq's phase. Sweeps stop
 * after one whose pairs all had cosines below eps * max(length, 16).
 * Vectors of U that a zero singular value or full_matrices leave open are
 * completed to an orthonormal basis.
 *
 * A row turns as x - ((1 - c) x -+ s y), 1 - c computed without
 * cancellation: a small angle's cosine rounds to 1, and c^2 + s^2 above 1
 * grew the norms by a bias that summed up over the many rotations. */
#include <math.h>

#include "hlo/complex_ops.h"
#include "hlo/linalg_ops.h"
#include "hlo/loop_ops.h"
#include "hlo/slice_ops.h"
#include "hlo/sort_ops.h"
#include "ops/families.h"

#define MAX_SWEEPS 30 /* convergence is quadratic: ~10 sweeps for n = 256 */

/* One Jacobi method: how a round turns and when sweeps stop. */
typedef struct jacobi {
  hlo_loop_body_fn round; /* one round over carried {x, worst (0-d), w if vectors} */
  hlo_value (*more)(hlo_builder* b, hlo_value x, hlo_value worst); /* 0-d i64: 1 while a sweep is needed */
  bool vectors;           /* w [B, N, N] carried and turned with x */
} jacobi;

/* The pairs of a round (step r): index N - 1 meets r, every other index
 * the one it sums to 2r with modulo N - 1. */
typedef struct pairing {
  hlo_value partner;   /* [N] i64 */
  hlo_value low, high; /* [N] i64: the smaller and larger index of each one's pair */
  hlo_value sign;      /* [N] of the dtype: -1 at a pair's smaller index, +1 at its larger */
} pairing;

/* The rotations of a round, [B, N] (both members of a pair hold the same). */
typedef struct rotation {
  hlo_value c1, s, t; /* 1 - cos, sin, tan */
} rotation;

static double epsilon(tpu_dtype dtype) { return tpu_dtype_real_part(dtype) == TPU_F64 ? 0x1p-52 : 0x1p-23; }

static double smallest_normal(tpu_dtype dtype) {
  return tpu_dtype_real_part(dtype) == TPU_F64 ? 0x1p-1022 : 0x1p-126;
}

/* A vector whose squared norm is below the smallest normal number counts
 * as zero: its norm is below this. */
static double tiny(tpu_dtype dtype) { return sqrt(smallest_normal(dtype)); }

static hlo_value sum(hlo_builder* b, hlo_value x, int64_t dim) {
  return hlo_reduce(b, x, hlo_constant(b, hlo_type_of(b, x)->dtype, 0), "add", &dim, 1);
}

static hlo_value square(hlo_builder* b, hlo_value x) { return hlo_binary(b, "multiply", x, x); }

static bool is_complex(hlo_builder* b, hlo_value x) { return tpu_dtype_is_complex(hlo_type_of(b, x)->dtype); }

/* |x|^2 entrywise, real for complex x too. */
static hlo_value magnitude_squared(hlo_builder* b, hlo_value x) {
  return is_complex(b, x) ? hlo_real(b, hlo_binary(b, "multiply", x, hlo_conj(b, x))) : square(b, x);
}

/* x (real) in like's dtype, so that it scales complex values. */
static hlo_value as_type_of(hlo_builder* b, hlo_value x, hlo_value like) {
  return hlo_convert(b, x, hlo_type_of(b, like)->dtype);
}

/* x ([B] or [B, n]) over `shape` (rank 2 or 3) along dims {0} or {0, along}. */
static hlo_value spread(hlo_builder* b, hlo_value x, const hlo_type* shape, int along) {
  int64_t dims[2] = {0, along};
  return hlo_broadcast_in_dim(b, x, shape->rank, shape->dims, dims);
}

/* x [.., r, c] as [B, r, c], B the product of the batch dims. */
static hlo_value flat(hlo_builder* b, hlo_value x) {
  const hlo_type* t = hlo_type_of(b, x);
  int64_t dims[3] = {1, t->dims[t->rank - 2], t->dims[t->rank - 1]};
  for (int i = 0; i < t->rank - 2; i++) dims[0] *= t->dims[i];
  return hlo_reshape(b, x, 3, dims);
}

static hlo_value transposed(hlo_builder* b, hlo_value x) {
  static const int64_t swap[3] = {0, 2, 1};
  return hlo_transpose(b, x, swap);
}

/* The first r rows and c columns of x [B, .., ..]. */
static hlo_value corner(hlo_builder* b, hlo_value x, int64_t r, int64_t c) {
  return hlo_slice_dim(b, hlo_slice_dim(b, x, 1, 0, r), 2, 0, c);
}

/* The mask over t [B, r, c] of the entries whose column is columns[row]
 * (columns [r] i64). */
static hlo_value at_columns(hlo_builder* b, const hlo_type* t, hlo_value columns) {
  hlo_type positions = *t;
  positions.dtype = TPU_I64;
  hlo_value per_row = hlo_broadcast_in_dim(b, columns, 3, positions.dims, &(int64_t){1});
  return hlo_compare(b, "EQ", hlo_iota(b, positions, 2), per_row);
}

static hlo_value diagonal_mask(hlo_builder* b, const hlo_type* t) {
  hlo_type rows = hlo_type_make(TPU_I64, 1, &t->dims[1]);
  return at_columns(b, t, hlo_iota(b, rows, 0));
}

/* a [B, N, N]'s diagonal [B, N]: every (N + 1)-th entry. */
static hlo_value diagonal(hlo_builder* b, hlo_value a) {
  hlo_type t = *hlo_type_of(b, a);
  int64_t n = t.dims[2], dims[2] = {t.dims[0], n * n};
  int64_t start[2] = {0, 0}, stride[2] = {1, n + 1};
  return hlo_slice(b, hlo_reshape(b, a, 2, dims), start, dims, stride);
}

/* x [B, r, c] divided by its largest magnitude (zero matrices by 1), so
 * that squares neither overflow nor underflow; *out_scale [B] undoes it. */
static hlo_value scaled(hlo_builder* b, hlo_value x, hlo_value* out_scale) {
  hlo_type t = *hlo_type_of(b, x);
  int64_t dims[2] = {1, 2};
  hlo_value largest = hlo_reduce(b, hlo_unary(b, "abs", x), hlo_constant(b, tpu_dtype_real_part(t.dtype), 0), "maximum",
                                 dims, 2);
  hlo_value zero = hlo_compare(b, "EQ", largest, hlo_constant_like(b, largest, 0));
  *out_scale = hlo_select(b, zero, hlo_constant_like(b, largest, 1), largest);
  return hlo_binary(b, "divide", x, as_type_of(b, spread(b, *out_scale, &t, 0), x));
}

/* x [B, r, c] with a zero row (and column, for a square x) appended when r
 * is odd: the rounds pair the rows. */
static hlo_value even(hlo_builder* b, hlo_value x, bool columns_too) {
  hlo_type t = *hlo_type_of(b, x);
  if (t.dims[1] % 2 == 0) return x;
  int64_t low[3] = {0, 0, 0}, high[3] = {0, 1, columns_too ? 1 : 0}, interior[3] = {0, 0, 0};
  return hlo_pad(b, x, hlo_constant(b, t.dtype, 0), low, high, interior);
}

static pairing pairing_of(hlo_builder* b, hlo_value round, int64_t n, tpu_dtype dtype) {
  hlo_value x = hlo_iota(b, hlo_type_make(TPU_I64, 1, &n), 0);
  hlo_value r = hlo_broadcast_in_dim(b, round, 1, &n, NULL), last = hlo_constant_like(b, x, (double)(n - 1));
  /* 2r - x, made positive before the remainder. */
  hlo_value mirrored = hlo_binary(b, "remainder", hlo_binary(b, "subtract", hlo_binary(b, "add", r, r),
                                                             hlo_binary(b, "subtract", x, last)), last);
  hlo_value partner = hlo_select(b, hlo_compare(b, "EQ", x, last), r,
                                 hlo_select(b, hlo_compare(b, "EQ", x, r), last, mirrored));
  hlo_value first = hlo_compare(b, "LT", x, partner);
  pairing out = {partner, hlo_binary(b, "minimum", x, partner), hlo_binary(b, "maximum", x, partner),
                 hlo_convert(b, hlo_select(b, first, hlo_constant_like(b, x, -1), hlo_constant_like(b, x, 1)), dtype)};
  return out;
}

/* x [B, N] at each index's pair's smaller (and larger) index: the same for
 * both members, bit for bit, so that both compute one rotation. */
static void at_pair(hlo_builder* b, hlo_value x, const pairing* pr, hlo_value* low, hlo_value* high) {
  *low = hlo_take(b, x, 1, pr->low);
  if (high) *high = hlo_take(b, x, 1, pr->high);
}

/* The rotation that diagonalizes [[app, apq], [apq, aqq]] (Rutishauser's
 * formulas, the smaller angle); none where apq is 0. */
static rotation rotation_of(hlo_builder* b, hlo_value app, hlo_value aqq, hlo_value apq) {
  hlo_value zero = hlo_constant_like(b, apq, 0), one = hlo_constant_like(b, apq, 1);
  hlo_value none = hlo_compare(b, "EQ", apq, zero);
  hlo_value twice = hlo_binary(b, "add", apq, apq);
  hlo_value tau = hlo_binary(b, "divide", hlo_binary(b, "subtract", aqq, app), hlo_select(b, none, one, twice));
  hlo_value sign = hlo_select(b, hlo_compare(b, "GE", tau, zero), one, hlo_unary(b, "negate", one));
  /* A huge tau's square overflows to infinity, giving t = 0: no rotation. */
  hlo_value root = hlo_unary(b, "sqrt", hlo_binary(b, "add", one, square(b, tau)));
  hlo_value t = hlo_binary(b, "divide", sign, hlo_binary(b, "add", hlo_unary(b, "abs", tau), root));
  t = hlo_select(b, none, zero, t);
  hlo_value r = hlo_unary(b, "sqrt", hlo_binary(b, "add", one, square(b, t))); /* 1 / c */
  rotation out = {hlo_binary(b, "divide", square(b, t), hlo_binary(b, "multiply", r, hlo_binary(b, "add", one, r))),
                  hlo_binary(b, "divide", t, r), t};
  return out;
}

/* x [B, N] with each member's sign: negated at a pair's smaller index. */
static hlo_value signed_by_member(hlo_builder* b, hlo_value x, const pairing* pr) {
  hlo_type t = *hlo_type_of(b, x);
  return hlo_binary(b, "multiply", x, hlo_broadcast_in_dim(b, pr->sign, 2, t.dims, &(int64_t){1}));
}

/* x [B, N, c] with its rows turned in pairs: x - ((1 - c) x - signed_s x[partner]),
 * so p' = c p - s q and q' = s p + c q. */
static hlo_value turned(hlo_builder* b, hlo_value x, const pairing* pr, const rotation* r, hlo_value signed_s) {
  hlo_type t = *hlo_type_of(b, x);
  hlo_value change = hlo_binary(b, "subtract", hlo_binary(b, "multiply", as_type_of(b, spread(b, r->c1, &t, 1), x), x),
                                hlo_binary(b, "multiply", spread(b, signed_s, &t, 1), hlo_take(b, x, 1, pr->partner)));
  return hlo_binary(b, "subtract", x, change);
}

/* The complex rotation's sines: signed_s [B, N] (real) times the phase
 * e^{i phi} of gamma (svd's <p, q>, eigh's a_pq) at p and e^{-i phi} at q,
 * so that p' = c p - s e^{i phi} q and q' = s e^{-i phi} p + c q: unitary,
 * and the turn zeroes gamma as the rotation of |gamma| zeroes |gamma|. */
static hlo_value with_phases(hlo_builder* b, hlo_value signed_s, hlo_value gamma, const pairing* pr) {
  hlo_value size = hlo_unary(b, "abs", gamma);
  hlo_value none = hlo_compare(b, "EQ", size, hlo_constant_like(b, size, 0));
  hlo_value phase = hlo_select(b, none, hlo_constant_like(b, gamma, 1),
                               hlo_binary(b, "divide", gamma, as_type_of(b, size, gamma)));
  hlo_type t = *hlo_type_of(b, gamma);
  hlo_value low = hlo_compare(b, "LT", hlo_broadcast_in_dim(b, pr->sign, 2, t.dims, &(int64_t){1}),
                              hlo_constant_like(b, signed_s, 0));
  return hlo_binary(b, "multiply", as_type_of(b, signed_s, gamma), hlo_select(b, low, phase, hlo_conj(b, phase)));
}

/* |gamma| of a complex gamma; a real one keeps its sign, which the
 * rotation's direction needs. */
static hlo_value magnitude(hlo_builder* b, hlo_value gamma) {
  return is_complex(b, gamma) ? hlo_unary(b, "abs", gamma) : gamma;
}

/* The turn of each pair that zeroes gamma, the off-diagonal entry of the
 * Hermitian [[alpha, gamma], [conj gamma, beta]] (alpha, beta real): the
 * rotation of |gamma|, its sines signed by member (and phased, complex)
 * in *out_signed_s. */
static rotation unitary_turn(hlo_builder* b, hlo_value alpha, hlo_value beta, hlo_value gamma, const pairing* pr,
                             hlo_value* out_signed_s) {
  rotation r = rotation_of(b, alpha, beta, magnitude(b, gamma));
  *out_signed_s = signed_by_member(b, r.s, pr);
  if (is_complex(b, gamma)) *out_signed_s = with_phases(b, *out_signed_s, gamma, pr);
  return r;
}

/* The end of both rounds: w turns with x. */
static void turn_vectors(hlo_builder* b, const jacobi* j, const hlo_value* in, hlo_value* out, const pairing* pr,
                         const rotation* r, hlo_value signed_s) {
  if (j->vectors) out[2] = turned(b, in[2], pr, r, signed_s);
}

/* One eigh round: carried {a [B, N, N], worst (unused), w}. The diagonal
 * stays real: a_pp and a_qq move by -+ t |a_pq|. */
static void eigh_round(hlo_builder* b, hlo_value step, const hlo_value* in, hlo_value* out, const void* context) {
  hlo_type t = *hlo_type_of(b, in[0]);
  int64_t n = t.dims[2], flat_dims[2] = {t.dims[0], n * n};
  pairing pr = pairing_of(b, step, n, tpu_dtype_real_part(t.dtype));
  hlo_value app, aqq, d = hlo_real(b, diagonal(b, in[0]));
  at_pair(b, d, &pr, &app, &aqq);
  hlo_value position = hlo_binary(b, "add", hlo_binary(b, "multiply", pr.low, hlo_constant_like(b, pr.low, (double)n)),
                                  pr.high);
  hlo_value apq = hlo_take(b, hlo_reshape(b, in[0], 2, flat_dims), 1, position);
  hlo_value signed_s;
  rotation r = unitary_turn(b, app, aqq, apq, &pr, &signed_s);
  hlo_value a = turned(b, hlo_conj(b, transposed(b, turned(b, in[0], &pr, &r, signed_s))), &pr, &r, signed_s);
  hlo_value shift = signed_by_member(b, hlo_binary(b, "multiply", r.t, magnitude(b, apq)), &pr);
  a = hlo_select(b, at_columns(b, &t, pr.partner), hlo_constant_like(b, a, 0), a);
  hlo_value updated = as_type_of(b, spread(b, hlo_binary(b, "add", d, shift), &t, 1), a);
  out[0] = hlo_select(b, diagonal_mask(b, &t), updated, a);
  out[1] = in[1];
  turn_vectors(b, context, in, out, &pr, &r, signed_s);
}

/* 1 while some matrix's off-diagonal part exceeds N eps times its norm
 * (the rounding of the rotations keeps it from reaching much less). */
static hlo_value eigh_more(hlo_builder* b, hlo_value a, hlo_value worst) {
  (void)worst;
  hlo_type t = *hlo_type_of(b, a);
  double tolerance = epsilon(t.dtype) * (double)t.dims[1];
  int64_t both[2] = {1, 2}, batch = 0;
  hlo_value squares = magnitude_squared(b, a), zero = hlo_constant(b, tpu_dtype_real_part(t.dtype), 0);
  hlo_value off_diagonal = hlo_select(b, diagonal_mask(b, &t), hlo_constant_like(b, squares, 0), squares);
  hlo_value off = hlo_reduce(b, off_diagonal, zero, "add", both, 2);
  hlo_value bound = hlo_binary(b, "multiply", hlo_reduce(b, squares, zero, "add", both, 2),
                               hlo_constant_like(b, off, tolerance * tolerance));
  hlo_value pending = hlo_convert(b, hlo_compare(b, "GT", off, bound), TPU_I64);
  return hlo_reduce(b, pending, hlo_constant_i64(b, TPU_I64, 0), "maximum", &batch, 1);
}

/* One svd round: carried {h [B, N, length], worst, w}: each pair of rows
 * turned orthogonal; worst keeps the largest cosine between them. */
static void svd_round(hlo_builder* b, hlo_value step, const hlo_value* in, hlo_value* out, const void* context) {
  hlo_value h = in[0];
  hlo_type t = *hlo_type_of(b, h);
  tpu_dtype parts = tpu_dtype_real_part(t.dtype);
  int64_t all[2] = {0, 1};
  pairing pr = pairing_of(b, step, t.dims[1], parts);
  hlo_value alpha, beta, gamma;
  at_pair(b, sum(b, magnitude_squared(b, h), 2), &pr, &alpha, &beta);
  at_pair(b, sum(b, hlo_binary(b, "multiply", h, hlo_conj(b, hlo_take(b, h, 1, pr.partner))), 2), &pr, &gamma, NULL);
  hlo_value lengths = hlo_binary(b, "multiply", hlo_unary(b, "sqrt", alpha), hlo_unary(b, "sqrt", beta));
  double floor = smallest_normal(t.dtype); /* 0 / 0 -> 0 */
  lengths = hlo_binary(b, "maximum", lengths, hlo_constant_like(b, lengths, floor));
  hlo_value cosines = hlo_binary(b, "divide", hlo_unary(b, "abs", gamma), lengths);
  hlo_value worst = hlo_reduce(b, cosines, hlo_constant(b, parts, 0), "maximum", all, 2);
  out[1] = hlo_binary(b, "maximum", in[1], worst);
  hlo_value signed_s;
  rotation r = unitary_turn(b, alpha, beta, gamma, &pr, &signed_s);
  out[0] = turned(b, h, &pr, &r, signed_s);
  turn_vectors(b, context, in, out, &pr, &r, signed_s);
}

/* 1 while the last sweep met a cosine above the rounding of the dot
 * products (eps times their length, at least 16 eps). */
static hlo_value svd_more(hlo_builder* b, hlo_value h, hlo_value worst) {
  hlo_type t = *hlo_type_of(b, h);
  double tolerance = epsilon(t.dtype) * fmax((double)t.dims[2], 16);
  return hlo_convert(b, hlo_compare(b, "GT", worst, hlo_constant(b, tpu_dtype_real_part(t.dtype), tolerance)), TPU_I64);
}

/* A sweep: carried {x, more (0-d i64), w}; N - 1 rounds when more is 1,
 * none once converged. */
static void sweep(hlo_builder* b, hlo_value step, const hlo_value* in, hlo_value* out, const void* context) {
  (void)step;
  const jacobi* j = context;
  hlo_type t = *hlo_type_of(b, in[0]);
  hlo_value rounds = hlo_binary(b, "multiply", in[1], hlo_constant_i64(b, TPU_I64, t.dims[1] - 1));
  hlo_value init[3] = {in[0], hlo_constant(b, tpu_dtype_real_part(t.dtype), 0), j->vectors ? in[2] : HLO_INVALID},
            done[3];
  hlo_counted_loop(b, rounds, init, j->vectors ? 3 : 2, j->round, j, done);
  out[0] = done[0];
  out[1] = j->more(b, done[0], done[1]);
  if (j->vectors) out[2] = done[2];
}

/* Sweeps of `j` over x [B, N, c] (and w [B, N, N]) until converged. */
static void run_sweeps(hlo_builder* b, const jacobi* j, hlo_value* x, hlo_value* w) {
  hlo_type t = *hlo_type_of(b, *x);
  t.dims[2] = t.dims[1];
  hlo_value init[3] = {*x, hlo_constant_i64(b, TPU_I64, 1), j->vectors ? hlo_identity(b, t) : HLO_INVALID}, out[3];
  hlo_counted_loop(b, hlo_constant_i64(b, TPU_I64, MAX_SWEEPS), init, j->vectors ? 3 : 2, sweep, j, out);
  *x = out[0];
  *w = j->vectors ? out[2] : HLO_INVALID;
}

/* Sorts values [B, n] in place; returns the order ([B, n] i64) they came in. */
static hlo_value sort_values(hlo_builder* b, hlo_value* values, bool descending) {
  hlo_type t = *hlo_type_of(b, *values);
  t.dtype = TPU_I64;
  hlo_value xs[2] = {*values, hlo_iota(b, t, 1)}, sorted[2];
  hlo_sort(b, xs, 2, 1, descending, sorted);
  *values = sorted[0];
  return sorted[1];
}

/* The rows of x [B, n, c] in `order` [B, n]. */
static hlo_value rows_in_order(hlo_builder* b, hlo_value x, hlo_value order) {
  hlo_type t = *hlo_type_of(b, x);
  t.dtype = TPU_I64;
  return hlo_gather_elements(b, x, 1, spread(b, order, &t, 1));
}

/* v [B, length] less its projection on the rows of u [B, width, length]. */
static hlo_value projected_off(hlo_builder* b, hlo_value u, hlo_value v) {
  hlo_type t = *hlo_type_of(b, u);
  hlo_value coefficients = sum(b, hlo_binary(b, "multiply", hlo_conj(b, u), spread(b, v, &t, 2)), 2);
  return hlo_binary(b, "subtract", v, sum(b, hlo_binary(b, "multiply", u, spread(b, coefficients, &t, 1)), 1));
}

/* One row of the completion: carried {u [B, width, length], first (0-d
 * i64)}. Row first + step, where a matrix has it zero, becomes the unit
 * vector least covered by u's rows (the coordinate whose column has the
 * least norm), projected off them twice and normalized. */
static void complete_step(hlo_builder* b, hlo_value step, const hlo_value* in, hlo_value* out, const void* context) {
  (void)context;
  hlo_value u = in[0];
  hlo_type t = *hlo_type_of(b, u), positions = t, vt = hlo_type_make(TPU_I64, 2, (int64_t[]){t.dims[0], t.dims[2]});
  positions.dtype = TPU_I64;
  hlo_value j = hlo_broadcast_in_dim(b, hlo_binary(b, "add", in[1], step), 3, t.dims, NULL);
  hlo_value here = hlo_compare(b, "EQ", hlo_iota(b, positions, 1), j);
  hlo_value row = sum(b, hlo_select(b, here, u, hlo_constant_like(b, u, 0)), 1);
  hlo_value length = sum(b, magnitude_squared(b, row), 1);
  hlo_value missing = hlo_compare(b, "LT", length, hlo_constant_like(b, length, 0.25));
  hlo_value least, coordinate;
  hlo_arg_reduce(b, sum(b, magnitude_squared(b, u), 1), 1, false, &least, &coordinate);
  hlo_value v = hlo_compare(b, "EQ", hlo_iota(b, vt, 1), spread(b, coordinate, &vt, 0));
  v = projected_off(b, u, projected_off(b, u, hlo_convert(b, v, t.dtype)));
  vt.dtype = t.dtype;
  hlo_value length_v = hlo_unary(b, "sqrt", sum(b, magnitude_squared(b, v), 1));
  v = hlo_binary(b, "divide", v, as_type_of(b, spread(b, length_v, &vt, 0), v));
  hlo_value replace = hlo_binary(b, "and", here, spread(b, missing, &t, 0));
  out[0] = hlo_select(b, replace, spread(b, v, &t, 2), u);
  out[1] = in[1];
}

/* u [B, k, length] grown to `width` rows, its zero rows (the last k -
 * found of each matrix) and the new ones made orthonormal to the rest. */
static hlo_value completed(hlo_builder* b, hlo_value u, hlo_value found, int64_t width) {
  hlo_type t = *hlo_type_of(b, u);
  int64_t low[3] = {0, 0, 0}, high[3] = {0, width - t.dims[1], 0}, interior[3] = {0, 0, 0}, batch = 0;
  u = hlo_pad(b, u, hlo_constant(b, t.dtype, 0), low, high, interior);
  hlo_value first = hlo_reduce(b, found, hlo_constant_i64(b, TPU_I64, width), "minimum", &batch, 1);
  hlo_value init[2] = {u, first}, out[2];
  hlo_counted_loop(b, hlo_binary(b, "subtract", hlo_constant_i64(b, TPU_I64, width), first), init, 2, complete_step,
                   NULL, out);
  return out[0];
}

static void set_output(tpu_lowering* l, int index, hlo_value x) {
  hlo_type t = tpu_lower_output_type(l, index);
  tpu_lower_set_output(l, index, hlo_reshape(tpu_lower_builder(l), x, t.rank, t.dims));
}

/* Outputs of a call with no matrices or empty ones: empty, but a square
 * output (full_matrices' U or Vh beside an empty dim) the identity, as on
 * the CPU. */
static void set_trivial_outputs(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  for (int i = 0; i < tpu_lower_output_count(l); i++) {
    hlo_type t = tpu_lower_output_type(l, i);
    tpu_lower_set_output(l, i, hlo_type_numel(&t) > 0 ? hlo_identity(b, t) : hlo_constant(b, t.dtype, 0));
  }
}

static bool check_input(tpu_lowering* l, bool square_only, bool complex_too) {
  hlo_type t = tpu_lower_arg_type(l, 0);
  char shape[96];
  if (t.rank < 2 || (square_only && t.dims[t.rank - 1] != t.dims[t.rank - 2])) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "aten::%s: expected %smatrices [..., m, n], got shape %s",
                   tpu_lower_op_name(l), square_only ? "square " : "", hlo_shape_print(&t, shape, sizeof shape));
    return false;
  }
  if (t.dtype != TPU_F32 && t.dtype != TPU_F64 && !(complex_too && tpu_dtype_is_complex(t.dtype))) {
    /* PyTorch's CPU kernels refuse the other types too (NotImplementedError). */
    tpu_lower_fail(l, TPU_UNIMPLEMENTED, "aten::%s: not implemented for %s input (shape %s) on tpu, as on the CPU; "
                   "convert it to float32 or float64", tpu_lower_op_name(l), tpu_dtype_name(t.dtype),
                   hlo_shape_print(&t, shape, sizeof shape));
    return false;
  }
  return true;
}

/* a [B, n, n] Hermitian from its lower (or upper) triangle; the other one
 * is never read, nor the diagonal's imaginary part (as in LAPACK). */
static hlo_value hermitian(hlo_builder* b, hlo_value a, bool upper) {
  hlo_type t = *hlo_type_of(b, a), positions = t;
  positions.dtype = TPU_I64;
  hlo_value kept = hlo_compare(b, upper ? "LE" : "GE", hlo_iota(b, positions, 1), hlo_iota(b, positions, 2));
  a = hlo_select(b, kept, a, hlo_conj(b, transposed(b, a)));
  return is_complex(b, a) ? hlo_select(b, diagonal_mask(b, &t), as_type_of(b, hlo_real(b, a), a), a) : a;
}

/* _linalg_eigh(A, UPLO, compute_v) -> (eigenvalues ascending and real,
 * eigenvectors as columns; empty without compute_v). */
static tpu_status lower_eigh(tpu_lowering* l) {
  if (!check_input(l, true, true)) return NULL;
  hlo_type at = tpu_lower_arg_type(l, 0);
  if (hlo_type_numel(&at) == 0) {
    set_trivial_outputs(l);
    return NULL;
  }
  hlo_builder* b = tpu_lower_builder(l);
  const char* uplo = tpu_lower_string(l, 1, "L");
  jacobi j = {eigh_round, eigh_more, tpu_lower_bool(l, 2, true)};
  hlo_value scale, w, a = hermitian(b, flat(b, tpu_lower_tensor(l, 0)), uplo[0] == 'U' || uplo[0] == 'u');
  a = even(b, scaled(b, a, &scale), true);
  run_sweeps(b, &j, &a, &w);
  int64_t n = at.dims[at.rank - 1];
  hlo_value values = hlo_slice_dim(b, hlo_real(b, diagonal(b, a)), 1, 0, n);
  hlo_value order = sort_values(b, &values, false);
  set_output(l, 0, hlo_binary(b, "multiply", values, spread(b, scale, hlo_type_of(b, values), 0)));
  /* W A W^H is diagonal: A's eigenvectors are the columns of W^H. */
  if (j.vectors)
    set_output(l, 1, hlo_conj(b, transposed(b, rows_in_order(b, corner(b, w, n, n), order))));
  else
    tpu_lower_set_output(l, 1, hlo_constant(b, at.dtype, 0));
  return NULL;
}

/* U's vectors (as rows [B, width, length]) from the turned rows h [B, k,
 * length] in order and their norms: normalized, and completed where a
 * norm is zero or full_matrices asks for more. */
static hlo_value left_vectors(hlo_builder* b, hlo_value h, hlo_value norms, int64_t width) {
  hlo_type t = *hlo_type_of(b, h);
  hlo_value nonzero = hlo_compare(b, "GT", norms, hlo_constant_like(b, norms, tiny(t.dtype)));
  hlo_value divisor = hlo_select(b, nonzero, norms, hlo_constant_like(b, norms, 1));
  hlo_value normalized = hlo_binary(b, "divide", h, as_type_of(b, spread(b, divisor, &t, 1), h));
  hlo_value u = hlo_select(b, spread(b, nonzero, &t, 1), normalized, hlo_constant_like(b, h, 0));
  return completed(b, u, sum(b, hlo_convert(b, nonzero, TPU_I64), 1), width);
}

/* _linalg_svd(A, full_matrices, compute_uv, driver) -> (U, S descending,
 * Vh); U and Vh empty without compute_uv. */
static tpu_status lower_svd(tpu_lowering* l) {
  if (!check_input(l, false, true)) return NULL;
  if (!tpu_lower_is_none(l, 3)) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "torch.linalg.svd: keyword argument `driver=` is only supported on CUDA "
                   "inputs with cuSOLVER backend (the tpu has one algorithm); leave it None");
    return NULL;
  }
  hlo_type at = tpu_lower_arg_type(l, 0);
  if (hlo_type_numel(&at) == 0) {
    set_trivial_outputs(l);
    return NULL;
  }
  hlo_builder* b = tpu_lower_builder(l);
  int64_t m = at.dims[at.rank - 2], n = at.dims[at.rank - 1], k = m < n ? m : n, length = m < n ? n : m;
  bool full = tpu_lower_bool(l, 1, false), wide = m < n;
  jacobi j = {svd_round, svd_more, tpu_lower_bool(l, 2, true)};
  /* The rows to orthogonalize: A's columns, or its rows when it is wide. */
  hlo_value scale, w, h = flat(b, tpu_lower_tensor(l, 0));
  h = even(b, scaled(b, wide ? h : transposed(b, h), &scale), false);
  run_sweeps(b, &j, &h, &w);
  h = hlo_slice_dim(b, h, 1, 0, k);
  hlo_value norms = hlo_unary(b, "sqrt", sum(b, magnitude_squared(b, h), 2)), s = norms;
  hlo_value order = sort_values(b, &s, true);
  set_output(l, 1, hlo_binary(b, "multiply", s, spread(b, scale, hlo_type_of(b, s), 0)));
  if (!j.vectors) {
    tpu_lower_set_output(l, 0, hlo_constant(b, at.dtype, 0));
    tpu_lower_set_output(l, 2, hlo_constant(b, at.dtype, 0));
    return NULL;
  }
  hlo_value u = left_vectors(b, rows_in_order(b, h, order), s, full ? length : k);
  /* h = W A^T (W A when wide) has orthogonal rows u diag(S): A = u^T S
   * conj(W) (W^H S u). */
  w = hlo_conj(b, rows_in_order(b, corner(b, w, k, k), order));
  set_output(l, 0, transposed(b, wide ? w : u));
  set_output(l, 2, wide ? u : w);
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"_linalg_eigh", lower_eigh, TPU_OP_COMPLEX},
    {"_linalg_svd", lower_svd, TPU_OP_COMPLEX},
};

TPU_OP_FAMILY(tpu_ops_eigen, entries);
