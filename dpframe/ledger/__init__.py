"""The privacy ledger: per-dataset budgets, atomic charges, and a verifiable hash chain.

::

    from dpframe.ledger import Ledger

    with Ledger.open("privacy.ledger", create=True) as ledger:
        ledger.create_budget("adult", (1.0, 1e-6), accountant="rdp")
        release = dpframe.execute(
            mechanism, dataset, params, ledger=ledger, request={"budget_label": "adult"}
        )
        print(ledger.remaining("adult").describe())

A ``postgresql://`` URL in place of the path opens a ledger shared across machines
(:mod:`dpframe.ledger.postgres`; its key file is named with ``key_file=`` or
``$DPFRAME_LEDGER_KEY_FILE``). See ``docs/ledger.md`` for the concepts, the schema, the
guarantees and the formats.
"""

from __future__ import annotations

from dpframe.ledger.chain import Problem, canonical_json
from dpframe.ledger.records import (
    FLAG_FLOAT_NOISE,
    FLAG_INFERRED,
    FLAG_SEEDED,
    Balance,
    Charge,
    ChargeRequest,
    DatasetBudget,
    Entry,
    NewBudget,
    Reservation,
    RestCalibration,
    VerifyReport,
    release_digest,
)
from dpframe.ledger.schema import SCHEMA_VERSION
from dpframe.ledger.state import verify_rows
from dpframe.ledger.store import (
    DEFAULT_ACCOUNTANT,
    DEFAULT_TIMEOUT,
    ENV_VAR,
    Ledger,
    key_digest,
    ledger_exists,
    ledger_path,
)
from dpframe.ledger.transfer import copy_ledger, export_jsonl, import_jsonl, migrate_ledger

__all__ = [
    "DEFAULT_ACCOUNTANT",
    "DEFAULT_TIMEOUT",
    "ENV_VAR",
    "FLAG_FLOAT_NOISE",
    "FLAG_INFERRED",
    "FLAG_SEEDED",
    "SCHEMA_VERSION",
    "Balance",
    "Charge",
    "ChargeRequest",
    "DatasetBudget",
    "Entry",
    "Ledger",
    "NewBudget",
    "Problem",
    "Reservation",
    "RestCalibration",
    "VerifyReport",
    "canonical_json",
    "copy_ledger",
    "export_jsonl",
    "import_jsonl",
    "key_digest",
    "ledger_exists",
    "ledger_path",
    "migrate_ledger",
    "release_digest",
    "verify_rows",
]
