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

_COMMANDS: list = []  # (name, help, description, [arg], function), in registration order


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
             "with one image path per line; or TFRecord shards (*.tfrecord, *-of-* files: a glob, a shard or "
             "a folder of them); omitted: a generated set of ImageNet-like JPEGs"),
    arg("--task", default="reference", choices=["reference", "train", "eval", "small-96"],
        help="what each peer does to every image (default: reference; see docs/cli.md)"),
    arg("--peers", default="fastq,tfdata,tensorpack,pyloop,dali", type=_csv,
        help="comma-separated peers: fastq, tfdata, tfdata_n, tensorpack, pyloop, dali, fastq@N "
             "(default: %(default)s); peers that are not installed are listed as such"),
    arg("--workers", type=_positive_int, help="fastq's workers and DALI's threads (default: usable cores)"),
    arg("--images", type=_positive_int,
        help="images per epoch (generated set: default 2000; DATA: default all, else a fixed random subset; "
             "TFRecord: the first N records in shard order)"),
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
        bench.check_peers(a.peers)  # before any data is generated
        if a.data is None:
            paths = bench.generated_dataset(n or 2000, a.data_dir, progress=progress)
            desc = "generated by fastq.testdata, seed 0"
        elif bench.find_tfrecords(a.data) is not None:
            shards = bench.find_tfrecords(a.data)
            paths = bench.TFRecordInput(shards, n)
            desc = (f"{a.data}: TFRecord, the first {len(paths)} of {paths.total} records in "
                    f"{len(shards)} shard(s)")
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
    bench.write_outputs(res, a.json, a.plot)
    return 1 if not res["peers"] else 0


# ---------------------------------------------------------------------------
# fastq show
# ---------------------------------------------------------------------------

def _op_classes():
    from fastq import ops
    return {n: getattr(ops, n) for n in ops.__all__
            if isinstance(getattr(ops, n), type) and issubclass(getattr(ops, n), ops.Op) and n != "Op"}


def _literal(node, where):
    """A number, string, bool, or tuple/list of those, from an AST node (no evaluation)."""
    import ast
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool)):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)) and \
            isinstance(node.operand, ast.Constant) and type(node.operand.value) in (int, float):
        return -node.operand.value if isinstance(node.op, ast.USub) else node.operand.value
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(_literal(e, where) for e in node.elts)
    raise CliError(f"bad op string: {where}: only numbers, strings and tuples are allowed as arguments, "
                   f"got {ast.unparse(node)!r}")


def parse_ops(text):
    """'RandomResizedCrop(224),HorizontalFlip(),ColorJitter(0.4,0.4,0.4)' -> [fastq.ops objects].

    Parsed with the ast module, never evaluated: each item must be a call of a
    fastq.ops class with literal arguments.  Raises CliError naming the problem."""
    import ast
    text = (text or "").strip()
    if not text:
        raise CliError("bad op string: it is empty")
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError as e:
        raise CliError(f"bad op string: invalid syntax at column {e.offset}: {text!r}") from None
    items = tree.elts if isinstance(tree, ast.Tuple) else [tree]
    known = _op_classes()
    chain = []
    for node in items:
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            raise CliError(f"bad op string: {ast.unparse(node)!r} is not an op call like HorizontalFlip()")
        name = node.func.id
        if name not in known:
            raise CliError(f"bad op string: unknown op {name!r} (ops: {', '.join(sorted(known))})")
        args = [_literal(a, name) for a in node.args]
        kwargs = {}
        for k in node.keywords:
            if k.arg is None:
                raise CliError(f"bad op string: {name}: **kwargs are not allowed")
            kwargs[k.arg] = _literal(k.value, name)
        try:
            chain.append(known[name](*args, **kwargs))
        except (TypeError, ValueError) as e:
            msg = str(e)
            raise CliError(f"bad op string: {msg if msg.startswith(name) else name + ': ' + msg}") from None
    return chain


def _crop_boxes(ex):
    """Rectangles (x, y, w, h) in source pixels of every crop in the chain (the
    first-op crop is ex['crop_src']); mapping stops at the first op that moves
    pixels other than by scaling and cropping."""
    ox = oy = 0.0
    sx = sy = 1.0
    boxes = []
    for op in ex["ops"]:
        name = op["op"]
        (ih, iw), (oh, ow) = op["in_shape"], op["out_shape"]
        if name == "Resize":
            sx, sy = sx * iw / ow, sy * ih / oh
        elif name in ("RandomResizedCrop", "CenterCrop", "RandomCrop"):
            x, y, w, h = op["box"]
            if name == "RandomCrop":
                x, y = x - op["pad"][0], y - op["pad"][1]
            rect = (ox + x * sx, oy + y * sy, w * sx, h * sy)
            boxes.append(rect)
            ox, oy = rect[0], rect[1]
            if name == "RandomResizedCrop":
                sx, sy = sx * w / ow, sy * h / oh
        elif name in ("HorizontalFlip", "VerticalFlip", "RandomAffine") and op.get("applied", True):
            break
    return boxes


def _explain_lines(ex):
    lines = [f"{ex['format']} {ex['src_shape'][1]}x{ex['src_shape'][0]}, decoded at "
             f"{ex['decode_scale'][0]}/{ex['decode_scale'][1]}" + (" (ROI)" if ex["roi_used"] else "")]
    for op in ex["ops"]:
        n = op["op"]
        if "box" in op:
            lines.append(f"{n} box x={op['box'][0]} y={op['box'][1]} w={op['box'][2]} h={op['box'][3]}")
        elif n == "ColorJitter":
            lines.append("jitter " + " ".join(f"{k[:3]}={op[k]:.2f}" for k in op["order"]))
        elif n == "RandomAffine":
            lines.append(f"affine rot={op['angle']:.1f} scale={op['scale']:.2f} "
                         f"t=({op['translate'][0]:.0f},{op['translate'][1]:.0f})")
        elif "applied" in op:
            lines.append(f"{n}: {'yes' if op['applied'] else 'no'}")
        elif n == "Resize":
            lines.append(f"Resize -> {op['out_shape'][1]}x{op['out_shape'][0]}")
    return lines


BOX_COLOR = (255, 0, 255)  # the crop rectangles drawn on the source thumbnails


def render_contact_sheet(paths, indices, chain, *, seed=0, epoch=0, thumb=224, columns=4, title=""):
    """(PIL.Image, cells): for each dataset index, the source thumbnail with its
    crop boxes, the augmented sample (fastq's native path, uint8) and its
    explain record as text.  cells holds each cell's geometry and explain."""
    import numpy as np
    from PIL import Image, ImageDraw, ImageFont
    from fastq import _image
    from fastq import ops as O
    view = [op for op in chain if not isinstance(op, O.Normalize)]  # pictures are uint8
    spec = _image.ImageSpec(O.compile_ops(view, dtype="uint8"))
    font = ImageFont.load_default()
    samples = []
    for i in indices:
        with open(paths[i], "rb") as f:
            data = f.read()
        try:
            out, ex = spec.process_encoded(data, seed, epoch, i)
        except Exception as e:  # noqa: BLE001 - a fastq error names the reason
            raise CliError(f"{paths[i]}: {type(e).__name__}: {e}") from None
        src = np.asarray(Image.open(paths[i]).convert("RGB"))
        samples.append((i, out, ex, src))
    out_h = max(s[1].shape[0] for s in samples)
    out_w = max(s[1].shape[1] for s in samples)
    tile = max(thumb, out_h)
    line_h, pad, n_lines = 13, 10, 1 + max(len(_explain_lines(s[2])) for s in samples)
    cell_w = thumb + out_w + 3 * pad
    cell_h = tile + n_lines * line_h + 2 * pad
    cols = min(columns, len(samples))
    rows = -(-len(samples) // cols)
    head = 2 * line_h + pad if title else 0
    sheet = Image.new("RGB", (cols * cell_w, head + rows * cell_h), (255, 255, 255))
    draw = ImageDraw.Draw(sheet)
    if title:
        draw.text((pad, pad // 2), title, fill=(0, 0, 0), font=font)
    cells = []
    for k, (i, out, ex, src) in enumerate(samples):
        cx, cy = (k % cols) * cell_w + pad, head + (k // cols) * cell_h + pad
        H, W = src.shape[:2]
        s = thumb / max(H, W)
        tw, th = max(1, round(W * s)), max(1, round(H * s))
        sheet.paste(Image.fromarray(src).resize((tw, th), Image.BILINEAR), (cx, cy))
        boxes = _crop_boxes(ex)
        for (bx, by, bw, bh) in boxes:
            x0, y0 = cx + round(bx * s), cy + round(by * s)
            x1, y1 = cx + round((bx + bw) * s) - 1, cy + round((by + bh) * s) - 1
            draw.rectangle([x0, y0, max(x0, x1), max(y0, y1)], outline=BOX_COLOR, width=2)
        img = out if out.ndim == 3 and out.shape[2] == 3 else np.repeat(out.reshape(out.shape[0], out.shape[1], 1), 3, 2)
        ox = cx + thumb + pad
        sheet.paste(Image.fromarray(np.ascontiguousarray(img)), (ox, cy))
        ty = cy + tile + 2
        draw.text((cx, ty), f"#{i} {os.path.basename(paths[i])}", fill=(0, 0, 0), font=font)
        for j, line in enumerate(_explain_lines(ex)):
            draw.text((cx, ty + (j + 1) * line_h), line, fill=(60, 60, 60), font=font)
        cells.append({"index": i, "path": paths[i], "thumb": {"x": cx, "y": cy, "w": tw, "h": th, "scale": s},
                      "out": {"x": ox, "y": cy, "w": img.shape[1], "h": img.shape[0]},
                      "boxes_src": boxes, "explain": ex})
    return sheet, cells


@command("show", help="a contact sheet of augmented samples with their explain records", args=[
    arg("data", metavar="DATA", help="a folder (searched recursively), a glob pattern or a file list"),
    arg("--ops", required=True,
        help='the op chain, e.g. "RandomResizedCrop(224),HorizontalFlip(),ColorJitter(0.4,0.4,0.4)" '
             "(fastq.ops names; numbers, strings and tuples as arguments)"),
    arg("--n", type=_positive_int, default=16, help="samples to show: the first N images (default 16)"),
    arg("--out", default="grid.png", metavar="FILE.png", help="where to write the PNG (default grid.png)"),
    arg("--seed", type=int, default=0, help="the pipeline seed (default 0)"),
    arg("--epoch", type=int, default=0, help="the epoch whose draws to show (default 0)"),
    arg("--columns", type=_positive_int, default=4, help="cells per row (default 4)"),
    arg("--json", metavar="FILE", help="also write each cell's position and explain record as JSON"),
])
def cmd_show(a):
    """Run the op chain on the first N images, as a Pipeline with this seed
    would in this epoch (same per-sample draws as Pipeline.explain), and draw
    each source thumbnail with its crop box(es), the augmented result, and the
    explain record.  Normalize, if given, is left out of the picture."""
    chain = parse_ops(a.ops)  # first: a bad op string fails before any file is read
    from fastq import bench
    if a.seed < 0 or a.epoch < 0:
        raise CliError("--seed and --epoch must be >= 0")
    d = os.path.dirname(os.path.abspath(a.out))
    if not os.path.isdir(d):
        raise CliError(f"{a.out}: folder {d} does not exist")
    try:
        paths = bench.find_images(a.data)
    except bench.BenchInputError as e:
        raise CliError(str(e)) from None
    try:
        from fastq import ops as O
        O.compile_ops([op for op in chain if not isinstance(op, O.Normalize)], dtype="uint8")
    except (TypeError, ValueError) as e:
        raise CliError(f"bad op string: {e}") from None
    idx = list(range(min(a.n, len(paths))))
    title = f"fastq show: {a.ops}  |  seed {a.seed}, epoch {a.epoch}  |  {len(idx)} of {len(paths)} images " \
            f"from {a.data}  |  magenta: crop box in the source"
    sheet, cells = render_contact_sheet(paths, idx, chain, seed=a.seed, epoch=a.epoch, columns=a.columns,
                                        title=title)
    sheet.save(a.out, format="PNG")
    print(f"wrote {a.out} ({sheet.width}x{sheet.height}, {len(cells)} samples)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"ops": a.ops, "seed": a.seed, "epoch": a.epoch, "box_color": BOX_COLOR, "cells": cells},
                      f, indent=1)
        print(f"wrote {a.json}")
    return 0


# ---------------------------------------------------------------------------
# fastq info
# ---------------------------------------------------------------------------

def _dpkg_owner(path):
    """(package, version) of the Debian package that installed `path`, or None."""
    import subprocess
    try:
        r = subprocess.run(["dpkg-query", "-S", path], capture_output=True, text=True, timeout=20)
        if r.returncode != 0:
            return None
        pkg = r.stdout.split("\n")[0].split(": ")[0].strip()  # "libjpeg62-turbo:amd64: /usr/lib/..."
        v = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True, text=True, timeout=20)
        return (pkg, v.stdout.strip()) if v.returncode == 0 else (pkg, "")
    except (OSError, subprocess.SubprocessError):
        return None


def _dist_version(module):
    """Version of an installed module from its distribution metadata, without importing it."""
    import importlib.metadata as md
    import importlib.util
    try:
        if importlib.util.find_spec(module) is None:
            return None
    except (ImportError, ValueError):
        return None
    top = module.split(".")[0]
    names = md.packages_distributions().get(top, [])
    if module == "nvidia.dali":
        names = [n for n in names if n.startswith("nvidia-dali")] or names
    for n in names:
        try:
            return md.version(n)
        except md.PackageNotFoundError:
            continue
    return "installed (version unknown)"


def collect_info():
    """Everything `fastq info` prints, as a dict."""
    import platform
    import fastq
    out = {"fastq": {"version": fastq.__version__, "path": os.path.dirname(os.path.abspath(fastq.__file__))},
           "python": platform.python_version(), "platform": platform.platform()}
    try:
        from fastq import _image
        nv = _image.native_versions()
    except ImportError as e:
        nv = {"error": f"fastq._image does not import: {e}"}
    if "error" not in nv:
        for key in ("libjpeg_library", "opencv_library"):
            owner = _dpkg_owner(nv[key]) if nv.get(key) else None
            nv[key.replace("_library", "_package")] = {"name": owner[0], "version": owner[1]} if owner else None
        env = [k for k in ("JSIMD_FORCENONE", "JSIMD_FORCESSE2", "JSIMD_FORCEAVX2") if os.environ.get(k) == "1"]
        if env:
            nv["libjpeg_turbo_simd"] = f"forced by {env[0]}"
        elif platform.machine() in ("x86_64", "AMD64"):
            nv["libjpeg_turbo_simd"] = ("AVX2" if "AVX2" in nv["cpu_simd"] else "SSE2") + \
                " (libjpeg-turbo picks its x86-64 SIMD code from CPUID at run time)"
        else:
            nv["libjpeg_turbo_simd"] = f"{platform.machine()}: chosen by libjpeg-turbo at run time"
    out["native"] = nv
    try:
        aff = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        aff = None
    cpu = {"count": os.cpu_count(), "usable": len(aff) if aff is not None else os.cpu_count(), "affinity": aff}
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            q, period = f.read().split()
            cpu["cgroup_quota_cores"] = None if q == "max" else int(q) / int(period)
    except (OSError, ValueError):
        pass
    from fastq.bench import cpu_model
    cpu["model"] = cpu_model()
    out["cpu"] = cpu
    from fastq import cuda
    cu = {"runtime_candidates": cuda.runtime_candidates()}
    cu["devices"] = 0
    try:
        from fastq import _cuda
        _cuda.load(cu["runtime_candidates"])
        cu["runtime"] = "loaded"
        cu["devices"] = _cuda.device_count()
    except Exception as e:  # noqa: BLE001 - reported, never raised: info must always print
        cu["runtime"] = f"loaded, but {e}" if cu.get("runtime") == "loaded" else f"not loaded: {e}"
    ok, why = cuda.available()
    cu["pinning"] = "would work: slot memory is registered with cudaHostRegister" if ok else f"would not work: {why}"
    cu["pinning_ok"] = ok
    out["cuda"] = cu
    out["frameworks"] = {m: _dist_version(m) for m in
                         ("tensorflow", "torch", "jax", "tensorpack", "nvidia.dali", "cv2", "numpy")}
    return out


def _print_info(d):
    f, nv, cpu, cu = d["fastq"], d["native"], d["cpu"], d["cuda"]
    print(f"fastq {f['version']}  ({f['path']})")
    print(f"Python {d['python']} on {d['platform']}")
    if "error" in nv:
        print(f"native image module: {nv['error']}")
    else:
        def pkg(k):
            p = nv.get(k)
            return f"; Debian package {p['name']} {p['version']}" if p else ""
        print(f"libjpeg-turbo {nv['libjpeg_turbo']} (built against; libjpeg ABI {nv['jpeg_lib_version']}), "
              f"loaded: {nv['libjpeg_library'] or 'unknown'}{pkg('libjpeg_package')}")
        print(f"OpenCV {nv['opencv']} (cv::getVersionString(); built against {nv['opencv_build']}), "
              f"loaded: {nv['opencv_library'] or 'unknown'}{pkg('opencv_package')}")
        print(f"SIMD: CPU has {' '.join(nv['cpu_simd']) or 'none found'}; OpenCV baseline/dispatch: "
              f"{nv['opencv_cpu_features']} (optimized code {'on' if nv['opencv_optimized'] else 'OFF'}); "
              f"libjpeg-turbo: {nv['libjpeg_turbo_simd']}")
    aff = cpu["affinity"]
    quota = cpu.get("cgroup_quota_cores")
    print(f"CPU: {cpu['model']}; {cpu['count']} logical CPUs, {cpu['usable']} usable by this process"
          f"{' (affinity ' + ','.join(map(str, aff)) + ')' if aff is not None else ''}"
          f"{f'; cgroup quota {quota:g} cores' if quota else ''}; default fastq workers = {cpu['usable']}")
    print(f"CUDA runtime: {cu['runtime']}; GPUs: {cu['devices']}")
    print(f"pinned slot memory (pin_memory='auto'): {cu['pinning']}")
    fw = ", ".join(f"{k} {v}" if v else f"{k}: not installed" for k, v in d["frameworks"].items())
    print(f"frameworks: {fw}")


@command("info", help="versions of fastq and the native libraries it runs with, CPU, CUDA, frameworks", args=[
    arg("--json", action="store_true", help="print the same facts as JSON"),
])
def cmd_info(a):
    """Print fastq's version; the libjpeg-turbo and OpenCV it runs with (the library
    files the dynamic linker loaded, their Debian packages, OpenCV's own version
    call); SIMD in use; CPU count and affinity; whether a CUDA runtime and GPU
    were found and whether pinned slot memory would work (and why not); which of
    TensorFlow, PyTorch, JAX, tensorpack, DALI are installed."""
    d = collect_info()
    if a.json:
        print(json.dumps(d, indent=1))
    else:
        _print_info(d)
    return 0


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


# ---------------------------------------------------------------------------
# fastq prepare (fastq/prepare.py)
# ---------------------------------------------------------------------------

def _prepare_args():
    from fastq import prepare
    return [arg(*names, **kw) for names, kw in prepare.ARGS]


@command("prepare", help="copy an image folder (or write TFRecord / tar shards), re-encoding JPEGs losslessly "
                         "for faster crop decoding", args=_prepare_args())
def cmd_prepare(a):
    """Copy SRC to DST (same tree), re-encoding every JPEG losslessly with restart
    markers that tile each MCU row, so that fastq decodes a crop from only the
    segments that cover it.  Other files are copied byte for byte; reruns skip
    outputs that are up to date.  With --format tfrecord or tar, the images of a
    class-per-subfolder SRC go into shards instead (tf.train.Example records, or
    WebDataset <key>.jpg + <key>.cls); reruns skip complete shards.  See
    docs/prepare.md."""
    from fastq import prepare
    try:
        return prepare.run(a)
    except (OSError, ValueError) as e:
        raise CliError(str(e)) from None


# ---------------------------------------------------------------------------
# fastq serve-dispatcher / serve-worker (tf.data service; the code is fastq/serve.py)
# ---------------------------------------------------------------------------

def _register_serve():
    from fastq import serve  # imports TensorFlow only when a command runs
    command("serve-dispatcher", help=serve.DISPATCHER_HELP, description=serve.DISPATCHER_HELP,
            args=[arg(*n, **k) for n, k in serve.DISPATCHER_ARGS])(serve.cmd_dispatcher)
    command("serve-worker", help=serve.WORKER_HELP, description=serve.WORKER_HELP,
            args=[arg(*n, **k) for n, k in serve.WORKER_ARGS])(serve.cmd_worker)


_register_serve()


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
