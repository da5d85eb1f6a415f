"""``dpframe demo``: a chained release on bundled real data, then an audit."""

from __future__ import annotations

import click


@click.command()
def demo() -> None:
    """Run the demo (placeholder)."""
