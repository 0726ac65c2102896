"""``fastq prepare``: the command over the library API of :mod:`fastq.prepare`
(``prepare_tree`` and ``prepare_shards``); prints the summary of a run."""
import sys

from fastq.cli.base import CliError, command
from fastq.prepare import DEFAULT_INTERVAL, DEFAULT_QUALITY, DEFAULT_SHARD_SIZE, FORMATS, prepare_shards, prepare_tree

__all__ = ["ARGS"]

ARGS = [  # the arguments of `fastq prepare`: (names, add_argument kwargs), as arg() makes them
    (("src",), dict(help="source folder; with --format tfrecord|tar also a URL prefix (s3://bucket/train)")),
    (("dst",), dict(help="destination folder (created; same tree); with --format tfrecord|tar also a URL "
                         "(s3://bucket/prefix, gs://, az://): shards are uploaded, each with a sidecar "
                         "index <shard>.idx that index=\"sidecar\" reads (docs/cloud.md)")),
    (("--interval",), dict(type=int, default=DEFAULT_INTERVAL,
                           help=f"target restart interval in MCUs (default {DEFAULT_INTERVAL}; the chosen one "
                                "divides the MCUs per row)")),
    (("--jobs", "-j"), dict(type=int, default=None, help="threads (default: CPU count)")),
    (("--force",), dict(action="store_true", help="redo outputs that look up to date")),
    (("--skip-errors",), dict(action="store_true", help="copy corrupt JPEGs unchanged instead of stopping")),
    (("--quiet", "-q"), dict(action="store_true", help="no progress bar")),
    (("--format",), dict(choices=FORMATS, default="folder",
                         help="folder: the same tree (default); tfrecord: TFRecord shards of tf.train.Example; "
                              "tar: WebDataset tar shards (<key>.jpg + <key>.cls).  Shards need a "
                              "class-per-subfolder SRC (labels as fastq.sources.Folder gives them)")),
    (("--shard-size",), dict(type=int, default=DEFAULT_SHARD_SIZE,
                             help=f"images per shard (default {DEFAULT_SHARD_SIZE})")),
    (("--shuffle",), dict(type=int, default=None, metavar="SEED",
                          help="shards: write the samples in a seeded random order (default: Folder's order)")),
    (("--max-side",), dict(type=int, default=None, metavar="N",
                           help="lossy, opt-in: shrink JPEGs whose longer side exceeds N pixels to N (same "
                                "aspect, area interpolation) and re-encode them at --quality, EXIF-free; "
                                "smaller JPEGs stay lossless (default: none, all lossless)")),
    (("--max-pixels",), dict(type=int, default=None, metavar="P",
                             help="lossy, opt-in: likewise for JPEGs with more than P pixels (with --max-side: "
                                  "both limits hold)")),
    (("--quality",), dict(type=int, default=DEFAULT_QUALITY,
                          help=f"JPEG quality of the shrunk copies, 1-100 (default {DEFAULT_QUALITY}; "
                               "only with --max-side / --max-pixels)")),
    (("--prefix",), dict(default="data", help="shard file name prefix (default: data -> "
                                              "data-00000-of-00004.tfrecord / .tar)")),
]


def _growth(out_bytes, in_bytes):
    return (out_bytes / in_bytes - 1) * 100 if in_bytes else 0.0


def _summary(line, errors, what):
    """Print the run's summary line, and one line per corrupt file to stderr."""
    print(f"fastq prepare: {line}")
    for rel, msg in errors:
        print(f"fastq prepare: {what}: {rel}: {msg}", file=sys.stderr)
    return 0


def _run(a):
    """Run the command for parsed arguments `a` (see ARGS).  Raises OSError or
    ValueError for errors the user can fix; returns the exit status otherwise."""
    on_error = "skip" if a.skip_errors else "raise"
    if a.quality != DEFAULT_QUALITY and a.max_side is None and a.max_pixels is None:
        raise ValueError("--quality applies only with --max-side or --max-pixels (lossless otherwise)")
    sizes = dict(max_side=a.max_side, max_pixels=a.max_pixels, quality=a.quality)
    if a.format != "folder":
        s = prepare_shards(a.src, a.dst, fmt=a.format, shard_size=a.shard_size, prefix=a.prefix,
                           interval=a.interval, jobs=a.jobs, force=a.force, progress=not a.quiet,
                           on_error=on_error, shuffle=a.shuffle, **sizes)
        return _summary(f"{s['samples']} images of {len(s['class_names'])} classes -> {s['records']} records in "
                        f"{s['shards']} {a.format} shard(s) ({s['written']} written, {s['skipped']} up to date); "
                        f"image bytes {s['in_bytes']} -> {s['out_bytes']} "
                        f"({_growth(s['out_bytes'], s['in_bytes']):+.2f} %)", s["errors"], "left out (corrupt)")
    s = prepare_tree(a.src, a.dst, interval=a.interval, jobs=a.jobs, force=a.force, progress=not a.quiet,
                     on_error=on_error, **sizes)
    shrunk = f"{s['resized']} JPEGs shrunk (quality {a.quality}), " if s["resized"] else ""
    return _summary(f"{s['files']} files: {s['rewritten']} JPEGs re-encoded, {shrunk}{s['kept']} JPEGs kept, "
                    f"{s['copied']} other files copied, {s['skipped']} up to date; JPEG bytes "
                    f"{s['jpeg_in_bytes']} -> {s['jpeg_out_bytes']} "
                    f"({_growth(s['jpeg_out_bytes'], s['jpeg_in_bytes']):+.2f} %)", s["errors"],
                    "copied unchanged (corrupt)")


@command("prepare", help="copy an image folder (or write TFRecord / tar shards), re-encoding JPEGs losslessly "
                         "for faster crop decoding", args=ARGS)
def cmd_prepare(a):
    """Copy SRC to DST (same tree), re-encoding every JPEG losslessly with restart
    markers that tile each MCU row, so that fastq decodes a crop from only the
    segments that cover it.  Other files are copied byte for byte; reruns skip
    outputs that are up to date.  With --format tfrecord or tar, the images of a
    class-per-subfolder SRC go into shards instead (tf.train.Example records, or
    WebDataset <key>.jpg + <key>.cls); reruns skip complete shards.  See
    docs/prepare.md."""
    try:
        return _run(a)
    except (OSError, ValueError) as e:
        raise CliError(str(e)) from None
