/* GHASH, the universal hash of AES-GCM (NIST SP 800-38D), on the CPU's carry-less multiply
   (optional).

   The fingerprint of new ledgers (dpframe.data.fingerprint, "gmac-blake3") is the
   AES-256-GMAC tag of the data, GHASH_H(A || 0* || len) xor AES_K(J0), then keyed BLAKE3 of
   that tag. OpenSSL computes GHASH over GCM's additional data with 128-bit carry-less
   multiplies (7.3 GB/s here); this module computes the same function with 256-bit ones
   (VPCLMULQDQ, two blocks an instruction) where the CPU has them, about 1.7 times as fast,
   and with 128-bit ones (PCLMULQDQ) otherwise. H and AES_K(J0) come from OpenSSL (AES in
   ECB mode, two blocks); the tests compare every tag with OpenSSL's GCM and with a GHASH
   written from SP 800-38D in Python. Carry-less multiplies, shifts and xors take the same
   time whatever their values: nothing here branches on the data or on H.

   ghash(h, y, data, wide) -> bytes

     h      the 16 bytes of H = AES_K(0^128)
     y      the 16 bytes of the running value (16 zero bytes to start)
     data   a C-contiguous buffer of a whole number of 16-byte blocks
     wide   true: the 256-bit path where the CPU has it; false: the 128-bit path
     returns y after the blocks of data: y <- (y xor X_i) * H for each block X_i, in GF(2^128)
     with GCM's bit order. The GIL is released.

   ghash_extremes(h, y, data) -> (y, nan, low, high)

     data   a C-contiguous buffer of one or more float64 values (machine order)
     returns ghash(h, y, whole blocks of data, wide) and, from the same loads, whether a
     value is NaN and the least and greatest value (infinities included): the fingerprint
     of a chunk and the check that it lies in its domain in one read of it. A last value
     beyond the whole blocks is in the extremes only (the caller hashes it with the next
     bytes). The 256-bit path only (RuntimeError on a CPU without it).

   paths() -> tuple: the paths this CPU runs, widest first ("vpclmulqdq", "pclmulqdq"), or ()
   where neither exists (the caller then uses OpenSSL's GCM).

   The arithmetic follows Gueron and Kounavis, "Intel Carry-Less Multiplication Instruction
   and its Usage for Computing the GCM Mode" (2014), algorithm 5: blocks byte-reversed, a
   256-bit product shifted left by one bit, reduced modulo x^128 + x^7 + x^2 + x + 1; and
   their aggregation (section 4): GROUP blocks are multiplied by H^GROUP .. H^1, the
   unreduced products added, and reduced once. The middle product is Karatsuba's. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_CLMUL_PATH 1

#define T128 __attribute__((target("pclmul,ssse3,sse4.1")))
#define T256 __attribute__((target("avx2,pclmul,vpclmulqdq")))
#define GROUP 32 /* blocks between reductions on the 256-bit path (measured: 16 was 5% slower) */
#define NARROW 4 /* the same on the 128-bit path */

/* <hi : lo> + mid * x^64, shifted left by one bit and reduced: the product, byte-reversed. */
T128 static inline __m128i
finish(__m128i lo, __m128i mid, __m128i hi)
{
    lo = _mm_xor_si128(lo, _mm_slli_si128(mid, 8));
    hi = _mm_xor_si128(hi, _mm_srli_si128(mid, 8));
    __m128i carry_lo = _mm_srli_epi32(lo, 31), carry_hi = _mm_srli_epi32(hi, 31);
    lo = _mm_slli_epi32(lo, 1);
    hi = _mm_slli_epi32(hi, 1);
    __m128i across = _mm_srli_si128(carry_lo, 12);
    lo = _mm_or_si128(lo, _mm_slli_si128(carry_lo, 4));
    hi = _mm_or_si128(_mm_or_si128(hi, _mm_slli_si128(carry_hi, 4)), across);
    __m128i a = _mm_xor_si128(_mm_xor_si128(_mm_slli_epi32(lo, 31), _mm_slli_epi32(lo, 30)),
                              _mm_slli_epi32(lo, 25));
    __m128i b = _mm_srli_si128(a, 4);
    lo = _mm_xor_si128(lo, _mm_slli_si128(a, 12));
    __m128i c = _mm_xor_si128(_mm_xor_si128(_mm_srli_epi32(lo, 1), _mm_srli_epi32(lo, 2)),
                              _mm_srli_epi32(lo, 7));
    lo = _mm_xor_si128(lo, _mm_xor_si128(c, b));
    return _mm_xor_si128(hi, lo);
}

T128 static inline void
multiply_add(__m128i a, __m128i b, __m128i *lo, __m128i *mid, __m128i *hi)
{
    *lo = _mm_xor_si128(*lo, _mm_clmulepi64_si128(a, b, 0x00));
    *hi = _mm_xor_si128(*hi, _mm_clmulepi64_si128(a, b, 0x11));
    *mid = _mm_xor_si128(*mid, _mm_xor_si128(_mm_clmulepi64_si128(a, b, 0x10),
                                             _mm_clmulepi64_si128(a, b, 0x01)));
}

T128 static inline __m128i
multiply(__m128i a, __m128i b)
{
    __m128i lo = _mm_setzero_si128(), mid = lo, hi = lo;
    multiply_add(a, b, &lo, &mid, &hi);
    return finish(lo, mid, hi);
}

T128 static inline __m128i
reverse(__m128i x)
{
    return _mm_shuffle_epi8(x, _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
}

T128 static inline __m128i
block(const uint8_t *data, size_t i)
{
    return reverse(_mm_loadu_si128((const __m128i *)(data + 16 * i)));
}

T128 static void
ghash_narrow(const uint8_t *h_bytes, uint8_t *y_bytes, const uint8_t *data, size_t blocks)
{
    __m128i h = reverse(_mm_loadu_si128((const __m128i *)h_bytes));
    __m128i y = reverse(_mm_loadu_si128((const __m128i *)y_bytes));
    __m128i powers[NARROW]; /* powers[k] = H^(k + 1) */
    size_t i = 0;
    int k;
    powers[0] = h;
    for (k = 1; k < NARROW; k++)
        powers[k] = multiply(powers[k - 1], h);
    for (; i + NARROW <= blocks; i += NARROW) {
        __m128i lo = _mm_setzero_si128(), mid = lo, hi = lo;
        multiply_add(_mm_xor_si128(y, block(data, i)), powers[NARROW - 1], &lo, &mid, &hi);
        for (k = 1; k < NARROW; k++)
            multiply_add(block(data, i + k), powers[NARROW - 1 - k], &lo, &mid, &hi);
        y = finish(lo, mid, hi);
    }
    for (; i < blocks; i++)
        y = multiply(_mm_xor_si128(y, block(data, i)), h);
    _mm_storeu_si128((__m128i *)y_bytes, reverse(y));
}

T256 static inline __m256i
reverse_pair(__m256i x)
{
    return _mm256_shuffle_epi8(
        x, _mm256_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5,
                           6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
}

T256 static inline __m128i
fold(__m256i x)
{
    return _mm_xor_si128(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1));
}

/* The 256-bit path; with `ext` (then data holds float64 values) it also finds their
   minimum and maximum from the same loads: ext[0] = min, ext[1] = max, ext[2] = 1 if a
   value is NaN (0 otherwise). Inlined into each caller with `ext` a constant. */
T256 static inline __attribute__((always_inline)) void
wide_body(const uint8_t *h_bytes, uint8_t *y_bytes, const uint8_t *data, size_t blocks,
          double *ext)
{
    __m128i h = reverse(_mm_loadu_si128((const __m128i *)h_bytes));
    __m128i y = reverse(_mm_loadu_si128((const __m128i *)y_bytes));
    __m128i powers[GROUP]; /* powers[k] = H^(k + 1) */
    __m256i pair[GROUP / 2], halves[GROUP / 2];
    __m256d low = _mm256_set1_pd(INFINITY), high = _mm256_set1_pd(-INFINITY);
    __m256d nan = _mm256_setzero_pd();
    size_t i = 0;
    int j;
    powers[0] = h;
    for (j = 1; j < GROUP; j++)
        powers[j] = multiply(powers[j - 1], h);
    /* the blocks X_(2j+1), X_(2j+2) of a group (low lane first) meet H^(GROUP-2j) and
       H^(GROUP-2j-1); halves holds each power's two 64-bit halves xored (Karatsuba) */
    for (j = 0; j < GROUP / 2; j++) {
        pair[j] = _mm256_set_m128i(powers[GROUP - 2 * j - 2], powers[GROUP - 2 * j - 1]);
        halves[j] = _mm256_xor_si256(pair[j], _mm256_srli_si256(pair[j], 8));
    }
    for (; i + GROUP <= blocks; i += GROUP) {
        const __m256i *p = (const __m256i *)(data + 16 * i);
        __m256i lo = _mm256_setzero_si256(), mid = lo, hi = lo;
        for (j = 0; j < GROUP / 2; j++) {
            __m256i raw = _mm256_loadu_si256(p + j);
            __m256i v = reverse_pair(raw);
            if (ext) {
                __m256d values = _mm256_castsi256_pd(raw);
                low = _mm256_min_pd(low, values);
                high = _mm256_max_pd(high, values);
                nan = _mm256_or_pd(nan, _mm256_cmp_pd(values, values, _CMP_UNORD_Q));
            }
            if (j == 0)
                v = _mm256_xor_si256(v, _mm256_zextsi128_si256(y));
            lo = _mm256_xor_si256(lo, _mm256_clmulepi64_epi128(v, pair[j], 0x00));
            hi = _mm256_xor_si256(hi, _mm256_clmulepi64_epi128(v, pair[j], 0x11));
            mid = _mm256_xor_si256(
                mid, _mm256_clmulepi64_epi128(_mm256_xor_si256(v, _mm256_srli_si256(v, 8)),
                                              halves[j], 0x00));
        }
        __m128i l = fold(lo), g = fold(hi);
        y = finish(l, _mm_xor_si128(fold(mid), _mm_xor_si128(l, g)), g);
    }
    for (; i < blocks; i++)
        y = multiply(_mm_xor_si128(y, block(data, i)), h);
    _mm_storeu_si128((__m128i *)y_bytes, reverse(y));
    if (ext) {
        double lows[4], highs[4], nans[4];
        const double *rest = (const double *)(data + 16 * (blocks - blocks % GROUP));
        size_t k, left = 2 * (blocks % GROUP);
        _mm256_storeu_pd(lows, low);
        _mm256_storeu_pd(highs, high);
        _mm256_storeu_pd(nans, nan);
        for (k = 0; k < 4; k++) {
            ext[0] = k == 0 || lows[k] < ext[0] ? lows[k] : ext[0];
            ext[1] = k == 0 || highs[k] > ext[1] ? highs[k] : ext[1];
            ext[2] = k == 0 ? (nans[k] != 0.0) : (ext[2] != 0.0 || nans[k] != 0.0);
        }
        for (k = 0; k < left; k++) {
            double v = rest[k];
            if (v != v)
                ext[2] = 1.0;
            ext[0] = v < ext[0] ? v : ext[0];
            ext[1] = v > ext[1] ? v : ext[1];
        }
    }
}

T256 static void
ghash_wide(const uint8_t *h_bytes, uint8_t *y_bytes, const uint8_t *data, size_t blocks)
{
    wide_body(h_bytes, y_bytes, data, blocks, NULL);
}

T256 static void
ghash_wide_extremes(const uint8_t *h_bytes, uint8_t *y_bytes, const uint8_t *data, size_t blocks,
                    double *ext)
{
    wide_body(h_bytes, y_bytes, data, blocks, ext);
}

static int
cpu_paths(void)
{
    static int known = -1; /* bit 0: pclmulqdq; bit 1: vpclmulqdq with AVX2 */
    if (known < 0) {
        __builtin_cpu_init();
        known = (__builtin_cpu_supports("pclmul") && __builtin_cpu_supports("ssse3")
                 && __builtin_cpu_supports("sse4.1"))
                    ? 1
                    : 0;
        if (known && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("vpclmulqdq"))
            known |= 2;
    }
    return known;
}
#else
static int
cpu_paths(void)
{
    return 0;
}
#endif

/* The buffers of a call, (h, y, data): H, the running value and the bytes. */
typedef struct {
    Py_buffer h, y, data;
} Call;

static void
release(Call *call)
{
    PyBuffer_Release(&call->h);
    PyBuffer_Release(&call->y);
    PyBuffer_Release(&call->data);
}

/* Check a call's buffers (data in units of `unit` bytes, at least `least` of them) and the
   CPU's `need`ed paths, and copy y into state; -1 with an exception set otherwise. */
static int
begin(Call *call, Py_ssize_t unit, Py_ssize_t least, int need, const char *shapes,
      uint8_t *state)
{
    if (call->h.len != 16 || call->y.len != 16 || call->data.len % unit != 0
        || call->data.len < least * unit) {
        PyErr_SetString(PyExc_ValueError, shapes);
        return -1;
    }
    if ((cpu_paths() & need) != need) {
        PyErr_SetString(PyExc_RuntimeError, "this CPU has no carry-less multiply of that width");
        return -1;
    }
    memcpy(state, call->y.buf, 16);
    return 0;
}

static PyObject *
ghash(PyObject *self, PyObject *args)
{
    Call call = {{0}};
    int wide;
    uint8_t state[16];
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "y*y*y*p", &call.h, &call.y, &call.data, &wide))
        return NULL;
    if (begin(&call, 16, 0, 1,
              "h and y must be 16 bytes, and data a whole number of 16-byte blocks", state) == 0) {
        const uint8_t *h = call.h.buf, *data = call.data.buf;
        size_t blocks = (size_t)call.data.len / 16;
        wide = wide && (cpu_paths() & 2);
#ifdef HAVE_CLMUL_PATH
        Py_BEGIN_ALLOW_THREADS
        if (wide)
            ghash_wide(h, state, data, blocks);
        else
            ghash_narrow(h, state, data, blocks);
        Py_END_ALLOW_THREADS
#endif
        result = PyBytes_FromStringAndSize((const char *)state, 16);
    }
    release(&call);
    return result;
}

static PyObject *
ghash_extremes(PyObject *self, PyObject *args)
{
    Call call = {{0}};
    uint8_t state[16];
    double ext[3] = {INFINITY, -INFINITY, 0.0}, last;
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "y*y*y*", &call.h, &call.y, &call.data))
        return NULL;
    if (begin(&call, 8, 1, 2, "h and y must be 16 bytes, and data one or more float64 values",
              state) == 0) {
        const uint8_t *data = call.data.buf;
        size_t blocks = (size_t)call.data.len / 16;
#ifdef HAVE_CLMUL_PATH
        Py_BEGIN_ALLOW_THREADS
        if (blocks)
            ghash_wide_extremes(call.h.buf, state, data, blocks, ext);
        if (call.data.len % 16) { /* a last value beyond the whole blocks: the extremes only */
            memcpy(&last, data + call.data.len - 8, 8);
            if (last != last)
                ext[2] = 1.0;
            ext[0] = last < ext[0] ? last : ext[0];
            ext[1] = last > ext[1] ? last : ext[1];
        }
        Py_END_ALLOW_THREADS
#endif
        result = Py_BuildValue("y#idd", (const char *)state, (Py_ssize_t)16, ext[2] != 0.0,
                               ext[0], ext[1]);
    }
    release(&call);
    return result;
}

static PyObject *
paths(PyObject *self, PyObject *noargs)
{
    int known = cpu_paths();
    if (known & 2)
        return Py_BuildValue("(ss)", "vpclmulqdq", "pclmulqdq");
    if (known & 1)
        return Py_BuildValue("(s)", "pclmulqdq");
    return PyTuple_New(0);
}

static PyMethodDef methods[] = {
    {"ghash", ghash, METH_VARARGS,
     "GHASH continued from y over whole 16-byte blocks of data, under H (GCM's bit order)."},
    {"ghash_extremes", ghash_extremes, METH_VARARGS,
     "GHASH continued over the whole blocks of float64 values, and the values' extremes, in "
     "one read (the 256-bit path)."},
    {"paths", paths, METH_NOARGS,
     "The carry-less multiply paths this CPU runs, widest first; () where there is none."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_ghashc", "GHASH on the CPU's carry-less multiply.", -1, methods,
};

PyMODINIT_FUNC
PyInit__ghashc(void)
{
    return PyModule_Create(&module);
}
