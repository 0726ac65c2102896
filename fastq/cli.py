"""The ``fastq`` command (also ``python -m fastq``).

    fastq bench [DATA] [--task T] [--peers ...] [--json F] [--plot F.png] ...
    fastq show DATA --ops "RandomResizedCrop(224),HorizontalFlip()" --out grid.png
    fastq info

Adding a subcommand is one function and one registration: write
``def cmd_x(args) -> int`` and put ``@command("x", help=..., args=[arg(...), ...])``
above it.  Errors the user can fix (missing folder, no images, bad op string)
raise :class:`CliError`; the command prints one line ``fastq x: error: ...`` to
stderr and exits with status 2.  See docs/cli.md.
"""
import argparse
import inspect
import json
import os
import sys

__all__ = ["main", "command", "arg", "CliError"]

_COMMANDS = []  # (name, help, description, [arg], function), in registration order


class CliError(Exception):
    """A user error: printed as one line, exit status 2."""


def arg(*names, **kwargs):
    """One argparse argument of a subcommand (the arguments of add_argument)."""
    return names, kwargs


def command(name, *, help, args=(), description=None):
    """Register ``fn(args) -> int`` as subcommand `name` with its arguments."""
    def deco(fn):
        _COMMANDS.append((name, help, description or inspect.cleandoc(fn.__doc__ or help), list(args), fn))
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


# ---------------------------------------------------------------------------
# fastq bench
# ---------------------------------------------------------------------------

@command("bench", help="images/s of fastq and its peers on your images or a generated set", args=[
    arg("data", nargs="?", metavar="DATA",
        help="a folder (searched recursively for image files), a glob pattern (quote it) or a text file "
             "with one image path per line; omitted: a generated set of ImageNet-like JPEGs"),
    arg("--task", default="reference", choices=["reference", "train", "eval", "small-96"],
        help="what each peer does to every image (default: reference; see docs/cli.md)"),
    arg("--peers", default="fastq,tfdata,tensorpack,pyloop,dali", type=_csv,
        help="comma-separated peers: fastq, tfdata, tfdata_n, tensorpack, pyloop, dali, fastq@N "
             "(default: %(default)s); peers that are not installed are listed as such"),
    arg("--workers", type=_positive_int, help="fastq's workers and DALI's threads (default: usable cores)"),
    arg("--images", type=_positive_int,
        help="images per epoch (generated set: default 2000; DATA: default all, else a fixed random subset)"),
    arg("--rounds", type=_positive_int, default=3, help="rounds; each peer's median is reported (default 3)"),
    arg("--scaling", type=_csv, default=[], metavar="N,N,...",
        help="also measure fastq with these worker counts (e.g. 1,2,4) and plot the curve"),
    arg("--json", metavar="FILE", help="write all results as JSON"),
    arg("--plot", metavar="FILE.png", help="write a PNG bar chart (and the scaling curve) with matplotlib"),
    arg("--quick", action="store_true", help="a fast check: 128 images, 1 round, no re-measuring"),
    arg("--profile", action="store_true",
        help="print fastq's per-stage times and wait fractions, and a single-thread stage profile"),
    arg("--data-dir", metavar="DIR", help="where generated sets are cached (default ~/.cache/fastq/bench_data)"),
    arg("--timeout", type=float, default=900, help="seconds allowed per peer process (default 900)"),
    arg("--no-progress", action="store_true", help="no progress bars"),
])
def cmd_bench(a):
    """Run each installed peer in its own process on the same files: a warm-up
    epoch, then one timed epoch per round; print the median images/s and
    fastq's same-run ratio per peer."""
    from fastq import bench
    rounds, n = a.rounds, a.images
    if a.quick:
        rounds, n = 1, n or 128
    try:
        scaling = [int(x) for x in a.scaling]
    except ValueError:
        raise CliError(f"--scaling must be comma-separated worker counts, got {','.join(a.scaling)!r}") from None
    for path in (a.json, a.plot):
        d = os.path.dirname(os.path.abspath(path)) if path else None
        if d and not os.path.isdir(d):
            raise CliError(f"{path}: folder {d} does not exist")
    if a.plot:
        try:
            import matplotlib  # noqa: F401  (fail here, before measuring)
        except ImportError:
            raise CliError("--plot needs matplotlib: pip install matplotlib") from None
    progress = not a.no_progress
    try:
        if a.data is None:
            paths = bench.generated_dataset(n or 2000, a.data_dir, progress=progress)
            desc = "generated by fastq.testdata, seed 0"
        else:
            paths = bench.find_images(a.data)
            total = len(paths)
            if n and n < total:
                import random
                paths = sorted(random.Random(0).sample(paths, n))
            desc = f"{a.data}: {len(paths)} of {total} image files"
        res = bench.run(paths, task=a.task, peers=a.peers, workers=a.workers, rounds=rounds, scaling=scaling,
                        profile=a.profile, retry_busy=0 if a.quick else 1, timeout=a.timeout,
                        progress=progress, data_description=desc)
    except bench.BenchInputError as e:
        raise CliError(str(e)) from None
    bench.print_report(res)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
        print(f"wrote {a.json}")
    if a.plot:
        from fastq.bench_plot import plot
        plot(res, a.plot)
        print(f"wrote {a.plot}")
    return 1 if not res["peers"] else 0


# ---------------------------------------------------------------------------
# entry point
# ---------------------------------------------------------------------------

def build_parser():
    from fastq import __version__
    p = _Parser(prog="fastq", description="fastq: a native, GIL-free input pipeline. Subcommands:",
                epilog="Run 'fastq COMMAND --help' for a command's options. Docs: docs/cli.md")
    p.add_argument("--version", action="version", version=f"fastq {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, help_, desc, args, fn in _COMMANDS:
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
