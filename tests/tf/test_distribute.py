"""fastq.tf.distribute_dataset under MultiWorkerMirroredStrategy: two worker
processes on 127.0.0.1 train a few steps; together they see every sample of the
epoch exactly once."""
import json
import os
import socket
import subprocess
import sys

import pytest

import tensorflow  # noqa: E402,F401  (a test requirement: requirements-dev.txt)

pytestmark = pytest.mark.tf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
N, GLOBAL_BATCH = 48, 8


def free_ports(n):
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


@pytest.mark.slow
def test_two_workers_see_every_sample_once(tmp_path):
    workers = [f"127.0.0.1:{p}" for p in free_ports(2)]
    procs, outs = [], []
    for i in range(2):
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="",
                   TF_CONFIG=json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": i}}))
        env["PYTHONPATH"] = os.pathsep.join([ROOT, os.path.join(ROOT, "tests"), env.get("PYTHONPATH", "")])
        out = tmp_path / f"worker{i}.json"
        outs.append(out)
        procs.append(subprocess.Popen([sys.executable, "-m", "helpers.distribute_worker", str(out)],
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT))
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=150)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, log in zip(procs, logs):
        assert p.returncode == 0, log[-4000:]
    res = [json.loads(o.read_text()) for o in outs]
    per_replica = GLOBAL_BATCH // 2
    for i, r in enumerate(res):
        assert r["task"] == i
        assert r["contexts"] == [[2, i, per_replica]]        # shard i of 2, per-replica batch size
        assert len(r["losses"]) == N // GLOBAL_BATCH          # both trained the same number of steps
        assert sorted(r["seen"]) == list(range(i, N, 2))      # its own shard, whole
    both = res[0]["seen"] + res[1]["seen"]
    assert sorted(both) == list(range(N))                     # every sample exactly once
    # the gradients were all-reduced: both workers end with the same weights
    assert res[0]["weights_sum"] == pytest.approx(res[1]["weights_sum"], rel=1e-5)
