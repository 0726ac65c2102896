"""What every ``fastq`` subcommand module uses: the registry (:func:`command`,
:func:`arg`), :class:`CliError` and the argument types."""
import argparse
import inspect

__all__ = ["CliError", "arg", "command", "COMMANDS"]

COMMANDS: list = []  # (name, help, description, [arg], function), in registration order


class CliError(Exception):
    """A user error: printed as one line, exit status 2."""


def arg(*names, **kwargs):
    """One argparse argument of a subcommand (the arguments of add_argument)."""
    return names, kwargs


def command(name, *, help, args=(), description=None):
    """Register ``fn(args) -> int`` as subcommand `name` with its arguments."""
    def deco(fn):
        COMMANDS.append((name, help, description or inspect.cleandoc(fn.__doc__ or help), list(args), fn))
        return fn
    return deco


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse prints usage + message)
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _csv(text):
    return [x.strip() for x in text.split(",") if x.strip()]


def _positive_int(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {v}")
    return v
