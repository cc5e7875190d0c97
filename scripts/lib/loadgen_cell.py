"""The figures of one `loadgen echo` or `loadgen write` run from its JSON report, as the
experiments on a real DataNode tabulate them (exp-twin.sh, exp-real-starts.sh)."""
import json

NAN = float("nan")


def size(nbytes):
    """A payload's size as the cells name it: 0B, 64KiB, 1MiB."""
    b = int(nbytes)
    return "0B" if b == 0 else (f"{b >> 20}MiB" if b % (1 << 20) == 0 else f"{b >> 10}KiB")


def figures(path, kind):
    """(report, value, unit, p50 ms, p99 ms) of the run: an echo's successes a second and its
    latency corrected for coordinated omission; a write's MB/s and its WriteChunks' latency."""
    r = json.load(open(path))
    if kind == "echo":
        pct = {p["percentile"]: p["ms"] for p in r["latency"]["corrected"]["percentiles"]}
        return r, r["throughput"]["successes_per_s"], "calls/s", pct.get(50.0, NAN), pct.get(99.0, NAN)
    wc = r["ops"]["WriteChunk"]["percentiles_ms"]
    return r, r["write"]["mb_per_s"], "MB/s", wc["p50"], wc["p99"]
