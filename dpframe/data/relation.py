"""The neighbouring relation: which pairs of datasets a DP guarantee is about."""

from __future__ import annotations

import enum


class Relation(str, enum.Enum):
    """Which change to a dataset a guarantee protects.

    ``REPLACE_ONE`` (bounded DP, the papers' notion, our default): the datasets have the
    same number of records and differ in one record, which may change every feature and
    its label. The record count is public.

    ``ADD_REMOVE`` (unbounded DP): one dataset is the other with one record added or
    removed. The record count is itself private.
    """

    REPLACE_ONE = "replace_one"
    ADD_REMOVE = "add_remove"

    @classmethod
    def parse(cls, value: str | Relation) -> Relation:
        """Accept ``replace_one``/``replace-one``/``add_remove``/``add-remove``."""
        from dpframe.errors import ParameterError

        if isinstance(value, Relation):
            return value
        key = str(value).strip().lower().replace("-", "_")
        for member in cls:
            if member.value == key:
                return member
        raise ParameterError(
            f"unknown neighbouring relation {value!r}; use 'replace_one' or 'add_remove'."
        )

    def __str__(self) -> str:
        return self.value
