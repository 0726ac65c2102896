"""Per-stage observability: where a pipeline's time goes, and which side waits.

``Pipeline.stats()["stages"]`` (built by :func:`stage_report`) holds:

- ``stage_s``: seconds per stage (read, decode, ops, write) summed over the
  native workers since the pipeline was created (csrc/core/fq_stage_times.h);
  ``None`` for Python-iterable sources, whose work fastq cannot see;
- ``active_s``: wall seconds during which an epoch was being iterated;
- ``worker_wait_fraction``: the share of the workers' time (workers x
  active_s) they spent waiting for a free slot in the ring, i.e. waiting on
  the consumer;
- ``consumer_wait_fraction``: the share of active_s the consumer spent
  waiting for a ready batch, i.e. waiting on the workers;
- ``verdict``: one line.  "input-bound" when the consumer waited on the
  workers a larger share of its time than the workers waited on the consumer
  (more workers / cores, or a cheaper chain, would speed training up);
  "consumer-bound" otherwise (the input keeps up; the model is the bottleneck).
"""

__all__ = ["stage_report", "format_stages", "STAGES"]

STAGES = ("read", "decode", "ops", "write")


def stage_report(stats, active_s):
    """The "stages" entry of Pipeline.stats() from the rest of its counters."""
    workers = stats.get("workers") or 1
    stage_s = stats.get("stage_s")
    pw, cw = stats.get("producer_wait_s"), stats.get("consumer_wait_s")
    out = {"stage_s": dict(stage_s) if stage_s is not None else None,
           "timed_samples": stats.get("timed_samples"), "active_s": active_s, "workers": workers,
           "worker_wait_s": pw, "consumer_wait_s": cw, "worker_wait_fraction": None,
           "consumer_wait_fraction": None, "verdict": "no epoch has run yet"}
    if not active_s or pw is None or cw is None:
        return out
    wf = min(1.0, pw / (workers * active_s))
    cf = min(1.0, cw / active_s)
    out["worker_wait_fraction"], out["consumer_wait_fraction"] = wf, cf
    busy = ""
    if stage_s:
        total = sum(stage_s.values())
        if total > 0:
            top = max(STAGES, key=lambda k: stage_s[k])
            busy = f"; {top} takes {stage_s[top] / total * 100:.0f} % of the workers' stage time"
    if cf > wf:
        out["verdict"] = (f"input-bound: the consumer waits {cf * 100:.0f} % of the time for batches, the "
                          f"workers wait {wf * 100:.0f} % of theirs for a free slot{busy}")
    else:
        out["verdict"] = (f"consumer-bound: the model waits {cf * 100:.0f} % of the time for input; the "
                          f"workers wait {wf * 100:.0f} % of theirs for a free slot")
    return out


def format_stages(rep):
    """Lines of text for a stage report (fastq bench --profile)."""
    lines = []
    st = rep.get("stage_s")
    if st:
        total = sum(st.values()) or 1.0
        n = rep.get("timed_samples") or 0
        per = (lambda v: f", {v / n * 1e6:.0f} us/sample") if n else (lambda v: "")
        for k in STAGES:
            lines.append(f"{k:7s} {st[k]:8.3f} s  {st[k] / total * 100:5.1f} %{per(st[k])}")
        lines.append(f"(summed over {rep['workers']} worker(s), {n} samples, {rep['active_s']:.2f} s of epochs)")
    if rep.get("worker_wait_fraction") is not None:
        lines.append(f"workers waited on the ring (for a free slot): {rep['worker_wait_fraction'] * 100:.1f} % "
                     f"of their time; consumer waited on workers: {rep['consumer_wait_fraction'] * 100:.1f} %")
    lines.append(rep["verdict"])
    return lines
