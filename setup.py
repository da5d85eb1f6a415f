"""Build configuration beyond pyproject.toml: the exact samplers' optional C kernel.

``dpframe.privacy._exactc`` is built when a C compiler is present and skipped otherwise
(``optional=True``): dpframe then uses the pure-numpy filter, which computes the same
draws, more slowly (docs/samplers.md, "The C kernel").
"""

import sys

from setuptools import Extension, setup

flags = [] if sys.platform == "win32" else ["-O2", "-ffp-contract=off"]

setup(
    ext_modules=[
        Extension(
            "dpframe.privacy._exactc",
            ["dpframe/privacy/_exactc.c"],
            extra_compile_args=flags,
            optional=True,
        )
    ]
)
