"""``--key-file``: one option, on every command that opens a ledger, naming its key.

The key is a secret kept outside the database; by default it sits beside a ledger file
(``LEDGER.key``), and ``--key-file`` (or ``$DPFRAME_LEDGER_KEY_FILE``) puts it elsewhere.
A wrong key refuses with the ledger's exit code (4) and one sentence, and so does a named
key file that does not exist; a ledger opened with no key at all can be read, never charged.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from dpframe.apps.cli import cli
from dpframe.ledger import Ledger

KEY_ENV = "DPFRAME_LEDGER_KEY_FILE"


@pytest.fixture
def run(monkeypatch):
    monkeypatch.delenv("DPFRAME_LEDGER", raising=False)
    monkeypatch.delenv(KEY_ENV, raising=False)
    runner = CliRunner()

    def invoke(*args: object):
        return runner.invoke(cli, [str(a) for a in args], catch_exceptions=False)

    return invoke


def release(run, data: Path, out: Path, *extra: object):
    return run(
        "release", "laplace", "--data", data, "--bounds", "0:1", "--epsilon", 0.1,
        "--out", out, "--budget-epsilon", 1, "--accountant", "pure", *extra,
    )  # fmt: skip


def head_of(path: Path) -> tuple[int, str]:
    with Ledger.open(path) as opened:
        return opened.head()


def one_sentence(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in text, text
    return lines[0]


def test_every_command_that_opens_a_ledger_takes_key_file():
    """The same option everywhere a ledger is opened (``ledger_option`` adds it)."""
    missing = []
    for path, command in _commands(cli):
        names = {p.name for p in command.params}
        opens = "ledger_file" in names or path == "ledger copy"
        if opens and not any("--key-file" in p.opts for p in command.params):
            missing.append(path)
    assert not missing
    assert len([p for p, _ in _commands(cli) if p.startswith("ledger ")]) >= 10


def _commands(group: click.Group, prefix: str = ""):
    for name, command in group.commands.items():
        path = f"{prefix}{name}"
        if isinstance(command, click.Group):
            yield from _commands(command, path + " ")
        elif path != "demo":  # the demo's ledger is a temporary file with its own key
            yield path, command


def test_the_key_goes_where_key_file_says_and_every_command_finds_it(run, data, tmp_path):
    ledger, key = tmp_path / "privacy.ledger", tmp_path / "vault" / "team.key"
    key.parent.mkdir(mode=0o700)
    old = os.umask(0)  # the key is 0600 whatever the umask
    try:
        created = run("ledger", "init", "--ledger", ledger, "--key-file", key)
    finally:
        os.umask(old)
    assert created.exit_code == 0, created.output
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert not (tmp_path / "privacy.ledger.key").exists()
    assert KEY_ENV not in os.environ  # set for the command only
    charged = release(run, data, tmp_path / "r", "--ledger", ledger, "--key-file", key)
    assert charged.exit_code == 0, charged.output
    verified = run("ledger", "verify", "--ledger", ledger, "--key-file", key)
    assert verified.exit_code == 0 and "MACs not checked" not in verified.output
    copy = tmp_path / "copy.ledger"
    copied = run("ledger", "copy", ledger, copy, "--key-file", key)
    assert copied.exit_code == 0, copied.output
    assert not (tmp_path / "copy.ledger.key").exists()  # the copy keeps the named key
    again = release(run, data, tmp_path / "r2", "--ledger", copy, "--key-file", key)
    assert again.exit_code == 0, again.output


def test_a_wrong_key_refuses_in_one_sentence(run, data, tmp_path):
    ledger, other = tmp_path / "privacy.ledger", tmp_path / "other.ledger"
    assert run("ledger", "init", "--ledger", ledger).exit_code == 0
    assert run("ledger", "init", "--ledger", other).exit_code == 0
    wrong = tmp_path / "other.ledger.key"
    for args in (
        ("ledger", "show", "--ledger", ledger, "--key-file", wrong),
        ("ledger", "verify", "--ledger", ledger, "--key-file", wrong),
    ):
        result = run(*args)
        assert result.exit_code == 4
        message = one_sentence(result.stderr)
        assert "is not the key of the ledger" in message and str(wrong) in message
    head = head_of(ledger)
    refused = release(run, data, tmp_path / "r", "--ledger", ledger, "--key-file", wrong)
    assert refused.exit_code == 4 and "is not the key" in one_sentence(refused.stderr)
    assert not (tmp_path / "r").exists()
    assert head_of(ledger) == head  # nothing was charged


def test_a_named_missing_key_file_is_refused_and_no_key_reads_only(run, data, tmp_path):
    ledger = tmp_path / "privacy.ledger"
    assert run("ledger", "init", "--ledger", ledger).exit_code == 0
    missing = tmp_path / "nowhere.key"
    head = head_of(ledger)
    refused = release(run, data, tmp_path / "r", "--ledger", ledger, "--key-file", missing)
    assert refused.exit_code == 4
    message = one_sentence(refused.stderr)
    assert str(missing) in message and "missing" in message and "--key-file" in message
    assert not missing.exists() and not (tmp_path / "r").exists()
    assert head_of(ledger) == head
    named = run("ledger", "verify", "--ledger", ledger, "--key-file", missing)
    assert named.exit_code == 4  # a named key that is not there is an error, not "no key"
    assert str(missing) in one_sentence(named.stderr) and "missing" in named.stderr
    beside = tmp_path / "privacy.ledger.key"
    beside.rename(tmp_path / "elsewhere.key")  # no key named and none beside: read only
    verified = run("ledger", "verify", "--ledger", ledger)
    assert verified.exit_code == 0 and "MACs not checked: no ledger key" in verified.output


def test_key_file_does_not_outlive_a_command_whose_arguments_fail(run):
    """``--key-file`` sets ``$DPFRAME_LEDGER_KEY_FILE`` for its command only, also when a
    later argument fails to parse (click then skips the context's cleanup)."""
    for args in (
        ["release", "laplace", "--key-file", "/nowhere/x.key", "--epsilon", "bogus"],
        ["ledger", "verify", "--key-file", "/nowhere/x.key", "--bogus"],
    ):
        assert run(*args).exit_code == 2
        assert KEY_ENV not in os.environ
