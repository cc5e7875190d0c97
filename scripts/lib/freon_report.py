"""The figures of a freon-layout console report (the real `ozone freon`'s ConsoleReporter, or
loadgen's text report, which prints the same lines): used by bench-vs-freon.sh and
exp-real-handlers.sh. Carriage returns (freon's progress bar under a pseudo-terminal) count as
line ends."""
import re
import sys

FIELDS = {
    "count": r"^\s+count = (\d+)",
    "rate": r"^\s+mean rate = ([\d.]+) calls/second",
    "p50": r"^\s+median = ([\d.]+) milliseconds",
    "p99": r"^\s+99% <= ([\d.]+) milliseconds",
    "failures": r"^Failures: (\d+)",
}


def parse(path, who):
    """count, rate (calls/s), p50 and p99 (ms), failures; exits naming `who` if one is missing."""
    text = open(path, errors="replace").read().replace("\r", "\n")
    figures = {}
    for name, pattern in FIELDS.items():
        m = re.search(pattern, text, re.M)
        if not m:
            sys.exit(f"no '{pattern}' in {who}'s report:\n{text[-2000:]}")
        figures[name] = float(m.group(1))
    return figures
