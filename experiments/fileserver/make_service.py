"""Writes service.csv: the file mix of the file-server experiments and its cost in ms.

The study (000) does not publish its files, only that they mix small and large transfers
(median response about 1 ms, mean about 30 ms). This is an explicit stand-in, fixed by a seed:

  60% small files,  1-16 KiB   (pages, style sheets)
  30% medium files, 16-256 KiB (images)
  10% large files,  1-4 MiB    (downloads)

sizes log-uniform within each band. The cost model turns bytes into milliseconds of service:

  service_ms = FIXED_MS + bytes / 1024 * MS_PER_KIB

with a fixed per-request cost (parse, open, headers) and a per-byte cost (about 50 MB/s).
The simulator's `empirical:service.csv` draws requests uniformly from the first column.
Run `python make_service.py` to regenerate; the numbers are the same every time.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

FIXED_MS = 0.25
MS_PER_KIB = 0.02
FILES = 1000
BANDS = [(0.6, 1, 16), (0.3, 16, 256), (0.1, 1024, 4096)]  # (fraction, KiB from, KiB to)


def main() -> None:
    rng = np.random.default_rng(0)
    rows = []
    for fraction, lo, hi in BANDS:
        n = int(round(fraction * FILES))
        kib = np.exp(rng.uniform(np.log(lo), np.log(hi), n))
        for k in kib:
            size = int(round(k * 1024))
            rows.append((FIXED_MS + size / 1024 * MS_PER_KIB, size))
    rng.shuffle(rows)
    with open(Path(__file__).with_name("service.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["service_ms", "bytes"])
        for ms, size in rows:
            w.writerow([f"{ms:.6f}", size])


if __name__ == "__main__":
    main()
