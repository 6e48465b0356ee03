"""The previewed application's websockets work through the proxy, for members only."""

from __future__ import annotations

import asyncio

import pytest
import websockets

from tests.sessions.stream.conftest import running_daphne
from tests.sessions.terminal.conftest import cookies  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db(transaction=True)

# A websocket echo server with nothing but the stdlib (the sandbox has no websocket library).
WS_APP = """\
import base64, hashlib, socket, struct, threading

def serve(conn):
    head = b""
    while b"\\r\\n\\r\\n" not in head:
        head += conn.recv(4096)
    lines = head.decode().split("\\r\\n")
    path = lines[0].split()[1]
    headers = dict(l.split(": ", 1) for l in lines[1:] if ": " in l)
    if "Sec-WebSocket-Key" not in headers:  # a plain request: the readiness check
        conn.sendall(b"HTTP/1.0 200 OK\\r\\nContent-Length: 2\\r\\n\\r\\nok")
        conn.close()
        return
    accept = base64.b64encode(hashlib.sha1(
        (headers["Sec-WebSocket-Key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()
    ).digest()).decode()
    conn.sendall(("HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\n"
                  "Connection: Upgrade\\r\\nSec-WebSocket-Accept: " + accept
                  + "\\r\\n\\r\\n").encode())
    f = conn.makefile("rb")
    def send(op, data):
        n = len(data)
        if n < 126:
            hdr = struct.pack("!BB", 0x80 | op, n)
        else:
            hdr = struct.pack("!BBH", 0x80 | op, 126, n)
        conn.sendall(hdr + data)
    send(1, ("path " + path).encode())
    while True:
        b0, b1 = f.read(2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", f.read(2))[0]
        key = f.read(4)
        data = bytes(b ^ key[i % 4] for i, b in enumerate(f.read(n)))
        op = b0 & 0x0F
        if op == 8:
            send(8, data)
            return
        send(op, (b"echo:" + data) if op == 2 else ("echo:" + data.decode()).encode())

s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 8000)); s.listen(8)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""


@pytest.fixture
def ws_session(transactional_db, inspect_cli, make_git_repo, team, create_session):
    from sessions.models import Session

    upstream = make_git_repo(
        files={
            "ws.py": WS_APP,
            ".inspect/environment.toml": 'preview = { command = "python3 ws.py", '
            'url = "http://127.0.0.1:8000/", ready_path = "/" }\n',
        }
    )
    team.repository.url = str(upstream.path)
    team.repository.save()
    code, _, err = inspect_cli("snapshot", "refresh", "widgets", "--json")
    assert code == 0, err
    _, summary, _ = create_session("--prompt", "x", "--agent-command", "true", "--inline")
    return Session.objects.get(pk=summary["id"])


async def test_a_member_talks_to_the_applications_websocket(ws_session, cookies, tmp_path):  # noqa: F811
    with running_daphne(tmp_path / "daphne.log") as daphne:
        async with websockets.connect(
            f"ws://127.0.0.1:{daphne.port}/sessions/{ws_session.pk}/preview/live?x=1",
            origin=f"http://127.0.0.1:{daphne.port}",
            additional_headers={"Cookie": cookies["reviewer"]},
            open_timeout=30,
        ) as ws:
            assert await asyncio.wait_for(ws.recv(), 10) == "path /live?x=1"
            await ws.send("hello")
            assert await asyncio.wait_for(ws.recv(), 10) == "echo:hello"
            await ws.send(b"\x00\x01" * 100)
            assert await asyncio.wait_for(ws.recv(), 10) == b"echo:" + b"\x00\x01" * 100


async def test_a_non_member_is_closed_with_4403(ws_session, cookies, tmp_path):  # noqa: F811
    with running_daphne(tmp_path / "daphne.log") as daphne:
        async with websockets.connect(
            f"ws://127.0.0.1:{daphne.port}/sessions/{ws_session.pk}/preview/live",
            origin=f"http://127.0.0.1:{daphne.port}",
            additional_headers={"Cookie": cookies["outsider"]},
        ) as ws:
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 10)
            assert closed.value.rcvd.code == 4403


async def test_an_open_socket_and_the_link_end_with_the_sandbox(ws_session, cookies, tmp_path):  # noqa: F811
    """A socket the application had open is closed (not left hanging) when the sandbox stops,
    and the link then refuses new ones."""
    from snapshots.backends import sandbox_backend
    from tests.sessions.stream.conftest import in_thread

    url = f"/sessions/{ws_session.pk}/preview/live"
    with running_daphne(tmp_path / "daphne.log") as daphne:
        connect = {
            "uri": f"ws://127.0.0.1:{daphne.port}{url}",
            "origin": f"http://127.0.0.1:{daphne.port}",
            "additional_headers": {"Cookie": cookies["engineer"]},
            "open_timeout": 30,
        }
        async with websockets.connect(**connect) as ws:
            assert await asyncio.wait_for(ws.recv(), 10) == "path /live"
            await in_thread(lambda: sandbox_backend().attach(ws_session.sandbox_id).terminate())
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 15)
            assert closed.value.rcvd.code == 4502  # the connection into the sandbox broke
        async with websockets.connect(**connect) as ws:
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 10)
            assert closed.value.rcvd.code == 4404  # the link ended with the sandbox


@pytest.mark.parametrize(
    ("upstream", "viewer"),
    [(1000, 1000), (1001, 1000), (4001, 4001), (3000, 3000), (1006, 4502), (1009, 4502),
     (1011, 4502), (2999, 4502)],
)  # fmt: skip
def test_the_viewer_is_closed_with_a_code_daphne_can_send(upstream, viewer):
    from sessions.stream.preview_socket import viewer_close_code

    assert viewer_close_code(upstream) == viewer


async def test_with_a_preview_origin_its_websockets_live_there_only(ws_session, cookies, tmp_path):  # noqa: F811
    """INSPECT_PREVIEW_ORIGIN: the dashboard (127.0.0.1) hands the member over to the preview
    origin (localhost, the same daphne), whose cookie alone opens the application's sockets."""
    import httpx

    from tests.sessions.stream.conftest import free_port

    port = free_port()
    preview, dashboard = f"http://localhost:{port}", f"http://127.0.0.1:{port}"
    path = f"/sessions/{ws_session.pk}/preview/live"
    log = tmp_path / "daphne.log"
    with running_daphne(log, port=port, INSPECT_PREVIEW_ORIGIN=preview):
        async with httpx.AsyncClient(timeout=30) as http:
            handed = await http.get(f"{dashboard}{path}", headers={"Cookie": cookies["engineer"]})
            assert handed.status_code == 302 and handed.headers["location"].startswith(preview)
            entered = await http.get(handed.headers["location"])
            assert entered.status_code == 302
            jar = f"inspect_preview={entered.cookies['inspect_preview']}"

        async with websockets.connect(
            f"ws://localhost:{port}{path}", origin=preview, additional_headers={"Cookie": jar}
        ) as ws:
            assert await asyncio.wait_for(ws.recv(), 10) == "path /live"
        # The dashboard's login opens nothing on the preview origin ...
        async with websockets.connect(
            f"ws://localhost:{port}{path}",
            origin=preview,
            additional_headers={"Cookie": cookies["engineer"]},
        ) as ws:
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 10)
            assert closed.value.rcvd.code == 4403
        # ... and the dashboard's origin serves no preview socket.
        with pytest.raises(websockets.InvalidHandshake):
            async with websockets.connect(
                f"ws://127.0.0.1:{port}{path}",
                origin=dashboard,
                additional_headers={"Cookie": cookies["engineer"]},
            ):
                pass
    assert "inspv_" not in log.read_text()  # the entry token stays out of the access log
