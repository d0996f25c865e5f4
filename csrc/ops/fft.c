/* PyTorch's three FFT primitives, _fft_r2c, _fft_c2r and _fft_c2c (each
 * with its out= overload): torch.fft.*, torch.stft and torch.istft are
 * written in them, and so are their backward formulas.
 *
 * StableHLO's fft transforms a value's last one to three dims, so a
 * transform moves its dims to the end (the others keep their order), runs
 * in chunks of at most three and moves them back. Its inverse transforms
 * already divide by the product of the lengths and its forward ones do not
 * scale; PyTorch's normalization (none, 1/sqrt(n) or 1/n) is applied
 * relative to that. c2r runs its complex transforms first and the real one
 * alone over the last dim, as PyTorch's CPU kernel does, so a spectrum that
 * is not Hermitian gives the CPU's result too. */
#include <math.h>

#include "hlo/complex_ops.h"
#include "hlo/conv_ops.h"
#include "ops/families.h"

/* PyTorch's fft_norm_mode. */
enum { NORM_NONE = 0, NORM_BY_ROOT_N = 1, NORM_BY_N = 2 };

/* The transformed dims of argument 1, wrapped into [0, rank). */
typedef struct fft_dims {
  int count;
  int64_t dims[TPU_MAX_RANK];
} fft_dims;

/* Reads and checks the dims and the normalization; false after failing. */
static bool read_dims(tpu_lowering* l, const hlo_type* in, bool need_one, fft_dims* out) {
  const char* op = tpu_lower_op_name(l);
  const int64_t* items;
  int count = tpu_lower_int_list(l, 1, &items);
  char shape[96];
  hlo_shape_print(in, shape, sizeof shape);
  if (count > in->rank || (need_one && count == 0)) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "aten::%s: cannot transform %d dims of a tensor of shape %s; "
                   "name between %d and %d distinct dims", op, count, shape, need_one ? 1 : 0, in->rank);
    return false;
  }
  out->count = count;
  for (int i = 0; i < count; i++) {
    int64_t d = items[i] < 0 ? items[i] + in->rank : items[i];
    if (d < 0 || d >= in->rank) {
      tpu_lower_fail(l, TPU_OUT_OF_RANGE, "aten::%s: dim %lld is out of range for a tensor of shape %s",
                     op, (long long)items[i], shape);
      return false;
    }
    for (int j = 0; j < i; j++) {
      if (out->dims[j] == d) {
        tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "aten::%s: dim %lld is named twice; each transformed dim must "
                       "be distinct", op, (long long)d);
        return false;
      }
    }
    out->dims[i] = d;
  }
  int64_t norm = tpu_lower_int(l, 2, NORM_NONE);
  if (norm < NORM_NONE || norm > NORM_BY_N) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "aten::%s: normalization %lld is not one of 0 (none), "
                   "1 (by 1/sqrt(n)) or 2 (by 1/n)", op, (long long)norm);
    return false;
  }
  return true;
}

/* Fails unless the input's dtype is one of the two the op takes. */
static bool check_dtype(tpu_lowering* l, tpu_dtype dtype, bool complex) {
  tpu_dtype want32 = complex ? TPU_C64 : TPU_F32, want64 = complex ? TPU_C128 : TPU_F64;
  if (dtype == want32 || dtype == want64) return true;
  tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "aten::%s: unsupported dtype %s; takes %s or %s (convert the input first)",
                 tpu_lower_op_name(l), tpu_dtype_name(dtype), tpu_dtype_name(want32), tpu_dtype_name(want64));
  return false;
}

/* One StableHLO fft over x's dims[0..count) (count 1 to 3), the last one
 * listed innermost; `last_length` is the real length of an IRFFT's last dim. */
static hlo_value transform(hlo_builder* b, hlo_value x, hlo_fft_kind kind, const int64_t* dims, int count,
                           int64_t last_length) {
  hlo_type t = *hlo_type_of(b, x);
  int64_t perm[TPU_MAX_RANK], back[TPU_MAX_RANK], lengths[3];
  int k = 0;
  for (int d = 0; d < t.rank; d++) {
    bool moved = false;
    for (int i = 0; i < count; i++) moved = moved || dims[i] == d;
    if (!moved) perm[k++] = d;
  }
  for (int i = 0; i < count; i++) {
    perm[k++] = dims[i];
    lengths[i] = t.dims[dims[i]];
  }
  if (kind == HLO_IRFFT) lengths[count - 1] = last_length;
  bool identity = true;
  for (int d = 0; d < t.rank; d++) {
    back[perm[d]] = d;
    identity = identity && perm[d] == d;
  }
  if (!identity) x = hlo_transpose(b, x, perm);
  x = hlo_fft(b, x, kind, lengths, count);
  return identity ? x : hlo_transpose(b, x, back);
}

/* Complex transforms (HLO_FFT or HLO_IFFT) over dims[0..count), up to
 * three at a time. */
static hlo_value complex_transform(hlo_builder* b, hlo_value x, hlo_fft_kind kind, const int64_t* dims, int count) {
  for (int i = 0; i < count; i += 3) x = transform(b, x, kind, dims + i, count - i < 3 ? count - i : 3, 0);
  return x;
}

/* Applies normalization `norm` over a signal of n elements to a forward
 * transform's unscaled result or an inverse one's result divided by n. */
static hlo_value normalize(hlo_builder* b, hlo_value x, int64_t norm, double n, bool inverse) {
  double scale = inverse ? n : 1;
  if (norm == NORM_BY_ROOT_N) scale /= sqrt(n);
  if (norm == NORM_BY_N) scale /= n;
  return scale == 1 ? x : hlo_binary_constant(b, "multiply", x, scale);
}

static double signal_size(const hlo_type* t, const fft_dims* f) {
  double n = 1;
  for (int i = 0; i < f->count; i++) n *= (double)t->dims[f->dims[i]];
  return n;
}

/* _fft_r2c(self, dim, normalization, onesided): the forward transform of a
 * real tensor; onesided keeps dim[-1]'s first n / 2 + 1 entries. */
static tpu_status lower_r2c(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type t = tpu_lower_arg_type(l, 0);
  fft_dims f;
  if (!check_dtype(l, t.dtype, false) || !read_dims(l, &t, true, &f)) return NULL;
  hlo_value x = tpu_lower_tensor(l, 0);
  if (tpu_lower_bool(l, 3, true)) {
    /* RFFT over up to three dims halves the last of them and transforms the
     * others fully; any further dims are complex transforms after it. */
    int real_count = f.count < 3 ? f.count : 3, rest = f.count - real_count;
    x = transform(b, x, HLO_RFFT, f.dims + rest, real_count, 0);
    x = complex_transform(b, x, HLO_FFT, f.dims, rest);
  } else {
    x = complex_transform(b, hlo_convert(b, x, tpu_dtype_complex_of(t.dtype)), HLO_FFT, f.dims, f.count);
  }
  tpu_lower_set_output(l, 0, normalize(b, x, tpu_lower_int(l, 2, NORM_NONE), signal_size(&t, &f), false));
  return NULL;
}

/* _fft_c2r(self, dim, normalization, last_dim_size): the inverse transform
 * of a Hermitian half spectrum to a real tensor whose dim[-1] has
 * last_dim_size entries, of which the input holds the first
 * last_dim_size / 2 + 1 (a longer input is cropped, a shorter one padded
 * with zeros). As in PyTorch's CPU kernel, the imaginary parts of that
 * dim's zero-frequency entry and (for an even size) its Nyquist entry are
 * ignored: a real signal's spectrum has none there. */
static tpu_status lower_c2r(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type t = tpu_lower_arg_type(l, 0);
  fft_dims f;
  if (!check_dtype(l, t.dtype, true) || !read_dims(l, &t, true, &f)) return NULL;
  int64_t size = tpu_lower_int(l, 3, 0);
  if (size < 1) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "aten::_fft_c2r: last_dim_size %lld must be at least 1",
                   (long long)size);
    return NULL;
  }
  int last = (int)f.dims[f.count - 1];
  int64_t half = size / 2 + 1;
  hlo_value x = tpu_lower_tensor(l, 0);

  int64_t start[TPU_MAX_RANK] = {0}, low[TPU_MAX_RANK] = {0}, high[TPU_MAX_RANK] = {0}, none[TPU_MAX_RANK] = {0};
  int64_t limit[TPU_MAX_RANK], step[TPU_MAX_RANK];
  for (int d = 0; d < t.rank; d++) {
    limit[d] = t.dims[d];
    step[d] = 1;
  }
  if (t.dims[last] > half) {
    limit[last] = half;
    x = hlo_slice(b, x, start, limit, step);
  } else if (t.dims[last] < half) {
    high[last] = half - t.dims[last];
    x = hlo_pad(b, x, hlo_constant(b, t.dtype, 0), low, high, none);
  }
  x = complex_transform(b, x, HLO_IFFT, f.dims, f.count - 1);

  /* Imaginary parts: entries 1 .. the Nyquist entry (excluded when the size
   * is even), zeros either side. */
  hlo_value re = hlo_real(b, x), im = hlo_imag(b, x);
  int64_t kept = half - 1 - (size % 2 == 0);
  if (kept <= 0) {
    im = hlo_constant_like(b, im, 0);
  } else {
    start[last] = 1;
    limit[last] = 1 + kept;
    low[last] = 1;
    high[last] = half - 1 - kept;
    im = hlo_pad(b, hlo_slice(b, im, start, limit, step), hlo_constant(b, tpu_dtype_real_part(t.dtype), 0), low, high,
                 none);
  }
  x = transform(b, hlo_complex(b, re, im), HLO_IRFFT, f.dims + f.count - 1, 1, size);

  hlo_type out = t;
  out.dims[last] = size;
  tpu_lower_set_output(l, 0, normalize(b, x, tpu_lower_int(l, 2, NORM_NONE), signal_size(&out, &f), true));
  return NULL;
}

/* _fft_c2c(self, dim, normalization, forward): the complex transform; no
 * dims leaves the input as it is. */
static tpu_status lower_c2c(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type t = tpu_lower_arg_type(l, 0);
  fft_dims f;
  if (!check_dtype(l, t.dtype, true) || !read_dims(l, &t, false, &f)) return NULL;
  bool forward = tpu_lower_bool(l, 3, true);
  hlo_value x = complex_transform(b, tpu_lower_tensor(l, 0), forward ? HLO_FFT : HLO_IFFT, f.dims, f.count);
  tpu_lower_set_output(l, 0, normalize(b, x, tpu_lower_int(l, 2, NORM_NONE), signal_size(&t, &f), !forward));
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"_fft_c2c", lower_c2c, TPU_OP_COMPLEX},
    {"_fft_c2r", lower_c2r, TPU_OP_COMPLEX},
    {"_fft_r2c", lower_r2c, TPU_OP_COMPLEX},
};

TPU_OP_FAMILY(tpu_ops_fft, entries);
