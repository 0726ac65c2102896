"""fastq.torch.DataLoader against torch.utils.data.DataLoader on the same ImageFolder and
the same transform object, for two training recipes:

* torchvision (v2) reference: RandomResizedCrop(224), RandomHorizontalFlip,
  TrivialAugmentWide, ToImage + ToDtype(float32, scale=True), Normalize, RandomErasing;
* timm: create_transform(224, is_training=True, auto_augment="rand-m9-mstd0.5-inc1",
  interpolation="bicubic", re_prob=0.25, re_mode="pixel").

A thin wrapper over ``fastq.bench.migrate`` (the code behind ``fastq bench --task migrate``,
whose rows "torchvision reference preset" and "timm rand-m9-mstd0.5-inc1" these are).
Both loaders: batch_size 64, shuffle, num_workers (default 2: torch's worker processes,
fastq's native threads).  One untimed warm-up epoch each, then `--epochs` timed epochs per
loader, alternating torch and fastq epoch by epoch; the medians of images/s and CPU ms per
image and their ratios are printed with what fastq ran natively and what stayed in Python.

    python3 benchmarks/bench_migrate_torch.py            # 2000 photos of 300-800 px
    python3 benchmarks/bench_migrate_torch.py --quick    # 96 photos, 1 timed epoch (< 60 s)
    python3 benchmarks/bench_migrate_torch.py --psnr     # PSNR of each deterministic step vs torchvision
    python3 benchmarks/bench_migrate_torch.py --opencv-resize   # resizes as without Pillow's (not exact)
"""
import argparse
import sys

RECIPES = {"torchvision": "torchvision reference preset", "timm": "timm rand-m9-mstd0.5-inc1"}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="96 photos, 1 timed epoch")
    ap.add_argument("--n", type=int, default=2000, help="photos (default 2000)")
    ap.add_argument("--epochs", type=int, default=3, help="timed epochs per loader (median)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--root", default="/tmp/fastq-bench-migrate-torch", help="where the photos are generated")
    ap.add_argument("--recipe", choices=["torchvision", "timm", "both"], default="both")
    ap.add_argument("--psnr", action="store_true", help="print the PSNR of each deterministic step and exit")
    ap.add_argument("--opencv-resize", action="store_true",
                    help="translate as a build without Pillow's resize would (OpenCV bilinear/bicubic, not "
                         "bit-exact with PIL): what exact resampling costs")
    args = ap.parse_args(argv)

    import _checkout  # noqa: F401  (benchmarks/_checkout.py: this checkout's fastq if built, else the installed one)
    from fastq.bench import migrate
    rows = [RECIPES[args.recipe]] if args.recipe != "both" else list(RECIPES.values())
    return migrate.main(images=None if args.quick else args.n, rounds=args.epochs, workers=args.workers,
                        quick=args.quick, rows=rows, data_dir=args.root,
                        batch_size=None if args.quick else args.batch_size, size=args.size,
                        opencv_resize=args.opencv_resize, psnr_only=args.psnr, progress=False)


if __name__ == "__main__":
    res = main()
    sys.exit(0 if res is None or res["rows"] else 1)
