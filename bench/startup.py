"""Time from `manage.py up` to the login page served: one cold start, then warm restarts.

Run: .venv/bin/python -m bench.startup [--runs 5]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from bench._harness import free_port, start_up, stop_up, summary, wait_for_page


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="thalamus-bench-") as tmp:
        data_dir = Path(tmp) / "data"
        timings = []
        for run in range(args.runs + 1):
            port = free_port()
            process = start_up(data_dir, port, Path(tmp) / f"up-{run}.log")
            try:
                seconds = wait_for_page(f"http://127.0.0.1:{port}/accounts/login/", process)
            finally:
                stop_up(process)
            label = "cold (initdb + all migrations)" if run == 0 else f"warm #{run}"
            print(f"{label}: {seconds:.2f} s")
            if run:
                timings.append(seconds * 1000)
        print(f"warm start to first page: {summary(timings)}")


if __name__ == "__main__":
    main()
