"""The web server as `up` runs it: uvicorn, with the app imported once and its processes forked.

    python -m thalamus_site.serve thalamus_site.asgi:application --port 8000 --workers 2

uvicorn's own `--workers` spawns each process afresh, and each imports Django and the whole app
again (~3 s of CPU apiece on two cores, while the Celery processes import it too). Here the
parent imports the app, binds the port and forks its workers, which start serving at once.
Nothing may start a thread or open a connection at import: a forked child keeps neither the
thread nor a usable connection. What a first turn needs is loaded here before the fork when it is
plain data (thalamus_site/asgi.py: PRELOAD), and otherwise in each process once it serves, by the
app's lifespan (apps/core/warmup.py).

With `--after-go`, the parent imports the app and then waits for a line on its standard input
before it binds the port: `up` starts it while the database is still being migrated and says
"go" when it is ready. End of input means `up` is gone, and the server stops.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import select
import signal
import sys
import time

logger = logging.getLogger("uvicorn.error")


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m thalamus_site.serve")
    parser.add_argument("app", help="the ASGI app, as module:attribute")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--ws-max-size", type=int, default=16 * 1024 * 1024)
    parser.add_argument("--after-go", action="store_true")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "thalamus_site.settings")
    import uvicorn
    from uvicorn.importer import import_from_string

    config = uvicorn.Config(
        import_from_string(args.app),
        host=args.host,
        port=args.port,
        # The MCP endpoint's session manager and the warm-up run in the app's lifespan.
        lifespan="on",
        access_log=False,
        ws_max_size=args.ws_max_size,
        # Compressing each streamed fragment cost ~12 % of the web process's loop at 50 users
        # (bench.load); the fragments are small and the pages mostly on a LAN.
        ws_per_message_deflate=False,
    )
    config.load()
    # Loaded once here, shared by the forked processes (and done while `up` migrates). What only
    # a turn needs is loaded here only while `up` is not ready yet, else by each process after
    # it serves: a restart then serves ~0.75 s of CPU sooner.
    from thalamus_site.asgi import PRELOAD, PRELOAD_WHILE_WAITING

    _preload(PRELOAD)
    if not args.after_go or not select.select([sys.stdin], [], [], 0)[0]:
        _preload(PRELOAD_WHILE_WAITING)
    if args.after_go and not sys.stdin.readline().strip():
        return 0
    from apps.core.warmup import keep_out_of_the_collector

    keep_out_of_the_collector()
    sock = config.bind_socket()
    if args.workers <= 1:
        uvicorn.Server(config).run(sockets=[sock])
        return 0
    return _supervise(config, sock, args.workers, watch_stdin=args.after_go)


def _preload(steps) -> None:
    for name, load in steps:
        try:
            load()
        except Exception:  # loaded lazily then, as without the preload
            logger.exception("preloading %s failed", name)


def _fork_server(config, sock) -> int:
    pid = os.fork()
    if pid:
        return pid
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)
    code = 0
    try:
        import uvicorn

        uvicorn.Server(config).run(sockets=[sock])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        logger.exception("web process %d failed", os.getpid())
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def _supervise(config, sock, workers: int, *, watch_stdin: bool) -> int:
    """Fork `workers` servers sharing `sock`; stop them all on SIGTERM or SIGINT, on end of
    input (with `watch_stdin`), or when one of them exits (then exit 1: `up` says which)."""
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.append(signum))
    signal.signal(signal.SIGINT, lambda signum, frame: stopping.append(signum))
    children = {_fork_server(config, sock) for _ in range(workers)}
    logger.info("Started parent process [%d], %d web processes forked", os.getpid(), workers)
    failed = 0
    while not failed:
        if watch_stdin and sys.stdin in select.select([sys.stdin], [], [], 0.2)[0]:
            if not sys.stdin.readline():
                break
        elif not watch_stdin:
            time.sleep(0.2)
        if stopping:
            break
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid:
            children.discard(pid)
            failed = os.waitstatus_to_exitcode(status) or 1
            logger.error("Web process [%d] exited with code %d; stopping the others", pid, failed)
    for pid in children:
        _kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    while children and time.monotonic() < deadline:
        pid, _ = os.waitpid(-1, os.WNOHANG)
        children.discard(pid)
        if not pid:
            time.sleep(0.05)
    for pid in children:
        _kill(pid, signal.SIGKILL)
    logger.info("Stopping parent process [%d]", os.getpid())
    return 1 if failed else 0


def _kill(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


if __name__ == "__main__":
    sys.exit(main())
