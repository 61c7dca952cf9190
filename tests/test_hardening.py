"""Issue 25's hardening, each against the real thing: secrets never reach the server's log, a
request head that dribbles in is cut off, ``inbots purge --days`` keeps to its bounds, and the
API's reference pages load nothing from elsewhere and are gone in production.

A real ``inbots serve`` (httptools and our protocol, as shipped) and a real uvicorn running the
h11 variant, both with a one-second head deadline; raw sockets send what no client library
would. The pages are asked of the app in process.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import httpx
import pytest

from inbots.app import create_app
from inbots.config import Settings, load_settings
from inbots.kit.tokens import OPERATOR_TOKEN_PREFIX, mint
from tests.processes import clean_env, inbots_executable, serve
from tests.test_protocol import ThreadServer

# One xdist worker runs the module: its servers (one an `inbots serve` process) start once.
pytestmark = pytest.mark.xdist_group("hardening")

OPERATOR_TOKEN = mint(OPERATOR_TOKEN_PREFIX)
HEAD_TIMEOUT = 1.0  # seconds: INBOTS_HTTP_HEADER_TIMEOUT_SECONDS of both servers
# How long a test goes on dribbling before it gives up: far past the deadline, so a server
# without one is caught, and short enough for a test.
GIVE_UP = 12.0


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real ``inbots serve``; yields its URL (its log is at ``LOGS['serve']``)."""
    with serve(
        tmp_path_factory.mktemp("serve"),
        INBOTS_OPERATOR_TOKEN=OPERATOR_TOKEN,
        INBOTS_HTTP_HEADER_TIMEOUT_SECONDS=str(HEAD_TIMEOUT),
    ) as running:
        LOGS["serve"] = running.log
        yield running.url


LOGS: dict[str, Path] = {}


@pytest.fixture(scope="module")
def h11_served(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path) -> Iterator[str]:
    from inbots.web.protocol import protocol_for

    path = tmp_path_factory.mktemp("h11") / "inbots.db"
    shutil.copy(sqlite_template, path)
    settings = load_settings(
        database_url=f"sqlite:///{path}", http_header_timeout_seconds=HEAD_TIMEOUT
    )
    with ThreadServer(settings, protocol_for(settings, "h11")) as running:
        yield running.url


@pytest.fixture(params=["inbots-serve", "uvicorn-h11"])
def url(request: pytest.FixtureRequest) -> str:
    name = "served" if request.param == "inbots-serve" else "h11_served"
    return str(request.getfixturevalue(name))


# --- a slow request head -------------------------------------------------------------------


def connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=GIVE_UP)


def dribble(sock: socket.socket, every: float = 0.2) -> tuple[bytes, float]:
    """Send one more byte of a header every ``every`` seconds, as the attack did, until the
    server has answered and closed (or ``GIVE_UP``): what it answered, and after how long."""
    start = time.monotonic()
    received = b""
    sock.settimeout(every)
    while time.monotonic() - start < GIVE_UP:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            with suppress(OSError):  # closed: the answer, if any, is read next
                sock.sendall(b"a")
            continue
        except OSError:
            break
        if not chunk:
            break
        received += chunk
    return received, time.monotonic() - start


def timed_out(answer: bytes) -> dict[str, str]:
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 "), answer[:300]
    assert b"content-type: application/json" in head.lower(), head
    error: dict[str, str] = json.loads(body)["error"]
    assert error["code"] == "request_timeout", error
    return error


def test_a_head_that_dribbles_in_gets_408_and_the_connection_closes(url: str) -> None:
    sock = connect(url)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    answer, seconds = dribble(sock)
    sock.close()
    error = timed_out(answer)
    assert "did not all arrive within 1 seconds" in error["message"], error
    assert HEAD_TIMEOUT * 0.9 <= seconds < HEAD_TIMEOUT + 5, seconds


def test_a_connection_that_sends_nothing_is_closed_without_an_answer(url: str) -> None:
    sock = connect(url)
    sock.settimeout(GIVE_UP)
    start = time.monotonic()
    assert sock.recv(100) == b""  # closed, nothing said
    assert time.monotonic() - start < HEAD_TIMEOUT + 5
    sock.close()


def test_each_request_on_a_kept_alive_connection_has_its_own_deadline(url: str) -> None:
    sock = connect(url)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    first = b""
    while b"\r\n\r\n" not in first or not first.endswith(b"}"):
        first += sock.recv(65536)
    assert first.startswith(b"HTTP/1.1 200 "), first
    time.sleep(HEAD_TIMEOUT * 1.5)  # the deadline of the first head is long past: no matter
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    answer, seconds = dribble(sock)
    sock.close()
    timed_out(answer)
    assert seconds < HEAD_TIMEOUT + 5, seconds


def test_a_slow_body_is_not_cut_by_the_heads_deadline(url: str) -> None:
    body = json.dumps({"enrollment_token": "enr_" + "x" * 43, "name": "slow-body"}).encode()
    sock = connect(url)
    sock.sendall(
        b"POST /v1/register HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body)
    )
    for piece in (body[:10], body[10:20], body[20:]):
        time.sleep(HEAD_TIMEOUT * 0.8)  # 2.4 s in all, past the head's deadline
        sock.sendall(piece)
    answer = b""
    while b"enrollment_invalid" not in answer and (chunk := sock.recv(65536)):
        answer += chunk
    sock.close()
    # The app's own answer (the token is unknown: 401 enrollment_invalid), not a 408.
    assert answer.startswith(b"HTTP/1.1 401 ") and b"enrollment_invalid" in answer, answer[:300]


def test_a_crowd_of_slow_heads_is_all_let_go_after_the_deadline(served: str) -> None:
    """The issue's attack in small: many connections, each dribbling a header, all closed once
    the deadline passes (before, every one stayed open for as long as it went on)."""
    socks = [connect(served) for _ in range(150)]
    for sock in socks:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        sock.setblocking(False)
    start = time.monotonic()
    open_ = set(socks)
    while open_ and time.monotonic() - start < GIVE_UP:
        time.sleep(0.2)
        for sock in list(open_):
            try:
                if sock.recv(65536) == b"":
                    open_.discard(sock)
                    continue
            except BlockingIOError:
                pass
            except OSError:
                open_.discard(sock)
                continue
            with suppress(OSError):
                sock.send(b"a")
    seconds = time.monotonic() - start
    for sock in socks:
        sock.close()
    assert not open_, f"{len(open_)} of {len(socks)} still open after {seconds:.1f} s"
    assert seconds < HEAD_TIMEOUT + 8, seconds


# --- secrets out of the log ----------------------------------------------------------------


def test_an_enrolment_token_is_absent_from_the_servers_log(served: str) -> None:
    """The token in a query (``enrollment_token=``) and in a path, a search's words (``q=``)
    and an acknowledgement's note (``note=``): the access log shows each request, and none of
    them."""
    operator = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
    with httpx.Client(base_url=served, timeout=10) as client:
        created = client.post("/v1/enrollments", headers=operator, json={})
        assert created.status_code == 201, created.text
        token = created.json()["token"]
        registered = client.post(
            "/v1/register",
            params={"enrollment_token": token},
            json={"enrollment_token": token, "name": "logged-agent"},
        )
        assert registered.status_code == 201, registered.text
        key = registered.json()["api_key"]
        agent = {"Authorization": f"Bearer {key}"}
        client.delete(f"/v1/enrollments/{token}", headers=operator)  # an id mistaken for it
        searched = client.get(
            "/v1/search", params={"q": "quarterlymerger", "limit": 5}, headers=agent
        )
        assert searched.status_code == 200, searched.text
        client.get(
            "/v1/messages/msg_unknown", params={"ack": "done", "note": "ring Ana"}, headers=agent
        )
    log = LOGS["serve"]
    deadline = time.monotonic() + 10
    while "/v1/messages/msg_unknown" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    text = log.read_text()
    assert '"POST /v1/register?enrollment_token=[redacted] HTTP/1.1" 201' in text, text
    assert "/v1/search?q=[redacted]&limit=5 " in text and "ack=done&note=[redacted] " in text
    body = token.removeprefix("enr_")
    for secret in (token, body, key, "quarterlymerger", "ring", "Ana"):
        assert secret not in text, secret


# --- inbots purge --days -------------------------------------------------------------------


@pytest.fixture(scope="module")
def purge_env(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path) -> dict[str, str]:
    home = tmp_path_factory.mktemp("purge")
    shutil.copy(sqlite_template, home / "inbots.db")
    return clean_env(home, INBOTS_DATABASE_URL=f"sqlite:///{home / 'inbots.db'}")


@pytest.mark.parametrize("days", ["inf", "1e308", "nan", "-1", "3650.5"])
def test_purge_days_past_its_bounds_is_a_usage_error(purge_env: dict[str, str], days: str) -> None:
    done = subprocess.run(
        [inbots_executable(), "purge", "--dry-run", "--days", days],
        env=purge_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, (done.returncode, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "'--days'" in lines[0] and "from 0 to 3,650" in lines[0], lines


def test_purge_days_at_its_ceiling_runs(purge_env: dict[str, str]) -> None:
    done = subprocess.run(
        [inbots_executable(), "purge", "--dry-run", "--days", "3650", "--output", "json"],
        env=purge_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["days"] == 3650


# --- /docs and /redoc ----------------------------------------------------------------------


def app_client(tmp_path: Path, environment: str) -> httpx.AsyncClient:
    settings: Settings = load_settings(
        database_url=f"sqlite:///{tmp_path / 'never-opened.db'}", environment=environment
    )
    app = create_app(settings, configure_logs=False)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://inbots")


SOURCES = re.compile(r"""<(?:script|link)\b[^>]*?\b(?:src|href)=["']([^"']+)""")


def test_no_cdn_script_on_docs(tmp_path: Path) -> None:
    """In development /docs and /redoc load Swagger UI and ReDoc from this server (the files
    installed with the package), and their policy lets the browser run nothing else."""
    asyncio.run(_no_cdn_script_on_docs(tmp_path))


async def _no_cdn_script_on_docs(tmp_path: Path) -> None:
    async with app_client(tmp_path, "development") as client:
        for path in ("/docs", "/redoc"):
            page = await client.get(path)
            assert page.status_code == 200, (path, page.text)
            sources = SOURCES.findall(page.text)
            assert any(s.endswith(".js") for s in sources), sources
            for source in sources:
                assert source.startswith("/docs/assets/"), (path, source)
                asset = await client.get(source)
                assert asset.status_code == 200 and len(asset.content) > 1000, source
            assert "http://" not in page.text and "https://" not in page.text, page.text
            policy = page.headers["content-security-policy"]
            assert "script-src 'self'" in policy and "http" not in policy, policy
            assert "frame-ancestors 'none'" in policy


def test_docs_and_redoc_404_in_production(tmp_path: Path) -> None:
    asyncio.run(_docs_and_redoc_404_in_production(tmp_path))


async def _docs_and_redoc_404_in_production(tmp_path: Path) -> None:
    async with app_client(tmp_path, "production") as client:
        for path in (
            "/docs",
            "/docs/oauth2-redirect",
            "/redoc",
            "/docs/assets/swagger-ui-bundle.js",
        ):
            answer = await client.get(path)
            assert answer.status_code == 404, (path, answer.status_code)
        assert (await client.get("/openapi.json")).status_code == 200  # for tools and clients


# --- a quiet first install -----------------------------------------------------------------


def test_the_license_is_an_spdx_string_so_the_install_warns_of_nothing() -> None:
    """setuptools warned three times (35 lines before the operator token of a first `.ci/dev
    serve`) about ``project.license`` as a table; the SPDX string needs setuptools 77."""
    import tomllib

    from tests.processes import ROOT

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["license"] == "Apache-2.0"
    assert project["build-system"]["requires"] == ["setuptools>=77"]
