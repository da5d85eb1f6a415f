"""The ledger on a real PostgreSQL server (pgserver): charges, refusals, the audit,
tampering, racing and killed processes, and copies to and from SQLite.

The server is started once per session (``pg_server`` in conftest.py); every test gets its
own empty schema. The 16-process race and the ``kill -9`` of a releasing process run on
both backends in test_concurrency.py. Edits are made the way someone with write access
to the database (but not to the key file or the anchor) could: triggers disabled, rows
changed directly.
"""

from __future__ import annotations

import json
import sys

import psycopg
import pytest
from click.testing import CliRunner
from ledger_testkit import RESERVATION_EDITS, charge

from dpframe.errors import BudgetExceededError, LedgerError, ParameterError
from dpframe.ledger import Ledger, copy_ledger
from dpframe.ledger.audit import audit
from dpframe.ledger.chain import GENESIS, entry_hash, entry_mac
from dpframe.ledger.keys import LedgerKey, read_anchor
from dpframe.ledger.state import CHECKPOINT_EVERY


def sql(url: str, *statements: str) -> None:
    """Edit the ledger's tables directly, with the append-only triggers disabled."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER TABLE entries DISABLE TRIGGER USER")
        for statement in statements:
            assert conn.execute(statement).rowcount > 0, statement


def count(url: str) -> int:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT COUNT(*) FROM entries").fetchone()[0]


@pytest.fixture
def full(pg_ledger):
    """A pure budget of ε = 1 spent by ten charges of 0.1 (rows 1..23)."""
    pg_ledger.create_budget("d", (1.0, 0.0), accountant="pure")
    for _ in range(10):
        charge(pg_ledger, 0.1)
    return pg_ledger


def test_charges_and_refusals_on_postgres(full, pg_url):
    assert full.is_new and "postgresql://" in str(full.path)
    before = count(pg_url)
    with pytest.raises(BudgetExceededError, match="nothing was charged"):
        charge(full, 0.1)
    assert count(pg_url) == before == 23  # a refusal writes nothing
    balance = full.remaining("d")
    assert balance.spent == pytest.approx(1.0) and balance.committed == 10
    report = full.verify()
    assert report.ok and report.authenticated and report.entries == 23
    anchor = read_anchor(full.anchor_file)
    assert anchor is not None and (anchor.seq, anchor.hash) == full.head()
    assert full.anchor_file.name == "team.anchor" and full.key_file.name == "team.key"
    with Ledger.open(pg_url) as again:  # another connection sees the same state
        assert again.remaining("d").spent == pytest.approx(1.0)
        with pytest.raises(BudgetExceededError):
            charge(again, 0.1)


def test_a_postgres_ledger_needs_a_named_key_file(pg_url, monkeypatch):
    monkeypatch.delenv("DPFRAME_LEDGER_KEY_FILE")
    with pytest.raises(ParameterError, match="DPFRAME_LEDGER_KEY_FILE"):
        Ledger.open(pg_url, create=True)
    assert not Ledger.exists(pg_url)


def test_checkpoints_continue_the_state_on_postgres(pg_ledger, pg_url):
    pg_ledger.create_budget("d", (1.0, 0.0), accountant="pure")
    for _ in range(CHECKPOINT_EVERY // 2 + 2):
        charge(pg_ledger, 0.01)
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT COUNT(*) FROM checkpoints").fetchone()[0] >= 1
    # a fresh process (no cached state) continues from the checkpoint and agrees
    with Ledger.open(pg_url) as again:
        assert again.remaining("d").charges == CHECKPOINT_EVERY // 2 + 2
    # edits before the checkpoint cannot free budget; verify names the first one
    sql(pg_url, "UPDATE entries SET kind = 'note' WHERE kind = 'reserve' AND seq < 20")
    assert pg_ledger.verify().problems[0].seq == 4


@pytest.mark.parametrize("edit", RESERVATION_EDITS.values(), ids=list(RESERVATION_EDITS))
def test_an_edited_past_row_refuses_the_charge_naming_it(full, pg_url, edit):
    sql(pg_url, edit)
    with Ledger.open(pg_url) as fresh:  # another analyst's process, no cached state
        with pytest.raises(LedgerError, match=r"ledger row 4 \(.*nothing was charged"):
            charge(fresh, 0.1)
        assert not fresh.verify().ok
        assert not audit(fresh).ok
    assert count(pg_url) == 23


def test_tail_deletion_is_refused_with_or_without_a_rewritten_head(full, pg_url):
    sql(pg_url, "DELETE FROM entries WHERE seq > 13")  # the last five charges gone
    with pytest.raises(LedgerError, match="head anchor records row 23"):
        charge(full, 0.1)
    # rewriting the head the database could hold (its last checkpoint) changes nothing
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DELETE FROM checkpoints WHERE seq > 13")
    with Ledger.open(pg_url) as fresh, pytest.raises(LedgerError, match="head anchor records"):
        charge(fresh, 0.1)
    assert count(pg_url) == 13
    assert any("head anchor records row 23" in p.message for p in full.verify().problems)


def test_a_full_rehash_without_the_key_is_caught(full, pg_url):
    """Lower every recorded event and re-hash the whole chain consistently: without the
    key the MACs cannot be remade (here: remade under a guessed key)."""
    guess = LedgerKey.generate().mac_key
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE entries DISABLE TRIGGER USER")
        rows = conn.execute(
            "SELECT seq, entry_id, kind, ref, budget_id, created, body FROM entries ORDER BY seq"
        ).fetchall()
        prev = GENESIS
        for seq, entry_id, kind, ref, budget_id, created, body in rows:
            body = body.replace('"noise_multiplier":10.0', '"noise_multiplier":1000.0')
            digest = entry_hash(
                seq=seq,
                entry_id=entry_id,
                kind=kind,
                ref=ref,
                budget_id=budget_id,
                created=created,
                body=json.loads(body),
                prev_hash=prev,
            )
            conn.execute(
                "UPDATE entries SET body = %s, prev_hash = %s, hash = %s, mac = %s WHERE seq = %s",
                (body, prev, digest, entry_mac(guess, seq, digest), seq),
            )
            prev = digest
    with Ledger.open(pg_url) as fresh:
        with pytest.raises(LedgerError, match="nothing was charged"):
            charge(fresh, 0.1)
        assert not fresh.verify().ok
    assert count(pg_url) == 23


def test_a_swapped_key_file_is_refused(full, pg_url, tmp_path, monkeypatch):
    other = tmp_path / "other.key"
    other.write_text(LedgerKey.generate().to_text())
    monkeypatch.setenv("DPFRAME_LEDGER_KEY_FILE", str(other))
    with pytest.raises(LedgerError, match="is not the key of the ledger"):
        Ledger.open(pg_url)


def _report(ledger: Ledger) -> dict:
    doc = audit(ledger).to_dict()
    doc["ledger"].pop("path", None)
    doc.pop("generated")
    return doc


def test_copy_postgres_to_sqlite_and_back_keeps_the_chain(full, pg_url, pg_server, tmp_path):
    copy_file = tmp_path / "copy.ledger"
    with copy_ledger(pg_url, copy_file) as local:
        assert local.head() == full.head() and local.ledger_id == full.ledger_id
        assert local.verify().ok and local.verify().authenticated
        assert _report(local) == _report(full)  # the same audit on both backends
        with pytest.raises(BudgetExceededError):  # the copy carries the spent budget
            charge(local, 0.1)
    with pytest.raises(LedgerError, match="already holds a ledger"):
        copy_ledger(copy_file, pg_url)  # never into a non-empty destination
    with psycopg.connect(pg_server.get_uri(), autocommit=True) as conn:
        conn.execute("CREATE SCHEMA back")
    back_url = f"{pg_server.get_uri()}&options=-csearch_path%3Dback"
    with copy_ledger(copy_file, back_url) as back:
        assert back.head() == full.head() and back.verify().ok
        with psycopg.connect(back_url) as conn:
            (checkpoints,) = conn.execute("SELECT COUNT(*) FROM checkpoints").fetchone()
        with psycopg.connect(pg_url) as conn:
            assert (checkpoints,) == conn.execute("SELECT COUNT(*) FROM checkpoints").fetchone()


def test_the_cli_takes_a_postgresql_url(pg_url, tmp_path):
    from dpframe.apps.cli import cli as main

    runner = CliRunner()
    result = runner.invoke(main, ["ledger", "init", "--json"], env={"DPFRAME_LEDGER": pg_url})
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["path"].startswith("postgresql://")
    args = ["ledger", "budget", "create", "d", "--epsilon", "1", "--ledger", pg_url]
    assert runner.invoke(main, args).exit_code == 0
    target = str(tmp_path / "copy.ledger")
    result = runner.invoke(main, ["ledger", "copy", pg_url, target, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["entries"] == 2
    result = runner.invoke(main, ["ledger", "verify", "--ledger", target])
    assert result.exit_code == 0 and "OK: 2 entries" in result.output
    result = runner.invoke(main, ["ledger", "copy", target, pg_url])
    assert result.exit_code == 4 and "already holds a ledger" in result.output


def test_a_url_without_the_driver_is_one_sentence(monkeypatch, tmp_path):
    """Without the ``postgres`` extra, a URL is refused in one sentence naming it."""
    monkeypatch.setitem(sys.modules, "psycopg", None)  # what `import psycopg` sees uninstalled
    monkeypatch.setenv("DPFRAME_LEDGER_KEY_FILE", str(tmp_path / "k.key"))
    with pytest.raises(LedgerError, match=r"pip install 'dpframe\[postgres\]'"):
        Ledger.open("postgres://nobody@localhost/none", create=True)
    assert not (tmp_path / "k.key").exists()


def test_an_analyst_role_with_the_documented_rights_charges_but_cannot_rewrite(
    pg_ledger, pg_url, pg_server
):
    """The rights docs/ledger.md lists are enough to charge, and such a role can neither
    delete rows nor disable the append-only trigger."""
    schema = pg_url.rsplit("%3D", 1)[1]
    role = f"analyst_{schema}"
    with psycopg.connect(pg_server.get_uri(), autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN")
        conn.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
        conn.execute(f"GRANT SELECT, INSERT ON {schema}.entries, {schema}.checkpoints TO {role}")
        conn.execute(f"GRANT SELECT ON {schema}.schema_version TO {role}")
        conn.execute(f"GRANT SELECT, UPDATE ON {schema}.meta TO {role}")
    analyst_url = pg_url.replace("postgresql://postgres:@", f"postgresql://{role}@", 1)
    assert analyst_url != pg_url
    pg_ledger.create_budget("d", (1.0, 0.0), accountant="pure")
    with Ledger.open(analyst_url) as ledger:
        charge(ledger, 0.5)
        assert ledger.remaining("d").spent == pytest.approx(0.5)
        assert ledger.verify().ok
    with psycopg.connect(analyst_url, autocommit=True) as conn:
        for attack in ("DELETE FROM entries", "ALTER TABLE entries DISABLE TRIGGER USER"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(attack)


def test_a_copy_into_postgresql_is_analysed_at_once(full, pg_url, pg_server, tmp_path):
    """A bulk load gives the planner its statistics at once (ANALYZE), not when autovacuum
    gets to it (never, for fewer than 50 rows): reltuples is -1 until a table is analysed."""
    copy_file = tmp_path / "copy.ledger"
    copy_ledger(pg_url, copy_file).close()
    with psycopg.connect(pg_server.get_uri(), autocommit=True) as conn:
        conn.execute("CREATE SCHEMA analysed")
    url = f"{pg_server.get_uri()}&options=-csearch_path%3Danalysed"
    copy_ledger(copy_file, url).close()
    with psycopg.connect(url) as conn:
        found = conn.execute(
            "SELECT relname, reltuples FROM pg_class WHERE relname IN ('entries', 'checkpoints') "
            "AND relnamespace = 'analysed'::regnamespace ORDER BY relname"
        ).fetchall()
        (rows,) = conn.execute("SELECT COUNT(*) FROM entries").fetchone()
    assert found == [("checkpoints", 0.0), ("entries", float(rows))] and rows == 23


@pytest.mark.parametrize("page", [1, 4, 23, 1024])
def test_the_rows_after_a_checkpoint_are_read_page_by_page_in_order(full, page):
    """The charge path reads the rows after its state in bounded pages (an index scan
    whatever the statistics): every row once, in chain order, at any page size."""
    everything = full._rows("TRUE", ())
    assert [r.seq for r in everything] == list(range(1, 24))
    for start in (0, 5, 22, 23):
        assert list(full._rows_after(start, page)) == everything[start:]
