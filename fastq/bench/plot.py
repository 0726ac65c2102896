"""PNG chart of a ``fastq bench`` result (``--plot out.png``), with matplotlib.

Left: images/s per peer (median of the rounds), each bar annotated with its
rate and fastq's same-run ratio over it; peers that are not installed or failed
are listed as such, with no bar.  Right (when the result has two or more
worker counts from ``--scaling``): fastq's images/s against workers, with the
ideal line N x (1-worker rate) when 1 worker was measured.
"""

__all__ = ["plot"]


def plot(res, path, dpi=110):
    """Write the chart of result dict `res` (fastq.bench.runner.run) to `path` (PNG)."""
    try:
        import matplotlib
    except ImportError as e:
        raise ImportError("--plot needs matplotlib: pip install matplotlib") from e
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    from fastq.bench.peers import peer_label

    summary = res["peers"]
    workers = res["machine"]["fastq_workers"]
    rows = [p for p in res["order"] if p in summary or p in res["not_installed"] or p in res["failed"]]
    scaling = {int(k): v for k, v in res.get("scaling", {}).items()}
    two = len(scaling) >= 2
    fig, axes = plt.subplots(1, 2 if two else 1, figsize=(13 if two else 8.5, 0.55 * len(rows) + 2.4),
                             gridspec_kw={"width_ratios": [1.6, 1]} if two else None, squeeze=False)
    ax = axes[0][0]
    labels, values, colors = [], [], []
    for p in rows:
        labels.append(summary[p]["label"] if p in summary else peer_label(p, workers))
        values.append(summary[p]["images_per_s"] if p in summary else 0.0)
        colors.append("#d95f02" if p.startswith("fastq") else "#1b9e77")
    y = list(range(len(rows)))[::-1]
    ax.barh(y, values, color=colors, height=0.6)
    ax.set_yticks(y)
    ax.set_yticklabels(labels)
    top = max(values) if values and max(values) > 0 else 1.0
    ax.set_xlim(0, top * 1.75)
    for yi, p, v in zip(y, rows, values):
        if p in summary:
            r = summary[p].get("fastq_over_peer")
            txt = f"{v:,.0f} img/s, {summary[p]['cpu_us_per_image']:,.0f} µs CPU/img"
            if r and p != "fastq":
                txt += f"   fastq {r:.2f}x"
            ax.text(v + top * 0.01, yi, txt, va="center", fontsize=9)
        else:
            why = "not installed" if p in res["not_installed"] else "failed"
            ax.text(top * 0.01, yi, why, va="center", fontsize=9, color="#777777", style="italic")
    ax.set_xlabel("images/s (median of rounds; higher is better)")
    t = res["task"]
    ax.set_title(f"task {t['name']}: {t['images']} images/epoch, {t['rounds']} round(s)", fontsize=11)
    ax.grid(axis="x", alpha=0.3)
    if two:
        ax2 = axes[0][1]
        ns = sorted(scaling)
        ax2.plot(ns, [scaling[n] for n in ns], "o-", color="#d95f02", label="fastq measured")
        if 1 in scaling:
            ax2.plot(ns, [scaling[1] * n for n in ns], "--", color="#999999", label="ideal: N x 1 worker")
        for n in ns:
            ax2.annotate(f"{scaling[n]:,.0f}", (n, scaling[n]), textcoords="offset points", xytext=(0, 7),
                         ha="center", fontsize=9)
        ax2.set_xticks(ns)
        ax2.set_xlabel("fastq workers")
        ax2.set_ylabel("images/s")
        ax2.set_ylim(0, max(max(scaling.values()), scaling.get(1, 0) * max(ns)) * 1.2)
        ax2.set_title("scaling over workers", fontsize=11)
        ax2.grid(alpha=0.3)
        ax2.legend(fontsize=9, loc="upper left")
    m = res["machine"]
    fig.suptitle(f"fastq bench, {res['date_utc']} -- {m['description']}", fontsize=9)
    others = [s["other_cores"] + (s["steal_cores"] or 0) for s in summary.values() if s["other_cores"] is not None]
    if others:
        busy = sorted(others)[len(others) // 2]
        note = f"other processes used a median of {busy:.2f} of {m['usable_cores']} cores during the timed epochs"
        if busy > 0.25:
            note += ": a shared machine, compare the ratios and CPU per image rather than images/s"
        fig.text(0.5, 0.005, note, ha="center", va="bottom", fontsize=8, color="#555555")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=dpi, format="png")
    plt.close(fig)
    return path
