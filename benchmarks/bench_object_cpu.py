"""Client CPU per single object fetched from an S3-compatible server, per client style, no
decoding: what obstore's calls cost, and the floor a Files source over
s3:// pays beside local files.

The server: fastq.bench.objserver in its own process (--latency ms added per request); the
objects: the ~110 KB JPEGs of ``fastq bench`` (generated once into --data-dir).  Each style
fetches --objects objects, --in-flight at once; CPU is this process's user + system time
(``getrusage``) over the objects, median of --rounds (every style runs once per round):

* asyncio / uvloop, task per object: ``get_async`` (If-Match: the ETag) + ``bytes_async``,
  one task per object under a semaphore: the fetcher's way;
* blocking, threads: ``obstore.get(...).bytes()`` (If-Match) from --in-flight Python threads;
* uvloop, get_range_async, no ETag: one await per object, without the If-Match check (a floor;
  obstore's ranged calls take no options);
* presigned + urllib3, threads: ``obstore.sign`` of every URL (one call), then a pooled
  HTTP/1.1 client (urllib3) from --in-flight threads: a floor outside obstore's runtime;
* uvloop, fastq native HTTP client: fastq/sources/nethttp.py (csrc/net), SigV4-signed, If-Match,
  one task per object: what ``RemoteOptions(http_client="native")`` fetches with.

obstore's ``get_ranges`` batches ranges of one object only: no style for single objects.

Usage: python benchmarks/bench_object_cpu.py [--objects 2000] [--in-flight 64] [--latency 20] [--rounds 3]
       python benchmarks/bench_object_cpu.py --images 64 --objects 128 --in-flight 8 --latency 0 --rounds 1  # a check
"""
import argparse
import asyncio
import os
import resource
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def styles(obstore, store, keys, meta, n, k, native=None):
    def task_per_object(run):
        def go():
            async def one(key, sem):
                async with sem:
                    r = await obstore.get_async(store, key, options={"if_match": meta[key]["e_tag"]})
                    return len(await r.bytes_async()) == r.meta["size"]

            async def main():
                sem = asyncio.Semaphore(k)
                return sum(await asyncio.gather(*(one(keys[i % len(keys)], sem) for i in range(n))))
            return run(main())
        return go

    def threads(fetch_one, setup=lambda: None):
        def go():
            ctx = setup()
            nxt, done, lock = [0], [0], threading.Lock()

            def worker():
                while True:
                    with lock:
                        i = nxt[0]
                        if i >= n:
                            return
                        nxt[0] += 1
                    ok = fetch_one(i, ctx)
                    with lock:
                        done[0] += ok
            ts = [threading.Thread(target=worker) for _ in range(k)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            return done[0]
        return go

    def blocking(i, _ctx):
        key = keys[i % len(keys)]
        r = obstore.get(store, key, options={"if_match": meta[key]["e_tag"]})
        return len(r.bytes()) == meta[key]["size"]

    def ranged_uvloop():
        import uvloop

        async def main():
            nxt = [0]

            async def worker():
                got = 0
                while nxt[0] < n:
                    key = keys[nxt[0] % len(keys)]
                    nxt[0] += 1
                    b = await obstore.get_range_async(store, key, start=0, end=meta[key]["size"])
                    got += len(b) == meta[key]["size"]
                return got
            return sum(await asyncio.gather(*(worker() for _ in range(k))))
        return uvloop.run(main())

    def signed_setup():
        import datetime
        import urllib3
        urls = obstore.sign(store, "GET", [keys[i % len(keys)] for i in range(n)], datetime.timedelta(hours=1))
        return urls, urllib3.PoolManager(maxsize=k)

    def signed(i, ctx):
        urls, pool = ctx
        r = pool.request("GET", urls[i])
        return r.status == 200 and len(r.data) == meta[keys[i % len(keys)]]["size"]

    def native_task_per_object(endpoint, creds):
        """fastq's own HTTP client (fastq/sources/nethttp.py), SigV4-signed, If-Match: what
        fetch() awaits with RemoteOptions(http_client="native")."""
        import types
        import urllib.parse
        import uvloop
        from fastq.sources import nethttp
        from fastq.bench.remote import BUCKET as bucket
        from fastq.sources.storage import ObjectInfo
        u = urllib.parse.urlsplit(endpoint)
        opts = types.SimpleNamespace(max_in_flight=k, connect_timeout_s=5.0, timeout_s=30.0)
        objs = {key: ObjectInfo(key, None, key) for key in keys}

        def go():
            target = nethttp.NativeTarget(u.hostname, u.port, "/" + bucket, creds, "us-east-1")

            async def one(key, sem):
                async with sem:
                    body, size, _ = await nethttp.get(target, objs[key], None, None, meta[key]["e_tag"], opts,
                                                      lambda *a: RuntimeError(str(a)))
                    return len(body) == size

            async def main():
                try:
                    sem = asyncio.Semaphore(k)
                    return sum(await asyncio.gather(*(one(keys[i % len(keys)], sem) for i in range(n))))
                finally:
                    nethttp.close_loop(asyncio.get_running_loop())
            return uvloop.run(main())
        return go

    out = {"asyncio, task per object (fastq before)": task_per_object(asyncio.run),
           "blocking get + bytes, threads": threads(blocking)}
    try:
        import uvloop
        out["uvloop, task per object (fastq now)"] = task_per_object(uvloop.run)
        out["uvloop, get_range_async, no ETag (floor)"] = ranged_uvloop
        if native is not None:
            out["uvloop, fastq native HTTP client"] = native_task_per_object(*native)
    except ImportError:
        pass
    try:
        import urllib3  # noqa: F401
        out["presigned + urllib3, threads"] = threads(signed, signed_setup)
    except ImportError:
        pass
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--objects", type=int, default=2000, help="objects fetched per style and round (default 2000)")
    ap.add_argument("--images", type=int, default=2000, help="distinct objects on the server (default 2000)")
    ap.add_argument("--in-flight", type=int, default=64)
    ap.add_argument("--latency", type=int, default=20, help="ms the server adds per request (default 20)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--data-dir", default=os.path.join(os.path.dirname(HERE), "bench_data"))
    a = ap.parse_args(argv)
    import _checkout  # noqa: F401  (this checkout's fastq if built)
    import obstore
    from obstore.store import S3Store
    from fastq.bench import generated_dataset
    from fastq.bench.objserver import ObjectServerProcess
    from fastq.bench.remote import BUCKET, prepare_data
    os.makedirs(a.data_dir, exist_ok=True)
    paths = generated_dataset(a.images, a.data_dir, progress=False)
    data = prepare_data(paths, 8, os.path.join(a.data_dir, f"remote_{a.images}_8"))
    srv = ObjectServerProcess(data["root"], latency_ms=a.latency)
    srv.start()
    try:
        store = S3Store(BUCKET, **srv.obstore_config(pool_max_idle_per_host=str(max(16, a.in_flight)), timeout="30s"))
        keys = data["keys"]["files"]
        meta = {k: obstore.head(store, k) for k in keys}
        cfg = srv.obstore_config()
        runs = styles(obstore, store, keys, meta, a.objects, a.in_flight,
                      native=(srv.endpoint, (cfg["access_key_id"], cfg["secret_access_key"], None)))
        res = {name: [] for name in runs}
        for name, go in runs.items():  # warm-up: connections, the runtime
            go()
        for _ in range(a.rounds):
            for name, go in runs.items():
                c, t = _cpu(), time.perf_counter()
                got = go()
                dc, dt = _cpu() - c, time.perf_counter() - t
                if got != a.objects:
                    raise SystemExit(f"{name}: {got} of {a.objects} objects arrived whole")
                res[name].append((dc / a.objects * 1e6, a.objects / dt))
    finally:
        srv.stop()
    print(f"{a.objects} objects (~{sum(m['size'] for m in meta.values()) // len(meta) // 1000} KB), "
          f"{a.in_flight} in flight, {a.latency} ms per request; median of {a.rounds}")
    print(f"{'client':44s} {'CPU us/obj':>10s} {'objects/s':>10s}  CPU per round")
    for name, v in res.items():
        print(f"{name:44s} {statistics.median(x[0] for x in v):10.0f} {statistics.median(x[1] for x in v):10.0f}  "
              + " ".join(f"{x[0]:.0f}" for x in v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
