"""``fastq bench --task migrate`` (fastq.bench.migrate; benchmarks/bench_migrate_torch.py and
bench_migrate_keras.py wrap it): its three rows run, each with both loaders' images/s, CPU ms
per image and the ratios, printed and written to --json.  Behaviour, not speed."""
import json

import pytest

from helpers.cli_runner import run_cli  # noqa: I100

ROWS = ["torchvision reference preset", "timm rand-m9-mstd0.5-inc1", "keras flip+rotation+zoom"]


def test_the_rows_are_defined_once():
    from fastq.bench import migrate
    assert list(migrate.ROWS) == ROWS


@pytest.mark.parametrize("extra", [["/tmp"], ["--peers", "torch"], ["--scaling", "1,2"], ["--profile"],
                                   ["--plot", "x.png"], ["--hires-forms", "original"]])
def test_it_refuses_what_it_does_not_take(extra):
    r = run_cli("bench", "--task", "migrate", *extra, timeout=120)
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    assert "--task migrate runs its own rows on a generated set" in r.stderr, r.stderr


@pytest.mark.slow
@pytest.mark.tf
@pytest.mark.torch
def test_quick_run_prints_and_returns_every_row(tmp_path):
    out = tmp_path / "m.json"
    r = run_cli("bench", "--task", "migrate", "--quick", "--no-progress", "--data-dir", str(tmp_path / "data"),
                "--json", str(out), "--workers", "2", timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    res = json.loads(out.read_text())
    assert list(res["rows"]) == ROWS and not res["skipped"], res["skipped"]
    assert res["images"] == 96 and res["rounds"] == 1 and res["workers"] == 2
    table = r.stdout[r.stdout.index("\nmigrate: "):]
    assert "peer img/s" in table and "CPU ratio" in table, table
    for name, row in res["rows"].items():
        for side in ("peer", "fastq"):
            assert row[side]["images_per_s"] > 0 and row[side]["cpu_ms_per_image"] > 0, (name, row)
            assert len(row[side]["runs"]) == 1, row
        assert row["ratio"] == pytest.approx(row["fastq"]["images_per_s"] / row["peer"]["images_per_s"])
        assert row["cpu_ratio"] == pytest.approx(row["peer"]["cpu_ms_per_image"] / row["fastq"]["cpu_ms_per_image"])
        line = next(ln for ln in table.splitlines() if ln.startswith(name))
        assert f"{row['ratio']:.2f}x" in line and f"{row['cpu_ratio']:.2f}x" in line, line
    assert "torch" in res["rows"][ROWS[0]]["peer_name"] and "keras" in res["rows"][ROWS[2]]["peer_name"]
    assert "keras: " in r.stdout  # what fastq.keras translated, from the child process
