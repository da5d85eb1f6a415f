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
   a release on its grid (both below); libm(...) exposes log and exp for the tests.

   log() and exp() are the C library's; the filter assumes relative errors below 2^-42
   and 2^-32 (glibc's are below 1 ulp, 2^-52). Compiled with -ffp-contract=off so that
   every operation is rounded as written, as in numpy. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define TABLE_MASK UINT64_C(0x1ffe) /* bits 1..12 of the word, times 2 */
#define ONE_BITS UINT64_C(0x3FF0000000000001)

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
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t w = words[i];
        double v;
        if (stage == 0) {
            /* u = (2k + 1)/2^52 for the top 51 bits k: 2k + 1 as the mantissa of a
               double in [1, 2), minus 1 (exact); y = -s ln u within slack/3 of -s ln U
               for every U of the interval when U >= 2^-12 (docs/samplers.md). */
            uint64_t bits = (w >> 12) | ONE_BITS;
            double u;
            memcpy(&u, &bits, sizeof u);
            u -= 1.0;
            double y = log(u) * minus_scale;
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
    for (Py_ssize_t i = 0; i < n && got < capacity; i++) {
        if (status[i] != 1 || (x[i] == 0.0 && signbit(x[i])))
            continue;
        out[got++] = (int64_t)x[i];
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&xv);
    PyBuffer_Release(&sv);
    PyBuffer_Release(&ov);
    return PyLong_FromSsize_t(got);
}

/* place(value, noise, out, gamma, limit): a release on a grid in one pass,
   out = (clip(rint(value/gamma), -limit, limit) + noise) * gamma, each step rounded as
   noise.py's GridNoise.place rounds it (k + Z added in int64 when |Z| >= 2^53). */
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
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        double k = rint(value[i] / gamma);
        k = k < -limit ? -limit : (k > limit ? limit : k);
        int64_t z = noise[i];
        double sum = (z < exact_limit && z > -exact_limit) ? k + (double)z
                                                            : (double)((int64_t)k + z);
        out[i] = sum * gamma;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&vv);
    PyBuffer_Release(&nv);
    PyBuffer_Release(&ov);
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
    for (Py_ssize_t i = 0; i < iv.len / 8; i++)
        out[i] = negate ? exp(-in[i]) : log(in[i]);
    PyBuffer_Release(&iv);
    PyBuffer_Release(&ov);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"filter", exactc_filter, METH_VARARGS, "The fused per-proposal filter."},
    {"refine", exactc_refine, METH_VARARGS, "The Gaussian's refined acceptances."},
    {"compact", exactc_compact, METH_VARARGS, "The accepted values, in order."},
    {"place", exactc_place, METH_VARARGS, "A release on a grid, in one pass."},
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
