"""Run a Markdown document's code blocks the way a reader would, in one temporary directory.

Every fenced block whose language is in :data:`RUN` runs, in document order, unless the
HTML comment just before it says why it cannot: ``<!-- not-run: needs a Dask scheduler -->``.
The blocks of one document share a terminal: the working directory and the exported
variables a bash block leaves (``cd``, ``export``) hold for the next blocks, and the Python
blocks share one interpreter (names defined in one are seen by the next). Bash blocks run
with ``set -eo pipefail``, so a failing command fails its block; a command expected to fail
is shown as ``cmd || echo "exit status $?"``. The interpreter's ``bin`` directory (the
virtualenv, with the ``dpframe`` script) comes first on ``PATH``.

A block marked ``<!-- docs-setup -->`` is also run first for every other document, so that
a page can start where the README's tutorial leaves a reader (the data and its domain);
:func:`prepare` runs such bash blocks once and each document starts from a copy of what
they left (files, working directory, exported variables).

With a :class:`Commands` server, the ``dpframe`` a block runs is a process forked from one
interpreter that has already imported the command line and the modules its commands load
(numpy, scipy, dp-accounting, the plugins): each command is still its own process, with
the block's arguments, working directory, environment, standard streams and exit status,
but it does not pay the imports again (about 1 s of CPU per release command). A document's
Python interpreter is forked by the same server (:meth:`Commands.python`): the blocks still
share one interpreter of their own, with the document's directory, variables and pipes. The
server freezes its objects out of the garbage collector (``gc.freeze``) before forking, so
that a command's collections do not touch, and copy, the pages of everything imported
(0.24 s -> 0.07 s of CPU for ``dpframe ledger budget list``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import attrs

BASH = ("bash", "sh", "shell")
PYTHON = ("python", "py")
RUN = BASH + PYTHON
TIMEOUT = 300.0
"""Seconds one block may take before it counts as failed."""

_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)\s*(?P<lang>[\w+-]*)")
_MARKER = re.compile(r"<!--\s*not-run:(?P<reason>.*?)-->")
_SETUP = re.compile(r"<!--\s*docs-setup\s*-->")


@attrs.frozen
class Block:
    """One fenced code block: its language, first code line (1-based), code, and the reason
    it is not run (None when it runs)."""

    lang: str
    line: int
    code: str
    not_run: str | None
    setup: bool = False

    @property
    def runs(self) -> bool:
        return self.lang in RUN and self.not_run is None


def blocks(text: str) -> list[Block]:
    """The fenced code blocks of a Markdown text, with their not-run markers."""
    lines = text.splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        fence, indent = match["fence"], match["indent"]
        start = i + 1
        i = start
        while i < len(lines) and not lines[i].strip().startswith(fence):
            i += 1
        body = [line[len(indent) :] if line.startswith(indent) else line for line in lines[start:i]]
        comments = _comments(lines, start - 1)
        found.append(
            Block(
                match["lang"].lower(),
                start + 1,
                "\n".join(body) + "\n",
                _not_run(comments),
                any(_SETUP.search(line) for _, line in comments),
            )
        )
        i += 1
    return found


def _comments(lines: list[str], fence: int) -> list[tuple[int, str]]:
    """The HTML comment lines right above line ``fence`` (0-based), with their indices."""
    found = []
    j = fence - 1
    while j >= 0 and lines[j].strip().startswith("<!--"):
        found.append((j, lines[j]))
        j -= 1
    return found


def _not_run(comments: list[tuple[int, str]]) -> str | None:
    """The reason of a ``not-run`` marker among ``comments``."""
    for j, line in comments:
        match = _MARKER.search(line)
        if match:
            reason = match["reason"].strip()
            if not reason:
                raise ValueError(f"line {j + 1}: a not-run marker must say why.")
            return reason
    return None


def runnable(path: Path) -> bool:
    """Whether the document has at least one block to run."""
    return any(b.runs for b in blocks(path.read_text()))


class BlockFailed(AssertionError):
    """A block of a document failed; the message names the line and shows the output."""


_DRIVER = r"""
import os, sys, traceback
namespace = {"__name__": "__main__"}
token = sys.argv[1]
while True:
    header = sys.stdin.readline()
    if not header:
        break
    size, line, name, cwd = header.rstrip("\n").split("\t", 3)
    code = sys.stdin.read(int(size))
    env = {}
    for item in sys.stdin.read(int(sys.stdin.readline())).split("\0"):
        key, _, value = item.partition("=")
        if key:
            env[key] = value
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    status = 0
    try:
        exec(compile("\n" * (int(line) - 1) + code, name, "exec"), namespace)
    except SystemExit as exc:
        status = 0 if exc.code in (None, 0) else 1
    except BaseException as exc:  # the traceback from the block on (not this driver)
        traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    print(f"\n{token} {status}", flush=True)
"""


_WARM = (
    "dpframe.apps.cli.app",
    "dpframe.releases.session",
    "dpframe.releases.chain",
    "dpframe.ledger.store",
    "dpframe.apps.evaluate",
    "scipy.optimize",
    "scipy.stats",
    "pyarrow.parquet",
    "dp_accounting.pld.privacy_loss_distribution",
)
"""Modules the server imports before it forks commands (the ones the documents' commands
load: the ledger's accountants, the releases, the plugins)."""

_SERVER = r"""
import importlib, io, json, os, socket, sys, traceback
for name in sys.argv[2:]:
    try:
        importlib.import_module(name)
    except ImportError:
        pass
from dpframe.apps.cli.app import main
from dpframe.releases.plugins import registry
registry()
import gc
gc.freeze()  # a forked command's collections skip these objects: no copy-on-write of them
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(sys.argv[1])
listener.listen()
print("ready", flush=True)


def enter(fds, data):
    # in a forked child: the request's streams, directory, environment and arguments
    listener.close()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    request = json.loads(data)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = ["-c" if "driver" in request else "dpframe", *request["args"]]
    return request


def status(call):
    # the exit status an interpreter running call() would end with
    try:
        call()
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
        return 1
    return 0


def interpreter(fds, data, conn):
    # a document's interpreter, as python -u -c: it replies its exit status itself
    request = enter(fds, data)
    sys.stdin = sys.__stdin__ = open(0, encoding="utf-8", closefd=False)
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(
        io.FileIO(1, "w", closefd=False), encoding="utf-8", write_through=True)
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False), encoding="utf-8", write_through=True)
    code = status(lambda: exec(compile(request["driver"], "<string>", "exec"),
                               {"__name__": "__main__"}))
    conn.sendall(str(code).encode())
    conn.close()
    sys.exit(code)


interpreters = set()
while True:
    conn, _ = listener.accept()
    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
    while chunk := conn.recv(1 << 16):
        data += chunk
    for pid in [p for p in interpreters if os.waitpid(p, os.WNOHANG)[0]]:
        interpreters.discard(pid)
    if not fds:
        break
    driver = "driver" in json.loads(data)
    pid = os.fork()
    if pid == 0 and driver:
        interpreter(fds, data, conn)
    if pid == 0:
        conn.close()
        request = enter(fds, data)
        # the interpreter's own exit: atexit handlers and flushes, as a real one
        sys.exit(status(lambda: main(request["args"])))
    for fd in fds:
        os.close(fd)
    if driver:  # its status comes from itself; reaped later
        conn.sendall(f"{pid}\n".encode())
        conn.close()
        interpreters.add(pid)
        continue
    _, status_ = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status_)
    conn.sendall(str(code if code >= 0 else 128 - code).encode())
    conn.close()
for pid in interpreters:  # reaped, so that their CPU time is counted as the server's
    os.waitpid(pid, 0)
"""

_CLIENT = r"""
import json, os, socket, sys
client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
client.connect({path!r})
request = {{"args": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ)}}
socket.send_fds(client, [json.dumps(request).encode()], [0, 1, 2])
client.shutdown(socket.SHUT_WR)
reply = b""
while chunk := client.recv(64):
    reply += chunk
sys.exit(int(reply))
"""


class Forked:
    """A process the :class:`Commands` server forked for this one (``Popen``'s ``stdin``,
    ``stdout``, ``kill`` and ``wait``): the server reaps it; it replies its exit status."""

    def __init__(self, pid: int, conn: socket.socket, stdin: IO[str], stdout: IO[str]) -> None:
        self.pid, self._conn, self.stdin, self.stdout = pid, conn, stdin, stdout

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int:
        self._conn.settimeout(timeout)
        try:
            reply = self._conn.recv(64)
        except TimeoutError:
            raise subprocess.TimeoutExpired(["forked interpreter"], timeout or 0) from None
        finally:
            self._conn.close()
            self.stdout.close()
        return int(reply) if reply else -signal.SIGKILL


class Commands:
    """A server of ``dpframe`` processes for the documents' bash blocks: a directory
    holding a ``dpframe`` script to put first on ``PATH``, which has the server fork the
    command (see the module docstring). :meth:`close` stops the server."""

    def __init__(self) -> None:
        self.bindir = Path(tempfile.mkdtemp(prefix="docblocks-bin-"))
        path = str(self.bindir / "server.sock")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DPFRAME_", "PYTEST"))}
        self._server = subprocess.Popen(
            [sys.executable, "-c", _SERVER, path, *_WARM],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            env={**env, "MPLBACKEND": env.get("MPLBACKEND", "Agg")},
            text=True,
        )
        assert self._server.stdout is not None
        if self._server.stdout.readline().strip() != "ready":
            self.close()
            raise RuntimeError("the dpframe command server did not start.")
        self._socket = path
        script = self.bindir / "dpframe"
        script.write_text(f"#!{sys.executable} -S\n" + _CLIENT.format(path=path))
        script.chmod(0o755)

    def python(self, cwd: Path, env: dict[str, str], args: list[str]) -> Forked:
        """A document's interpreter (:data:`_DRIVER` with ``args``), forked by the server
        with the given directory and environment; its standard input and output are pipes
        (output and errors on one), as for ``python -u -c``."""
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(self._socket)
        request = {"driver": _DRIVER, "args": args, "cwd": str(cwd), "env": env}
        socket.send_fds(conn, [json.dumps(request).encode()], [stdin_r, stdout_w, stdout_w])
        conn.shutdown(socket.SHUT_WR)
        os.close(stdin_r), os.close(stdout_w)
        pid = int(conn.makefile("rb").readline())
        stdin = open(stdin_w, "w", encoding="utf-8")  # noqa: SIM115 - closed by Forked
        stdout = open(stdout_r, encoding="utf-8")  # noqa: SIM115
        return Forked(pid, conn, stdin, stdout)

    def close(self) -> None:
        if self._server.poll() is None:
            try:  # a request without file descriptors stops the server
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as stop:
                    stop.connect(self._socket)
                    stop.sendall(b"{}")
                self._server.wait(timeout=30)
            except (OSError, AttributeError, subprocess.TimeoutExpired):
                self._server.kill()
                self._server.wait()
        shutil.rmtree(self.bindir, ignore_errors=True)


class Terminal:
    """A reader's terminal for one document: a working directory, exported variables,
    and one Python interpreter."""

    def __init__(
        self, cwd: Path, env: dict[str, str] | None = None, commands: Commands | None = None
    ) -> None:
        base = dict(os.environ if env is None else env)
        for key in [k for k in base if k.startswith("DPFRAME_") or k.startswith("PYTEST")]:
            del base[key]
        bindir = str(Path(sys.executable).parent)
        base["PATH"] = bindir + os.pathsep + base.get("PATH", "")
        if commands is not None:
            base["PATH"] = str(commands.bindir) + os.pathsep + base["PATH"]
        self._commands = commands
        base.setdefault("MPLBACKEND", "Agg")
        self.cwd, self.env = Path(cwd), base
        self._python: subprocess.Popen[str] | Forked | None = None
        self._token = f"__docblock_{uuid.uuid4().hex}__"
        self._state = Path(tempfile.mkdtemp(prefix="docblocks-"))  # outside the reader's files

    def run(self, block: Block, name: str) -> str:
        """Run one block; its output, or :class:`BlockFailed`."""
        if block.lang in BASH:
            return self._bash(block, name)
        return self._run_python(block, name)

    def _bash(self, block: Block, name: str) -> str:
        state = self._state / "shell"
        script = (
            "set -eo pipefail\n"
            f"trap 'pwd > {state}.cwd; export -p > {state}.env' EXIT\n" + block.code
        )
        try:
            proc = subprocess.run(
                ["bash", "-c", script],
                cwd=self.cwd,
                env=self.env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=TIMEOUT,
            )
        except subprocess.TimeoutExpired as exc:
            raise BlockFailed(f"{name}:{block.line}: timed out after {TIMEOUT:.0f} s") from exc
        if Path(f"{state}.cwd").exists():
            self.cwd = Path(Path(f"{state}.cwd").read_text().strip())
            self.env = _exported(Path(f"{state}.env"), self.env)
        if proc.returncode != 0:
            raise BlockFailed(
                f"{name}:{block.line}: the bash block exited {proc.returncode}:\n{proc.stdout}"
            )
        return proc.stdout

    def _run_python(self, block: Block, name: str) -> str:
        if self._python is None and self._commands is not None:
            env = {**self.env, "PYTHONIOENCODING": "utf-8"}
            self._python = self._commands.python(self.cwd, env, [self._token])
        elif self._python is None:
            self._python = subprocess.Popen(
                [sys.executable, "-u", "-c", _DRIVER, self._token],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=self.cwd,
                env={**self.env, "PYTHONIOENCODING": "utf-8"},
                text=True,
                encoding="utf-8",
            )
        proc = self._python
        assert proc.stdin is not None and proc.stdout is not None
        env = "\0".join(f"{k}={v}" for k, v in self.env.items())
        # A dead interpreter may close the pipe before the block is sent: its output (none,
        # or what it printed before dying) then reports it as dead, below.
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.write(f"{len(block.code)}\t{block.line}\t{name}\t{self.cwd}\n{block.code}")
            proc.stdin.write(f"{len(env)}\n{env}")
            proc.stdin.flush()
        output: list[str] = []
        timer = threading.Timer(TIMEOUT, proc.kill)  # a block that hangs dies, and fails
        timer.start()
        try:
            return self._python_output(proc, block, name, output)
        finally:
            timer.cancel()

    def _python_output(
        self, proc: subprocess.Popen[str] | Forked, block: Block, name: str, output: list[str]
    ) -> str:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith(self._token):
                if line.split()[1] != "0":
                    raise BlockFailed(
                        f"{name}:{block.line}: the Python block failed:\n" + "".join(output)
                    )
                return "".join(output)
            output.append(line)
        raise BlockFailed(f"{name}:{block.line}: the Python interpreter died:\n" + "".join(output))

    def close(self) -> None:
        shutil.rmtree(self._state, ignore_errors=True)
        if self._python is not None:
            assert self._python.stdin is not None
            with contextlib.suppress(BrokenPipeError):  # an interpreter that died
                self._python.stdin.close()
            self._python.wait(timeout=30)
            self._python = None


def _exported(path: Path, previous: dict[str, str]) -> dict[str, str]:
    """The variables ``export -p`` wrote, read back by bash itself."""
    proc = subprocess.run(
        ["bash", "-c", f'source "{path}" 2>/dev/null; env -0'],
        env={},
        capture_output=True,
        text=True,
        check=False,
    )
    env = dict(item.partition("=")[::2] for item in proc.stdout.split("\0") if "=" in item)
    env.pop("PWD", None), env.pop("OLDPWD", None), env.pop("SHLVL", None), env.pop("_", None)
    return env or previous


@attrs.frozen
class Prepared:
    """What a document's ``docs-setup`` bash blocks leave, run once (:func:`prepare`): the
    files in ``root``, the working directory (relative to it) and the exported variables."""

    root: Path
    cwd: Path
    env: dict[str, str]

    def restore(self, terminal: Terminal) -> None:
        """Give ``terminal`` the same state, as if the setup blocks had run in its directory:
        the files copied there, and ``root`` replaced by that directory in the variables."""
        shutil.copytree(self.root, terminal.cwd, symlinks=True, dirs_exist_ok=True)
        here = str(terminal.cwd)
        terminal.env = {k: v.replace(str(self.root), here) for k, v in self.env.items()}
        terminal.cwd = terminal.cwd / self.cwd


def prepare(setup: Path, commands: Commands | None = None) -> Prepared:
    """Run the ``docs-setup`` blocks of ``setup`` once, in a temporary directory (bash
    blocks only: a Python block's names would live in its interpreter)."""
    root = Path(tempfile.mkdtemp(prefix="docblocks-setup-"))
    terminal = Terminal(root, commands=commands)
    try:
        for block in blocks(setup.read_text()):
            if block.runs and block.setup:
                if block.lang not in BASH:
                    raise ValueError(f"{setup}:{block.line}: only bash setup blocks are prepared")
                terminal.run(block, f"{setup} (setup)")
    finally:
        terminal.close()
    return Prepared(root, terminal.cwd.relative_to(root), dict(terminal.env))


def run_document(
    path: Path,
    cwd: Path,
    setup: Path | Prepared | None = None,
    commands: Commands | None = None,
) -> Iterator[tuple[Block, str]]:
    """Run every runnable block of the document at ``path`` in ``cwd``, in order, after
    the ``docs-setup`` blocks of ``setup`` (or their :func:`prepare`-d state), with
    ``dpframe`` forked by ``commands`` when given; yields each of the document's blocks
    with its output, and raises :class:`BlockFailed` at the first failure."""
    terminal = Terminal(cwd, commands=commands)
    try:
        if isinstance(setup, Prepared):
            setup.restore(terminal)
        elif setup is not None:
            for block in blocks(setup.read_text()):
                if block.runs and block.setup:
                    terminal.run(block, f"{setup} (setup)")
        for block in blocks(path.read_text()):
            if block.runs:
                yield block, terminal.run(block, str(path))
    finally:
        terminal.close()


__all__ = [
    "Block",
    "BlockFailed",
    "Commands",
    "Prepared",
    "Terminal",
    "blocks",
    "prepare",
    "run_document",
    "runnable",
]
