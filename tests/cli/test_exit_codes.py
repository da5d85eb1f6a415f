"""Every exit code of the table in docs/cli.md, provoked through the CLI, in text and with
``--json`` (one object on stdout: ``{"error": {"code", "exit_code", "message"}}``, next to
the command's result when it has one)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import dpframe.apps.cli.plugins_cmd
from dpframe.apps.cli import cli
from dpframe.apps.demo import spec_path
from dpframe.errors import (
    EXIT_BUDGET_REFUSED,
    EXIT_COMPUTE,
    EXIT_DATA,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_LEDGER,
    EXIT_OK,
    EXIT_USAGE,
)
from dpframe.ledger import schema

CTG = spec_path().parent / "ctg.csv"
DOMAIN = """
[features]
names = ["LB", "AC", "ASTV", "ALTV", "MLTV"]
lower = [50, 0, 0, 0, 0]
upper = [240, 0.0667, 100, 100, 190]
[labels]
column = "NSP"
classes = [1, 2, 3]
"""


@pytest.fixture(autouse=True)
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DPFRAME_LEDGER", str(tmp_path / "test.ledger"))
    (tmp_path / "ctg.toml").write_text(DOMAIN)
    return tmp_path


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


def check(args: list[str], exit_code: int, code: str | None, fragment: str = "") -> dict:
    """Run ``args`` as text and with --json; both exit ``exit_code``; the text error is
    one sentence on stderr, the JSON one an object on stdout. Returns the JSON."""
    text = run(*args)
    assert text.exit_code == exit_code, text.output
    assert "Traceback" not in text.output
    if code is not None:
        last = text.stderr.strip().splitlines()[-1]
        assert last.startswith("Error: ") and fragment in last, text.stderr
    doc = run(*args, "--json")
    assert doc.exit_code == exit_code, doc.output
    parsed = json.loads(doc.stdout)
    if code is None:
        assert not (isinstance(parsed, dict) and "error" in parsed)
        return parsed
    error = parsed["error"]
    assert error == {"code": code, "exit_code": exit_code, "message": error["message"]}
    assert fragment in error["message"] and "\n" not in error["message"]
    return parsed


def release(*extra: str) -> list[str]:
    return ["release", "laplace", "--data", str(CTG), "--domain", "ctg.toml", "--out", "rel",
            "--param", "query=mean", *extra]  # fmt: skip


def test_0_success():
    rows = check(["plugins"], EXIT_OK, None)
    assert any(r["name"] == "laplace" for r in rows)


def test_1_refused_by_the_budget_and_nothing_charged(workdir):
    assert run("ledger", "budget", "create", "ctg", "--epsilon", "1").exit_code == 0
    check(release("--budget-label", "ctg", "--epsilon", "2"), EXIT_BUDGET_REFUSED,
          "budget_refused", "nothing was charged")  # fmt: skip
    # no budget for these data at all: refused by the ledger, also exit 1
    check(release("--budget-label", "other", "--epsilon", "0.5"), EXIT_BUDGET_REFUSED,
          "budget_refused")  # fmt: skip
    # a cap or accountant that contradicts the budget's: also a budget refusal (it was 4)
    check(release("--budget-label", "ctg", "--epsilon", "0.5", "--budget-epsilon", "3"),
          EXIT_BUDGET_REFUSED, "budget_refused", "cannot be changed")  # fmt: skip
    check(release("--budget-label", "ctg", "--epsilon", "0.5", "--budget-epsilon", "1",
                  "--accountant", "rdp"),
          EXIT_BUDGET_REFUSED, "budget_refused", "cannot be changed")  # fmt: skip
    assert not (workdir / "rel").exists()
    shown = json.loads(run("ledger", "show", "--json").stdout)
    assert shown["charges"] == []


def test_2_usage_errors_ours_and_clicks():
    check(["describe", "no-such-mechanism"], EXIT_USAGE, "usage", "no-such-mechanism")
    check(release("--budget-epsilon", "1", "--epsilon", "-1"), EXIT_USAGE, "usage", "epsilon")
    # click's own: a missing option, an unknown option, a value of the wrong type
    check(["release", "laplace", "--data", str(CTG)], EXIT_USAGE, "usage", "--epsilon")
    check(["ledger", "show", "--bogus"], EXIT_USAGE, "usage", "--bogus")
    check(release("--epsilon", "lots"), EXIT_USAGE, "usage", "lots")
    check(["no-such-command"], EXIT_USAGE, "usage", "no-such-command")
    check(["--bogus", "plugins"], EXIT_USAGE, "usage", "--bogus")  # the root's options


def test_3_data_and_domain_errors(workdir):
    check(["release", "laplace", "--data", "missing.csv", "--domain", "ctg.toml",
           "--epsilon", "1", "--budget-epsilon", "1", "--out", "o"],
          EXIT_DATA, "data", "missing.csv")  # fmt: skip
    (workdir / "bad.toml").write_text("[features]\nlower = [1]\nupper = [0]\n")
    check(["release", "laplace", "--data", str(CTG), "--domain", "bad.toml",
           "--epsilon", "1", "--budget-epsilon", "1", "--out", "o"],
          EXIT_DATA, "data", "exceeds")  # fmt: skip


def test_4_a_damaged_ledger(workdir):
    (workdir / "damaged.ledger").write_bytes(b"this is not a ledger" * 100)
    check(["ledger", "show", "--ledger", "damaged.ledger"], EXIT_LEDGER, "ledger", "damaged")


def test_4_a_ledger_locked_by_another_process(workdir, monkeypatch):
    assert run("ledger", "init").exit_code == 0
    connect = schema.connect
    monkeypatch.setattr(schema, "connect", lambda path, timeout: connect(path, 0.2))
    holder = sqlite3.connect(workdir / "test.ledger", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process's write transaction
    try:
        check(["ledger", "budget", "create", "b", "--epsilon", "1"], EXIT_LEDGER, "ledger",
              "locked")  # fmt: skip
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_4_a_tampered_ledger_fails_verification_with_the_report(workdir):
    assert run("ledger", "budget", "create", "ctg", "--epsilon", "1").exit_code == 0
    conn = sqlite3.connect(workdir / "test.ledger")
    conn.execute("DROP TRIGGER entries_no_update")
    conn.execute("UPDATE entries SET body = replace(body, '\"ctg\"', '\"gtc\"')")
    conn.commit()
    conn.close()
    doc = check(["ledger", "verify"], EXIT_LEDGER, "ledger", "failed verification")
    assert doc["ok"] is False and doc["problems"]  # the report and the error, one object


def test_5_a_chain_step_that_fails_while_running(workdir, monkeypatch):
    sys.path.insert(0, str(Path(__file__).parents[1] / "session"))
    from session_kit import FailingLaplace, register

    register(monkeypatch, FailingLaplace)
    (workdir / "chain.toml").write_text(
        f'[budget]\nlabel = "ctg"\nepsilon = 10\n[data]\npath = "{CTG}"\n'
        '[domain]\nfile = "ctg.toml"\n[[steps]]\nname = "broken"\n'
        f'mechanism = "{FailingLaplace.name}"\nepsilon = 1\n'
    )
    text = run("chain", "run", "chain.toml", "--out", "run1")
    assert text.exit_code == EXIT_COMPUTE, text.output
    doc = run("chain", "run", "chain.toml", "--out", "run2", "--json")
    parsed = json.loads(doc.stdout)
    assert doc.exit_code == EXIT_COMPUTE and parsed["error"]["code"] == "compute"
    assert parsed["steps"][0]["status"] == "failed"  # the chain's summary, with the error


def test_3_a_chain_step_stopped_by_its_data_exits_as_a_data_error(workdir, monkeypatch):
    # Not every stop is a budget refusal: the chain exits with the code of what stopped it.
    sys.path.insert(0, str(Path(__file__).parents[1] / "session"))
    from session_kit import FailingLaplace, register

    from dpframe.errors import DataError

    class BadDataLaplace(FailingLaplace):
        name = "test-bad-data-laplace"

        def run(self, dataset, params, sampler):
            raise DataError("row 7 of the data is not a number.")

    register(monkeypatch, BadDataLaplace)
    (workdir / "chain.toml").write_text(
        f'[budget]\nlabel = "ctg"\nepsilon = 10\n[data]\npath = "{CTG}"\n'
        '[domain]\nfile = "ctg.toml"\n[[steps]]\nname = "bad"\n'
        f'mechanism = "{BadDataLaplace.name}"\nepsilon = 1\n'
    )
    text = run("chain", "run", "chain.toml", "--out", "run1")
    assert text.exit_code == EXIT_DATA, text.output
    doc = run("chain", "run", "chain.toml", "--out", "run2", "--json")
    parsed = json.loads(doc.stdout)
    assert doc.exit_code == EXIT_DATA and parsed["error"]["code"] == "data"
    assert parsed["steps"][0]["code"] == "data" and "row 7" in parsed["steps"][0]["reason"]


def test_70_internal_error(monkeypatch):
    def broken() -> list:
        raise RuntimeError("a bug")

    monkeypatch.setattr(dpframe.apps.cli.plugins_cmd, "plugin_rows", broken)
    check(["plugins"], EXIT_INTERNAL, "internal", "RuntimeError: a bug")


def test_130_interrupted_in_a_real_process():
    code = (
        "import os, signal, sys\n"
        "import dpframe.apps.cli.plugins_cmd as p\n"
        "from dpframe.apps.cli import main\n"
        "import threading, time\n"
        # as in a terminal, whatever this test's own parent did (a shell's background job
        # starts with SIGINT ignored, and Python then installs no KeyboardInterrupt)
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "main_thread = threading.main_thread().ident\n"
        # to the main thread, which sleeps until it arrives: os.kill may hand the signal to
        # another thread, and the interrupt then lands later, wherever the main thread is
        "interrupt = lambda: signal.pthread_kill(main_thread, signal.SIGINT) or time.sleep(30)\n"
        "p.plugin_rows = lambda: interrupt() or []\n"
        "main(sys.argv[1:])\n"
    )
    for extra in ([], ["--json"]):
        proc = subprocess.run(
            [sys.executable, "-c", code, "plugins", *extra], capture_output=True, text=True
        )
        assert proc.returncode == EXIT_INTERRUPTED, proc.stderr
        assert "Traceback" not in proc.stderr
        if extra:
            assert json.loads(proc.stdout)["error"]["code"] == "interrupted"
        else:
            assert proc.stderr.strip() == "Error: interrupted."


def test_shell_completion_script_is_produced():
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "dpframe")],
        env={"_DPFRAME_COMPLETE": "bash_source", "PATH": str(Path(sys.executable).parent)},
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert "_dpframe_completion()" in proc.stdout and "complete " in proc.stdout
    words = subprocess.run(
        [str(Path(sys.executable).parent / "dpframe")],
        env={
            "_DPFRAME_COMPLETE": "bash_complete",
            "COMP_WORDS": "dpframe led",
            "COMP_CWORD": "1",
            "PATH": str(Path(sys.executable).parent),
        },
        capture_output=True,
        text=True,
    )
    assert "plain,ledger" in words.stdout.split()


def test_1_a_refused_chain_prints_its_reason_once_and_its_summary(workdir):
    (workdir / "chain.toml").write_text(
        f'[budget]\nlabel = "ctg"\nepsilon = 1\naccountant = "pure"\n[data]\npath = "{CTG}"\n'
        '[domain]\nfile = "ctg.toml"\n[[steps]]\nname = "mean"\nmechanism = "laplace"\n'
        'epsilon = 2\nparams = { query = "mean" }\n'
    )
    text = run("chain", "run", "chain.toml", "--out", "run1")
    assert text.exit_code == EXIT_BUDGET_REFUSED, text.output
    output = text.stdout + text.stderr
    assert output.count("above its cap") == 1, output  # the reason, once: in the summary
    assert "[1] mean: refused" in text.stderr.splitlines()
    assert text.stderr.strip().splitlines()[-1].startswith("Error: the chain stopped before")
    doc = run("chain", "run", "chain.toml", "--out", "run2", "--json")
    parsed = json.loads(doc.stdout)
    assert doc.exit_code == EXIT_BUDGET_REFUSED and parsed["error"]["code"] == "budget_refused"
    assert "above its cap" in parsed["stop"]["reason"]


def test_0_a_reader_that_stops_reading_is_no_error():
    # `dpframe plugins | head -1`, the reader gone before the first write: the read end is
    # closed before the process has even started writing (its start-up takes far longer).
    dpframe = Path(sys.executable).parent / "dpframe"
    proc = subprocess.Popen(
        [str(dpframe), "plugins"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    proc.stdout.close()
    stderr = proc.stderr.read()
    assert proc.wait() == EXIT_OK, stderr
    assert stderr == ""


def test_2_an_output_directory_no_release_could_be_written_to_charges_nothing(workdir):
    # these were charged and then failed writing, exit 70 (fuzzing, stop 41)
    (workdir / "afile").write_text("")
    (workdir / "full").mkdir()
    (workdir / "full" / "synthetic.csv").write_text("private")
    (workdir / "dangling").symlink_to(workdir / "nowhere")
    assert run("ledger", "budget", "create", "ctg", "--epsilon", "10").exit_code == 0
    for out, fragment in [
        ("afile/sub", "is not a directory"),
        ("full", "is not empty"),
        ("dangling", "broken link"),
        ("x" * 300, "name is too long"),
    ]:
        args = release("--budget-label", "ctg", "--epsilon", "1")
        args[args.index("rel")] = out
        check(args, EXIT_USAGE, "usage", fragment)
    assert (workdir / "full" / "synthetic.csv").read_text() == "private"
    assert json.loads(run("ledger", "show", "--json").stdout)["charges"] == []


def _disk_full(monkeypatch) -> None:
    """Every ``.npy`` write fails part-way, as on a full disk."""
    import errno

    import numpy as np

    def save(path, *args, **kwargs):
        Path(path).write_bytes(b"\x93NUMPY")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np, "save", save)


def _statuses() -> list[str]:
    return [c["status"] for c in json.loads(run("ledger", "show", "--json").stdout)["charges"]]


def test_5_a_release_that_cannot_be_written_fails_its_charge(workdir, monkeypatch):
    # written after the charge was committed: exit 70, a truncated file left, the charge
    # 'committed' (fuzzing, round 43)
    assert run("ledger", "budget", "create", "ctg", "--epsilon", "10").exit_code == 0
    _disk_full(monkeypatch)
    check(release("--budget-label", "ctg", "--epsilon", "1"), EXIT_COMPUTE, "compute",
          "could not be written: the disk is full")  # fmt: skip
    assert not [p for p in (workdir / "rel").rglob("*") if p.is_file()]
    assert _statuses() == ["failed", "failed"]  # text and --json


def test_5_a_chain_step_that_cannot_be_written_fails_and_the_summary_is_written(
    workdir, monkeypatch
):
    (workdir / "chain.toml").write_text(
        f'[budget]\nlabel = "ctg"\nepsilon = 10\n[data]\npath = "{CTG}"\n'
        '[domain]\nfile = "ctg.toml"\n[[steps]]\nname = "mean"\nmechanism = "laplace"\n'
        "epsilon = 1\n"
    )
    _disk_full(monkeypatch)
    doc = run("chain", "run", "chain.toml", "--out", "run1", "--json")
    assert doc.exit_code == EXIT_COMPUTE, doc.output
    parsed = json.loads(doc.stdout)
    assert parsed["error"]["code"] == "compute" and parsed["steps"][0]["status"] == "failed"
    assert "the disk is full" in parsed["steps"][0]["reason"]
    assert json.loads((workdir / "run1" / "chain.json").read_text()) == {
        k: v for k, v in parsed.items() if k != "error"
    }
    assert _statuses() == ["failed"]


def test_5_a_chain_summary_that_cannot_be_written_is_one_sentence(workdir, monkeypatch):
    import errno

    (workdir / "chain.toml").write_text(
        f'[budget]\nlabel = "ctg"\nepsilon = 10\n[data]\npath = "{CTG}"\n'
        '[domain]\nfile = "ctg.toml"\n[[steps]]\nname = "mean"\nmechanism = "laplace"\n'
        "epsilon = 1\n"
    )
    write_text = Path.write_text

    def full(path, *args, **kwargs):
        if path.name == "chain.json":
            raise OSError(errno.ENOSPC, "No space left on device")
        return write_text(path, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full)
    text = run("chain", "run", "chain.toml", "--out", "run1")
    assert text.exit_code == EXIT_COMPUTE and "Traceback" not in text.output
    assert text.stderr.strip().splitlines()[-1] == (
        "Error: the chain's summary could not be written to 'run1': the disk is full "
        "(`dpframe ledger show` lists its charges)."
    )


def test_2_an_output_path_its_files_would_not_fit_charges_nothing(workdir):
    # --out passed the check, the charge was committed, then release.json (or a step's
    # files) hit the system's path length limit: exit 70 (fuzzing, round 43)
    import os

    room = os.pathconf(workdir, "PC_PATH_MAX") - len(os.fsencode(workdir)) - 1
    long = "/".join(["d" * 200] * (room // 201))
    out = long + "/" + "e" * (room - len(long) - 2 - len("/mean.npy"))  # mean.npy fits
    assert run("ledger", "budget", "create", "ctg", "--epsilon", "10").exit_code == 0
    args = release("--budget-label", "ctg", "--epsilon", "1")
    args[args.index("rel")] = str(workdir / out)
    check(args, EXIT_USAGE, "usage", "paths of its files would be too long")
    (workdir / "chain.toml").write_text(
        f'[budget]\nlabel = "ctg"\nepsilon = 10\n[data]\npath = "{CTG}"\n'
        f'[domain]\nfile = "ctg.toml"\n[[steps]]\nname = "{"s" * 90}"\nmechanism = "laplace"\n'
        "epsilon = 1\n"
    )
    chain_out = str(workdir / long) + "/" + "c" * (room - len(long) - 1 - 60)  # chain.json fits
    check(
        ["chain", "run", "chain.toml", "--out", chain_out], EXIT_USAGE, "usage", "would be too long"
    )
    assert _statuses() == []
    assert not (workdir / long).exists()


def test_2_bad_seeds_and_accountants_are_refused_before_the_ledger_is_created(workdir):
    # refused only after the ledger (and a chain's --out) were created (fuzzing, round 43)
    check(release("--epsilon", "1", "--seed", "-1", "--budget-epsilon", "5"), EXIT_USAGE,
          "usage", "seed must be an integer >= 0")  # fmt: skip
    check(release("--epsilon", "1", "--budget-epsilon", "5", "--accountant", "nosuch"),
          EXIT_USAGE, "usage", "unknown accountant 'nosuch'")  # fmt: skip
    (workdir / "chain.toml").write_text(
        f'[budget]\nlabel = "ctg"\nepsilon = 10\n[data]\npath = "{CTG}"\n'
        '[domain]\nfile = "ctg.toml"\n[[steps]]\nname = "mean"\nmechanism = "laplace"\n'
        "epsilon = 1\n"
    )
    text = run("chain", "run", "chain.toml", "--out", "run1", "--seed", "-1")
    assert text.exit_code == EXIT_USAGE and "Warning" not in text.stderr, text.stderr
    assert not (workdir / "run1").exists()
    assert sorted(p.name for p in workdir.iterdir()) == ["chain.toml", "ctg.toml"]
    # an accountant spec with members is a known name (the early check refused it)
    made = run(
        *release("--epsilon", "1", "--budget-epsilon", "5", "--accountant", "best[pure,rdp]")
    )
    assert made.exit_code == 0, made.output
    budget = json.loads(run("ledger", "budget", "list", "--json").stdout)[0]
    assert budget["budget"]["accountant"] == "best[pure,rdp]"


def test_debug_shows_the_traceback_and_keeps_the_exit_code_and_the_json():
    # --debug exited 1 (budget_refused's code) for every error, with no JSON (round 43)
    text = run("--debug", "describe", "no-such-mechanism")
    assert text.exit_code == EXIT_USAGE
    assert "Traceback" in text.stderr and "PluginError" in text.stderr
    doc = run("--debug", "describe", "no-such-mechanism", "--json")
    assert doc.exit_code == EXIT_USAGE and "Traceback" in doc.stderr
    assert json.loads(doc.stdout)["error"]["code"] == "usage"
