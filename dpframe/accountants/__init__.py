"""Accountants: turn privacy events into (epsilon, delta) guarantees."""

from dpframe.accountants.base import Accountant, Guarantee, Support

__all__ = ["Accountant", "Guarantee", "Support"]
