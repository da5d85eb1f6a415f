/* The AVX2 paths of dpframe's optional C kernels (dpframe/privacy/_exactc.c,
   dpframe/data/_chunkc.c): on x86-64 with GCC or Clang, HAVE_AVX2_PATH is defined, the
   intrinsics are available to functions marked __attribute__((target("avx2"))), and
   use_avx2() says, once per process, whether this CPU runs them. */
#ifndef DPFRAME_AVX2_H
#define DPFRAME_AVX2_H

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_AVX2_PATH 1

static int
use_avx2(void)
{
    static int known = -1;
    if (known < 0) {
        __builtin_cpu_init();
        known = __builtin_cpu_supports("avx2") ? 1 : 0;
    }
    return known;
}
#endif

#endif
