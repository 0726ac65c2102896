"""The report of a ``fastq bench`` run: the table printed to the terminal
(one row per peer, ratios, scaling, stage profile) and the JSON / PNG outputs."""
import json

from fastq.bench.peers import peer_label
from fastq.bench.runner import BUSY_LIMIT, TARGETS

__all__ = ["print_report", "write_outputs"]


def _verdict(value, target):
    if value >= target:
        return f"met (>= {target:.1f}x)"
    return (f"MISSED: {value:.2f}x vs {target:.1f}x target, short by {target - value:.2f}x "
            f"({(1 - value / target) * 100:.0f} %)")


def write_outputs(res, json_path=None, plot_path=None, out=print):
    """Write a run's result as JSON and/or as the PNG chart (fastq.bench.plot)."""
    if json_path:
        with open(json_path, "w") as f:
            json.dump(res, f, indent=1)
        out(f"wrote {json_path}")
    if plot_path:
        from fastq.bench.plot import plot
        plot(res, plot_path)
        out(f"wrote {plot_path}")


def print_report(res, out=print, show_targets=False):
    """The table (one row per peer), ratios, scaling, profile."""
    summary, workers = res["peers"], res["machine"]["fastq_workers"]
    out("")
    out(f"{'peer':40s} {'images/s':>9s} {'runs (min-max)':>15s} {'fastq/peer':>10s} {'peak RSS':>9s}"
        f" {'CPU us/img':>10s} {'cores own/others':>16s}")
    for p in res["order"]:
        if p in summary:
            s = summary[p]
            ratio = f"{s['fastq_over_peer']:9.2f}x" if s["fastq_over_peer"] else "         -"
            oth = "-" if s["other_cores"] is None else f"{s['other_cores'] + (s['steal_cores'] or 0):.2f}"
            out(f"{s['label']:40s} {s['images_per_s']:9.0f} {min(s['runs']):7.0f}-{max(s['runs']):<7.0f} "
                f"{ratio} {s['peak_rss_mb']:7.0f}MB {s['cpu_us_per_image']:10.0f} "
                f"{s['own_cores']:8.2f}/{oth:<7s}")
        elif p in res["not_installed"] or p in res["failed"] or p in res.get("not_available", {}):
            why = "not installed" if p in res["not_installed"] else \
                "FAILED" if p in res["failed"] else \
                "n/a for TFRecord" if "TFRecord" in res["not_available"][p] else "n/a for task"
            out(f"{peer_label(p, workers):40s} {'-':>9s} {why:>15s}")
    out("fastq/peer = fastq(workers=%d) images/s / peer images/s, same run; images/s = median of the rounds;\n"
        "CPU us/img = the peer process's CPU time per image (all threads); cores own/others = cores busy\n"
        "with this peer / with other processes + hypervisor steal during its timed epochs." % workers)
    if show_targets and res["task"]["name"] == "reference":
        out("\nratios (same run) against the reference task's targets:")
        for name, num, den, target in TARGETS:
            r = res["ratios"].get(name)
            if r:
                out(f"  {name:42s} {r['value']:5.2f}x  {_verdict(r['value'], r['target'])}")
            elif den in res["not_installed"] or den in res["failed"]:
                out(f"  {name:42s}   n/a  target >= {target:.1f}x: not measured ({den} "
                    f"{'not installed' if den in res['not_installed'] else 'failed'})")
    if res["scaling"]:
        base = res["scaling"].get("1")
        out("\nscaling (fastq, images/s by workers): " + ", ".join(
            f"{n}: {v:.0f}" + (f" ({v / base:.2f}x)" if base else "") for n, v in res["scaling"].items()))
    load0, load1 = res["machine"]["loadavg_start"], res["machine"]["loadavg_end"]
    out(f"load average at start {load0[0]:.2f}, at end {load1[0]:.2f} (1 min)")
    for p, s in summary.items():
        if s["contended_runs"]:
            again = " even after re-measuring" if s["measurements"] > len(s["runs"]) else ""
            out(f"note: {s['contended_runs']} of {len(s['runs'])} runs of {s['label']} shared the CPUs with "
                f"other work (> {BUSY_LIMIT} cores){again}; those runs read low")
    fqinfo = summary.get("fastq", {}).get("info") or {}
    if fqinfo.get("stages"):
        from fastq.stages import format_stages
        out("\nfastq pipeline stages (pipeline.stats()['stages'] of the last round's fastq process: warm-up + "
            "timed epoch, summed over workers):")
        for line in format_stages(fqinfo["stages"]):
            out("  " + line)
    if res.get("profile"):
        from fastq.bench.profile import print_profile
        print_profile(res["profile"], summary, workers, out=out)
    for p, err in res["failed"].items():
        out(f"failed: {peer_label(p, workers)}: {err}")
    for p, why in res.get("not_available", {}).items():
        out(f"not run: {why}")
    for p, note in res.get("notes", {}).items():
        out(f"note: {p}: {note}")
