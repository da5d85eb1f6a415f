/* A chunk of records converted, checked and clipped in one pass (optional).

   dpframe.data.chunks prepares every chunk of a streamed source before any statistic
   sees it: the columns (Arrow buffers of a Parquet or CSV batch, or the columns of an
   array) become one row-major float64 matrix, every value must be finite, and the rows
   are clipped to the domain's box with per-feature counts. numpy makes that a dozen
   passes over the chunk (the strided column writes, min, max, two comparisons, their
   counts, the clip); this module makes one, a tile of rows at a time so that the rows
   being written stay in the first-level cache.

   prepare(columns, out, lower, upper, counts, clip) -> (status, rows_clipped, low, high)

     columns  a sequence of d one-dimensional buffers of n values each (any stride;
              float32, float64, or signed or unsigned integers of 1 to 8 bytes, in the
              machine's byte order)
     out      float64[n * d] (write; may be the memory of the columns themselves, each
              value at its own place: it is read before it is written)
     lower, upper  float64[d]: the box (read when clip is true)
     counts   int64[d] (write when clip is true): values clipped per feature
     clip     true: write min(max(v, lower), upper) and count the values outside the box
              and the rows holding one (low and high are returned as 0); false: write v
              and return the extremes (low, high) of the chunk

   status 0: done. status 1: a value is NaN or infinite; status 2 (clip only): a zero
   bound meets a zero of the other sign, a value or the other bound (numpy's clip may
   return either zero: the caller does not depend on which). On status 1 or 2, out and counts are unspecified and
   the caller prepares the chunk with numpy, which names the value or clips it.

   extremes(values) -> (status, low, high)

     values   a C-contiguous float64 buffer (an in-memory chunk the caller's array holds)
     status 0: every value is finite, and (low, high) are its minimum and maximum, exact;
     status 1: a value is NaN or infinite, or there is none (low and high unspecified):
     the caller asks numpy, which names the value. One read where min() and max() make
     two; the AVX2 path where the CPU has it.

   rows(values, d, centre, scale, out, codes, sums, counts) -> (status, low, high)

     values   a C-contiguous float64 buffer of n rows of d values (a chunk in memory)
     centre, scale  float64[d], or both empty: each value becomes (v - centre) / scale,
              written to out (float64[n * d], write; not values' memory); empty: the
              values are read as they are (out is not written)
     codes    int64[n]: each row's group, 0 <= codes[i] < k, with k = len(counts); when
              k is 0 the rows are not grouped (codes is then empty)
     sums     float64[k * d] (read and write): each (mapped) row i is added to row
              codes[i], rows in order, each sum in its own order of rows (the same bits
              on either path)
     counts   int64[k] (read and write): counts[codes[i]] += 1
     status 0: done, every (mapped) value finite, (low, high) their extremes as
     extremes() returns them; status 1: a value is NaN or infinite; status 2: a code is
     outside 0 .. k-1 (out, sums and counts unspecified). One read for DPRP's chunk: the
     public map, the extremes of the clipping check and the per-class sums of its label
     blocks of Z^T Z, where numpy makes three passes (subtract, divide, then the sums) and
     a one-hot product runs far below BLAS's rate.

   sums_norms(values, d, sums) -> (status, largest)

     values   a C-contiguous float64 buffer of n >= 1 rows of d values (a chunk in memory)
     sums     float64[d] (write): the column sums, 0.0 plus each row added in row order
              (numpy's x.sum(axis=0), bit for bit)
     largest  the largest squared row norm, each row's squares added in column order
              (x[:, 0]**2 + x[:, 1]**2 + ..., numpy's column loop, bit for bit)
     status 0: done; status 1: a value is NaN or infinite (sums and largest unspecified).
     One read for PCA-Gauss's chunk, where numpy makes two (a matrix-vector product and
     the row norms), eight rows' norms at a time as eight independent chains.

   offsets(values, d, inverse, mean, out, norms) -> status

     values   a C-contiguous float64 buffer of n >= 1 rows of d values (a chunk in memory)
     inverse  float64[n]: each row's scale; mean  float64[d]: the point subtracted
     out      float64[n * d] (write; may be values' own memory): values[i] * inverse[i]
              - mean, two roundings an entry (numpy's multiply, then subtract)
     norms    float64[n] (write): the Euclidean norm of each row of out, its squares added
              in column order, then sqrt
     status 0: done; status 1: a squared norm is NaN or infinite (out and norms
     unspecified: the caller asks numpy). One read for RON-Gauss's second pass, where
     numpy makes three (the scaling, the subtraction, the row norms).

   group(values, d, codes, out, sums, counts) -> status

     values   a C-contiguous float64 buffer of n >= 1 rows of d values (a chunk in memory)
     codes    int64[n]: each row's class, 0 <= codes[i] < k, with k = len(counts) >= 1
     out      float64[n * d] (write): the rows grouped by class, class 0's first, each
              class's rows in their order (a stable sort by class)
     sums     float64[k * d] (write): each class's column sums, 0.0 plus its rows in order
              (numpy's block.sum(axis=0) of its block of out, bit for bit)
     counts   int64[k] (write): each class's rows
     status 0: done; status 2: a code is outside 0 .. k-1 (out, sums and counts
     unspecified). One read for GMM's chunk, where numpy makes four (the counts, a sort
     of the labels, the gather, and the sums from the gathered rows).

   Conversions are C's casts, which are numpy's (exact for float32 and for integers up to
   2^53, rounded to nearest above). Compiled with -ffp-contract=off: nothing is fused. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define TILE 32 /* rows per tile: 32 rows x 100 features x 8 bytes stay in L1 */

enum kind { F32, F64, I8, I16, I32, I64, U8, U16, U32, U64 };

typedef struct {
    const char *data;
    Py_ssize_t stride; /* bytes */
    int kind;
} column;

static int
kind_of(const Py_buffer *view)
{
    const char *format = view->format ? view->format : "B";
    if (*format == '<' || *format == '=' || *format == '@') {
        if (*format == '<' && !PY_LITTLE_ENDIAN)
            return -1;
        format++;
    }
    if (format[0] == '\0' || format[1] != '\0')
        return -1;
    switch (format[0]) {
    case 'f': return view->itemsize == 4 ? F32 : -1;
    case 'd': return view->itemsize == 8 ? F64 : -1;
    case 'b': case 'h': case 'i': case 'l': case 'q':
        switch (view->itemsize) {
        case 1: return I8;
        case 2: return I16;
        case 4: return I32;
        case 8: return I64;
        }
        return -1;
    case 'B': case 'H': case 'I': case 'L': case 'Q':
        switch (view->itemsize) {
        case 1: return U8;
        case 2: return U16;
        case 4: return U32;
        case 8: return U64;
        }
        return -1;
    }
    return -1;
}

/* Column j's rows [first, first + rows) as doubles into tile[0..rows). */
static void
load(const column *c, Py_ssize_t first, Py_ssize_t rows, double *tile)
{
    const char *p = c->data + first * c->stride;
    const Py_ssize_t s = c->stride;
    Py_ssize_t i;
    if (s > 0 && s <= 8) { /* the next tile of a column, which no prefetcher follows */
        const char *next = p + rows * s;
        for (i = 0; i < rows * s; i += 64)
            __builtin_prefetch(next + i);
    }
#define LOAD(T)                                                                  \
    for (i = 0; i < rows; i++)                                                  \
        tile[i] = (double)*(const T *)(p + i * s);                              \
    break;
    switch (c->kind) {
    case F32: LOAD(float)
    case F64: LOAD(double)
    case I8: LOAD(int8_t)
    case I16: LOAD(int16_t)
    case I32: LOAD(int32_t)
    case I64: LOAD(int64_t)
    case U8: LOAD(uint8_t)
    case U16: LOAD(uint16_t)
    case U32: LOAD(uint32_t)
    case U64: LOAD(uint64_t)
    }
#undef LOAD
}

/* Rows [first, first + rows) of every column, converted into the column-major tile
   (column j at tile + j * TILE), the next tile's columns prefetched. */
static void
load_tile(const column *cols, Py_ssize_t d, Py_ssize_t first, Py_ssize_t rows, double *tile)
{
    Py_ssize_t j;
    for (j = 0; j < d; j++)
        load(&cols[j], first, rows, tile + j * TILE);
}

/* The tile's rows written row-major into out (its rows [0, rows)). */
static void
store_tile(const double *tile, Py_ssize_t d, Py_ssize_t rows, double *out)
{
    Py_ssize_t i, j;
    for (i = 0; i < rows; i++)
        for (j = 0; j < d; j++)
            out[i * d + j] = tile[j * TILE + i];
}

/* Whether a value of the tile's column is a zero of the other sign than a zero bound
   (numpy's clip may keep it or return the bound; so too for a value below a lower bound
   -0.0 when the upper one is +0.0, which the caller refuses without this test). */
static int
signed_zero_tie(const double *values, Py_ssize_t rows, double lo, double hi)
{
    Py_ssize_t i;
    for (i = 0; i < rows; i++) {
        const double v = values[i];
        if (v == 0.0 && ((lo == 0.0 && signbit(v) != signbit(lo)) ||
                         (hi == 0.0 && signbit(v) != signbit(hi))))
            return 1;
    }
    return 0;
}

/* The clipping pass over all rows; returns the status. The flags and counts are kept as
   doubles (0 and 1, sums exact below 2^53) so that the compiler vectorizes the loop, and
   finiteness as the sum of v - v (0 for a finite v, NaN otherwise). */
static int
clip_rows(const column *cols, Py_ssize_t n, Py_ssize_t d, double *out, const double *lower,
          const double *upper, int64_t *counts, int64_t *rows_clipped, double *tile)
{
    double moved[TILE];
    int64_t rows_moved = 0;
    Py_ssize_t first, i, j;
    memset(counts, 0, (size_t)d * sizeof(int64_t));
    for (first = 0; first < n; first += TILE) {
        const Py_ssize_t rows = n - first < TILE ? n - first : TILE;
        double finite = 0.0;
        for (i = 0; i < TILE; i++)
            moved[i] = 0.0;
        load_tile(cols, d, first, rows, tile);
        for (j = 0; j < d; j++) {
            double *restrict values = tile + j * TILE;
            const double lo = lower[j], hi = upper[j];
            double outside = 0.0;
            if ((lo == 0.0 || hi == 0.0) &&
                ((lo == hi && signbit(lo) != signbit(hi)) ||
                 signed_zero_tie(values, rows, lo, hi)))
                return 2;
            for (i = 0; i < rows; i++) {
                const double v = values[i];
                const double raised = v < lo ? lo : v;
                const double o = (v < lo || v > hi) ? 1.0 : 0.0;
                finite += v - v;
                outside += o;
                moved[i] += o;
                values[i] = raised > hi ? hi : raised;
            }
            counts[j] += (int64_t)outside;
        }
        if (!(finite == 0.0))
            return 1;
        store_tile(tile, d, rows, out + first * d);
        for (i = 0; i < rows; i++)
            rows_moved += moved[i] > 0.0;
    }
    *rows_clipped = rows_moved;
    return 0;
}

/* The converting pass without clipping: the extremes; returns the status. */
static int
convert_rows(const column *cols, Py_ssize_t n, Py_ssize_t d, double *out, double *low,
             double *high, double *tile)
{
    double lowest = INFINITY, highest = -INFINITY;
    Py_ssize_t first, i, j;
    for (first = 0; first < n; first += TILE) {
        const Py_ssize_t rows = n - first < TILE ? n - first : TILE;
        double finite = 0.0;
        load_tile(cols, d, first, rows, tile);
        for (j = 0; j < d; j++) {
            const double *restrict values = tile + j * TILE;
            for (i = 0; i < rows; i++) {
                const double v = values[i];
                finite += v - v;
                lowest = v < lowest ? v : lowest;
                highest = v > highest ? v : highest;
            }
        }
        if (!(finite == 0.0))
            return 1;
        store_tile(tile, d, rows, out + first * d);
    }
    *low = lowest;
    *high = highest;
    return 0;
}

static PyObject *
prepare(PyObject *self, PyObject *args)
{
    PyObject *sequence, *fast = NULL, *result = NULL;
    Py_buffer outv = {0}, lowv = {0}, highv = {0}, countv = {0};
    Py_buffer *views = NULL;
    column *cols = NULL;
    double *tile = NULL;
    Py_ssize_t n = -1, d, j, got = 0;
    int clip, status;
    int64_t rows_clipped = 0;
    double low = 0.0, high = 0.0;

    if (!PyArg_ParseTuple(args, "Ow*y*y*w*p", &sequence, &outv, &lowv, &highv, &countv, &clip))
        return NULL;
    fast = PySequence_Fast(sequence, "columns must be a sequence");
    if (fast == NULL)
        goto done;
    d = PySequence_Fast_GET_SIZE(fast);
    views = PyMem_Calloc(d ? (size_t)d : 1, sizeof(Py_buffer));
    cols = PyMem_Calloc(d ? (size_t)d : 1, sizeof(column));
    if (views == NULL || cols == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (j = 0; j < d; j++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, j);
        if (PyObject_GetBuffer(item, &views[j], PyBUF_STRIDED_RO | PyBUF_FORMAT) < 0)
            goto done;
        got++;
        cols[j].kind = kind_of(&views[j]);
        if (views[j].ndim != 1 || cols[j].kind < 0) {
            PyErr_SetString(PyExc_TypeError, "a column is not a 1-d array of numbers");
            goto done;
        }
        if (j == 0)
            n = views[j].shape[0];
        if (views[j].shape[0] != n) {
            PyErr_SetString(PyExc_ValueError, "the columns differ in length");
            goto done;
        }
        cols[j].data = views[j].buf;
        cols[j].stride = views[j].strides[0];
    }
    if (d == 0 || n < 0 || outv.len != n * d * (Py_ssize_t)sizeof(double) ||
        lowv.len != d * (Py_ssize_t)sizeof(double) ||
        highv.len != d * (Py_ssize_t)sizeof(double) ||
        countv.len != d * (Py_ssize_t)sizeof(int64_t)) {
        PyErr_SetString(PyExc_ValueError, "the buffers do not match the columns");
        goto done;
    }
    tile = PyMem_RawMalloc((size_t)d * TILE * sizeof(double));
    if (tile == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    if (clip)
        status = clip_rows(cols, n, d, outv.buf, lowv.buf, highv.buf, countv.buf, &rows_clipped,
                           tile);
    else
        status = convert_rows(cols, n, d, outv.buf, &low, &high, tile);
    Py_END_ALLOW_THREADS
    PyMem_RawFree(tile);
    result = Py_BuildValue("iLdd", status, (long long)rows_clipped, low, high);
done:
    for (j = 0; j < got; j++)
        PyBuffer_Release(&views[j]);
    PyMem_Free(views);
    PyMem_Free(cols);
    Py_XDECREF(fast);
    PyBuffer_Release(&outv);
    PyBuffer_Release(&lowv);
    PyBuffer_Release(&highv);
    PyBuffer_Release(&countv);
    return result;
}

/* The running extremes *low and *high of n doubles, and whether one is NaN: the minimum
   and maximum ignore a NaN (as minpd and maxpd, which return their second operand, the
   running extreme, when either is NaN), which the unordered comparison records instead;
   an infinity shows in the extremes. */
static int
scan_scalar(const double *v, Py_ssize_t n, double *low, double *high)
{
    double lo = *low, hi = *high;
    int nan = 0;
    Py_ssize_t i;
    for (i = 0; i < n; i++) {
        const double x = v[i];
        nan |= x != x;
        lo = x < lo ? x : lo;
        hi = x > hi ? x : hi;
    }
    *low = lo;
    *high = hi;
    return nan;
}

#include "../_avx2.h"
#ifdef HAVE_AVX2_PATH
/* scan_scalar, 16 values at a time in four pairs of accumulators. */
__attribute__((target("avx2"))) static int
scan_avx2(const double *v, Py_ssize_t n, double *low, double *high)
{
    __m256d lo[4], hi[4], nan = _mm256_setzero_pd();
    double lanes_lo[4], lanes_hi[4];
    const Py_ssize_t whole = n - n % 16;
    Py_ssize_t i;
    int k;
    for (k = 0; k < 4; k++) {
        lo[k] = _mm256_set1_pd(*low);
        hi[k] = _mm256_set1_pd(*high);
    }
    for (i = 0; i < whole; i += 16) {
        for (k = 0; k < 4; k++) {
            const __m256d x = _mm256_loadu_pd(v + i + 4 * k);
            lo[k] = _mm256_min_pd(x, lo[k]);
            hi[k] = _mm256_max_pd(x, hi[k]);
            nan = _mm256_or_pd(nan, _mm256_cmp_pd(x, x, _CMP_UNORD_Q));
        }
    }
    _mm256_storeu_pd(lanes_lo, _mm256_min_pd(_mm256_min_pd(lo[0], lo[1]),
                                             _mm256_min_pd(lo[2], lo[3])));
    _mm256_storeu_pd(lanes_hi, _mm256_max_pd(_mm256_max_pd(hi[0], hi[1]),
                                             _mm256_max_pd(hi[2], hi[3])));
    for (k = 0; k < 4; k++) {
        *low = lanes_lo[k] < *low ? lanes_lo[k] : *low;
        *high = lanes_hi[k] > *high ? lanes_hi[k] : *high;
    }
    return (_mm256_movemask_pd(nan) != 0) | scan_scalar(v + whole, n - whole, low, high);
}
#endif

static PyObject *
extremes(PyObject *self, PyObject *args)
{
    Py_buffer view = {0};
    double low, high;
    Py_ssize_t n;
    int status;
    if (!PyArg_ParseTuple(args, "y*", &view))
        return NULL;
    if (view.len % (Py_ssize_t)sizeof(double) != 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "the buffer does not hold float64 values");
        return NULL;
    }
    n = view.len / (Py_ssize_t)sizeof(double);
    low = INFINITY;
    high = -INFINITY;
    Py_BEGIN_ALLOW_THREADS
#ifdef HAVE_AVX2_PATH
    if (use_avx2())
        status = scan_avx2(view.buf, n, &low, &high);
    else
#endif
        status = scan_scalar(view.buf, n, &low, &high);
    Py_END_ALLOW_THREADS
    status = status || !isfinite(low) || !isfinite(high);
    PyBuffer_Release(&view);
    return Py_BuildValue("idd", status, low, high);
}

/* The row of sums that record i adds to, its group counted (NULL when k is 0: the rows
   are not grouped); *bad for a code outside 0 .. k-1. */
static inline double *
group_row(const int64_t *codes, Py_ssize_t i, Py_ssize_t k, Py_ssize_t d, double *sums,
          int64_t *counts, int *bad)
{
    int64_t c;
    if (k == 0)
        return NULL;
    c = codes[i];
    if (c < 0 || c >= k) {
        *bad = 1;
        return NULL;
    }
    counts[c] += 1;
    return sums + c * d;
}

/* Row i of the n x d values, mapped to (v - centre) / scale into out when centre is
   given, added to row codes[i] of sums when k > 0; the extremes and NaN as scan_scalar's.
   Returns 1 for a NaN, 2 for a code outside 0 .. k-1. */
static int
rows_scalar(const double *v, Py_ssize_t n, Py_ssize_t d, const double *centre,
            const double *scale, double *out, const int64_t *codes, Py_ssize_t k,
            double *sums, int64_t *counts, double *low, double *high)
{
    int nan = 0;
    Py_ssize_t i, j;
    for (i = 0; i < n; i++) {
        const double *row = v + i * d;
        int bad = 0;
        double *sum = group_row(codes, i, k, d, sums, counts, &bad);
        if (bad)
            return 2;
        if (centre != NULL) {
            double *mapped = out + i * d;
            for (j = 0; j < d; j++)
                mapped[j] = (row[j] - centre[j]) / scale[j];
            row = mapped;
        }
        if (sum != NULL)
            for (j = 0; j < d; j++)
                sum[j] += row[j];
        nan |= scan_scalar(row, d, low, high);
    }
    return nan;
}

#ifdef HAVE_AVX2_PATH
/* rows_scalar, four values of a row at a time (each sum still adds its rows in order;
   the map is the same two roundings, nothing fused). */
__attribute__((target("avx2"))) static int
rows_avx2(const double *v, Py_ssize_t n, Py_ssize_t d, const double *centre,
          const double *scale, double *out, const int64_t *codes, Py_ssize_t k,
          double *sums, int64_t *counts, double *low, double *high)
{
    __m256d lo = _mm256_set1_pd(*low), hi = _mm256_set1_pd(*high), nan = _mm256_setzero_pd();
    double lanes_lo[4], lanes_hi[4];
    const Py_ssize_t whole = d - d % 4;
    int tail = 0;
    Py_ssize_t i, j;
    int m;
    for (i = 0; i < n; i++) {
        const double *row = v + i * d;
        double *mapped = centre != NULL ? out + i * d : NULL;
        int bad = 0;
        double *sum = group_row(codes, i, k, d, sums, counts, &bad);
        if (bad)
            return 2;
        for (j = 0; j < whole; j += 4) {
            __m256d x = _mm256_loadu_pd(row + j);
            if (mapped != NULL) {
                x = _mm256_div_pd(_mm256_sub_pd(x, _mm256_loadu_pd(centre + j)),
                                  _mm256_loadu_pd(scale + j));
                _mm256_storeu_pd(mapped + j, x);
            }
            if (sum != NULL)
                _mm256_storeu_pd(sum + j, _mm256_add_pd(_mm256_loadu_pd(sum + j), x));
            lo = _mm256_min_pd(x, lo);
            hi = _mm256_max_pd(x, hi);
            nan = _mm256_or_pd(nan, _mm256_cmp_pd(x, x, _CMP_UNORD_Q));
        }
        if (mapped != NULL) {
            for (j = whole; j < d; j++)
                mapped[j] = (row[j] - centre[j]) / scale[j];
            row = mapped;
        }
        if (sum != NULL)
            for (j = whole; j < d; j++)
                sum[j] += row[j];
        tail |= scan_scalar(row + whole, d - whole, low, high);
    }
    _mm256_storeu_pd(lanes_lo, lo);
    _mm256_storeu_pd(lanes_hi, hi);
    for (m = 0; m < 4; m++) {
        *low = lanes_lo[m] < *low ? lanes_lo[m] : *low;
        *high = lanes_hi[m] > *high ? lanes_hi[m] : *high;
    }
    return (_mm256_movemask_pd(nan) != 0) | tail;
}
#endif

static PyObject *
rows(PyObject *self, PyObject *args)
{
    Py_buffer view = {0}, centrev = {0}, scalev = {0}, outv = {0}, codev = {0}, sumv = {0},
              countv = {0};
    Py_ssize_t d, n, k;
    double low = INFINITY, high = -INFINITY;
    const double *centre = NULL, *scale = NULL;
    int status;
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "y*ny*y*w*y*w*w*", &view, &d, &centrev, &scalev, &outv,
                          &codev, &sumv, &countv))
        return NULL;
    k = countv.len / (Py_ssize_t)sizeof(int64_t);
    n = d > 0 ? view.len / (Py_ssize_t)sizeof(double) / d : 0;
    if (centrev.len > 0) {
        centre = centrev.buf;
        scale = scalev.buf;
    }
    if (d <= 0 || view.len != n * d * (Py_ssize_t)sizeof(double)
        || (centre != NULL && (centrev.len != d * (Py_ssize_t)sizeof(double)
                               || scalev.len != centrev.len
                               || outv.len != view.len || outv.buf == view.buf))
        || (k > 0 && codev.len != n * (Py_ssize_t)sizeof(int64_t))
        || sumv.len != k * d * (Py_ssize_t)sizeof(double)
        || countv.len != k * (Py_ssize_t)sizeof(int64_t)) {
        PyErr_SetString(PyExc_ValueError, "the buffers' sizes do not match n x d, d, n and k");
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
#ifdef HAVE_AVX2_PATH
    if (use_avx2())
        status = rows_avx2(view.buf, n, d, centre, scale, outv.buf, codev.buf, k, sumv.buf,
                           countv.buf, &low, &high);
    else
#endif
        status = rows_scalar(view.buf, n, d, centre, scale, outv.buf, codev.buf, k, sumv.buf,
                             countv.buf, &low, &high);
    Py_END_ALLOW_THREADS
    if (status == 0 && (!isfinite(low) || !isfinite(high)))
        status = 1;
    result = Py_BuildValue("idd", status, low, high);
done:
    PyBuffer_Release(&view);
    PyBuffer_Release(&centrev);
    PyBuffer_Release(&scalev);
    PyBuffer_Release(&outv);
    PyBuffer_Release(&codev);
    PyBuffer_Release(&sumv);
    PyBuffer_Release(&countv);
    return result;
}

/* Row i's squared norm, its squares added in column order (the first square, then each
   next one). */
static inline double
square_norm(const double *row, Py_ssize_t d)
{
    double s = row[0] * row[0];
    Py_ssize_t j;
    for (j = 1; j < d; j++)
        s += row[j] * row[j];
    return s;
}

/* The squared norms of eight consecutive rows, as eight independent chains, each in
   column order: square_norm's sums, bit for bit, eight at a time. */
static inline __attribute__((always_inline)) void
eight_square_norms(const double *rows, Py_ssize_t d, double s[8])
{
    int r;
    Py_ssize_t j;
    for (r = 0; r < 8; r++)
        s[r] = rows[r * d] * rows[r * d];
    for (j = 1; j < d; j++)
        for (r = 0; r < 8; r++)
            s[r] += rows[r * d + j] * rows[r * d + j];
}

/* sums_norms: see the module's comment. Returns 1 if a value or a square is not finite.
   Eight rows at a time: their column sums in row order (vectorised across the columns),
   then their norms as eight independent chains, each in column order. */
static inline __attribute__((always_inline)) int
sums_norms_body(const double *v, Py_ssize_t n, Py_ssize_t d, double *sums, double *largest)
{
    double top, s[8];
    int bad = 0, r;
    Py_ssize_t i = 1, j;
    for (j = 0; j < d; j++)
        sums[j] = 0.0 + v[j]; /* numpy's sum starts at +0.0: a column of -0.0 sums to +0.0 */
    top = square_norm(v, d);
    bad |= !isfinite(top);
    for (; i + 8 <= n; i += 8) {
        const double *rows = v + i * d;
        for (r = 0; r < 8; r++)
            for (j = 0; j < d; j++)
                sums[j] += rows[r * d + j];
        eight_square_norms(rows, d, s);
        for (r = 0; r < 8; r++) {
            bad |= !isfinite(s[r]);
            top = s[r] > top ? s[r] : top;
        }
    }
    for (; i < n; i++) {
        const double *row = v + i * d;
        double t = square_norm(row, d);
        for (j = 0; j < d; j++)
            sums[j] += row[j];
        bad |= !isfinite(t);
        top = t > top ? t : top;
    }
    for (j = 0; j < d; j++)
        bad |= !isfinite(sums[j]);
    *largest = top;
    return bad;
}

static int
sums_norms_rows(const double *v, Py_ssize_t n, Py_ssize_t d, double *sums, double *largest)
{
    return sums_norms_body(v, n, d, sums, largest);
}

#ifdef HAVE_AVX2_PATH
/* The same code, compiled for AVX2 (nothing fused: -ffp-contract=off). */
__attribute__((target("avx2"))) static int
sums_norms_avx2(const double *v, Py_ssize_t n, Py_ssize_t d, double *sums, double *largest)
{
    return sums_norms_body(v, n, d, sums, largest);
}
#endif

static PyObject *
sums_norms(PyObject *self, PyObject *args)
{
    Py_buffer view = {0}, sumv = {0};
    Py_ssize_t d, n;
    double largest = 0.0;
    int status;
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "y*nw*", &view, &d, &sumv))
        return NULL;
    n = d > 0 ? view.len / (Py_ssize_t)sizeof(double) / d : 0;
    if (d <= 0 || n <= 0 || view.len != n * d * (Py_ssize_t)sizeof(double)
        || sumv.len != d * (Py_ssize_t)sizeof(double)) {
        PyErr_SetString(PyExc_ValueError, "the buffers' sizes do not match n x d (n >= 1) and d");
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
#ifdef HAVE_AVX2_PATH
    if (use_avx2())
        status = sums_norms_avx2(view.buf, n, d, sumv.buf, &largest);
    else
#endif
        status = sums_norms_rows(view.buf, n, d, sumv.buf, &largest);
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("id", status, largest);
done:
    PyBuffer_Release(&view);
    PyBuffer_Release(&sumv);
    return result;
}

/* offsets: see the module's comment. Returns 1 if a squared norm is not finite. Eight
   rows at a time: their offsets written (vectorised across the columns), then their
   squared norms from what was written, as eight independent chains in column order. */
static inline __attribute__((always_inline)) int
offsets_body(const double *v, Py_ssize_t n, Py_ssize_t d, const double *inverse,
             const double *mean, double *out, double *norms)
{
    double s[8];
    int bad = 0, r;
    Py_ssize_t i = 0, j;
    for (; i + 8 <= n; i += 8) {
        const double *rows = v + i * d;
        double *to = out + i * d;
        for (r = 0; r < 8; r++) {
            double scale = inverse[i + r];
            for (j = 0; j < d; j++) {
                double u = rows[r * d + j] * scale; /* two roundings, as numpy's two ufuncs */
                to[r * d + j] = u - mean[j];
            }
        }
        eight_square_norms(to, d, s);
        for (r = 0; r < 8; r++) {
            bad |= !isfinite(s[r]);
            norms[i + r] = sqrt(s[r]);
        }
    }
    for (; i < n; i++) {
        const double *row = v + i * d;
        double *to = out + i * d, scale = inverse[i], t;
        for (j = 0; j < d; j++) {
            double u = row[j] * scale;
            to[j] = u - mean[j];
        }
        t = square_norm(to, d);
        bad |= !isfinite(t);
        norms[i] = sqrt(t);
    }
    return bad;
}

static int
offsets_rows(const double *v, Py_ssize_t n, Py_ssize_t d, const double *inverse,
             const double *mean, double *out, double *norms)
{
    return offsets_body(v, n, d, inverse, mean, out, norms);
}

#ifdef HAVE_AVX2_PATH
/* The same code, compiled for AVX2 (nothing fused: -ffp-contract=off). */
__attribute__((target("avx2"))) static int
offsets_avx2(const double *v, Py_ssize_t n, Py_ssize_t d, const double *inverse,
             const double *mean, double *out, double *norms)
{
    return offsets_body(v, n, d, inverse, mean, out, norms);
}
#endif

static PyObject *
offsets(PyObject *self, PyObject *args)
{
    Py_buffer view = {0}, invv = {0}, meanv = {0}, outv = {0}, normv = {0};
    Py_ssize_t d, n;
    int status;
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "y*ny*y*w*w*", &view, &d, &invv, &meanv, &outv, &normv))
        return NULL;
    n = d > 0 ? view.len / (Py_ssize_t)sizeof(double) / d : 0;
    if (d <= 0 || n <= 0 || view.len != n * d * (Py_ssize_t)sizeof(double)
        || invv.len != n * (Py_ssize_t)sizeof(double)
        || meanv.len != d * (Py_ssize_t)sizeof(double) || outv.len != view.len
        || normv.len != n * (Py_ssize_t)sizeof(double)) {
        PyErr_SetString(PyExc_ValueError,
                        "the buffers' sizes do not match n x d values (n >= 1), n and d");
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
#ifdef HAVE_AVX2_PATH
    if (use_avx2())
        status = offsets_avx2(view.buf, n, d, invv.buf, meanv.buf, outv.buf, normv.buf);
    else
#endif
        status = offsets_rows(view.buf, n, d, invv.buf, meanv.buf, outv.buf, normv.buf);
    Py_END_ALLOW_THREADS
    result = PyLong_FromLong(status);
done:
    PyBuffer_Release(&view);
    PyBuffer_Release(&invv);
    PyBuffer_Release(&meanv);
    PyBuffer_Release(&outv);
    PyBuffer_Release(&normv);
    return result;
}

/* group: see the module's comment. Returns 2 if a code is outside 0 .. k-1. `at` is
   scratch for 2k offsets. Each class's sum is 0.0 plus its rows in order (numpy's
   block.sum(axis=0) of its grouped block). */
static inline __attribute__((always_inline)) int
group_body(const double *v, Py_ssize_t n, Py_ssize_t d, const int64_t *codes, Py_ssize_t k,
           double *out, double *sums, int64_t *counts, Py_ssize_t *at)
{
    Py_ssize_t i, j, c, *start = at + k;
    memset(counts, 0, (size_t)k * sizeof(int64_t));
    for (i = 0; i < n; i++) {
        if (codes[i] < 0 || codes[i] >= k)
            return 2;
        counts[codes[i]]++;
    }
    for (c = 0, j = 0; c < k; c++) { /* each class's rows begin after the classes before */
        at[c] = start[c] = j;
        j += (Py_ssize_t)counts[c];
    }
    for (c = 0; c < k * d; c++)
        sums[c] = 0.0;
    for (i = 0; i < n; i++) {
        const double *row = v + i * d;
        double *sum = sums + codes[i] * d, *to = out + at[codes[i]]++ * d;
        for (j = 0; j < d; j++) {
            to[j] = row[j];
            sum[j] += row[j];
        }
    }
    return 0;
}

static int
group_rows(const double *v, Py_ssize_t n, Py_ssize_t d, const int64_t *codes, Py_ssize_t k,
           double *out, double *sums, int64_t *counts, Py_ssize_t *at)
{
    return group_body(v, n, d, codes, k, out, sums, counts, at);
}

#ifdef HAVE_AVX2_PATH
/* The same code, compiled for AVX2 (nothing fused: -ffp-contract=off). */
__attribute__((target("avx2"))) static int
group_avx2(const double *v, Py_ssize_t n, Py_ssize_t d, const int64_t *codes, Py_ssize_t k,
           double *out, double *sums, int64_t *counts, Py_ssize_t *at)
{
    return group_body(v, n, d, codes, k, out, sums, counts, at);
}
#endif

static PyObject *
group(PyObject *self, PyObject *args)
{
    Py_buffer view = {0}, codev = {0}, outv = {0}, sumv = {0}, countv = {0};
    Py_ssize_t d, n, k;
    Py_ssize_t *at = NULL;
    int status;
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "y*ny*w*w*w*", &view, &d, &codev, &outv, &sumv, &countv))
        return NULL;
    n = d > 0 ? view.len / (Py_ssize_t)sizeof(double) / d : 0;
    k = countv.len / (Py_ssize_t)sizeof(int64_t);
    if (d <= 0 || n <= 0 || k <= 0 || view.len != n * d * (Py_ssize_t)sizeof(double)
        || codev.len != n * (Py_ssize_t)sizeof(int64_t) || outv.len != view.len
        || sumv.len != k * d * (Py_ssize_t)sizeof(double)
        || countv.len != k * (Py_ssize_t)sizeof(int64_t)) {
        PyErr_SetString(PyExc_ValueError,
                        "the buffers' sizes do not match n x d values (n >= 1), n codes and k "
                        "classes (k >= 1)");
        goto done;
    }
    at = PyMem_Malloc(2 * (size_t)k * sizeof(Py_ssize_t));
    if (at == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
#ifdef HAVE_AVX2_PATH
    if (use_avx2())
        status = group_avx2(view.buf, n, d, codev.buf, k, outv.buf, sumv.buf, countv.buf, at);
    else
#endif
        status = group_rows(view.buf, n, d, codev.buf, k, outv.buf, sumv.buf, countv.buf, at);
    Py_END_ALLOW_THREADS
    result = PyLong_FromLong(status);
done:
    PyMem_Free(at);
    PyBuffer_Release(&view);
    PyBuffer_Release(&codev);
    PyBuffer_Release(&outv);
    PyBuffer_Release(&sumv);
    PyBuffer_Release(&countv);
    return result;
}

static PyMethodDef methods[] = {
    {"rows", rows, METH_VARARGS,
     "Map each row of contiguous float64 values, add it to its group's sum, count it, and "
     "return the extremes, in one read."},
    {"extremes", extremes, METH_VARARGS,
     "The minimum and maximum of contiguous float64 values in one read, and whether one "
     "is not finite."},
    {"sums_norms", sums_norms, METH_VARARGS,
     "The column sums and the largest squared row norm of contiguous float64 rows, in one "
     "read."},
    {"offsets", offsets, METH_VARARGS,
     "Each contiguous float64 row scaled, less a point, and the result's norm, in one read."},
    {"group", group, METH_VARARGS,
     "Group contiguous float64 rows by class, in order, with each class's count and sum, in "
     "one read."},
    {"prepare", prepare, METH_VARARGS,
     "Convert a chunk's columns to row-major float64, check them finite, clip to the box."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_chunkc", "A chunk converted, checked and clipped in one pass.", -1,
    methods,
};

PyMODINIT_FUNC
PyInit__chunkc(void)
{
    return PyModule_Create(&module);
}
