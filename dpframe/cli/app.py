"""The root command group, error handling and command registration."""

from __future__ import annotations

import sys
import warnings
from typing import Any

import click

from dpframe.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, DPFrameError


class UserError(click.ClickException):
    """A DPFrameError shown as one sentence with its exit code."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _show_warning(message: Any, category: type, *args: Any, **kwargs: Any) -> None:
    click.echo(f"Warning: {message}", err=True)


class DPFrameGroup(click.Group):
    """Turns dpframe errors into one sentence, and other failures into one sentence
    plus a hint to rerun with ``--debug``. Plugin commands are added on first lookup."""

    _plugin_commands_loaded = False

    def _load_plugin_commands(self) -> None:
        if not self._plugin_commands_loaded:
            self._plugin_commands_loaded = True
            from dpframe.plugins import registry

            registry().add_commands(self)

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._load_plugin_commands()
        return super().list_commands(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        self._load_plugin_commands()
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        debug = bool(ctx.params.get("debug"))
        previous = warnings.showwarning
        if not debug:
            warnings.showwarning = _show_warning
        try:
            return super().invoke(ctx)
        except DPFrameError as exc:
            if debug:
                raise
            raise UserError(_sentence(exc), exc.exit_code) from None
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except KeyboardInterrupt:
            raise UserError("interrupted.", EXIT_INTERRUPTED) from None
        except Exception as exc:
            if debug:
                raise
            raise UserError(
                f"internal error: {type(exc).__name__}: {_sentence(exc)} (rerun with --debug "
                "for the traceback, and please report it).",
                EXIT_INTERNAL,
            ) from None
        finally:
            warnings.showwarning = previous


def _sentence(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


@click.group(cls=DPFrameGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dpframe", prog_name="dpframe")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
def cli(debug: bool) -> None:
    """dpframe: differentially private data release with a privacy ledger."""


def main(argv: list[str] | None = None) -> Any:
    """Entry point of the ``dpframe`` script."""
    return cli.main(args=argv if argv is not None else sys.argv[1:], prog_name="dpframe")


def _add_core_commands() -> None:
    from dpframe.cli import (
        chain_cmd,
        demo_cmd,
        evaluate_cmd,
        ledger_cmd,
        plugins_cmd,
        release_cmd,
        reproduce_cmd,
    )

    for command in (
        plugins_cmd.plugins,
        plugins_cmd.describe,
        release_cmd.release,
        ledger_cmd.ledger,
        chain_cmd.chain,
        demo_cmd.demo,
        evaluate_cmd.evaluate,
        reproduce_cmd.reproduce,
    ):
        cli.add_command(command)


_add_core_commands()
