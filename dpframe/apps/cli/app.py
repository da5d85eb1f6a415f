"""The root command group, error handling and command registration."""

from __future__ import annotations

import json
import os
import sys
import traceback
import warnings
from typing import Any

import click

from dpframe.apps.cli.common import KEY_FILE_ENV_VAR
from dpframe.errors import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    DPFrameError,
    error_object,
)

JSON_META = "dpframe.json"
"""``ctx.meta`` key: whether the command line asked for ``--json``."""


class UserError(click.ClickException):
    """An error shown as one sentence on stderr, or with ``--json`` as the object
    ``{"error": {"code", "exit_code", "message"}}`` on stdout; exits with its code."""

    def __init__(
        self, message: str, exit_code: int, code: str = "usage", as_json: bool = False
    ) -> None:
        super().__init__(message)
        self.exit_code, self.code, self.as_json = exit_code, code, as_json

    def show(self, file: Any = None) -> None:
        if not self.as_json:
            super().show(file)
            return
        doc = {"error": error_object(self.code, self.exit_code, self.message)}
        click.echo(json.dumps(doc, indent=2, sort_keys=True))


def _show_warning(message: Any, category: type, *args: Any, **kwargs: Any) -> None:
    click.echo(f"Warning: {message}", err=True)


class DPFrameGroup(click.Group):
    """Turns dpframe errors into one sentence, and other failures into one sentence
    plus a hint to rerun with ``--debug``. Plugin commands are added on first lookup."""

    _plugin_commands_loaded = False

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """Run the command line; ``$DPFRAME_LEDGER_KEY_FILE``, which ``--key-file`` sets for
        one command, is as it was afterwards however the command ended (click does not
        close a context's resources when its arguments fail to parse)."""
        name = KEY_FILE_ENV_VAR
        before = os.environ.get(name)
        try:
            return super().main(*args, **kwargs)
        finally:
            if before is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = before

    def _load_plugin_commands(self) -> None:
        if not self._plugin_commands_loaded:
            self._plugin_commands_loaded = True
            from dpframe.releases.plugins import registry

            registry().add_commands(self)

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._load_plugin_commands()
        return super().list_commands(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        self._load_plugin_commands()
        return super().get_command(ctx, cmd_name)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        words = args[: args.index("--")] if "--" in args else args
        ctx.meta[JSON_META] = "--json" in words
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:  # the root's own options (dpframe --bogus ...)
            if ctx.meta[JSON_META]:
                raise UserError(_sentence_of(exc), EXIT_USAGE, "usage", True) from None
            raise

    def invoke(self, ctx: click.Context) -> Any:
        debug = bool(ctx.params.get("debug"))
        as_json = bool(ctx.meta.get(JSON_META))
        previous = warnings.showwarning
        if not debug:
            warnings.showwarning = _show_warning
        try:
            return super().invoke(ctx)
        except DPFrameError as exc:
            _traceback(debug, as_json, exc.exit_code)
            raise UserError(exc.sentence, exc.exit_code, exc.code, as_json) from None
        except UserError:
            raise
        except click.ClickException as exc:
            exc.exit_code = EXIT_USAGE  # click's own errors are all usage errors here
            if as_json:
                raise UserError(_sentence_of(exc), exc.exit_code, "usage", True) from None
            raise
        except (click.exceptions.Exit, click.Abort):
            raise
        except KeyboardInterrupt:
            raise UserError("interrupted.", EXIT_INTERRUPTED, "interrupted", as_json) from None
        except BrokenPipeError:
            # The reader stopped reading (``dpframe plugins | head -1``): what it read was
            # what it asked for. Nothing more to say, and nothing to flush at exit.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise click.exceptions.Exit(EXIT_OK) from None
        except Exception as exc:
            _traceback(debug, as_json, EXIT_INTERNAL)
            raise UserError(
                f"internal error: {type(exc).__name__}: {_sentence(exc)} (rerun with --debug "
                "for the traceback, and please report it).",
                EXIT_INTERNAL,
                "internal",
                as_json,
            ) from None
        finally:
            warnings.showwarning = previous


def _traceback(debug: bool, as_json: bool, exit_code: int) -> None:
    """With ``--debug``, the traceback of the error being handled on stderr instead of its
    sentence (with ``--json`` as well as the JSON error on stdout); the exit code stays."""
    if debug:
        traceback.print_exc(file=sys.stderr)
        if not as_json:
            raise click.exceptions.Exit(exit_code) from None


def _sentence(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def _sentence_of(exc: click.ClickException) -> str:
    """A click error as one sentence, naming the command whose usage it is about."""
    text = " ".join(exc.format_message().split()).rstrip(".")
    ctx = getattr(exc, "ctx", None)
    if ctx is not None:
        text += f" (see '{ctx.command_path} --help')"
    return text + "."


@click.group(cls=DPFrameGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dpframe", prog_name="dpframe")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
def cli(debug: bool) -> None:
    """dpframe: differentially private data release with a privacy ledger."""


def main(argv: list[str] | None = None) -> Any:
    """Entry point of the ``dpframe`` script."""
    return cli.main(args=argv if argv is not None else sys.argv[1:], prog_name="dpframe")


def _add_core_commands() -> None:
    from dpframe.apps.cli import (
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
