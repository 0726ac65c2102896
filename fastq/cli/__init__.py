"""The ``fastq`` command (also ``python -m fastq``), one module per subcommand.

    fastq bench [DATA] [--task T] [--peers ...] [--json F] [--plot F.png] ...   (bench.py)
    fastq show DATA --ops "RandomResizedCrop(224),HorizontalFlip()" --out grid.png  (show.py)
    fastq info                                                                   (info.py)
    fastq prepare SRC DST [--format folder|tfrecord|tar] ...                     (prepare.py)

Adding a subcommand is one module and one line: write ``fastq/cli/<name>.py`` with
``def cmd_x(args) -> int`` and ``@command("x", help=..., args=[arg(...), ...])``
(from :mod:`fastq.cli.base`) above it, and import the module below (the import
order is the order of ``fastq --help``).  Errors the user can fix (missing folder,
no images, bad op string) raise :class:`CliError`; the command prints one line
``fastq x: error: ...`` to stderr and exits with status 2.  See docs/cli.md.
"""
import argparse
import sys

from fastq.cli import bench, show, info, prepare, serve  # noqa: F401,I100  (registers the subcommands, in this order)
from fastq.cli.base import COMMANDS, CliError, _Parser, arg, command

__all__ = ["main", "build_parser", "command", "arg", "CliError", "COMMANDS"]


def build_parser():
    from fastq import __version__
    p = _Parser(prog="fastq", description="fastq: a native, GIL-free input pipeline. Subcommands:",
                epilog="Run 'fastq COMMAND --help' for a command's options. Docs: docs/cli.md")
    p.add_argument("--version", action="version", version=f"fastq {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, help_, desc, args, fn in COMMANDS:
        sp = sub.add_parser(name, help=help_, description=desc,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        for names, kw in args:
            sp.add_argument(*names, **kw)
        sp.set_defaults(_fn=fn, _name=name)
    return p


def main(argv=None):
    p = build_parser()
    a = p.parse_args(argv)
    if not getattr(a, "_fn", None):
        p.print_help(sys.stderr)
        return 2
    try:
        return a._fn(a) or 0
    except CliError as e:
        print(f"fastq {a._name}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"fastq {a._name}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
