"""More than one web process on the same PostgreSQL and Redis: Stop, live pushes, the dashboard
and the reply lease work whichever process serves each page.

Two real uvicorn servers (the command line `up` runs) on the test database and Redis, so each
test decides which process serves which socket; test_up_web_processes.py checks the one port
that `up --web-processes` shares between uvicorn's workers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.core.cache import cache
from django.utils import timezone
from websockets.sync.client import ClientConnection, connect

from apps.chat import admission, open_replies
from apps.chat.models import Conversation, Message
from apps.core.cache import redis_client
from apps.core.management.commands.up import web_command
from apps.core.ports import free_port
from apps.memory import services as memory_services
from tests.private_servers import (
    HEALTH_TOKEN,
    chat_turn,
    database_url,
    logged_in_client,
    pool_children,
    wait_for_http,
    wait_until_warm,
)

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "correct-horse-battery-9"
# The most connections a web process holds: one per thread that reads the database, in asgiref's
# default executor (Python's default size), its one thread for sync code, the recall's search
# and embedding pools (apps/cognition/context.py), the tool pool (apps/cognition/toolloop.py) and
# the pool of recalls the API's accept starts (apps/cognition/pipeline.py).
WEB_PROCESS_CONNECTIONS = min(32, (os.cpu_count() or 1) + 4) + 1 + 8 + 4 + 4 + 4
# Long enough that the answer is still being written when the Stop lands.
SLOW_TICKS = {"content": "tick " * 400, "tps": 40}
TWO_PROCESSES = f"thalamus-web-{os.getpid()}"


@contextmanager
def web_process(
    processes: int = 1, *, name: str = "thalamus-web"
) -> Iterator[tuple[str, subprocess.Popen]]:
    """uvicorn as `up` starts it, on the test database and Redis; yields its URL and process.
    `name` is its database connections' application_name."""
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": f"{database_url()}&application_name={name}",
        "REDIS_URL": settings.REDIS_URL,
        "THALAMUS_HEALTH_TOKEN": HEALTH_TOKEN,
        "PYTHONUNBUFFERED": "1",
    }
    argv = web_command("127.0.0.1", port, processes)
    # The product's app, its routes recorded for the coverage gate.
    argv[argv.index("thalamus_site.asgi:application")] = "tests.recorded_asgi:application"
    process = subprocess.Popen(argv, cwd=ROOT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(f"{url}/accounts/login/", 60, process)
        wait_until_warm(url, 60, process)
        yield url, process
    finally:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(5)


# Once for the module: starting and warming up two servers took longer than the tests that use
# them (8-16 s a test), and no test leaves anything in them for the next one, which makes its own
# user and conversation after the database is emptied. Their connections are named for this test
# process, so that counting them counts no other run's.
@pytest.fixture(scope="module")
def two_processes(django_db_setup):
    with web_process(name=TWO_PROCESSES) as first, web_process(name=TWO_PROCESSES) as second:
        yield first[0], second[0]


def _socket(url: str, client: httpx.Client, conversation_id: int) -> ClientConnection:
    cookie = "; ".join(f"{name}={value}" for name, value in client.cookies.items())
    return connect(
        url.replace("http://", "ws://") + f"/ws/c/{conversation_id}/",
        additional_headers={"Cookie": cookie, "Origin": url},
        open_timeout=10,
        max_size=None,
    )


def _frames_until(socket: ClientConnection, needle: str, timeout: float = 20) -> list[str]:
    frames = []
    deadline = time.monotonic() + timeout
    while True:
        frames.append(socket.recv(timeout=max(0.1, deadline - time.monotonic())))
        if needle in frames[-1]:
            return frames


def _send(socket: ClientConnection, **data) -> None:
    socket.send(json.dumps(data))


def _reply_once(*, status: str, timeout: float = 20) -> Message:
    deadline = time.monotonic() + timeout
    while True:
        reply = Message.objects.filter(role="assistant").order_by("-pk").first()
        if reply is not None and reply.status == status:
            return reply
        assert time.monotonic() < deadline, f"the reply is {reply and reply.status}, not {status}"
        time.sleep(0.05)


def _streaming_reply() -> Message:
    return _reply_once(status=Message.Status.STREAMING)


def test_a_reply_streams_to_a_page_on_the_other_process_and_stops_from_there(
    two_processes, user, llm_stub
):
    first, second = two_processes
    conversation = Conversation.objects.create(owner=user)
    client = logged_in_client(first, "alice", PASSWORD)
    llm_stub.script(SLOW_TICKS)
    with (
        _socket(first, client, conversation.pk) as asking,
        _socket(second, client, conversation.pk) as watching,
    ):
        _send(asking, content="count for me")
        # The growing answer, written in the first process, reaches the page on the second.
        _frames_until(watching, "tick tick tick")
        reply = _streaming_reply()

        _send(watching, action="stop", message_id=reply.pk)

        _frames_until(asking, "msg-assistant cancelled")
        _frames_until(watching, "msg-assistant cancelled")
    reply.refresh_from_db()
    assert reply.status == Message.Status.CANCELLED
    assert 3 <= reply.content.count("tick") < 400


def test_a_stop_reaches_a_reply_whose_page_has_closed_on_the_other_process(
    two_processes, user, llm_stub
):
    first, second = two_processes
    conversation = Conversation.objects.create(owner=user)
    client = logged_in_client(first, "alice", PASSWORD)
    llm_stub.script(SLOW_TICKS)
    with _socket(first, client, conversation.pk) as asking:
        _send(asking, content="count for me")
        _frames_until(asking, "tick tick")
    # No page of the conversation is open in the first process any more; it still writes.
    reply = _streaming_reply()

    with _socket(second, client, conversation.pk) as later:
        _send(later, action="stop", message_id=reply.pk)
        _frames_until(later, "msg-assistant cancelled")
    reply.refresh_from_db()
    assert reply.status == Message.Status.CANCELLED
    assert 2 <= reply.content.count("tick") < 400


def test_the_no_javascript_stop_on_one_process_stops_an_answer_written_by_the_other(
    two_processes, user, llm_stub
):
    first, second = two_processes
    conversation = Conversation.objects.create(owner=user)
    writer = logged_in_client(first, "alice", PASSWORD)
    stopper = logged_in_client(second, "alice", PASSWORD)
    llm_stub.script(SLOW_TICKS)
    # Without JavaScript the answer is written during the POST, in the first process.
    sent = {}
    sending = threading.Thread(
        target=lambda: sent.update(
            response=writer.post(
                f"/c/{conversation.pk}/send",
                data={
                    "content": "count for me",
                    "csrfmiddlewaretoken": writer.cookies["csrftoken"],
                },
                headers={"Referer": f"{first}/"},
                timeout=30,
            )
        )
    )
    sending.start()
    reply = _streaming_reply()
    page = stopper.get(f"/c/{conversation.pk}/")
    assert f'action="/c/{conversation.pk}/stop"' in page.text  # the Stop form works as a form

    stopped = stopper.post(
        f"/c/{conversation.pk}/stop",
        data={"message_id": reply.pk, "csrfmiddlewaretoken": stopper.cookies["csrftoken"]},
        headers={"Referer": f"{second}/"},
    )

    assert stopped.status_code == 302
    sending.join(30)
    assert sent["response"].status_code == 302  # the writer's page comes back, stopped
    reply.refresh_from_db()
    assert reply.status == Message.Status.CANCELLED
    assert reply.content.count("tick") < 400


def test_a_retry_from_the_other_process_answers_again_and_both_pages_see_it(
    two_processes, user, llm_stub
):
    first, second = two_processes
    conversation = Conversation.objects.create(owner=user)
    client = logged_in_client(first, "alice", PASSWORD)
    llm_stub.script({"fault": "http_500"}, {"content": "The second try worked."})
    with (
        _socket(first, client, conversation.pk) as asking,
        _socket(second, client, conversation.pk) as other,
    ):
        _send(asking, content="try this")
        _frames_until(asking, "msg-assistant failed")
        reply = _reply_once(status=Message.Status.FAILED)

        _send(other, action="retry", message_id=reply.pk)

        assert "The second try worked." in _frames_until(asking, "msg-assistant complete")[-1]
        _frames_until(other, "msg-assistant complete")
    reply.refresh_from_db()
    assert reply.status == Message.Status.COMPLETE
    assert reply.content == "The second try worked."


def test_the_dashboard_on_one_process_shows_a_change_made_through_the_other(two_processes, user):
    first, second = two_processes
    node = memory_services.memory_node_create(
        owner=user, description="Alice keeps bees", embed=False, source="admin"
    )
    client = logged_in_client(first, "alice", PASSWORD)
    cookie = "; ".join(f"{name}={value}" for name, value in client.cookies.items())
    with connect(
        second.replace("http://", "ws://") + "/ws/mind/me/",
        additional_headers={"Cookie": cookie, "Origin": second},
        open_timeout=10,
        max_size=None,
    ) as dashboard:
        dashboard.recv(timeout=10)  # the graph, on connect

        confirmed = client.post(
            f"/memory/{node.pk}/confirm",
            data={"csrfmiddlewaretoken": client.cookies["csrftoken"]},
            headers={"Referer": f"{first}/memory/"},
        )

        assert confirmed.status_code in {200, 302}
        _frames_until(dashboard, "Alice keeps bees", timeout=10)


@pytest.mark.timeout(180)
def test_a_reply_of_a_process_that_died_is_failed_by_the_other_once_its_lease_lapses(
    user, llm_stub
):
    conversation = Conversation.objects.create(owner=user)
    with web_process() as (second, _):
        with web_process() as (first, dying):
            client = logged_in_client(first, "alice", PASSWORD)
            llm_stub.script({"content": "tick " * 4000, "tps": 40})
            with _socket(first, client, conversation.pk) as asking:
                _send(asking, content="count for me")
                _frames_until(asking, "tick tick")
            os.killpg(dying.pid, signal.SIGKILL)  # no chance to save anything
            dying.wait(10)
        reply = _streaming_reply()
        died_at = time.monotonic()
        lease = open_replies._lease_key(reply.pk)
        assert cache.get(lease), "the dead process's lease is still running"
        later = logged_in_client(second, "alice", PASSWORD)

        # While the lease runs, the other process takes the reply for one being written.
        later.get(f"/c/{conversation.pk}/")
        with _socket(second, later, conversation.pk) as page:
            _send(page, action="stop", message_id=reply.pk)
            assert _quiet(page, 1.0)
        reply.refresh_from_db()
        assert reply.status == Message.Status.STREAMING

        # Nobody renews it: it runs out within the lease's time of the death. Its lapse is then
        # brought forward (what Redis does when the time is up), not waited for (30 s); a reply
        # younger than the orphan grace is still not failed, so that much is waited for.
        expires_in = redis_client().ttl(cache.make_and_validate_key(lease))
        assert 0 < expires_in <= open_replies.REPLY_LEASE_SECONDS - (time.monotonic() - died_at) + 1
        time.sleep(2)
        assert redis_client().ttl(cache.make_and_validate_key(lease)) < expires_in
        cache.delete(lease)
        young = open_replies.ORPHAN_GRACE - (timezone.now() - reply.created_at)
        time.sleep(max(young.total_seconds(), 0) + 0.5)
        shown = later.get(f"/c/{conversation.pk}/")

    reply.refresh_from_db()
    assert reply.status == Message.Status.FAILED
    assert reply.error == open_replies.INTERRUPTED
    assert "interrupted" in shown.text


def _quiet(socket: ClientConnection, seconds: float) -> bool:
    try:
        socket.recv(timeout=seconds)
    except TimeoutError:
        return True
    return False


def _serving_pid(socket: ClientConnection, port: int, workers: list[int]) -> int:
    """The worker process holding the server's end of this client's TCP connection."""
    client_port = socket.socket.getsockname()[1]
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, remote = fields[1], fields[2]
            if int(local.rsplit(":", 1)[1], 16) == port and (
                int(remote.rsplit(":", 1)[1], 16) == client_port
            ):
                inodes.add(f"socket:[{fields[9]}]")
    for pid in workers:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with suppress(OSError):
                if os.readlink(fd) in inodes:
                    return pid
    raise AssertionError(f"no worker holds the connection from port {client_port}")


def test_two_workers_on_one_port_stop_each_others_replies(user, llm_stub):
    conversation = Conversation.objects.create(owner=user)
    with web_process(processes=2) as (url, supervisor), ExitStack() as sockets:
        port = int(url.rsplit(":", 1)[1])
        workers = pool_children(supervisor.pid)
        client = logged_in_client(url, "alice", PASSWORD)
        by_worker: dict[int, ClientConnection] = {}
        for _ in range(40):
            socket = sockets.enter_context(_socket(url, client, conversation.pk))
            by_worker.setdefault(_serving_pid(socket, port, workers), socket)
            if len(by_worker) == 2:
                break
        assert len(by_worker) == 2, "every connection went to one worker"
        asking, watching = by_worker.values()
        llm_stub.script(SLOW_TICKS)

        _send(asking, content="count for me")
        _frames_until(watching, "tick tick")
        asking.close()  # the reply goes on in its worker with no page open there
        reply = _streaming_reply()
        _send(watching, action="stop", message_id=reply.pk)

        _frames_until(watching, "msg-assistant cancelled")
    reply.refresh_from_db()
    assert reply.status == Message.Status.CANCELLED


def test_two_web_processes_hold_a_bounded_number_of_connections_while_turns_run_at_once(
    two_processes, user, other_user, llm_stub
):
    first, second = two_processes
    conversations = [
        Conversation.objects.create(owner=owner) for owner in (user, other_user) for _ in range(3)
    ]
    peak = 0
    sampling = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not sampling.wait(0.02):
            peak = max(peak, _connections_named(TWO_PROCESSES))

    clients = {
        (url, username): logged_in_client(url, username, PASSWORD)
        for url in (first, second)
        for username in ("alice", "mallory")
    }
    sampler = threading.Thread(target=sample)
    sampler.start()
    finals: list[str] = []
    for round_ in range(2):
        # A slot is given back just after the answer's last fragment is sent.
        _until_streams_end(user, other_user)
        llm_stub.script(*[{"content": "tick " * 40, "tps": 40}] * len(conversations))
        turns = [
            threading.Thread(
                target=lambda url=url, conversation=conversation, round_=round_: finals.append(
                    chat_turn(
                        url,
                        clients[url, conversation.owner.username],
                        conversation.pk,
                        f"count for me, round {round_}",
                    )
                )
            )
            for index, conversation in enumerate(conversations)
            for url in [(first, second)[index % 2]]
        ]
        for turn in turns:
            turn.start()
        for turn in turns:
            turn.join(60)
    sampling.set()
    sampler.join()

    # Twelve answers, six at a time, by two processes: each holds at most one connection per
    # thread that reads the database, and those threads are pools of fixed sizes.
    assert len(finals) == 12
    assert [f[:300] for f in finals if "msg-assistant complete" not in f] == []
    assert 1 <= peak <= 2 * WEB_PROCESS_CONNECTIONS, peak


def _until_streams_end(*users) -> None:
    deadline = time.monotonic() + 10
    while any(admission._redis().zcard(admission._streams_key(u.pk)) for u in users):
        assert time.monotonic() < deadline, "a stream slot was never given back"
        time.sleep(0.05)


def _connections_named(name: str) -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [name])
        return cursor.fetchone()[0]
