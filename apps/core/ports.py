from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that nothing listens on right now (for child servers, tests and benchmarks)."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]
