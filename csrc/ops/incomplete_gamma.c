/* The regularized incomplete gamma functions: igamma(a, x) = P(a, x), the
 * lower one (special.gammainc), and igammac(a, x) = Q(a, x) = 1 - P, the
 * upper one (special.gammaincc), elementwise with broadcasting.
 *
 * Each element takes the method ATen's CPU kernel (calc_igamma and
 * calc_igammac in Math.h, after SciPy's igam.c) picks for it, in the same
 * arithmetic: the edge values first (NaN for a or x negative, the limits at
 * a = 0, x = 0 and infinities), Temme's uniform asymptotic expansion for
 * large a near x, else the power series of P (DLMF 8.11.4), the series of Q
 * for small x (DLMF 8.7.3) or the continued fraction of Q (DLMF 8.9.2), the
 * other function being 1 minus it. The three sums share one device loop
 * and the expansion has another; each stops an element where the CPU's
 * loop breaks and stops altogether once no element runs (checked every few
 * steps), so nothing waits on the host. Elements that take neither (edges,
 * NaN) start finished.
 *
 * Where XLA's elementary functions differ from glibc's in the last bits and
 * the CPU's formulas amplify that (log Gamma near 1 and 2), it takes the
 * builder's (hlo_log_gamma, hlo_log1p: hlo/special_ops.h); it keeps XLA
 * from folding constants (x + c1) + c2; and it emulates in float32 the CPU's
 * double-precision tests (x > 1.1) and intermediates. What remains: XLA
 * flushes subnormals (results below the smallest normal number come out
 * 0, subnormal inputs read as 0), and float32 results inherit the last-bit
 * rounding of the CPU's float log and lgamma where a log x is large.
 *
 * float32 and float64 compute in their own precision, with the CPU's
 * per-type constants; float16 and bfloat16 compute in float32 and round, as
 * the CPU does. Complex (and integer-only, which PyTorch's meta refuses
 * before) inputs are refused naming the op. PyTorch defines the gradient
 * in x only, through ops that are lowered elsewhere. */
#include <math.h>
#include <string.h>

#include "hlo/elementwise_extra_ops.h"
#include "hlo/loop_ops.h"
#include "hlo/reduce_extra_ops.h"
#include "hlo/special_ops.h"
#include "ops/families.h"

#include "ops/incomplete_gamma_coefficients.inc"

#define LANCZOS_G 6.024680040776729583740234375
#define MAX_ITERATIONS 2000 /* the CPU's MAXITER */
#define TEMME_TERMS 25

/* The CPU's constants per type: its loops' tolerance, the log below which
 * exp underflows, and the continued fraction's rescaling threshold. */
typedef struct limits {
  double machep, maxlog, big, biginv;
} limits;

static const limits LIMITS_F64 = {1.11022302462515654042E-16, 7.09782712893383996843E2, 4.503599627370496e15,
                                  2.22044604925031308085e-16};
static const limits LIMITS_F32 = {5.9604644775390625E-8, 88.72283905206835, 16777216., 5.9604644775390625E-8};

/* ---- arithmetic shorthands ---- */

static hlo_value and_(hlo_builder* b, hlo_value x, hlo_value y) { return hlo_binary(b, "and", x, y); }
static hlo_value or_(hlo_builder* b, hlo_value x, hlo_value y) { return hlo_binary(b, "or", x, y); }
/* x, which XLA's simplifier may not look through: it folds (x + c1) + c2
 * into x + (c1 + c2), which rounds differently from the CPU. */
static hlo_value opaque(hlo_builder* b, hlo_value x) { return hlo_optimization_barrier(b, x); }

/* |x| < eps |y| (or <= when `or_equal`), the loops' stopping test. */
static hlo_value negligible(hlo_builder* b, hlo_value x, hlo_value y, double eps, bool or_equal) {
  return hlo_compare(b, or_equal ? "LE" : "LT", hlo_unary(b, "abs", x),
                     hlo_binary_constant(b, "multiply", hlo_unary(b, "abs", y), eps));
}

/* ---- loops that run until every element has stopped ---- */

#define MAX_STATE 12

/* One step of an elementwise iteration: next[0..n-1] from state[0..n-1]
 * (all of one shape), and the returned bool tensor says which elements stop
 * after this step. `iteration` (0-d i64) counts from 0. */
typedef hlo_value (*step_fn)(hlo_builder* b, hlo_value iteration, const hlo_value* state, hlo_value* next,
                             const limits* lim);

typedef struct iteration {
  step_fn step;
  const limits* lim;
  int n;     /* state values */
  int max;   /* steps at most */
  int chunk; /* steps between checks for an element still running */
} iteration;

/* Carried: the step count, which elements have stopped, then the state. */
enum { ITERATION, DONE, STATE };

/* A step; a stopped element keeps its state, as the CPU's loop breaks. */
static void run_step(hlo_builder* b, hlo_value step, const hlo_value* in, hlo_value* out,
                     const void* context) {
  (void)step;
  const iteration* it = context;
  hlo_value next[MAX_STATE];
  hlo_value stop = it->step(b, in[ITERATION], in + STATE, next, it->lim);
  for (int i = 0; i < it->n; i++)
    out[STATE + i] = next[i] == in[STATE + i] ? next[i] : hlo_select(b, in[DONE], in[STATE + i], next[i]);
  out[DONE] = or_(b, in[DONE], stop);
  out[ITERATION] = hlo_binary(b, "add", in[ITERATION], hlo_constant_i64(b, TPU_I64, 1));
}

/* A round: up to `chunk` more steps (fewer at the cap), none once every
 * element has stopped. */
static void run_round(hlo_builder* b, hlo_value step, const hlo_value* in, hlo_value* out,
                      const void* context) {
  (void)step;
  const iteration* it = context;
  hlo_value running = hlo_unary(b, "not", in[DONE]);
  running = hlo_reduce_all(b, running, hlo_constant(b, TPU_BOOL, 0), "or");
  hlo_value left = hlo_binary(b, "subtract", hlo_constant_i64(b, TPU_I64, it->max), in[ITERATION]);
  hlo_value count = hlo_binary(b, "minimum", left, hlo_constant_i64(b, TPU_I64, it->chunk));
  count = hlo_select(b, running, count, hlo_constant_i64(b, TPU_I64, 0));
  hlo_counted_loop(b, count, in, STATE + it->n, run_step, it, out);
}

/* Runs `it` from init (elements where `done` is set never step) until each
 * element stops or `max` steps; the final state into out. */
static void iterate(hlo_builder* b, const iteration* it, hlo_value done, const hlo_value* init,
                    hlo_value* out) {
  hlo_value carried[STATE + MAX_STATE], result[STATE + MAX_STATE];
  for (int i = 0; i < it->n; i++) out[i] = init[i];
  if (it->n > MAX_STATE) {
    hlo_fail(b, TPU_INTERNAL, "an iteration carries at most %d values, got %d", MAX_STATE, it->n);
    return;
  }
  carried[ITERATION] = hlo_constant_i64(b, TPU_I64, 0);
  carried[DONE] = done;
  for (int i = 0; i < it->n; i++) carried[STATE + i] = init[i];
  int rounds = (it->max + it->chunk - 1) / it->chunk;
  hlo_counted_loop(b, hlo_constant_i64(b, TPU_I64, rounds), carried, STATE + it->n, run_round, it, result);
  for (int i = 0; i < it->n; i++) out[i] = result[STATE + i];
}

/* The step count as a float of `like`'s type and shape, plus `offset`. */
static hlo_value count_as(hlo_builder* b, hlo_value iteration, int64_t offset, hlo_value like) {
  hlo_type shape = *hlo_type_of(b, like);
  hlo_value v = hlo_binary(b, "add", iteration, hlo_constant_i64(b, TPU_I64, offset));
  return hlo_broadcast_to(b, hlo_convert(b, v, shape.dtype), shape.rank, shape.dims);
}

/* ---- x^a e^-x / Gamma(a) ---- */

/* c[0] z^(n-1) + ... + c[n-1] by Horner's rule, or with the coefficients
 * taken in reverse (`reversed`). */
static hlo_value horner(hlo_builder* b, hlo_value z, const double* c, int n, bool reversed) {
  hlo_value r = hlo_constant_like(b, z, c[reversed ? n - 1 : 0]);
  for (int i = 1; i < n; i++)
    r = hlo_binary_constant(b, "add", hlo_multiply(b, r, z), c[reversed ? n - 1 - i : i]);
  return r;
}

/* Boost's Lanczos sum scaled by exp(-g), as a rational function of a, in
 * 1/a above 1 (ratevl). */
static hlo_value lanczos_sum(hlo_builder* b, hlo_value a) {
  int n = (int)(sizeof lanczos_num / sizeof lanczos_num[0]);
  hlo_value y = hlo_divide(b, hlo_constant_like(b, a, 1), a);
  hlo_value near = hlo_divide(b, horner(b, a, lanczos_num, n, false), horner(b, a, lanczos_den, n, false));
  hlo_value far = hlo_divide(b, horner(b, y, lanczos_num, n, true), horner(b, y, lanczos_den, n, true));
  return hlo_select(b, hlo_compare_constant(b, "GT", hlo_unary(b, "abs", a), 1), far, near);
}

/* q^a times e (> 2^70 where q^a is subnormal). In float32 q^a can be
 * subnormal, which the CPU keeps and XLA flushes to 0: there it is rounded
 * to the subnormals' spacing, 2^-149, by hand, from (q^(a/2))^2. */
static hlo_value power_times(hlo_builder* b, hlo_value q, hlo_value a, hlo_value e) {
  hlo_value normal = hlo_multiply(b, e, hlo_binary(b, "power", q, a));
  if (hlo_type_of(b, q)->dtype != TPU_F32) return normal;
  hlo_value half = hlo_binary(b, "power", q, hlo_binary_constant(b, "multiply", a, 0.5));
  hlo_value units = hlo_multiply(b, hlo_binary_constant(b, "multiply", half, 0x1p75),
                                 hlo_binary_constant(b, "multiply", half, 0x1p74)); /* q^a / 2^-149 */
  hlo_value subnormal = hlo_binary_constant(b, "multiply",
                                            hlo_multiply(b, hlo_binary_constant(b, "multiply", e, 0x1p-75),
                                                         hlo_unary(b, "round_nearest_even", units)),
                                            0x1p-74);
  return hlo_select(b, hlo_compare_constant(b, "LT", units, 0x1p23), subnormal, normal);
}

/* x^a e^-x / Gamma(a) (_igam_helper_fac): through lgamma when x is far
 * from a (0 below exp(-MAXLOG)), else by the Lanczos approximation, whose
 * exponent is reorganized for a or x of 200 and above. */
static hlo_value power_factor(hlo_builder* b, hlo_value a, hlo_value x, hlo_value lgamma_a,
                              const limits* lim) {
  hlo_value far = hlo_compare(b, "GT", hlo_unary(b, "abs", hlo_subtract(b, a, x)),
                              hlo_binary_constant(b, "multiply", hlo_unary(b, "abs", a), 0.4));
  hlo_value log_ax =
      hlo_subtract(b, hlo_subtract(b, hlo_multiply(b, a, hlo_unary(b, "log", x)), x), lgamma_a);
  hlo_value by_lgamma = hlo_select_constant(b, hlo_compare_constant(b, "LT", log_ax, -lim->maxlog), 0,
                                            hlo_unary(b, "exponential", log_ax));

  hlo_value fac = hlo_binary_constant(b, "add", opaque(b, hlo_binary_constant(b, "add", a, LANCZOS_G)), -0.5);
  hlo_value res =
      hlo_divide(b, hlo_unary(b, "sqrt", hlo_binary_constant(b, "divide", fac, M_E)), lanczos_sum(b, a));
  hlo_value small =
      power_times(b, hlo_divide(b, x, fac), a, hlo_unary(b, "exponential", hlo_subtract(b, a, x)));
  hlo_value numfac = hlo_divide(
      b,
      hlo_binary_constant(b, "add",
                          opaque(b, hlo_binary_constant(b, "add", hlo_subtract(b, x, a), -LANCZOS_G)), 0.5),
      fac);
  hlo_value exponent = hlo_add(b, hlo_multiply(b, a, hlo_subtract(b, hlo_log1p(b, numfac), numfac)),
                               hlo_divide(b, hlo_binary_constant(b, "multiply", x, 0.5 - LANCZOS_G), fac));
  /* float32: the CPU takes this exponential in double, so its product with
   * res may be a normal number where the exponential alone is not */
  hlo_value large = hlo_type_of(b, a)->dtype == TPU_F32
                        ? hlo_unary(b, "exponential", hlo_add(b, exponent, hlo_unary(b, "log", res)))
                        : hlo_multiply(b, res, hlo_unary(b, "exponential", exponent));
  hlo_value below_200 = and_(b, hlo_compare_constant(b, "LT", a, 200), hlo_compare_constant(b, "LT", x, 200));
  hlo_value by_lanczos = hlo_select(b, below_200, hlo_multiply(b, res, small), large);
  return hlo_select(b, far, by_lgamma, by_lanczos);
}

/* ---- the three sums, in one loop ---- */

/* Each element takes one of P's power series (DLMF 8.11.4), Q's series
 * for small x (8.7.3) or Q's continued fraction (8.9.2); they share one
 * loop, and the slots of its state: r, c, sum for P's series; fac, sum for
 * Q's; y, z, pkm1, pkm2, qkm1, qkm2, ans for the fraction. */
enum { SLOTS = 7, SUM_X = SLOTS, SUM_A, SUM_BY_Q_SERIES, SUM_BY_FRACTION, SUM_STATE };

/* P's series: c *= x / ++r; sum += c, to c <= MACHEP sum. */
static hlo_value p_series_step(hlo_builder* b, const hlo_value* in, hlo_value x, hlo_value* out,
                               const limits* lim) {
  out[0] = hlo_binary_constant(b, "add", in[0], 1);
  out[1] = hlo_multiply(b, in[1], hlo_divide(b, x, out[0]));
  out[2] = hlo_add(b, in[2], out[1]);
  return hlo_compare(b, "LE", out[1], hlo_binary_constant(b, "multiply", out[2], lim->machep));
}

/* Q's series: fac *= -x / n; sum += fac / (a + n), to a term at most
 * MACHEP of the sum. */
static hlo_value q_series_step(hlo_builder* b, hlo_value n, const hlo_value* in, hlo_value x, hlo_value a,
                               hlo_value* out, const limits* lim) {
  out[0] = hlo_multiply(b, in[0], hlo_divide(b, hlo_unary(b, "negate", x), n));
  hlo_value term = hlo_divide(b, out[0], hlo_add(b, a, n));
  out[1] = hlo_add(b, in[1], term);
  return negligible(b, term, out[1], lim->machep, true);
}

/* The fraction's next convergent p_k / q_k (k = c) by the three-term
 * recurrences, rescaled when p_k grows past BIG; to a convergent that moved
 * by at most MACHEP. */
static hlo_value fraction_step(hlo_builder* b, hlo_value c, const hlo_value* in, hlo_value* out,
                               const limits* lim) {
  enum { Y, Z, PKM1, PKM2, QKM1, QKM2, ANS };
  out[Y] = hlo_binary_constant(b, "add", in[Y], 1);
  out[Z] = hlo_binary_constant(b, "add", in[Z], 2);
  hlo_value yc = hlo_multiply(b, out[Y], c);
  hlo_value pk = hlo_subtract(b, hlo_multiply(b, in[PKM1], out[Z]), hlo_multiply(b, in[PKM2], yc));
  hlo_value qk = hlo_subtract(b, hlo_multiply(b, in[QKM1], out[Z]), hlo_multiply(b, in[QKM2], yc));
  hlo_value nonzero = hlo_compare_constant(b, "NE", qk, 0);
  hlo_value r = hlo_divide(b, pk, qk);
  hlo_value moved = hlo_unary(b, "abs", hlo_divide(b, hlo_subtract(b, in[ANS], r), r));
  moved = hlo_select(b, nonzero, moved, hlo_constant_like(b, moved, 1));
  out[ANS] = hlo_select(b, nonzero, r, in[ANS]);
  hlo_value big = hlo_compare_constant(b, "GT", hlo_unary(b, "abs", pk), lim->big);
  hlo_value shifted[4] = {pk, in[PKM1], qk, in[QKM1]};
  for (int i = 0; i < 4; i++)
    out[PKM1 + i] =
        hlo_select(b, big, hlo_binary_constant(b, "multiply", shifted[i], lim->biginv), shifted[i]);
  return hlo_compare_constant(b, "LE", moved, lim->machep);
}

/* One step of each; every element keeps its own sum's. */
static hlo_value sums_step(hlo_builder* b, hlo_value iteration, const hlo_value* in, hlo_value* out,
                           const limits* lim) {
  hlo_value x = in[SUM_X], by_q = in[SUM_BY_Q_SERIES], by_fraction = in[SUM_BY_FRACTION];
  const hlo_type shape = *hlo_type_of(b, x);
  hlo_value n = count_as(b, iteration, 1, x);
  hlo_value p[SLOTS], q[SLOTS], f[SLOTS];
  for (int i = 0; i < SLOTS; i++) p[i] = q[i] = f[i] = in[i];
  hlo_value p_stop = p_series_step(b, in, x, p, lim);
  hlo_value q_stop = q_series_step(b, n, in, x, in[SUM_A], q, lim);
  /* Q's series runs to n = 1999, the others 2000 steps */
  hlo_value q_last = hlo_compare(b, "GE", iteration, hlo_constant_i64(b, TPU_I64, MAX_ITERATIONS - 2));
  q_stop = or_(b, q_stop, hlo_broadcast_to(b, q_last, shape.rank, shape.dims));
  hlo_value f_stop = fraction_step(b, n, in, f, lim);
  for (int i = 0; i < SLOTS; i++) out[i] = hlo_select(b, by_fraction, f[i], hlo_select(b, by_q, q[i], p[i]));
  for (int i = SLOTS; i < SUM_STATE; i++) out[i] = in[i];
  return hlo_select(b, by_fraction, f_stop, hlo_select(b, by_q, q_stop, p_stop));
}

/* P(a, x) where P's series is taken, else Q(a, x) by Q's series (by_q) or
 * its fraction (by_fraction); elements marked `skip` run no step. factor
 * is x^a e^-x / Gamma(a), lgamma_1p lgamma(1 + a) where Q's series is
 * taken. As the CPU's helpers: P = factor / a times the series
 * (_igam_helper_series); Q = factor times the fraction
 * (_igamc_helper_continued_fraction); both 0 without a loop where factor
 * is; and Q = -expm1(a log x - lgamma(1 + a)) - x^a / Gamma(a) times Q's
 * series (_igamc_helper_series, which avoids the cancellation of 1 - P). */
static hlo_value sums(hlo_builder* b, hlo_value a, hlo_value x, hlo_value by_q, hlo_value by_fraction,
                      hlo_value factor, hlo_value lgamma_1p, hlo_value skip, const limits* lim) {
  static const iteration it = {sums_step, NULL, SUM_STATE, MAX_ITERATIONS, 16};
  iteration run = it;
  run.lim = lim;
  hlo_value one = hlo_constant_like(b, x, 1), zero = hlo_constant_like(b, x, 0);
  hlo_value y = hlo_subtract(b, one, a), z = hlo_binary_constant(b, "add", hlo_add(b, x, y), 1);
  hlo_value pkm1 = hlo_binary_constant(b, "add", x, 1), qkm1 = hlo_multiply(b, z, x);
  hlo_value p_init[SLOTS] = {a, one, one, zero, zero, zero, zero};
  hlo_value q_init[SLOTS] = {one, zero, zero, zero, zero, zero, zero};
  hlo_value f_init[SLOTS] = {y, z, pkm1, one, qkm1, x, hlo_divide(b, pkm1, qkm1)};
  hlo_value init[SUM_STATE], out[SUM_STATE];
  for (int i = 0; i < SLOTS; i++)
    init[i] = hlo_select(b, by_fraction, f_init[i], hlo_select(b, by_q, q_init[i], p_init[i]));
  init[SUM_X] = x;
  init[SUM_A] = a;
  init[SUM_BY_Q_SERIES] = by_q;
  init[SUM_BY_FRACTION] = by_fraction;
  hlo_value no_factor = and_(b, hlo_unary(b, "not", by_q), hlo_compare_constant(b, "EQ", factor, 0));
  iterate(b, &run, or_(b, skip, no_factor), init, out);

  hlo_value p = hlo_divide(b, hlo_multiply(b, out[2], factor), a);
  hlo_value f = hlo_multiply(b, out[6], factor);
  hlo_value a_log_x = hlo_multiply(b, a, hlo_unary(b, "log", x));
  hlo_value head =
      hlo_unary(b, "negate", hlo_unary(b, "exponential_minus_one", hlo_subtract(b, a_log_x, lgamma_1p)));
  /* lgamma(a) as lgamma(1 + a) - log a: the same to the rounding of log a */
  hlo_value scale = hlo_unary(b, "exponential",
                              hlo_subtract(b, a_log_x, hlo_subtract(b, lgamma_1p, hlo_unary(b, "log", a))));
  hlo_value q = hlo_subtract(b, head, hlo_multiply(b, scale, out[1]));
  return hlo_select(b, by_q, q, hlo_select_constant(b, no_factor, 0, hlo_select(b, by_fraction, f, p)));
}

/* ---- Temme's uniform asymptotic expansion, for large a near x ---- */

enum { T_SUM, T_AFAC, T_LAST, T_ETA, T_A, T_COUNT };

/* Carried through C_k's sum over the powers of eta (n = step + 1). */
enum { C_SUM, C_POWER, C_SETTLED, C_ETA, C_K, C_COUNT };

/* Adds d[k][n] eta^n to C_k unless an earlier term was below MACHEP of
 * the sum (the CPU's inner break). */
static void temme_power_step(hlo_builder* b, hlo_value step, const hlo_value* in, hlo_value* out,
                             const void* context) {
  const limits* lim = context;
  hlo_type shape = *hlo_type_of(b, in[C_ETA]);
  hlo_value row = hlo_binary(b, "multiply", in[C_K], hlo_constant_i64(b, TPU_I64, TEMME_TERMS));
  hlo_value index = hlo_binary(b, "add", row, hlo_binary(b, "add", step, hlo_constant_i64(b, TPU_I64, 1)));
  hlo_value table = hlo_constant_table(b, shape.dtype, &temme_d[0][0], TEMME_TERMS * TEMME_TERMS, 1);
  hlo_value d = hlo_broadcast_to(b, hlo_table_lookup(b, table, index), shape.rank, shape.dims);
  out[C_POWER] = hlo_multiply(b, in[C_ETA], in[C_POWER]);
  hlo_value term = hlo_multiply(b, d, out[C_POWER]);
  out[C_SUM] = hlo_select(b, in[C_SETTLED], in[C_SUM], hlo_add(b, in[C_SUM], term));
  out[C_SETTLED] = or_(b, in[C_SETTLED], negligible(b, term, out[C_SUM], lim->machep, false));
  out[C_ETA] = in[C_ETA];
  out[C_K] = in[C_K];
}

/* Term k of the expansion: C_k(eta) / a^k, with C_k summed over the powers
 * of eta until a term is below MACHEP of it; stops before a term that grew
 * (the series diverges from there) or after one below MACHEP of the sum. */
static hlo_value temme_step(hlo_builder* b, hlo_value k, const hlo_value* in, hlo_value* out,
                            const limits* lim) {
  hlo_value eta = in[T_ETA];
  hlo_type shape = *hlo_type_of(b, eta);
  hlo_value column_0 = hlo_constant_table(b, shape.dtype, &temme_d[0][0], TEMME_TERMS, TEMME_TERMS);
  hlo_value first = hlo_table_lookup(b, column_0, k);
  hlo_value init[C_COUNT] = {hlo_broadcast_to(b, first, shape.rank, shape.dims), hlo_constant_like(b, eta, 1),
                             hlo_filled(b, TPU_BOOL, shape.rank, shape.dims, 0), eta, k};
  hlo_value c[C_COUNT];
  hlo_counted_loop(b, hlo_constant_i64(b, TPU_I64, TEMME_TERMS - 1), init, C_COUNT, temme_power_step, lim, c);
  hlo_value term = hlo_multiply(b, c[C_SUM], in[T_AFAC]), size = hlo_unary(b, "abs", term);
  hlo_value grew = hlo_compare(b, "GT", size, in[T_LAST]);
  out[T_SUM] = hlo_select(b, grew, in[T_SUM], hlo_add(b, in[T_SUM], term));
  out[T_AFAC] = hlo_divide(b, in[T_AFAC], in[T_A]);
  out[T_LAST] = size;
  out[T_ETA] = eta;
  out[T_A] = in[T_A];
  return or_(b, grew, negligible(b, term, out[T_SUM], lim->machep, false));
}

/* P (lower) or Q by DLMF 8.12.3/8.12.4: erfc(-+eta sqrt(a/2)) / 2 -+
 * exp(-a eta^2 / 2) / sqrt(2 pi a) times the series in 1/a, where
 * eta^2 / 2 = x/a - 1 - log(x/a), eta of the sign of x - a
 * (_igam_helper_asymptotic_series). */
static hlo_value temme(hlo_builder* b, hlo_value a, hlo_value x, hlo_value skip, bool lower,
                       const limits* lim) {
  static const iteration it = {temme_step, NULL, T_COUNT, TEMME_TERMS, 5};
  iteration run = it;
  run.lim = lim;
  hlo_value lambda = hlo_divide(b, x, a), sigma = hlo_divide(b, hlo_subtract(b, x, a), a);
  /* (never below 0, which rounding could give for x within an ulp of a) */
  hlo_value eta = hlo_binary_constant(b, "multiply", hlo_subtract(b, hlo_log1p(b, sigma), sigma), -2);
  eta = hlo_unary(b, "sqrt", hlo_binary(b, "maximum", eta, hlo_constant_like(b, eta, 0)));
  eta = hlo_select(b, hlo_compare_constant(b, "LT", lambda, 1), hlo_unary(b, "negate", eta), eta);
  eta = hlo_select_constant(b, hlo_compare_constant(b, "EQ", lambda, 1), 0, eta);
  hlo_value init[T_COUNT] = {hlo_constant_like(b, x, 0), hlo_constant_like(b, x, 1),
                             hlo_constant_like(b, x, INFINITY), eta, a},
            out[T_COUNT];
  iterate(b, &run, skip, init, out);

  double sign = lower ? -1 : 1;
  hlo_value head = hlo_binary_constant(
      b, "multiply",
      hlo_erfc(b, hlo_multiply(b, hlo_binary_constant(b, "multiply", eta, sign),
                               hlo_unary(b, "sqrt", hlo_binary_constant(b, "multiply", a, 0.5)))),
      0.5);
  hlo_value decay =
      hlo_unary(b, "exponential",
                hlo_multiply(b, hlo_multiply(b, hlo_binary_constant(b, "multiply", a, -0.5), eta), eta));
  /* the CPU takes 2 pi in float (c10::pi<float>) in both precisions */
  hlo_value root = hlo_unary(b, "sqrt", hlo_binary_constant(b, "multiply", a, (double)(2 * (float)M_PI)));
  return hlo_add(
      b, head,
      hlo_divide(b, hlo_multiply(b, hlo_binary_constant(b, "multiply", decay, sign), out[T_SUM]), root));
}

/* ---- the two functions ---- */

/* P(a, x) (lower) or Q(a, x) for a and x of one float type and shape. */
static hlo_value incomplete_gamma(hlo_builder* b, hlo_value a, hlo_value x, bool lower, const limits* lim) {
  hlo_value away = hlo_divide(b, hlo_unary(b, "abs", hlo_subtract(b, x, a)), a); /* |x - a| / a */
  hlo_value middle =
      and_(b, and_(b, hlo_compare_constant(b, "GT", a, 20), hlo_compare_constant(b, "LT", a, 200)),
           hlo_compare_constant(b, "LT", away, 0.3));
  hlo_value large =
      and_(b, hlo_compare_constant(b, "GT", a, 200),
           hlo_compare(b, "LT", away, hlo_divide(b, hlo_constant_like(b, a, 4.5), hlo_unary(b, "sqrt", a))));
  hlo_value use_temme = or_(b, middle, large);

  /* Q's choice between 1 - the series of P, its own series and its
   * continued fraction; P takes the series unless x > 1 and x > a, where it
   * is 1 - Q (by the fraction above 1.1, Q's series below). x > 1.1 as the
   * CPU tests it, in double also for float32 (1.1f is above 1.1, so x = 1.1f
   * takes the fraction); its other double tests, x 1.1 < a and -0.4 / log x
   * < a, are float32 here, which only matters within an ulp of their edge,
   * where both methods agree to float32's rounding. */
  bool f32 = hlo_type_of(b, x)->dtype == TPU_F32;
  hlo_value above = hlo_compare_constant(b, f32 && (float)1.1 > 1.1 ? "GE" : "GT", x, f32 ? (float)1.1 : 1.1);
  hlo_value below_half = hlo_compare_constant(b, "LE", x, 0.5);
  hlo_value q_by_p = hlo_select(
      b, above, hlo_compare(b, "LT", x, a),
      hlo_select(
          b, below_half,
          hlo_compare(b, "LT", hlo_divide(b, hlo_constant_like(b, x, -0.4), hlo_unary(b, "log", x)), a),
          hlo_compare(b, "LT", hlo_binary_constant(b, "multiply", x, 1.1), a)));
  hlo_value p_by_q = and_(b, hlo_compare_constant(b, "GT", x, 1), hlo_compare(b, "GT", x, a));
  hlo_value by_series = lower ? hlo_unary(b, "not", p_by_q) : q_by_p; /* else by Q's own methods */
  hlo_value by_fraction = and_(b, hlo_unary(b, "not", by_series), above);
  hlo_value by_upper_series = and_(b, hlo_unary(b, "not", by_series), hlo_unary(b, "not", above));

  /* elements whose value is an edge value or NaN run no loop */
  hlo_value nan = or_(b, hlo_compare(b, "NE", a, a), hlo_compare(b, "NE", x, x));
  hlo_value edge =
      or_(b, or_(b, hlo_compare_constant(b, "LE", a, 0), hlo_compare_constant(b, "LE", x, 0)),
          or_(b, hlo_compare_constant(b, "EQ", a, INFINITY), hlo_compare_constant(b, "EQ", x, INFINITY)));
  hlo_value idle = or_(b, or_(b, nan, edge), use_temme);

  /* one log Gamma serves both: lgamma(1 + a) (1 + a rounded, as on the
   * CPU) for Q's series, lgamma(a) for the others */
  hlo_value lgamma =
      hlo_log_gamma(b, hlo_select(b, by_upper_series, opaque(b, hlo_binary_constant(b, "add", a, 1)), a));
  hlo_value factor = power_factor(b, a, x, lgamma, lim);
  hlo_value r = sums(b, a, x, by_upper_series, by_fraction, factor, lgamma, idle, lim);
  hlo_value v = hlo_select(b, by_series, lower ? r : hlo_subtract(b, hlo_constant_like(b, x, 1), r),
                           lower ? hlo_subtract(b, hlo_constant_like(b, x, 1), r) : r);
  v = hlo_select(b, use_temme, temme(b, a, x, hlo_unary(b, "not", use_temme), lower, lim), v);

  /* The edges, applied from the CPU's last test to its first. */
  double at_lower_end = lower ? 0 : 1, at_upper_end = lower ? 1 : 0;
  hlo_value x_inf = hlo_compare_constant(b, "EQ", x, INFINITY);
  v = hlo_select_constant(b, x_inf, at_upper_end, v);
  hlo_value a_inf = hlo_compare_constant(b, "EQ", a, INFINITY);
  v = hlo_select(b, a_inf, hlo_select_constant(b, x_inf, NAN, hlo_constant_like(b, v, at_lower_end)), v);
  v = hlo_select_constant(b, hlo_compare_constant(b, "EQ", x, 0), at_lower_end, v);
  v = hlo_select(
      b, hlo_compare_constant(b, "EQ", a, 0),
      hlo_select_constant(b, hlo_compare_constant(b, "GT", x, 0), at_upper_end, hlo_constant_like(b, v, NAN)),
      v);
  return hlo_select_constant(
      b, or_(b, hlo_compare_constant(b, "LT", a, 0), hlo_compare_constant(b, "LT", x, 0)), NAN, v);
}

/* igamma / igammac (and their in-place and out= forms, and the special_
 * aliases, which reach them) over self = a and other = x. */
static tpu_status lower_igamma(tpu_lowering* l) {
  const char* name = tpu_lower_op_name(l);
  int operands[2] = {0, 1};
  tpu_dtype t = tpu_lower_result_type(l, operands, 2);
  if (!tpu_dtype_is_float(t)) {
    tpu_lower_fail(
        l, TPU_UNIMPLEMENTED,
        "aten::%s is not implemented for %s and %s (result type %s), as on the CPU; it takes floating "
        "point tensors (float16, bfloat16, float32, float64)",
        name, tpu_dtype_name(tpu_lower_arg_type(l, 0).dtype), tpu_dtype_name(tpu_lower_arg_type(l, 1).dtype),
        tpu_dtype_name(t));
    return NULL;
  }
  t = tpu_dtype_compute(t);
  hlo_type shape = tpu_lower_broadcast_type(l, operands, 2, t);
  hlo_value a = tpu_lower_value_as(l, 0, &shape), x = tpu_lower_value_as(l, 1, &shape);
  const limits* lim = t == TPU_F64 ? &LIMITS_F64 : &LIMITS_F32;
  tpu_lower_set_output(l, 0, incomplete_gamma(tpu_lower_builder(l), a, x, strcmp(name, "igammac") != 0, lim));
  return NULL;
}

/* TPU_OP_COMPLEX: the lowering refuses complex numbers itself, saying that
 * the CPU does too. */
static const tpu_op_entry entries[] = {
    {"igamma", lower_igamma, TPU_OP_COMPLEX},
    {"igammac", lower_igamma, TPU_OP_COMPLEX},
};

TPU_OP_FAMILY(tpu_ops_incomplete_gamma, entries);
