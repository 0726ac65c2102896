"""``fastq show``: a contact sheet of augmented samples with their explain records."""
import json
import os

from fastq.bench.data import BenchInputError, find_images
from fastq.cli.base import CliError, _positive_int, arg, command

__all__ = ["BOX_COLOR", "applied_ops", "parse_ops", "render_contact_sheet"]


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
    if isinstance(node, ast.Call):  # an op inside a composition: RandomApply([HorizontalFlip()], p=0.3)
        return _op_call(node, _op_classes())
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
    return [_op_call(node, known) for node in items]


def _op_call(node, known):
    import ast
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
        return known[name](*args, **kwargs)
    except (TypeError, ValueError) as e:
        msg = str(e)
        raise CliError(f"bad op string: {msg if msg.startswith(name) else name + ': ' + msg}") from None


def _crop_boxes(ex):
    """Rectangles (x, y, w, h) in source pixels of every crop in the chain (the
    first-op crop is ex['crop_src']); mapping stops at the first op that moves
    pixels other than by scaling and cropping."""
    ox = oy = 0.0
    sx = sy = 1.0
    boxes = []
    for i in ex.get("exec_order", range(len(ex["ops"]))):  # compositions: the ops that ran, in order
        op = ex["ops"][i]
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


def applied_ops(ex):
    """The names of the ops that ran and took effect for one sample, in the order they ran:
    children of compositions included (skipped ones and draws of "not applied" left out),
    and the ops a policy drew in brackets, e.g. ``RandAugment[Rotate, Color]``."""
    ops = ex["ops"]
    names = []
    for i in ex.get("exec_order", range(len(ops))):  # exec_order: chains with compositions
        op = ops[i]
        if op.get("skipped") or not op.get("applied", True) or "children" in op:
            continue
        policy = op.get("policy")
        names.append(op["op"] + (f"[{', '.join(p['op'] for p in policy)}]" if policy is not None else ""))
    return names


def _explain_lines(ex):
    import textwrap
    lines = [f"{ex['format']} {ex['src_shape'][1]}x{ex['src_shape'][0]}, decoded at "
             f"{ex['decode_scale'][0]}/{ex['decode_scale'][1]}" + (" (ROI)" if ex["roi_used"] else "")]
    lines += textwrap.wrap("ran: " + (", ".join(applied_ops(ex)) or "nothing"), 72, subsequent_indent="  ")
    for op in ex["ops"]:
        n = op["op"]
        if op.get("skipped"):
            continue
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
    from fastq._native import _image
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
        cells.append({"index": i, "path": paths[i], "label": _explain_lines(ex),
                      "thumb": {"x": cx, "y": cy, "w": tw, "h": th, "scale": s},
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
    if a.seed < 0 or a.epoch < 0:
        raise CliError("--seed and --epoch must be >= 0")
    d = os.path.dirname(os.path.abspath(a.out))
    if not os.path.isdir(d):
        raise CliError(f"{a.out}: folder {d} does not exist")
    try:
        paths = find_images(a.data)
    except BenchInputError as e:
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
