"""The audit's JSON output validates against the JSON Schema published in docs/auditing.md."""

from __future__ import annotations

import copy
import json
import re
import sqlite3
from pathlib import Path

import pytest
from json_schema import errors
from session_kit import FailingLaplace, make_dataset, register

from dpframe import Session
from dpframe.ledger.audit import SCHEMA_VERSION, audit

pytestmark = pytest.mark.filterwarnings("ignore::dpframe.releases.session.AdaptivityWarning")

DOCS = Path(__file__).parents[2] / "docs" / "auditing.md"


def published_schema() -> dict:
    text = DOCS.read_text()
    block = re.search(
        r"<!-- audit-schema:begin -->\s*```json\n(.*?)```\s*<!-- audit-schema:end -->", text, re.S
    )
    assert block, "docs/auditing.md lost its schema block"
    return json.loads(block.group(1))


@pytest.fixture
def rich_ledger(ledger, ledger_file, monkeypatch):
    """Two budgets, chains, links, a seeded release, a failed run, a tampered row."""
    register(monkeypatch, FailingLaplace)
    with Session(make_dataset(), ledger, "toy", cap=(5.0, 1e-5), seed=1) as session:
        cov = session.release("laplace", step="cov", epsilon=0.5, query="covariance")
        session.release(
            "mvg",
            epsilon=1.0,
            delta=1e-6,
            noise="unimodal",
            allocation="max_pnr",
            signal_covariance=cov["covariance"],
        )
        with pytest.raises(RuntimeError):
            session.release("test-failing-laplace", epsilon=0.1)
    with Session(make_dataset(seed=2), ledger, "other", cap=1.0, accountant="pure") as other:
        other.release("laplace", epsilon=0.2)
    conn = sqlite3.connect(ledger_file)
    conn.execute("DROP TRIGGER entries_no_update")
    conn.execute(
        "UPDATE entries SET body = replace(body, '\"epsilon\":0.2,', '\"epsilon\":0.25,') "
        "WHERE kind = 'reserve' AND instr(body, '\"epsilon\":0.2,') > 0"
    )
    conn.commit()
    conn.close()
    return ledger


def test_real_audit_output_matches_the_published_schema(rich_ledger):
    schema = published_schema()
    doc = json.loads(json.dumps(audit(rich_ledger).to_dict()))  # exactly what --json prints
    assert doc["schema_version"] == SCHEMA_VERSION
    assert errors(doc, schema) == []
    # the document exercises the interesting parts of the schema
    flags = doc["summary"]["flags"]
    assert {"seeded_sampler", "failed", "tampered", "event_mismatch"} <= set(flags)
    assert any(e["links"] for b in doc["budgets"] for e in b["entries"])
    assert any(t["epsilon"] is None for b in doc["budgets"] for t in b["totals"].values())


def test_the_validator_rejects_documents_that_break_the_schema(rich_ledger):
    schema = published_schema()
    doc = json.loads(json.dumps(audit(rich_ledger).to_dict()))
    broken = copy.deepcopy(doc)
    del broken["budgets"][0]["entries"][0]["rederived"]
    broken["budgets"][0]["spent_epsilon"] = "lots"
    broken["summary"]["extra"] = 1
    found = errors(broken, schema)
    assert any("missing 'rederived'" in e for e in found)
    assert any("spent_epsilon" in e for e in found)
    assert any("unexpected key 'extra'" in e for e in found)
