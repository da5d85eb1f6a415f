"""Build configuration beyond pyproject.toml: three optional C kernels.

``dpframe.privacy._exactc`` (the exact samplers' fused filter), ``dpframe.data._chunkc``
(a streamed chunk converted, checked and clipped in one pass) and ``dpframe.data._ghashc``
(GHASH, for the ledger's dataset fingerprints) are built when a C compiler is present and
skipped otherwise (``optional=True``): dpframe then uses numpy, or OpenSSL for GHASH, which
compute the same values, more slowly (docs/samplers.md, "The C kernel"; docs/scaling.md,
"The chunk kernel"; docs/ledger.md, "Dataset fingerprint").
"""

import platform
import sys

from setuptools import Extension, setup

flags = [] if sys.platform == "win32" else ["-O2", "-ffp-contract=off"]
# glibc's vector log (libmvec, x86-64) for the exact filter's logs, at run time where the
# CPU has AVX2 (the C library's log otherwise): docs/samplers.md, "The C kernel"
libmvec = (
    sys.platform.startswith("linux")
    and platform.machine() == "x86_64"
    and platform.libc_ver()[0] == "glibc"
)
vectorised = [] if sys.platform == "win32" else ["-O3", "-ffp-contract=off"]  # the clip's loop

setup(
    ext_modules=[
        Extension(
            "dpframe.privacy._exactc",
            ["dpframe/privacy/_exactc.c"],
            depends=["dpframe/_avx2.h"],
            extra_compile_args=flags,
            define_macros=[("DPFRAME_LIBMVEC", "1")] if libmvec else [],
            libraries=["mvec", "m"] if libmvec else [],
            optional=True,
        ),
        Extension(
            "dpframe.data._chunkc",
            ["dpframe/data/_chunkc.c"],
            depends=["dpframe/_avx2.h"],
            extra_compile_args=vectorised,
            optional=True,
        ),
        Extension(
            "dpframe.data._ghashc",
            ["dpframe/data/_ghashc.c"],
            extra_compile_args=flags,
            optional=True,
        ),
    ]
)
