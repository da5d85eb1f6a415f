"""Build configuration beyond pyproject.toml: two optional C kernels.

``dpframe.privacy._exactc`` (the exact samplers' fused filter) and ``dpframe.data._chunkc``
(a streamed chunk converted, checked and clipped in one pass) are built when a C compiler
is present and skipped otherwise (``optional=True``): dpframe then uses numpy, which
computes the same values, more slowly (docs/samplers.md, "The C kernel";
docs/scaling.md, "The chunk kernel").
"""

import sys

from setuptools import Extension, setup

flags = [] if sys.platform == "win32" else ["-O2", "-ffp-contract=off"]
vectorised = [] if sys.platform == "win32" else ["-O3", "-ffp-contract=off"]  # the clip's loop

setup(
    ext_modules=[
        Extension(
            "dpframe.privacy._exactc",
            ["dpframe/privacy/_exactc.c"],
            extra_compile_args=flags,
            optional=True,
        ),
        Extension(
            "dpframe.data._chunkc",
            ["dpframe/data/_chunkc.c"],
            extra_compile_args=vectorised,
            optional=True,
        ),
    ]
)
