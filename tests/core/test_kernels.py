"""The optional compiled kernels are built where a C compiler exists (pip install builds
them; a silent build failure would leave every release on the slower numpy or OpenSSL
path), and an environment variable switches each off."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import sysconfig

import pytest

KERNELS = [
    ("dpframe.privacy.exact", "filter_path", "dpframe.privacy._exactc", "DPFRAME_EXACT_KERNEL"),
    ("dpframe.data.chunks", "kernel_path", "dpframe.data._chunkc", "DPFRAME_CHUNK_KERNEL"),
    ("dpframe.data.fingerprint", "ghash_path", "dpframe.data._ghashc", "DPFRAME_GHASH_KERNEL"),
]
FALLBACK = {"dpframe.data._ghashc": "openssl"}  # the others fall back on numpy


def _no_carry_less_multiply() -> bool:
    try:
        return importlib.import_module("dpframe.data._ghashc").paths() == ()
    except ImportError:  # not built: the test says so
        return False


@pytest.mark.parametrize(("module", "path", "kernel", "switch"), KERNELS)
def test_the_kernel_is_built_where_a_compiler_exists(module, path, kernel, switch):
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip("no C compiler: the numpy path is the intended one")
    if os.environ.get(switch, "1") in ("0", "off", "no", "false"):
        pytest.skip(f"{switch} switches the kernel off")
    if kernel == "dpframe.data._ghashc" and _no_carry_less_multiply():
        pytest.skip("this CPU has no carry-less multiply: OpenSSL's GCM is the intended path")
    assert getattr(importlib.import_module(module), path)() == "c", (
        f"{kernel} is not built: reinstall (pip install -e .) or run "
        "`python setup.py build_ext --inplace`"
    )


@pytest.mark.parametrize(("module", "path", "kernel", "switch"), KERNELS)
def test_the_environment_switches_a_kernel_off(module, path, kernel, switch):
    code = f"import {module} as m; print(m.{path}())"
    env = {**os.environ, switch: "off"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == FALLBACK.get(kernel, "numpy")
