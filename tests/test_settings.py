"""Settings and start-up: bad settings stop ``inbots serve`` with one line naming them; a real
``inbots serve`` starts, seeds the operator token once and serves what http-api.md lists."""

from __future__ import annotations

import os
import re
import secrets
import socket
import subprocess
from pathlib import Path

import httpx
import pytest

from inbots.config import Settings, SettingsError, load_settings
from tests.conftest import free_port
from tests.processes import ROOT, clean_env, inbots_executable, procfile, serve, venv_path

SPEC = Path(__file__).resolve().parents[2] / "shared" / "spec" / "http-api.md"
TOKEN = re.compile(r"ops_[A-Za-z0-9_-]{43,}")


# --- bad settings ---------------------------------------------------------------------------


BAD_SETTINGS = [
    ("INBOTS_RETRY_SCHEDULE", "abc"),
    ("INBOTS_RETRY_SCHEDULE", "1,-2,3"),
    ("INBOTS_PORT", "99999"),
    ("INBOTS_PORT", "eighty"),
    ("INBOTS_MESSAGE_BODY_MAX", "-1"),
    ("INBOTS_PUBLISH_LOST_SECONDS", "10"),
    ("INBOTS_STALL_SECONDS", "0"),
    ("INBOTS_WEBHOOK_TIMEOUT_SECONDS", "soon"),
    ("INBOTS_WEBHOOK_ALLOW_PRIVATE", "maybe"),
    ("INBOTS_NEW_AGENT_GRACE_SECONDS", "-5"),
    ("INBOTS_LIST_DEFAULT", "500"),
    ("INBOTS_OPERATOR_TOKEN", "not-a-token"),
    ("INBOTS_OPERATOR_TOKEN", "ops_" + "0" * 32),
    ("INBOTS_METRICS_PUBLIC", "perhaps"),
    ("INBOTS_HTTP_HEADER_MAX_BYTES", "100"),
    ("INBOTS_DATABASE_URL", "mysql://user@localhost/inbots"),
    ("INBOTS_BROKER_URL", "http://nope"),  # once accepted, then a crash after the token
    ("INBOTS_HOST", " "),
    ("INBOTS_RETENTION_DAYS", "inf"),  # once passed inbots check, then crashed serve
    ("INBOTS_FORWARDED_ALLOW_IPS", "bogus_x"),  # a literal uvicorn would never match
    ("INBOTS_FORWARDED_ALLOW_IPS", "10.0.0.5,proxy.internal"),
]


def run_serve(tmp_path: Path, **settings: str) -> subprocess.CompletedProcess[str]:
    env = clean_env(tmp_path, **{"INBOTS_PORT": str(free_port()), **settings})
    try:
        return subprocess.run(
            [inbots_executable(), "serve"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=30,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"inbots serve kept running with {settings}: {exc.stdout!r}")


def test_serve_on_a_port_in_use_says_so_in_one_line_before_making_a_token(
    tmp_path: Path,
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_serve(tmp_path, INBOTS_PORT=str(port))
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    assert done.stderr.startswith("inbots: cannot listen on 127.0.0.1:"), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "INBOTS_PORT" in done.stderr and not TOKEN.search(done.stdout + done.stderr)


@pytest.mark.parametrize(("name", "value"), BAD_SETTINGS, ids=[f"{n}={v}" for n, v in BAD_SETTINGS])
def test_bad_setting_stops_serve_naming_it(tmp_path: Path, name: str, value: str) -> None:
    done = run_serve(tmp_path, **{name: value})
    assert done.returncode != 0, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    assert name in done.stderr, done.stderr
    assert "Uvicorn running" not in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("INBOTS_RETRY_SCHEDULE", "abc"),
        ("INBOTS_MESSAGE_BODY_MAX", "-1"),
        ("INBOTS_PORT", "99999"),
        ("INBOTS_STALL_SECONDS", "0"),
    ],
)
def test_bad_setting_error_is_one_line(tmp_path: Path, name: str, value: str) -> None:
    """One line on stderr, also when it is a pipe or a log file (no wrapping at 80 columns)."""
    done = run_serve(tmp_path, **{name: value})
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line, got {len(lines)}:\n{done.stderr}"
    assert name in lines[0], lines


@pytest.mark.parametrize("process", ["release", "web", "worker", "beat"])
def test_bad_setting_stops_each_procfile_process_with_one_line(
    tmp_path: Path, process: str
) -> None:
    """The Procfile's own command lines, run as a process manager would (through ``sh -c``,
    from the repository root): each stops with one line naming the setting and exit status 2,
    never a traceback, and the web process does not leave uvicorn restarting its workers."""
    env = venv_path(clean_env(tmp_path, INBOTS_RETRY_SCHEDULE="abc", PORT=str(free_port())))
    try:
        done = subprocess.run(
            ["sh", "-c", procfile()[process]],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the {process} process kept running with a bad setting: {exc.stderr!r}")
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert len(lines) == 1 and lines[0].startswith("inbots: bad setting INBOTS_RETRY_SCHEDULE"), (
        done.stderr
    )


def test_load_settings_names_the_bad_setting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    for key in [k for k in os.environ if k.startswith("INBOTS_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("INBOTS_STALL_SECONDS", "-1")
    with pytest.raises(SettingsError) as caught:
        load_settings()
    assert "INBOTS_STALL_SECONDS" in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        ("INBOTS_RETENTION_DAYS", "inf", "finite"),
        ("INBOTS_STALL_SECONDS", "nan", "finite"),
        ("INBOTS_RETENTION_DAYS", "3651", "at most 3,650 days"),
        (
            "INBOTS_TTL_MAX_SECONDS",
            "99999999999999",
            "315,360,000 seconds (ten years) (got 99,999,999,999,999)",
        ),
        ("INBOTS_RETRY_SCHEDULE", "1,1e20", "at most 315,360,000 seconds"),
        ("INBOTS_STALL_SECONDS", "315360001", "(got 315,360,001)"),  # as written, never 3.1e+08
        ("INBOTS_LIST_MAX", "99999999999", "at most 2,147,483,647"),
    ],
)
def test_numbers_past_what_a_timestamp_or_column_holds_are_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str, value: str, said: str
) -> None:
    """Infinity, NaN and values no timestamp or integer column can take stop start-up naming
    the setting (a TTL ceiling of 10^14 s once passed, and a send with that TTL was a 500); the
    ceiling itself is accepted."""
    monkeypatch.chdir(tmp_path)
    for key in [k for k in os.environ if k.startswith("INBOTS_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as caught:
        load_settings()
    assert str(caught.value).startswith(f"bad setting {name}: "), str(caught.value)
    assert said in str(caught.value)
    monkeypatch.delenv(name)
    monkeypatch.setenv("INBOTS_TTL_MAX_SECONDS", "315360000")
    monkeypatch.setenv("INBOTS_RETENTION_DAYS", "3650")
    assert load_settings().ttl_max_seconds == 315_360_000


WEAK_TOKENS = [
    "ops_" + "0" * 32,  # the issue's own example
    "ops_" + "A" * 43,
    "ops_" + "abcd" * 8,  # a few characters over and over
    "ops_" + "password1234" * 3,  # a chunk repeated
    "ops_0123456789abcdefghijklmnopqrstuv",  # a run of neighbours
    "ops_" + "7" * 20 + "31415926535897932384",  # digits only, mostly one
    "ops_31415926535897932384626433832795",  # 32 digits: at most 106 bits
    # Issue 25: words and keyboard walks that pass every count of characters (zxcvbn's lists).
    "ops_PasswordPasswordPassword123456789",
    "ops_qwertyuiopasdfghjklzxcvbnm1234567890",
    "ops_1qaz2wsx3edc4rfv5tgb6yhn7ujm8ik9ol0p",
    "ops_ThisIsMyOperatorTokenForInbotsProduction2024",
]


@pytest.mark.parametrize("token", WEAK_TOKENS)
def test_weak_operator_tokens_are_refused_with_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, token: str
) -> None:
    monkeypatch.chdir(tmp_path)
    for key in [k for k in os.environ if k.startswith("INBOTS_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("INBOTS_OPERATOR_TOKEN", token)
    with pytest.raises(SettingsError) as caught:
        load_settings()
    message = str(caught.value)
    assert message.startswith("bad setting INBOTS_OPERATOR_TOKEN: too weak"), message
    assert "128 bits" in message and "secrets.token_urlsafe(32)" in message
    assert "\n" not in message and token not in message


def test_random_operator_tokens_are_accepted() -> None:
    # 32 hex digits are exactly 128 bits: the words and dates zxcvbn finds in them by chance
    # must not refuse them. (zxcvbn makes each judgement cost milliseconds: 50 rounds.)
    for _ in range(50):
        for body in (
            secrets.token_urlsafe(32),
            secrets.token_hex(32),
            secrets.token_urlsafe(24),
            secrets.token_hex(16),
        ):
            assert load_settings(operator_token="ops_" + body).operator_token == "ops_" + body
    from inbots.kit.tokens import OPERATOR_TOKEN_PREFIX, mint

    assert load_settings(operator_token=mint(OPERATOR_TOKEN_PREFIX)).operator_token


@pytest.mark.parametrize(
    "token",
    ["ops_PasswordPasswordPassword123456789", "ops_qwertyuiopasdfghjklzxcvbnm1234567890"],
)
def test_a_phrase_or_a_keyboard_walk_is_refused_for_its_words(token: str) -> None:
    """Both pass every count of characters (alphabet, spread, repeats, runs); zxcvbn's word
    lists and keyboard patterns find what they are made of."""
    with pytest.raises(SettingsError) as caught:
        load_settings(operator_token=token)
    assert "words, names, dates or keyboard patterns" in str(caught.value), str(caught.value)


def test_inbots_check_refuses_a_weak_token_in_one_line(tmp_path: Path) -> None:
    env = clean_env(tmp_path, INBOTS_OPERATOR_TOKEN="ops_" + "0" * 32)
    done = subprocess.run(
        [inbots_executable(), "check"], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "INBOTS_OPERATOR_TOKEN" in lines[0] and "weak" in lines[0], lines


def test_durations_accept_fractions_of_a_second(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    for key in [k for k in os.environ if k.startswith("INBOTS_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("INBOTS_RETRY_SCHEDULE", "0.2,0.4,0.8")
    monkeypatch.setenv("INBOTS_WEBHOOK_TIMEOUT_SECONDS", "0.5")
    monkeypatch.setenv("INBOTS_STALL_SECONDS", "1.5")
    monkeypatch.setenv("INBOTS_PUBLISH_LOST_SECONDS", "5.5")
    monkeypatch.setenv("INBOTS_RENOTIFY_INTERVAL_SECONDS", "0.25")
    monkeypatch.setenv("INBOTS_NEW_AGENT_GRACE_SECONDS", "0.5")
    monkeypatch.setenv("INBOTS_ACTIVE_SECONDS", "0.75")
    settings = load_settings()
    assert settings.retry_schedule == (0.2, 0.4, 0.8)
    assert settings.webhook_timeout_seconds == 0.5
    assert settings.stall_seconds == 1.5
    assert settings.publish_lost_seconds == 5.5
    assert settings.renotify_interval_seconds == 0.25
    assert settings.new_agent_grace_seconds == 0.5
    assert settings.active_seconds == 0.75


def test_settings_defaults_match_the_spec(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    for key in [k for k in os.environ if k.startswith("INBOTS_")]:
        monkeypatch.delenv(key)
    s = load_settings()
    assert s.broker_url == ""
    assert s.webhook_allow_private is False
    assert s.webhook_timeout_seconds == 10
    assert s.retry_schedule == (1, 12, 148)
    assert s.publish_attempts == 3
    assert s.publish_lost_seconds == 300
    assert s.stall_seconds == 900
    assert s.renotify_interval_seconds == 30
    assert s.new_agent_grace_seconds == 600
    assert s.active_seconds == 300
    assert s.message_body_max == 10_000
    assert s.summary_required_over == 200
    assert s.summary_max == 200
    assert s.summary_shown == 120
    assert s.thread_title_max == 200 and s.thread_ref_max == 128
    assert s.inbox_bodies_max == 20
    assert s.description_max == 200
    assert (s.list_default, s.list_max) == (50, 200)
    assert (s.check_inbox_default, s.check_inbox_max) == (20, 50)
    assert (s.wait_default_seconds, s.wait_max_seconds) == (30, 60)
    assert s.ack_batch_max == 100
    assert s.request_body_max_bytes == 64 * 1024
    assert s.database_url.startswith("sqlite:///")


def test_settings_are_read_from_a_dotenv_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    for key in [k for k in os.environ if k.startswith("INBOTS_")]:
        monkeypatch.delenv(key)
    (tmp_path / ".env").write_text("INBOTS_STALL_SECONDS=42.5\nINBOTS_RETRY_SCHEDULE=0.1,0.2\n")
    settings: Settings = load_settings()
    assert settings.stall_seconds == 42.5
    assert settings.retry_schedule == (0.1, 0.2)


def spec_paths() -> list[tuple[str, str]]:
    """Every (method, /v1 path) the HTTP contract names, in order, without duplicates."""
    if not SPEC.exists():
        pytest.skip(f"the product spec is not beside this checkout ({SPEC})")
    found = re.findall(r"`(GET|POST|PUT|DELETE|PATCH) (/v1/[^`\s?]*)", SPEC.read_text())
    return list(dict.fromkeys(found))


def normalise(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "{}", path)


def test_serve_starts_and_prints_the_operator_token_once(tmp_path: Path) -> None:
    with serve(tmp_path) as first:
        assert httpx.get(first.url + "/healthz").status_code == 200
        ready = httpx.get(first.url + "/readyz")
        assert ready.status_code == 200, ready.text
    tokens = TOKEN.findall(first.output)
    assert len(tokens) == 1, first.output
    assert f"Dashboard: {first.url}/" in first.output
    token = tokens[0]
    assert len(token) - len("ops_") >= 43

    with serve(tmp_path) as second:
        response = httpx.get(
            second.url + "/v1/agents", headers={"Authorization": f"Bearer {token}"}
        )
        assert response.status_code == 200, response.text
        assert response.json() == {"items": []}
    assert TOKEN.findall(second.output) == [], second.output
    assert token not in second.output


def test_serve_token_from_the_environment_works_and_is_not_printed(tmp_path: Path) -> None:
    token = "ops_" + secrets.token_urlsafe(32)
    assert len(token) - 4 == 43
    with serve(tmp_path, INBOTS_OPERATOR_TOKEN=token) as served:
        headers = {"Authorization": f"Bearer {token}"}
        created = httpx.post(served.url + "/v1/agents", headers=headers, json={"name": "alpha"})
        assert created.status_code == 201, created.text
        listed = httpx.get(served.url + "/v1/agents", headers=headers)
        assert [a["username"] for a in listed.json()["items"]] == ["alpha"]
        wrong = httpx.get(
            served.url + "/v1/agents", headers={"Authorization": f"Bearer {token[:-1]}y"}
        )
        assert wrong.status_code == 401
    assert TOKEN.findall(served.output) == [], served.output


def test_serve_adds_environment_token_to_an_existing_workspace(tmp_path: Path) -> None:
    with serve(tmp_path) as first:
        pass
    (minted,) = TOKEN.findall(first.output)
    extra = "ops_" + secrets.token_urlsafe(32)
    with serve(tmp_path, INBOTS_OPERATOR_TOKEN=extra) as second:
        for number, token in enumerate((minted, extra)):
            response = httpx.post(
                second.url + "/v1/agents",
                headers={"Authorization": f"Bearer {token}"},
                json={"name": f"agent-{number}"},
            )
            assert response.status_code == 201, (token, response.text)
        listed = httpx.get(
            second.url + "/v1/agents", headers={"Authorization": f"Bearer {extra}"}
        ).json()["items"]
        assert len(listed) == 2  # one workspace, reached by both tokens


def test_openapi_lists_every_implemented_v1_path_of_the_contract(tmp_path: Path) -> None:
    token = "ops_" + secrets.token_urlsafe(32)
    # The operator has an inbox of its own: its long-poll answers the probe after half a second.
    with serve(tmp_path, INBOTS_OPERATOR_TOKEN=token, INBOTS_WAIT_DEFAULT_SECONDS="0.5") as served:
        document = httpx.get(served.url + "/openapi.json").json()
        documented = {
            (method.upper(), normalise(path))
            for path, operations in document["paths"].items()
            for method in operations
        }
        implemented = []
        missing = []
        headers = {"Authorization": f"Bearer {token}"}
        for method, path in spec_paths():
            concrete = re.sub(r"\{[^}]+\}", "x-probe", path)
            response = httpx.request(method, served.url + concrete, headers=headers, json={})
            generic = response.status_code == 405 or (
                response.status_code == 404
                and "No such endpoint" in response.json()["error"]["message"]
            )
            if generic:
                continue
            implemented.append((method, path))
            if (method, normalise(path)) not in documented:
                missing.append((method, path))
    assert not missing, f"served but not in /openapi.json: {missing}"
    send = document["paths"]["/v1/threads/{thread_id}/messages"]["post"]["responses"]
    assert {"200", "201"} <= set(send), "a send answers 201, and 200 for a repeated key"
    # What exists today must at least be found, so the probe above is not vacuous.
    core = {
        ("POST", "/v1/agents"),
        ("GET", "/v1/agents"),
        ("GET", "/v1/agents/{id_or_username}"),
        ("POST", "/v1/agents/{id}/archive"),
        ("POST", "/v1/threads"),
        ("GET", "/v1/threads"),
        ("GET", "/v1/threads/{id}"),
        ("POST", "/v1/threads/{id}/participants"),
        ("GET", "/v1/threads/{id}/messages"),
        ("POST", "/v1/threads/{id}/messages"),
        ("POST", "/v1/threads/{id}/close-request"),
        ("POST", "/v1/threads/{id}/close"),
        ("POST", "/v1/threads/{id}/close/dismiss"),
        ("GET", "/v1/deliveries"),
        ("GET", "/v1/deliveries/{id}"),
        ("GET", "/v1/operator/inbox"),
        ("GET", "/v1/me"),
        ("GET", "/v1/directory"),
        ("GET", "/v1/inbox"),
        ("GET", "/v1/inbox/wait"),
        ("GET", "/v1/messages/{message_or_delivery_id}"),
        ("POST", "/v1/deliveries/{id}/received"),
        ("POST", "/v1/acks"),
    }
    assert core <= set(implemented), core - set(implemented)
    assert {(m, normalise(p)) for m, p in core} <= documented


def test_version_prints_the_packages_version(tmp_path: Path) -> None:
    from inbots import __version__

    done = subprocess.run(
        [inbots_executable(), "--version"],
        env=clean_env(tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, f"inbots {__version__}\n", "")
