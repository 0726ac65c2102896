"""``fastq bench``: images/s of fastq and its peers (the tool is :mod:`fastq.bench`)."""
import json
import os

from fastq.bench.feed import DEFAULT_FEEDERS, DEFAULT_SETTINGS, FEEDERS, RUN_AHEAD
from fastq.bench.runner import DEFAULT_PEERS, default_peers
from fastq.bench.tasks import TASKS
from fastq.cli.base import CliError, _csv, _positive_int, arg, command


@command("bench", help="images/s of fastq and its peers on your images or a generated set", args=[
    arg("data", nargs="?", metavar="DATA",
        help="a folder (searched recursively for image files), a glob pattern (quote it) or a text file "
             "with one image path per line; or TFRecord shards (*.tfrecord, *-of-* files: a glob, a shard or "
             "a folder of them); omitted: a generated set of ImageNet-like JPEGs (--task hires: 300 camera-like JPEGs, 1800-3200 px)"),
    arg("--task", default="reference", choices=list(TASKS) + ["feed", "remote", "migrate"],
        help="what each peer does to every image (default: reference; detection and segmentation: boxes / label "
             "maps, batch 8, on a generated set with annotations, no DATA; feed: the reference task feeding a "
             "synthetic training loop that shares the CPUs, see docs/cli.md; remote: the reference task from "
             "local files against the same files, WebDataset and TFRecord shards behind an S3-compatible server "
             "at 0, 20 and 50 ms per request, generated set only, see fastq/bench/remote.py; migrate: fastq's "
             "translations against the original libraries in one sitting, rows torchvision reference preset, "
             "timm rand-m9-mstd0.5-inc1 and keras flip+rotation+zoom (DataLoader / image_dataset_from_directory "
             "vs fastq.torch / fastq.keras), img/s and CPU ms per image with their ratios, generated set only, "
             "see fastq/bench/migrate.py)"),
    arg("--peers", type=_csv,
        help="comma-separated peers: fastq, fastq_normal, tfdata, tfdata_n, tensorpack, tensorpack_zmq, torch, "
             f"pyloop, dali, fastq@N (default: {','.join(DEFAULT_PEERS)}; --task randaugment: "
             f"{','.join(default_peers('randaugment'))}; --task fbresnet: {','.join(default_peers('fbresnet'))}; "
             f"--task detection: {','.join(default_peers('detection'))}; --task segmentation: "
             f"{','.join(default_peers('segmentation'))}; --task feed: the feeders "
             f"{','.join(FEEDERS)} (default {','.join(DEFAULT_FEEDERS)})); "
             "peers that are not installed are listed as such"),
    arg("--workers", type=_positive_int, help="fastq's workers and DALI's threads (default: usable cores; "
                                              "--task feed: fastq's own default, and tf.data's / the DataLoader's)"),
    arg("--images", type=_positive_int,
        help="images per epoch (generated set: default 2000, hires 300, detection / segmentation 512; DATA: default all, else a fixed random subset; "
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
    arg("--feed-settings", metavar="C:D,...",
        help="--task feed: the trainer settings, comma-separated C:D or NAME=C:D, milliseconds per batch of CPU "
             "holding the GIL (C) and on the simulated device (D) (default: "
             + ",".join(f"{s.name}={s.launch_ms:g}:{s.device_ms:g}" for s in DEFAULT_SETTINGS) + ")"),
    arg("--run-ahead", type=_positive_int, default=RUN_AHEAD,
        help=f"--task feed: steps the trainer may queue ahead of the simulated device (default {RUN_AHEAD})"),
    arg("--hires-forms", type=_csv, metavar="FORM,FORM,...",
        help="--task hires: measure fastq and DALI CPU in the same run on these forms of the set: original, "
             "prepared (fastq prepare, lossless), maxN (fastq prepare --max-side N), e.g. "
             "original,prepared,max512; ratios against DALI CPU on the originals, per-form profile, PSNR/SSIM "
             "of the maxN copies (docs/benchmarks_augment.md)"),
])
def cmd_bench(a):
    """Run each installed peer in its own process on the same files: a warm-up
    epoch, then one timed epoch per round; print the median images/s and
    fastq's same-run ratio per peer."""
    from fastq import bench
    rounds, n = a.rounds, a.images
    if a.task == "remote":
        return _remote(a)
    if a.task == "migrate":
        return _migrate(a)
    feed = a.task == "feed"
    if a.quick:
        rounds, n = 1, n or (512 if feed else 128)  # feed: enough batches of 64 to time some after the start
    if (a.feed_settings or a.run_ahead != RUN_AHEAD) and not feed:
        raise CliError("--feed-settings and --run-ahead need --task feed")
    if feed and (a.scaling or a.plot or a.profile):
        raise CliError("--task feed has no --scaling, --plot or --profile")
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
    if a.hires_forms and a.task != "hires":
        raise CliError("--hires-forms needs --task hires")
    try:
        if feed:
            from fastq.bench import feed as feedbench
            settings = feedbench.parse_settings(a.feed_settings) if a.feed_settings else feedbench.DEFAULT_SETTINGS
            for k in a.peers or []:  # before any data is generated
                if k not in FEEDERS:
                    raise CliError(f"--task feed: unknown feeder {k!r}; choose from {', '.join(FEEDERS)}")
        else:
            bench.check_peers(a.peers or [])
        if a.data is not None and not feed and TASKS[a.task].data == "dense":
            raise CliError(f"--task {a.task} runs on its generated set (images with boxes and label maps): "
                           f"omit DATA")
        if a.data is None:
            from fastq.bench.data import GENERATED
            kind = "jpeg" if feed else TASKS[a.task].data
            paths = bench.generated_dataset(n or GENERATED[kind][1], a.data_dir, progress=progress, kind=kind)
            desc = f"generated by fastq.bench.testdata, seed 0: {GENERATED[kind][3]}"
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
        if a.hires_forms:
            return _hires_forms(a, paths, rounds, progress, desc)
        if feed:
            if isinstance(paths, bench.TFRecordInput):
                raise CliError("--task feed reads image files (its tf.data and DataLoader feeders take files), "
                               "not TFRecord shards")
            res = feedbench.run(paths, feeders=a.peers, settings=settings, rounds=rounds, workers=a.workers,
                                run_ahead=a.run_ahead, timeout=a.timeout, progress=progress,
                                data_description=desc)
            feedbench.print_report(res)
            feedbench.write_json(res, a.json)
            return 0 if res["feeders"] else 1
        res = bench.run(paths, task=a.task, peers=a.peers, workers=a.workers, rounds=rounds, scaling=scaling,
                        profile=a.profile, retry_busy=0 if a.quick else 1, timeout=a.timeout,
                        progress=progress, data_description=desc)
    except bench.BenchInputError as e:
        raise CliError(str(e)) from None
    bench.print_report(res)
    bench.write_outputs(res, a.json, a.plot)
    return 1 if not res["peers"] else 0


def _hires_forms(a, paths, rounds, progress, desc):
    """``--hires-forms``: the forms of the set in one run (fastq.bench.hires)."""
    from fastq import bench
    from fastq.bench import hires
    if isinstance(paths, bench.TFRecordInput):
        raise bench.BenchInputError("--hires-forms needs image files (the copies are made with fastq prepare)")
    forms = hires.parse_forms(a.hires_forms)
    fp = hires.build_forms(paths, forms, a.data_dir, progress=progress)
    res = hires.run_forms(fp, peers=a.peers or ("fastq", "dali"), workers=a.workers, rounds=rounds,
                          retry_busy=0 if a.quick else 1, timeout=a.timeout, progress=progress,
                          passes=1 if a.quick else 3, crops=2 if a.quick else 4, data_description=desc)
    hires.print_forms_report(res)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
        print(f"wrote {a.json}")
    return 0 if res["peers"] else 1


def _remote(a):
    """``--task remote`` (fastq.bench.remote): local sources against the same data behind
    fastq.bench.objserver; --quick: 128 images, 2 shards, 1 round, 20 ms only."""
    from fastq.bench import remote
    if a.data is not None or a.peers or a.scaling or a.plot or a.profile or a.hires_forms:
        raise CliError("--task remote runs its own rows on a generated set: no DATA, --peers, --scaling, --plot, "
                       "--profile or --hires-forms")
    if a.quick:
        return remote.main(images=a.images or 128, rounds=1, workers=a.workers, shards=2, latencies=(20,),
                           data_dir=a.data_dir, json_path=a.json, raw_seconds=0.3, progress=not a.no_progress)
    return remote.main(images=a.images or 2000, rounds=a.rounds, workers=a.workers, data_dir=a.data_dir,
                       json_path=a.json, progress=not a.no_progress)


def _migrate(a):
    """``--task migrate`` (fastq.bench.migrate): torch / timm / Keras loaders against fastq's
    translations of them; --quick: 96 images, 1 round, batch 32; --workers default 2."""
    from fastq.bench import migrate
    if (a.data is not None or a.peers or a.scaling or a.plot or a.profile or a.hires_forms or a.feed_settings
            or a.run_ahead != RUN_AHEAD):
        raise CliError("--task migrate runs its own rows on a generated set: no DATA, --peers, --scaling, --plot, "
                       "--profile, --hires-forms, --feed-settings or --run-ahead")
    res = migrate.main(images=a.images, rounds=a.rounds, workers=a.workers or 2, quick=a.quick, data_dir=a.data_dir,
                       json_path=a.json, progress=not a.no_progress, timeout=a.timeout)
    return 0 if res["rows"] else 1
