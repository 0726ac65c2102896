"""``fastq prepare SRC DST``: copy an image folder, re-encoding every JPEG losslessly with
restart markers that tile each MCU row, so that fastq decodes a crop from only the
restart segments that cover it (docs/prepare.md).

The prepared JPEGs hold the same quantized DCT coefficients (``jpeg_read_coefficients``
-> ``jpeg_write_coefficients``, like ``jpegtran -restart N -optimize``): every decoder
gives the same pixels as for the original.  Non-JPEG files, and JPEGs the re-encode
cannot help (CMYK, tiny, already prepared, ...), are copied byte for byte.  The folder
tree is mirrored.  Reruns skip outputs that are up to date (same mtime as their
source), so an interrupted run resumes.  Work runs in threads; the native re-encode
releases the GIL.

    python -m fastq.prepare SRC DST [--interval 4] [--jobs N] [--force] [--quiet]
"""
import os
import shutil
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

__all__ = ["main", "run", "ARGS", "prepare_tree", "prepare_file", "DEFAULT_INTERVAL"]

# Target restart interval in MCUs (the chosen one divides the MCUs per row); measured
# in docs/prepare.md.
DEFAULT_INTERVAL = 4
_TMP_SUFFIX = ".fastq-prepare-tmp"


def _is_jpeg(head):
    return head[:3] == b"\xff\xd8\xff"


def _up_to_date(src_st, dst):
    """dst is only ever created by an atomic rename after a complete write, with the
    source's mtime: an equal mtime means it was made from this version of src."""
    try:
        return os.stat(dst).st_mtime_ns == src_st.st_mtime_ns
    except FileNotFoundError:
        return False


def prepare_file(src, dst, interval=DEFAULT_INTERVAL, force=False):
    """Prepare one file.  Returns (action, in_bytes, out_bytes, detail) with action one
    of "rewritten", "kept" (JPEG copied unchanged), "copied" (not a JPEG), "skipped"
    (up to date).  Writes dst atomically (temporary file + rename) and gives it the
    source's mtime.  Raises fastq.errors.DecodeError for a corrupt JPEG."""
    from fastq import _image

    st = os.stat(src)
    if not force and _up_to_date(st, dst):
        return "skipped", st.st_size, os.path.getsize(dst), ""
    with open(src, "rb") as f:
        data = f.read()
    os.makedirs(os.path.dirname(dst) or ".", exist_ok=True)
    tmp = dst + _TMP_SUFFIX
    if _is_jpeg(data):
        new, info = _image.prepare_jpeg(data, interval)
        if new is not None:
            action, out, detail = "rewritten", new, f"interval {info['restart_interval']}"
        else:
            action, out, detail = "kept", data, info["why"]
    else:
        action, out, detail = "copied", data, ""
    try:
        with open(tmp, "wb") as f:
            f.write(out)
        shutil.copymode(src, tmp)
        os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.replace(tmp, dst)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return action, len(data), len(out), detail


def _walk(src):
    for root, dirs, files in os.walk(src):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(_TMP_SUFFIX):
                continue
            p = os.path.join(root, name)
            yield os.path.relpath(p, src)


def prepare_tree(src, dst, interval=DEFAULT_INTERVAL, jobs=None, force=False, progress=True, on_error="raise"):
    """Mirror the tree under ``src`` into ``dst`` (see the module doc).  Returns a dict of
    counts and byte totals.  ``on_error="skip"`` records corrupt files in
    ``stats["errors"]`` (and copies them unchanged) instead of raising."""
    src = os.path.abspath(src)
    dst = os.path.abspath(dst)
    if not os.path.isdir(src):
        raise NotADirectoryError(f"source folder not found: {src}")
    if dst == src or dst.startswith(src + os.sep):
        raise ValueError(f"destination {dst} must not lie inside the source {src}")
    if interval < 1:
        raise ValueError(f"interval must be >= 1 MCU, got {interval}")
    rels = list(_walk(src))
    stats = {"files": len(rels), "rewritten": 0, "kept": 0, "copied": 0, "skipped": 0, "errors": [],
             "in_bytes": 0, "out_bytes": 0, "jpeg_in_bytes": 0, "jpeg_out_bytes": 0}
    lock = threading.Lock()
    bar = None
    if progress:
        try:
            from tqdm import tqdm
            bar = tqdm(total=len(rels), unit="file", desc="fastq prepare", dynamic_ncols=True)
        except ImportError:  # pragma: no cover - tqdm comes with TensorFlow
            bar = None

    def one(rel):
        from fastq import errors as E
        s, d = os.path.join(src, rel), os.path.join(dst, rel)
        try:
            action, nin, nout, _ = prepare_file(s, d, interval, force)
        except E.DecodeError as e:
            if on_error != "skip":
                raise E.DecodeError(f"{s}: {e}") from e
            shutil.copy2(s, d)
            with lock:
                stats["errors"].append((rel, str(e)))
            action, nin, nout = "kept", os.path.getsize(s), os.path.getsize(s)
        with lock:
            stats[action] += 1
            stats["in_bytes"] += nin
            stats["out_bytes"] += nout
            if action in ("rewritten", "kept") or (action == "skipped" and rel.lower().endswith((".jpg", ".jpeg"))):
                stats["jpeg_in_bytes"] += nin
                stats["jpeg_out_bytes"] += nout
            if bar is not None:
                bar.update(1)

    try:
        with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as ex:
            for f in [ex.submit(one, r) for r in rels]:
                f.result()
    finally:
        if bar is not None:
            bar.close()
    return stats


# The command's arguments, as (names, add_argument kwargs): used by main() here and by
# `fastq prepare` (fastq/cli.py), so both take the same options.
ARGS = [
    (("src",), dict(help="source folder")),
    (("dst",), dict(help="destination folder (created; same tree)")),
    (("--interval",), dict(type=int, default=DEFAULT_INTERVAL,
                           help=f"target restart interval in MCUs (default {DEFAULT_INTERVAL}; the chosen one "
                                "divides the MCUs per row)")),
    (("--jobs", "-j"), dict(type=int, default=None, help="threads (default: CPU count)")),
    (("--force",), dict(action="store_true", help="redo outputs that look up to date")),
    (("--skip-errors",), dict(action="store_true", help="copy corrupt JPEGs unchanged instead of stopping")),
    (("--quiet", "-q"), dict(action="store_true", help="no progress bar")),
]
DESCRIPTION = ("Copy an image folder, re-encoding JPEGs losslessly with restart markers so that fastq "
               "decodes crops faster (docs/prepare.md).")


def run(a):
    """Run the command for parsed arguments `a` (see ARGS).  Raises OSError or
    ValueError for errors the user can fix; returns the exit status otherwise."""
    s = prepare_tree(a.src, a.dst, a.interval, a.jobs, a.force, progress=not a.quiet,
                     on_error="skip" if a.skip_errors else "raise")
    growth = (s["jpeg_out_bytes"] / s["jpeg_in_bytes"] - 1) * 100 if s["jpeg_in_bytes"] else 0.0
    print(f"fastq prepare: {s['files']} files: {s['rewritten']} JPEGs re-encoded, {s['kept']} JPEGs kept, "
          f"{s['copied']} other files copied, {s['skipped']} up to date; JPEG bytes "
          f"{s['jpeg_in_bytes']} -> {s['jpeg_out_bytes']} ({growth:+.2f} %)")
    for rel, msg in s["errors"]:
        print(f"fastq prepare: copied unchanged (corrupt): {rel}: {msg}", file=sys.stderr)
    return 0


def main(argv=None):
    """``python -m fastq.prepare`` (the same as ``fastq prepare``)."""
    from fastq.cli import main as cli_main
    return cli_main(["prepare"] + list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
