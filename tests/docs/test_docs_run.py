"""The documentation runs: every bash and Python block of README.md, docs/*.md and the
plugin READMEs, in a temporary directory per document, unless a marker says why not.
Pages other than the README start where its tutorial's first step leaves a reader (the
README's ``docs-setup`` blocks: the bundled data ``ctg.csv``, its domain file and
``DPFRAME_LEDGER``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from docblocks import (
    BlockFailed,
    Commands,
    Terminal,
    blocks,
    prepare,
    run_document,
    runnable,
)

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCUMENTS = sorted(
    [REPO / "README.md", *(REPO / "docs").glob("*.md"), *(REPO / "plugins").glob("*/README.md")]
)


@pytest.fixture(scope="module")
def commands():
    """One server forking the documents' ``dpframe`` commands (each still its own process;
    the command line's real start-up is tested in tests/cli and tests/core/test_startup.py)."""
    server = Commands()
    yield server
    server.close()


@pytest.fixture(scope="module")
def tutorial(commands):
    """The README's ``docs-setup`` blocks, run once; each page starts from a copy."""
    prepared = prepare(README, commands)
    yield prepared
    shutil.rmtree(prepared.root, ignore_errors=True)


@pytest.mark.parametrize(
    "path",
    [p for p in DOCUMENTS if runnable(p)],
    ids=lambda p: str(p.relative_to(REPO)),
)
def test_document_runs(path, tmp_path, commands, tutorial):
    setup = None if path == README else tutorial
    ran = [block.line for block, _ in run_document(path, tmp_path, setup, commands)]
    assert ran == [b.line for b in blocks(path.read_text()) if b.runs]


# -- the runner itself ---------------------------------------------------------------------


def _doc(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "doc.md"
    path.write_text(text)
    return path


def test_blocks_share_the_directory_variables_and_the_interpreter(tmp_path):
    doc = _doc(
        tmp_path,
        "```bash\nmkdir sub && cd sub\nexport GREETING=hello\n```\n\n"
        "```python\nimport os\n"
        "name = os.environ['GREETING'] + ' ' + os.path.basename(os.getcwd())\n"
        "open('made.txt', 'w').write(name)\n```\n\n"
        "```python\nprint(name.upper())\n```\n\n"
        '```bash\ncat made.txt; echo " $GREETING"\n```\n',
    )
    outputs = [out for _, out in run_document(doc, tmp_path)]
    assert outputs[2].strip() == "HELLO SUB"
    assert outputs[3].strip() == "hello sub hello"


def test_a_forked_interpreter_shares_names_directory_variables_and_reports_failures(
    tmp_path, commands
):
    doc = _doc(
        tmp_path,
        "```bash\nmkdir sub && cd sub\nexport GREETING=héllo\n```\n\n"
        "```python\nimport os, sys\nname = os.environ['GREETING'] + ' ' + os.getcwd()\n"
        "print(sys.argv[0], name)\n```\n\n"
        "```python\nprint(name.upper(), file=__import__('sys').stderr)\n```\n\n"
        "```python\nraise ValueError('boom')\n```\n",
    )
    terminal = Terminal(tmp_path, commands=commands)
    try:
        found = [b for b in blocks(doc.read_text()) if b.runs]
        terminal.run(found[0], "doc.md")
        assert terminal.run(found[1], "doc.md").strip() == f"-c héllo {tmp_path / 'sub'}"
        assert terminal.run(found[2], "doc.md").strip() == f"HÉLLO {tmp_path / 'sub'}".upper()
        failed = r"(?s)doc.md:17: the Python block failed.*line 17.*boom"
        with pytest.raises(BlockFailed, match=failed):
            terminal.run(found[3], "doc.md")
        terminal._python.kill()  # a killed interpreter is reported as dead
        with pytest.raises(BlockFailed, match="the Python interpreter died"):
            terminal.run(found[1], "doc.md")
        # now surely gone (its output ended): the block cannot even be sent to it
        with pytest.raises(BlockFailed, match="the Python interpreter died"):
            terminal.run(found[1], "doc.md")
    finally:
        terminal.close()


def test_a_failing_block_fails_the_document_and_names_its_line(tmp_path):
    doc = _doc(tmp_path, "text\n\n```bash\ntrue\nfalse\necho never\n```\n")
    with pytest.raises(BlockFailed, match=r"doc.md:4: the bash block exited 1"):
        list(run_document(doc, tmp_path))
    doc = _doc(tmp_path, "```python\nraise ValueError('boom')\n```\n")
    with pytest.raises(BlockFailed, match=r"(?s)doc.md:2: the Python block failed.*boom"):
        list(run_document(doc, tmp_path))


def test_a_marked_block_is_not_run_and_other_languages_are_not_run(tmp_path):
    doc = _doc(
        tmp_path,
        "<!-- not-run: needs a Dask scheduler -->\n```bash\nexit 3\n```\n\n"
        "```toml\nnot = code\n```\n\n```console\n$ false\n```\n\n```bash\necho ran\n```\n",
    )
    found = blocks(doc.read_text())
    assert [b.not_run for b in found] == ["needs a Dask scheduler", None, None, None]
    assert [(b.line, out) for b, out in run_document(doc, tmp_path)] == [(15, "ran\n")]


def test_setup_blocks_run_first_and_only_once(tmp_path):
    setup = tmp_path / "setup.md"
    setup.write_text(
        "<!-- docs-setup -->\n```bash\necho made > data.txt\nexport FROM_SETUP=1\n```\n\n"
        "```bash\necho not setup > other.txt\n```\n"
    )
    doc = _doc(tmp_path, '```bash\ncat data.txt; echo "$FROM_SETUP"; ls\n```\n')
    work = tmp_path / "work"
    work.mkdir()
    ((_, out),) = run_document(doc, work, setup)
    assert out.split() == ["made", "1", "data.txt"]


def test_prepared_setup_blocks_leave_each_document_their_files_directory_and_variables(
    tmp_path,
):
    setup = tmp_path / "setup.md"
    setup.write_text(
        "<!-- docs-setup -->\n```bash\nmkdir sub && cd sub\necho made > data.txt\n"
        "export HERE=$PWD/data.txt\n```\n\n```bash\necho not setup > other.txt\n```\n"
    )
    prepared = prepare(setup)
    doc = _doc(tmp_path, '```bash\ncat "$HERE"; echo "$HERE"; pwd; ls\n```\n')
    for name in ("one", "two"):  # each from its own copy, the variables pointing into it
        work = tmp_path / name
        work.mkdir()
        ((_, out),) = run_document(doc, work, prepared)
        assert out.split() == [
            "made",
            str(work / "sub" / "data.txt"),
            str(work / "sub"),
            "data.txt",
        ]
    assert (prepared.root / "sub" / "data.txt").read_text() == "made\n"


def test_a_marker_without_a_reason_is_refused(tmp_path):
    with pytest.raises(ValueError, match="must say why"):
        blocks("<!-- not-run: -->\n```bash\ntrue\n```\n")


def test_the_virtualenv_comes_first_on_path_and_dpframe_variables_are_cleared(tmp_path):
    import sys

    terminal = Terminal(tmp_path, env={"PATH": "/usr/bin:/bin", "DPFRAME_LEDGER": "x"})
    (block,) = blocks('```bash\ncommand -v python; echo "[${DPFRAME_LEDGER:-}]"\n```\n')
    out = terminal.run(block, "doc.md").splitlines()
    assert Path(out[0]).parent == Path(sys.executable).parent and out[1] == "[]"


def test_forked_commands_keep_their_arguments_streams_directory_and_exit_status(tmp_path, commands):
    doc = _doc(
        tmp_path,
        "```bash\nmkdir sub && cd sub\nexport DPFRAME_LEDGER=$PWD/l.ledger\n"
        "dpframe ledger budget create b --epsilon 1 --accountant pure\n"
        "dpframe ledger budget list | grep -c \"^budget 'b' (pure\"\nls\n"
        'dpframe release nosuch --data x.csv 2>&1 || echo "exit status $?"\n```\n',
    )
    ((_, out),) = run_document(doc, tmp_path, commands=commands)
    lines = out.splitlines()
    assert "l.ledger" in lines and "1" in lines
    assert lines[-1] == "exit status 2" and "Traceback" not in out
