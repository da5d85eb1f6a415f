/* The exact samplers' per-proposal float filter, fused into one pass (optional).

   dpframe.privacy.exact draws each discrete Laplace / discrete Gaussian proposal from one
   64-bit ChaCha20 word and decides it with a floating-point filter that only answers when
   a rigorous enclosure puts the exact comparison on one side (docs/samplers.md, "How the
   exact draws are fast"). This module computes the same filter in one pass over the word
   array instead of a dozen numpy passes. It never decides an outcome itself beyond what
   the filter proves: whatever it cannot decide is marked and settled by the Python code
   (the second inversion filter, the refined comparison and the exact integer path), so
   the output is the same function of the same words as the pure-numpy path.

   filter(words, x, status, scale, slack, quick_min, m, coefficient, bounds, stage)

     words   uint64[n] (read)   the proposals' words
     x       float64[n] (write on stage 0, read/write on stage 1)
                                 the signed magnitude (sign = bit 0 of the word), an
                                 exact integer as a double
     status  uint8[n] (write)   0 rejected, 1 accepted, 2 inversion undecided (x not
                                 set), 3 the Gaussian's table undecided
     scale, slack               the geometric's scale s and the bound 2^-36 s
     quick_min                  words below this (U < 2^-12) are left to the second filter
     m, coefficient             the Gaussian's m and b/(2a); coefficient < 0 for Laplace
     bounds  float64[2^13]      below[k], above[k] interleaved (index: word & 0x1ffe)
     stage   0: invert then accept; 1: accept the magnitudes already in x (unsigned)

   Returns the number of undecided proposals (status 2 or 3).

   compact(x, status, out) writes the accepted values (status 1, the proposal -0
   excluded) as int64 into out, at most len(out) of them, and returns how many.

   refine(...) settles most of the Gaussian's table-undecided proposals, place(...) puts
   a release on its grid and checks it finite (both below); libm(...) exposes the filter's log and exp for the tests.

   log() and exp() are the C library's, and the quick filter's logs libmvec's AVX2 log
   where built with it (logs() below); the filter assumes relative errors below 2^-42
   and 2^-32 (glibc's are below 1 ulp, 2^-52; libmvec's a few ulp). Compiled with -ffp-contract=off so that
   every operation is rounded as written, as in numpy. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define TABLE_MASK UINT64_C(0x1ffe) /* bits 1..12 of the word, times 2 */
#define ONE_BITS UINT64_C(0x3FF0000000000001)

static void logs(const double *in, double *out, Py_ssize_t n);

static int
check(Py_buffer *view, Py_ssize_t itemsize, const char *what)
{
    if (view->itemsize != itemsize || view->len % itemsize) {
        PyErr_Format(PyExc_TypeError, "%s: wrong item size", what);
        return -1;
    }
    return 0;
}

static void
release(Py_buffer *a, Py_buffer *b, Py_buffer *c, Py_buffer *d)
{
    PyBuffer_Release(a);
    PyBuffer_Release(b);
    PyBuffer_Release(c);
    PyBuffer_Release(d);
}

/* The inversion's second filter (exact.py, _Geometric.invert) with its bound doubled:
   from the 51-bit prefix k, y = -s ln((k + 1/2)/2^51) and err = s/k + 2^-40 y + 2^-48 s;
   decided when no integer lies within 2 err of y. Doubling makes this filter decide only
   where numpy's would too (the two logs differ by far less than err), so the elements
   left to numpy's, and its exact fallback's draws, are the numpy path's. */
static int
second_filter(uint64_t k, double scale, double minus_scale, double *v)
{
    if (k == 0)
        return 0;
    double kd = (double)k;
    double y = log((kd + 0.5) * 0x1p-51) * minus_scale;
    double err = scale / kd;
    err += y * 0x1p-40 + scale * 0x1p-48;
    err *= 2;
    double lo = floor(y - err);
    if (!(y + err < lo + 1))
        return 0;
    *v = lo;
    return 1;
}

static PyObject *
exactc_filter(PyObject *self, PyObject *args)
{
    Py_buffer wv, xv, sv, bv;
    double scale, slack, m, coefficient;
    unsigned long long quick_min;
    int stage;
    if (!PyArg_ParseTuple(args, "y*w*w*ddKddy*i", &wv, &xv, &sv, &scale, &slack,
                          &quick_min, &m, &coefficient, &bv, &stage))
        return NULL;
    Py_ssize_t n = wv.len / 8;
    if (check(&wv, 8, "words") || check(&xv, 8, "x") || check(&sv, 1, "status") ||
        check(&bv, 8, "bounds") || xv.len / 8 != n || sv.len != n ||
        bv.len / 8 < (Py_ssize_t)(TABLE_MASK + 2)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "filter: inconsistent buffer sizes");
        release(&wv, &xv, &sv, &bv);
        return NULL;
    }
    const uint64_t *words = (const uint64_t *)wv.buf;
    double *x = (double *)xv.buf;
    uint8_t *status = (uint8_t *)sv.buf;
    const double *bounds = (const double *)bv.buf;
    const double minus_scale = -scale;
    const int gaussian = coefficient >= 0;
    Py_ssize_t undecided = 0;

    Py_BEGIN_ALLOW_THREADS
    enum { BLOCK = 256 };
    double us[BLOCK], logu[BLOCK]; /* a block's u and ln u (logs: vectorised) */
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t w = words[i];
        double v;
        if (stage == 0) {
            /* u = (2k + 1)/2^52 for the top 51 bits k: 2k + 1 as the mantissa of a
               double in [1, 2), minus 1 (exact); y = -s ln u within slack/3 of -s ln U
               for every U of the interval when U >= 2^-12 (docs/samplers.md). The
               block's u and their logs are computed when i enters it. */
            Py_ssize_t at = i % BLOCK;
            if (at == 0) {
                Py_ssize_t size = n - i < BLOCK ? n - i : BLOCK;
                for (Py_ssize_t j = 0; j < size; j++) {
                    uint64_t bits = (words[i + j] >> 12) | ONE_BITS;
                    memcpy(&us[j], &bits, sizeof bits);
                    us[j] -= 1.0;
                }
                logs(us, logu, size);
            }
            double y = logu[at] * minus_scale;
            /* y - slack >= 0 and y + slack < 2^31 (U >= 2^-52, s <= 2^25): the
               conversion to an integer is floor */
            double a = y - slack, b = y + slack;
            if (w >= quick_min && a >= 0 && (int64_t)a == (int64_t)b)
                v = (double)(int64_t)a;
            else if (!second_filter(w >> 13, scale, minus_scale, &v)) {
                status[i] = 2;
                undecided++;
                continue;
            }
        } else {
            v = x[i];
        }
        /* bit 0 of the word is the sign, set on the double (a kept -0.0 is the
           rejected proposal -0, dropped by compact) */
        uint64_t vb;
        memcpy(&vb, &v, sizeof vb);
        vb |= w << 63;
        memcpy(&x[i], &vb, sizeof vb);
        if (!gaussian) {
            status[i] = 1;
            continue;
        }
        /* accept when (|y| - m)^2 b/(2a) < below[k], reject when > above[k], for the
           12-bit prefix k of the acceptance uniform (the tables' argument) */
        double g = v - m;
        g *= g;
        g *= coefficient;
        uint64_t pair = w & TABLE_MASK;
        int accept = g < bounds[pair], unsure = !accept & (g <= bounds[pair + 1]);
        status[i] = (uint8_t)(accept | (unsure * 3));
        undecided += unsure;
    }
    Py_END_ALLOW_THREADS

    release(&wv, &xv, &sv, &bv);
    return PyLong_FromSsize_t(undecided);
}

/* refine(words, more, x, status, m, coefficient): the Gaussian's acceptances its table
   left undecided (status 3), each with 52 more bits (low bits of ``more``): U's 64-bit
   prefix is the word's 12 table bits then those, u = prefix/2^64, e = exp(-gamma);
   accept when u + 2^-62 <= e (1 - 2^-29), reject when u > e (1 + 2^-29): the bounds of
   exact.py's _below_exp doubled, so that this decides only where it would too. Returns
   how many stay undecided. */
static PyObject *
exactc_refine(PyObject *self, PyObject *args)
{
    Py_buffer wv, mv, xv, sv;
    double m, coefficient;
    if (!PyArg_ParseTuple(args, "y*y*y*w*dd", &wv, &mv, &xv, &sv, &m, &coefficient))
        return NULL;
    Py_ssize_t n = wv.len / 8;
    if (check(&wv, 8, "words") || check(&mv, 8, "more") || check(&xv, 8, "x") ||
        check(&sv, 1, "status") || mv.len / 8 != n || xv.len / 8 != n || sv.len != n) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "refine: inconsistent buffer sizes");
        release(&wv, &mv, &xv, &sv);
        return NULL;
    }
    const uint64_t *words = (const uint64_t *)wv.buf, *more = (const uint64_t *)mv.buf;
    const double *x = (const double *)xv.buf;
    uint8_t *status = (uint8_t *)sv.buf;
    Py_ssize_t left = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (status[i] != 3)
            continue;
        uint64_t prefix = ((words[i] & TABLE_MASK) >> 1) << 52 | (more[i] & ((UINT64_C(1) << 52) - 1));
        double u = (double)prefix * 0x1p-64;
        double g = fabs(x[i]) - m;
        g *= g;
        g *= coefficient;
        double e = exp(-g);
        if (u + 0x1p-62 <= e * (1 - 0x1p-29))
            status[i] = 1;
        else if (u > e * (1 + 0x1p-29))
            status[i] = 0;
        else
            left++;
    }
    release(&wv, &mv, &xv, &sv);
    return PyLong_FromSsize_t(left);
}

static PyObject *
exactc_compact(PyObject *self, PyObject *args)
{
    Py_buffer xv, sv, ov;
    if (!PyArg_ParseTuple(args, "y*y*w*", &xv, &sv, &ov))
        return NULL;
    Py_ssize_t n = xv.len / 8, capacity = ov.len / 8, got = 0;
    if (check(&xv, 8, "x") || check(&sv, 1, "status") || check(&ov, 8, "out") ||
        sv.len != n) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "compact: inconsistent buffer sizes");
        PyBuffer_Release(&xv);
        PyBuffer_Release(&sv);
        PyBuffer_Release(&ov);
        return NULL;
    }
    const double *x = (const double *)xv.buf;
    const uint8_t *status = (const uint8_t *)sv.buf;
    int64_t *out = (int64_t *)ov.buf;
    Py_BEGIN_ALLOW_THREADS
    /* without a branch on the (random) status: every value is written at out[got], and
       got moves on only for a kept one (x holds a set magnitude for every status 0 or 1) */
    for (Py_ssize_t i = 0; i < n && got < capacity; i++) {
        uint64_t bits;
        memcpy(&bits, &x[i], sizeof bits);
        out[got] = (int64_t)x[i];
        got += (status[i] == 1) & (bits != UINT64_C(0x8000000000000000));
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&xv);
    PyBuffer_Release(&sv);
    PyBuffer_Release(&ov);
    return PyLong_FromSsize_t(got);
}

/* rint(y) in the default rounding mode without a library call: for |y| < 2^52 the sum
   y + 2^52 (y - 2^52 when y < 0) has a unit ulp, so it is y rounded to an integer, ties
   to even (2^52 is even), and subtracting 2^52 back is exact. Larger doubles are integers
   already. It differs from rint only in giving +0.0 for y in (-1/2, 0] (-0.0 - 2^52 + 2^52
   is +0.0 too), which place's sum
   k + Z (Z a double holding an integer, never -0.0) turns into +0.0 either way. */
static inline double
round_even(double y)
{
    const double big = 0x1p52;
    if (!(fabs(y) < big))
        return y;
    const double shift = copysign(big, y); /* no branch on the (random) sign */
    return (y + shift) - shift;
}

/* place(value, noise, out, gamma, limit): a release on a grid in one pass,
   out = (clip(rint(value/gamma), -limit, limit) + noise) * gamma, each step rounded as
   noise.py's GridNoise.place rounds it (k + Z added in int64 when |Z| >= 2^53). value/gamma
   is value * (1/gamma) when gamma is a power of two (the same real number, rounded
   once). out may be the noise's or the value's own buffer (each element is read before it
   is written). Returns whether every value was finite (checked in the same pass; a
   non-finite value gives a meaningless out, which the caller discards). */
static PyObject *
exactc_place(PyObject *self, PyObject *args)
{
    Py_buffer vv, nv, ov;
    double gamma, limit;
    if (!PyArg_ParseTuple(args, "y*y*w*dd", &vv, &nv, &ov, &gamma, &limit))
        return NULL;
    Py_ssize_t n = vv.len / 8;
    if (check(&vv, 8, "value") || check(&nv, 8, "noise") || check(&ov, 8, "out") ||
        nv.len != vv.len || ov.len != vv.len) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "place: inconsistent buffer sizes");
        PyBuffer_Release(&vv);
        PyBuffer_Release(&nv);
        PyBuffer_Release(&ov);
        return NULL;
    }
    const double *value = (const double *)vv.buf;
    const int64_t *noise = (const int64_t *)nv.buf;
    double *out = (double *)ov.buf;
    const int64_t exact_limit = INT64_C(1) << 53;
    int exponent;
    const double inverse = 1.0 / gamma;
    const int power_of_two = frexp(gamma, &exponent) == 0.5 && isfinite(inverse) &&
                             inverse * gamma == 1.0 && frexp(inverse, &exponent) == 0.5;
    int all = 1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        double v = value[i];
        all &= isfinite(v) != 0;
        double k = round_even(power_of_two ? v * inverse : v / gamma);
        k = k < -limit ? -limit : (k > limit ? limit : (k == k ? k : 0.0)); /* NaN: 0 */
        int64_t z = noise[i];
        double sum = (z < exact_limit && z > -exact_limit) ? k + (double)z
                                                            : (double)((int64_t)k + z);
        out[i] = sum * gamma;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&vv);
    PyBuffer_Release(&nv);
    PyBuffer_Release(&ov);
    return PyBool_FromLong(all);
}

/* finite(value): whether every element is finite (one pass, no temporary). */
static PyObject *
exactc_finite(PyObject *self, PyObject *args)
{
    Py_buffer vv;
    if (!PyArg_ParseTuple(args, "y*", &vv))
        return NULL;
    if (check(&vv, 8, "value")) {
        PyBuffer_Release(&vv);
        return NULL;
    }
    const double *value = (const double *)vv.buf;
    Py_ssize_t n = vv.len / 8;
    int all = 1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++)
        all &= isfinite(value[i]) != 0;
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&vv);
    return PyBool_FromLong(all);
}

/* ChaCha20 words, the stream randomgen's ChaCha(rounds=20) produces.

   randomgen keeps a 128-bit counter of 32-bit outputs, ctr = (ctr1, ctr0): output ctr is
   word ctr mod 16 of the block whose 128-bit number B = ctr / 16 fills input words 12..15
   (low to high); its random_raw word is output ctr | output ctr+1 << 32. The blocks are
   independent (counter mode), so this computes them eight at a time (AVX2, when the CPU
   has it) or one at a time, then lays out the same 64-bit words. exact.py reads the
   state, calls this, and writes back the advanced counter and the last block, exactly as
   random_raw would leave them; tests/core/test_exact_kernel.py checks the words and the
   state against random_raw. */

static const uint32_t SIGMA[4] = {0x61707865, 0x3320646e, 0x79622d32, 0x6b206574};

#define ROTL32(x, n) (((x) << (n)) | ((x) >> (32 - (n))))
#define QUARTER(a, b, c, d)                                                              \
    a += b; d ^= a; d = ROTL32(d, 16); c += d; b ^= c; b = ROTL32(b, 12);                \
    a += b; d ^= a; d = ROTL32(d, 8); c += d; b ^= c; b = ROTL32(b, 7)

static void
chacha_block(const uint32_t *key, uint64_t lo, uint64_t hi, uint32_t *out)
{
    uint32_t in[16], x[16];
    memcpy(in, SIGMA, sizeof SIGMA);
    memcpy(in + 4, key, 8 * sizeof(uint32_t));
    in[12] = (uint32_t)lo;
    in[13] = (uint32_t)(lo >> 32);
    in[14] = (uint32_t)hi;
    in[15] = (uint32_t)(hi >> 32);
    memcpy(x, in, sizeof x);
    for (int r = 0; r < 20; r += 2) {
        QUARTER(x[0], x[4], x[8], x[12]);
        QUARTER(x[1], x[5], x[9], x[13]);
        QUARTER(x[2], x[6], x[10], x[14]);
        QUARTER(x[3], x[7], x[11], x[15]);
        QUARTER(x[0], x[5], x[10], x[15]);
        QUARTER(x[1], x[6], x[11], x[12]);
        QUARTER(x[2], x[7], x[8], x[13]);
        QUARTER(x[3], x[4], x[9], x[14]);
    }
    for (int i = 0; i < 16; i++)
        out[i] = x[i] + in[i];
}

#include "../_avx2.h"
#ifdef HAVE_AVX2_PATH

#define AVX_ROT16(v)                                                                    \
    _mm256_shuffle_epi8(v, _mm256_set_epi8(13, 12, 15, 14, 9, 8, 11, 10, 5, 4, 7, 6, 1, \
                                           0, 3, 2, 13, 12, 15, 14, 9, 8, 11, 10, 5, 4, \
                                           7, 6, 1, 0, 3, 2))
#define AVX_ROT8(v)                                                                     \
    _mm256_shuffle_epi8(v, _mm256_set_epi8(14, 13, 12, 15, 10, 9, 8, 11, 6, 5, 4, 7, 2, \
                                           1, 0, 3, 14, 13, 12, 15, 10, 9, 8, 11, 6, 5, \
                                           4, 7, 2, 1, 0, 3))
#define AVX_ROT(v, n) _mm256_or_si256(_mm256_slli_epi32(v, n), _mm256_srli_epi32(v, 32 - (n)))
#define AVX_QUARTER(a, b, c, d)                                                          \
    a = _mm256_add_epi32(a, b); d = AVX_ROT16(_mm256_xor_si256(d, a));                   \
    c = _mm256_add_epi32(c, d); b = AVX_ROT(_mm256_xor_si256(b, c), 12);                 \
    a = _mm256_add_epi32(a, b); d = AVX_ROT8(_mm256_xor_si256(d, a));                    \
    c = _mm256_add_epi32(c, d); b = AVX_ROT(_mm256_xor_si256(b, c), 7)

/* Blocks lo, ..., lo + 7 (no carry into hi: the caller checks) into out[8][16]. */
__attribute__((target("avx2"))) static void
chacha_blocks8(const uint32_t *key, uint64_t lo, uint64_t hi, uint32_t *out)
{
    __m256i in[16], x[16];
    for (int i = 0; i < 4; i++)
        in[i] = _mm256_set1_epi32((int)SIGMA[i]);
    for (int i = 0; i < 8; i++)
        in[4 + i] = _mm256_set1_epi32((int)key[i]);
    uint32_t c12[8], c13[8];
    for (int l = 0; l < 8; l++) {
        c12[l] = (uint32_t)(lo + l);
        c13[l] = (uint32_t)((lo + l) >> 32);
    }
    in[12] = _mm256_loadu_si256((const __m256i *)c12);
    in[13] = _mm256_loadu_si256((const __m256i *)c13);
    in[14] = _mm256_set1_epi32((int)(uint32_t)hi);
    in[15] = _mm256_set1_epi32((int)(uint32_t)(hi >> 32));
    for (int i = 0; i < 16; i++)
        x[i] = in[i];
    for (int r = 0; r < 20; r += 2) {
        AVX_QUARTER(x[0], x[4], x[8], x[12]);
        AVX_QUARTER(x[1], x[5], x[9], x[13]);
        AVX_QUARTER(x[2], x[6], x[10], x[14]);
        AVX_QUARTER(x[3], x[7], x[11], x[15]);
        AVX_QUARTER(x[0], x[5], x[10], x[15]);
        AVX_QUARTER(x[1], x[6], x[11], x[12]);
        AVX_QUARTER(x[2], x[7], x[8], x[13]);
        AVX_QUARTER(x[3], x[4], x[9], x[14]);
    }
    uint32_t lanes[16][8];
    for (int i = 0; i < 16; i++)
        _mm256_storeu_si256((__m256i *)lanes[i], _mm256_add_epi32(x[i], in[i]));
    for (int l = 0; l < 8; l++)
        for (int i = 0; i < 16; i++)
            out[16 * l + i] = lanes[i][l];
}
#endif

/* log(in[i]) into out[i]: with glibc's vector log (libmvec's AVX2 variant, four values
   per call, about three times the C library's scalar rate) where the module was linked
   against libmvec (setup.py: x86-64 Linux with glibc) and the CPU has AVX2, else the C
   library's log. Both are well within the filter's assumption (relative error below
   2^-42; glibc documents a few ulp at most for libmvec, under 1 ulp for log), which
   tests/core/test_exact_filter.py measures through libm(), computed here too. */
#if defined(DPFRAME_LIBMVEC) && defined(HAVE_AVX2_PATH)
__m256d _ZGVdN4v_log(__m256d);

__attribute__((target("avx2"))) static void
logs_avx2(const double *in, double *out, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    for (; i + 4 <= n; i += 4)
        _mm256_storeu_pd(out + i, _ZGVdN4v_log(_mm256_loadu_pd(in + i)));
    for (; i < n; i++)
        out[i] = log(in[i]);
}
#endif

static void
logs(const double *in, double *out, Py_ssize_t n)
{
#if defined(DPFRAME_LIBMVEC) && defined(HAVE_AVX2_PATH)
    if (use_avx2()) {
        logs_avx2(in, out, n);
        return;
    }
#endif
    for (Py_ssize_t i = 0; i < n; i++)
        out[i] = log(in[i]);
}

/* chacha(key, ctr0, ctr1, out, block, simd): len(out) words from the 32-bit position
   (ctr1, ctr0) on (wrapping at 2^128 as randomgen's counter does); block
   receives the last block computed (randomgen's cached block afterwards). simd = 0
   forces the one-block code (for the tests). */
static PyObject *
exactc_chacha(PyObject *self, PyObject *args)
{
    Py_buffer kv, ov, bv;
    unsigned long long ctr0, ctr1;
    int simd;
    if (!PyArg_ParseTuple(args, "y*KKw*w*p", &kv, &ctr0, &ctr1, &ov, &bv, &simd))
        return NULL;
    if (check(&kv, 4, "key") || check(&ov, 8, "out") || check(&bv, 4, "block") ||
        kv.len != 32 || bv.len != 64) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "chacha: a key of 8 and a block of 16 words");
        PyBuffer_Release(&kv);
        PyBuffer_Release(&ov);
        PyBuffer_Release(&bv);
        return NULL;
    }
    const uint32_t *key = (const uint32_t *)kv.buf;
    uint64_t *out = (uint64_t *)ov.buf;
    uint32_t *last = (uint32_t *)bv.buf;
    Py_ssize_t n = ov.len / 8;
    Py_BEGIN_ALLOW_THREADS
    /* 32-bit outputs [ctr0, ctr0 + 2n): blocks lo .. of the 128-bit block number */
    uint64_t lo = (ctr0 >> 4) | (ctr1 << 60), hi = ctr1 >> 4;
    unsigned skip = (unsigned)(ctr0 & 15);
    uint32_t buffer[8 * 16], pending = 0; /* a 32-bit output waiting for its high half */
    int have_pending = 0;
    Py_ssize_t done = 0;
    while (done < n) {
        int count = 1;
        const uint32_t *blocks = buffer;
#ifdef HAVE_AVX2_PATH
        if (simd && use_avx2() && n - done >= 32 && lo <= UINT64_MAX - 8) {
            chacha_blocks8(key, lo, hi, buffer);
            count = 8;
        } else
#endif
            chacha_block(key, lo, hi, buffer);
        unsigned total = 16u * (unsigned)count, i = skip;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        if (!have_pending) { /* whole words: two outputs in order are one word */
            Py_ssize_t whole = (Py_ssize_t)((total - i) / 2);
            if (whole > n - done)
                whole = n - done;
            memcpy(out + done, blocks + i, (size_t)whole * 8);
            done += whole;
            i += 2 * (unsigned)whole;
        }
#endif
        unsigned used = i; /* one past the last output taken from these blocks */
        for (; i < total && done < n; i++, used = i) {
            if (have_pending) {
                out[done++] = (uint64_t)pending | (uint64_t)blocks[i] << 32;
                have_pending = 0;
            } else {
                pending = blocks[i];
                have_pending = 1;
            }
        }
        skip = 0;
        memcpy(last, blocks + 16 * ((used - 1) / 16), 64);
        lo += (uint64_t)count;
        if (lo < (uint64_t)count) /* the block number has 124 bits: it wraps as ctr does */
            hi = (hi + 1) & ((UINT64_C(1) << 60) - 1);
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&kv);
    PyBuffer_Release(&ov);
    PyBuffer_Release(&bv);
    Py_RETURN_NONE;
}

static PyObject *
exactc_libm(PyObject *self, PyObject *args)
{
    Py_buffer iv, ov;
    int negate;
    if (!PyArg_ParseTuple(args, "y*w*p", &iv, &ov, &negate))
        return NULL;
    if (check(&iv, 8, "values") || check(&ov, 8, "out") || iv.len != ov.len) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "libm: inconsistent buffer sizes");
        PyBuffer_Release(&iv);
        PyBuffer_Release(&ov);
        return NULL;
    }
    const double *in = (const double *)iv.buf;
    double *out = (double *)ov.buf;
    if (negate) {
        for (Py_ssize_t i = 0; i < iv.len / 8; i++)
            out[i] = exp(-in[i]);
    } else {
        logs(in, out, iv.len / 8); /* the filter's log */
    }
    PyBuffer_Release(&iv);
    PyBuffer_Release(&ov);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"filter", exactc_filter, METH_VARARGS, "The fused per-proposal filter."},
    {"refine", exactc_refine, METH_VARARGS, "The Gaussian's refined acceptances."},
    {"compact", exactc_compact, METH_VARARGS, "The accepted values, in order."},
    {"place", exactc_place, METH_VARARGS, "A release on a grid, in one pass."},
    {"finite", exactc_finite, METH_VARARGS, "Whether every value is finite."},
    {"chacha", exactc_chacha, METH_VARARGS, "ChaCha20 words (randomgen's stream)."},
    {"libm", exactc_libm, METH_VARARGS, "log(x), or exp(-x) if negate (for tests)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_exactc", "The exact samplers' fused float filter.", -1, methods,
};

PyMODINIT_FUNC
PyInit__exactc(void)
{
    return PyModule_Create(&module);
}
