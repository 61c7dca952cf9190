"""Settings: the one place that reads the environment.

Every limit of the product spec is a field here, with the spec's default. Names are read with the
``INBOTS_`` prefix (``INBOTS_MESSAGE_BODY_MAX``) and from a ``.env`` file. Durations are seconds and
accept fractions, so tests shorten timings through settings rather than by patching code.
"""

from __future__ import annotations

import ipaddress
import sys
from functools import lru_cache
from pathlib import Path
from typing import Annotated

import platformdirs
from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from inbots.kit.tokens import OPERATOR_TOKEN_PREFIX, looks_like, weakness

PositiveSeconds = Annotated[float, Field(gt=0)]

# The largest a number setting may be (infinity and NaN are refused outright): a duration is
# added to timestamps, so at most ten years; a count goes into an integer column or a loop.
LONGEST_SECONDS = 10 * 365 * 86_400
LONGEST_DAYS = 10 * 365
LARGEST_COUNT = 2**31 - 1

# An in-flight slot (a lease) outlives the attempt timeout by this much: name resolution and
# signing happen inside the slot too, before the request's own timeout starts.
LEASE_MARGIN_SECONDS = 2.0
# What a send's body may hold beyond the usual cap for each attachment besides its base64
# data: its name, its media type and the JSON around them.
ATTACHMENT_OVERHEAD_BYTES = 2048


def plain_number(value: float) -> str:
    """A number as a person writes it in a message: ``315,360,001``, ``1.5``, never ``3.1e+08``."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,}"


def default_database_url() -> str:
    """The embedded default: a SQLite file in the user's data directory."""
    data_dir = Path(platformdirs.user_data_dir("inbots", appauthor=False))
    return f"sqlite:///{data_dir / 'inbots.db'}"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="INBOTS_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        validate_default=True,
        allow_inf_nan=False,
    )

    # Where things run.
    database_url: str = Field(default_factory=default_database_url)
    broker_url: str = ""
    operator_token: str | None = Field(default=None, repr=False)
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    environment: str = Field(default="development", pattern="^(development|production)$")
    log_level: str = Field(default="INFO", pattern="^(DEBUG|INFO|WARNING|ERROR|CRITICAL)$")
    log_format: str = Field(default="auto", pattern="^(auto|json|text)$")
    forwarded_allow_ips: str = Field(
        default="127.0.0.1",
        description="Comma-separated proxy addresses whose X-Forwarded-* headers are believed.",
    )
    session_secret: str = Field(default="", repr=False)
    metrics_token: str = Field(default="", repr=False)
    metrics_public: bool = False
    worker_metrics_port: int = Field(default=0, ge=0, le=65535)
    # Where `inbots web` keeps its processes' metric files ("" = a temporary directory).
    metrics_dir: str = ""
    db_pool_size: int = Field(default=10, ge=1, le=200)
    # A database that is down or hung answers 503 within these, instead of holding requests.
    db_connect_timeout_seconds: float = Field(default=5.0, ge=2)  # libpq's minimum is 2 s
    db_statement_timeout_seconds: float = Field(default=30.0, ge=0)  # 0: no limit
    db_pool_timeout_seconds: PositiveSeconds = 10.0
    sqlite_busy_timeout_seconds: PositiveSeconds = 30.0

    # Message and thread limits (product.md, "Limits").
    message_body_max: int = Field(default=10_000, ge=1)
    summary_required_over: int = Field(default=200, ge=0)
    summary_max: int = Field(default=200, ge=1)
    summary_shown: int = Field(default=120, ge=2)
    thread_title_max: int = Field(default=200, ge=1)
    thread_goal_max: int = Field(default=2_000, ge=1)
    thread_ref_max: int = Field(default=128, ge=1)
    description_max: int = Field(default=200, ge=1)
    brief_max: int = Field(default=20_000, ge=1)  # an agent's brief (Markdown), in characters
    note_max: int = Field(default=500, ge=1)
    idempotency_key_max: int = Field(default=128, ge=1)
    ack_batch_max: int = Field(default=100, ge=1)
    request_body_max_bytes: int = Field(default=64 * 1024, ge=1024)
    # Attachments of one message (decoded bytes). A send's body may be larger than
    # request_body_max_bytes by what its attachments take in base64 (send_body_max_bytes).
    attachments_max: int = Field(default=5, ge=0)
    attachment_bytes: int = Field(default=1024 * 1024, ge=1)
    attachments_total_bytes: int = Field(default=4 * 1024 * 1024, ge=1)
    http_header_max_bytes: int = Field(default=32 * 1024, ge=4096)
    # The request line and headers must arrive within this (a slow-header attack holds a
    # connection open by dribbling them): then 408 and the connection closes.
    http_header_timeout_seconds: PositiveSeconds = 10.0

    # Operator sign-in and dashboard sessions.
    session_max_age_seconds: PositiveSeconds = 12 * 3600.0
    session_cookie_secure: bool = False
    signin_window_seconds: PositiveSeconds = 900.0
    signin_max_failures_per_address: int = Field(default=10, ge=1)
    signin_max_failures: int = Field(default=100, ge=1)

    # Listings.
    list_default: int = Field(default=50, ge=1)
    list_max: int = Field(default=200, ge=1)
    check_inbox_default: int = Field(default=20, ge=1)
    check_inbox_max: int = Field(default=50, ge=1)
    inbox_bodies_max: int = Field(default=20, ge=1)  # items a page when the page carries bodies
    search_query_max: int = Field(default=200, ge=1)  # characters of a search's q
    search_words_max: int = Field(default=12, ge=1)  # words a search's q may hold
    wait_default_seconds: PositiveSeconds = 30.0
    wait_max_seconds: PositiveSeconds = 60.0
    # The tools /mcp lists: "default" (what an agent uses) or "all" (the account tools list_keys
    # and list_sessions too). A request may ask for either with X-Inbots-Tools (inbots mcp
    # --tools). Every tool answers a call by name whichever is listed.
    mcp_tools: str = Field(default="default", pattern="^(default|all)$")

    # Agent activity.
    active_seconds: PositiveSeconds = 300.0
    new_agent_grace_seconds: PositiveSeconds = 600.0
    last_seen_resolution_seconds: float = Field(default=5.0, ge=0)

    # Enrolment, agent keys and agent sessions (agents-and-governance.md section 3).
    enrollment_uses_max: int = Field(default=1_000, ge=1)
    enrollment_expires_in_default: PositiveSeconds = 86_400.0
    enrollment_expires_in_max: PositiveSeconds = 30 * 86_400.0
    agent_keys_max: int = Field(default=20, ge=1)
    key_label_max: int = Field(default=100, ge=1)
    session_label_max: int = Field(default=64, ge=1, le=200)
    session_active_seconds: PositiveSeconds = 300.0

    # Delivery engine (delivery.md).
    webhook_allow_private: bool = False
    webhook_timeout_seconds: PositiveSeconds = 10.0
    retry_schedule: Annotated[tuple[float, ...], NoDecode] = (1.0, 12.0, 148.0)
    retry_jitter: float = Field(default=0.2, ge=0, lt=1)
    publish_attempts: int = Field(default=3, ge=1)
    publish_lost_seconds: PositiveSeconds = 300.0
    stall_seconds: PositiveSeconds = 900.0
    # A delivery its recipient marked working is not stalled until this passes without a
    # heartbeat (POST /v1/deliveries/{id}/working, mark_working).
    working_stall_seconds: PositiveSeconds = 7200.0
    renotify_interval_seconds: PositiveSeconds = 30.0
    renotify_batch_size: int = Field(default=500, ge=1)
    webhook_max_in_flight_per_url: int = Field(default=4, ge=1)
    # Notifications published together (one message's webhook deliveries, a sweep's batch)
    # travel as one job of up to this many: one task, one claim and a few records between them.
    notify_batch_size: int = Field(default=16, ge=1, le=256)
    # An attempt's claim on its delivery lasts the timeout plus this; a claim that runs out
    # unrecorded belongs to a worker that died (a `worker_lost` attempt). It must cover the
    # in-flight slot's margin and recording the attempt (SQLite may wait its busy timeout).
    webhook_claim_margin_seconds: float = Field(default=30.0, ge=LEASE_MARGIN_SECONDS)
    # An agent's webhook attempts failed in a row before the operator is alerted
    # (agent.webhook_failing, once a streak; inbots.alerts).
    alert_webhook_failures: int = Field(default=5, ge=1)
    # The operator's alerts about one agent's deliveries (delivery.stalled, delivery.failed), and
    # queue.backlog and workers.down while they hold, are raised at most once per this: the first
    # at once, what follows within it counted and told in one alert when it ends.
    alert_interval_seconds: PositiveSeconds = 300.0
    # queue.backlog: the oldest notify job has waited longer than this for a worker.
    backlog_alert_seconds: PositiveSeconds = 300.0
    # workers.down (told by beat itself): no renotify sweep has finished for this long, or for
    # twice the renotify interval if that is longer (a sweep merely due is no sign of anything).
    workers_down_seconds: PositiveSeconds = 120.0
    broker_visibility_timeout_seconds: int = Field(default=3_600, ge=60)

    # Governance (agents-and-governance.md §3). Each cap and the rate limit: 0 turns it off.
    cap_per_recipient: int = Field(default=2_000, ge=0)  # unacknowledged deliveries to one agent
    cap_per_pair: int = Field(default=500, ge=0)  # ... from one sender to one recipient
    rate_limit_per_minute: int = Field(default=120, ge=0)  # messages an agent sends (refill)
    rate_limit_burst: int = Field(default=30, ge=0)  # the bucket's size
    # A message's ttl_seconds bounds. The minimum is lowered only by tests and operators who
    # need short-lived mail to expire quickly.
    ttl_min_seconds: int = Field(default=300, ge=1)
    ttl_max_seconds: int = Field(default=604_800, ge=1)
    # Closed threads older than this many days are deleted by the sweep (0: keep forever),
    # this many threads a transaction.
    retention_days: float = Field(default=0, ge=0)
    retention_batch_size: int = Field(default=500, ge=1)

    @field_validator("retry_schedule", mode="before")
    @classmethod
    def _parse_schedule(cls, value: object) -> object:
        if isinstance(value, str):
            parts = [p.strip() for p in value.split(",") if p.strip()]
            try:
                return tuple(float(p) for p in parts)
            except ValueError:
                raise ValueError("expected seconds separated by commas, like 1,12,148") from None
        return value

    @field_validator("retry_schedule")
    @classmethod
    def _check_schedule(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if any(v <= 0 for v in value):
            raise ValueError("every retry delay must be more than 0 seconds")
        return value

    @field_validator("forwarded_allow_ips")
    @classmethod
    def _check_forwarded_allow_ips(cls, value: str) -> str:
        """``*``, or addresses and networks: uvicorn compares the peer's address with them and
        would take anything else (a host name, a typo) as a literal that never matches, so the
        proxy's headers would be ignored without a word."""
        for item in (part.strip() for part in value.split(",")):
            if item in ("*", ""):  # empty: no proxy is believed
                continue
            try:
                if "/" in item:
                    ipaddress.ip_network(item, strict=False)
                else:
                    ipaddress.ip_address(item)
            except ValueError:
                raise ValueError(
                    f"{item!r} is not an IP address or network: list the proxy's addresses "
                    "(like 10.0.0.5,10.1.0.0/16), comma-separated, or * (host names are not "
                    "looked up)"
                ) from None
        return value

    @field_validator("database_url")
    @classmethod
    def _check_database_url(cls, value: str) -> str:
        scheme = value.split(":", 1)[0].split("+", 1)[0].lower()
        if scheme not in ("sqlite", "postgres", "postgresql"):
            raise ValueError("use a sqlite:/// or postgresql:// URL")
        return value

    @field_validator("broker_url")
    @classmethod
    def _check_broker_url(cls, value: str) -> str:
        # Empty is the embedded default; else Redis, which Celery and the wake-up relay share.
        scheme = value.split(":", 1)[0].lower() if "://" in value else ""
        if value and scheme not in ("redis", "rediss"):
            raise ValueError(
                "use a redis:// or rediss:// URL (Celery's broker and the wake-up relay share "
                "it), or leave it empty for the embedded default"
            )
        return value

    @field_validator("host")
    @classmethod
    def _check_host(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("name an address to listen on, like 127.0.0.1 or 0.0.0.0")
        return value

    @field_validator("operator_token")
    @classmethod
    def _check_operator_token(cls, value: str | None) -> str | None:
        if value in (None, ""):
            return None
        if not looks_like(value, OPERATOR_TOKEN_PREFIX):
            raise ValueError("an operator token is ops_ followed by 32 or more url-safe characters")
        weak = weakness(value, OPERATOR_TOKEN_PREFIX)
        if weak:
            raise ValueError(
                f"too weak to trust ({weak}); it needs 128 bits of randomness: make one with "
                "python -c \"import secrets; print('ops_' + secrets.token_urlsafe(32))\""
                " or leave it unset and use the token Inbots prints"
            )
        return value

    @model_validator(mode="after")
    def _check_ceilings(self) -> Settings:
        # A value past these would overflow a timestamp or a column on first use (a 500, or a
        # crash at start-up): refused here with the setting's name instead.
        for name, value in self:
            if isinstance(value, bool) or not isinstance(value, int | float | tuple):
                continue
            ceiling, unit = LARGEST_COUNT, ""
            if name.endswith("_seconds") or name == "retry_schedule":
                ceiling, unit = LONGEST_SECONDS, " seconds (ten years)"
            elif name.endswith("_days"):
                ceiling, unit = LONGEST_DAYS, " days (ten years)"
            values = value if isinstance(value, tuple) else (value,)
            if any(isinstance(v, int | float) and v > ceiling for v in values):
                raise ValueError(
                    f"{name}: must be at most {ceiling:,}{unit} (got {plain_number(max(values))})"
                )
        return self

    @model_validator(mode="after")
    def _check_relations(self) -> Settings:
        # Each message starts with the setting to change: load_settings names it from there.
        if self.list_default > self.list_max:
            raise ValueError("list_default: must not exceed INBOTS_LIST_MAX")
        if self.check_inbox_default > self.check_inbox_max:
            raise ValueError("check_inbox_default: must not exceed INBOTS_CHECK_INBOX_MAX")
        if self.wait_default_seconds > self.wait_max_seconds:
            raise ValueError("wait_default_seconds: must not exceed INBOTS_WAIT_MAX_SECONDS")
        if self.ttl_min_seconds > self.ttl_max_seconds:
            raise ValueError("ttl_min_seconds: must not exceed INBOTS_TTL_MAX_SECONDS")
        if self.enrollment_expires_in_default > self.enrollment_expires_in_max:
            raise ValueError(
                "enrollment_expires_in_default: must not exceed INBOTS_ENROLLMENT_EXPIRES_IN_MAX"
            )
        if self.summary_shown > self.summary_max:
            raise ValueError("summary_shown: must not exceed INBOTS_SUMMARY_MAX")
        if self.metrics_public and self.metrics_token:
            raise ValueError(
                "metrics_public: /metrics cannot be both open and guarded by"
                " INBOTS_METRICS_TOKEN; unset one of them"
            )
        if self.signin_max_failures_per_address > self.signin_max_failures:
            raise ValueError(
                "signin_max_failures_per_address: must not exceed INBOTS_SIGNIN_MAX_FAILURES"
            )
        if self.publish_lost_seconds <= self.longest_retry_sequence_seconds:
            raise ValueError(
                "publish_lost_seconds: must be longer than a whole retry sequence "
                f"({self.longest_retry_sequence_seconds:.1f} s with timeouts and jitter)"
            )
        return self

    @property
    def longest_retry_sequence_seconds(self) -> float:
        """Worst case from first try to last answer: every delay +jitter, every try timing out."""
        delays = sum(self.retry_schedule) * (1 + self.retry_jitter)
        return delays + (len(self.retry_schedule) + 1) * self.webhook_timeout_seconds

    @property
    def metrics_access(self) -> str:
        """Who may read ``/metrics``: ``token`` (bearer ``INBOTS_METRICS_TOKEN``), ``open``
        (anyone: development, or production with ``INBOTS_METRICS_PUBLIC``) or ``closed``
        (production with neither: refused until one is set)."""
        if self.metrics_token:
            return "token"
        if self.metrics_public or self.environment != "production":
            return "open"
        return "closed"

    @property
    def workers_down_after_seconds(self) -> float:
        """How long without a finished sweep means no worker takes jobs (``workers.down``)."""
        return max(self.workers_down_seconds, 2 * self.renotify_interval_seconds)

    @property
    def claim_seconds(self) -> float:
        """How long one attempt's claim on its delivery lasts."""
        return self.webhook_timeout_seconds + self.webhook_claim_margin_seconds

    @property
    def inflight_lease_seconds(self) -> float:
        """How long an in-flight slot of a URL lasts unless released: a worker killed mid-attempt
        gives its slots back this long after it took them, whatever the traffic."""
        return self.webhook_timeout_seconds + LEASE_MARGIN_SECONDS

    @property
    def send_body_max_bytes(self) -> int:
        """The body cap of the send routes (``POST /v1/messages``, ``POST
        /v1/threads/{id}/messages``, ``POST /mcp``): the usual cap, plus the base64 of as many
        attachments of the largest size as a message may carry, and 2 KiB each for its name and
        type. (Larger than ``attachments_total_bytes`` allows, so that a send over that total
        gets its answer naming the attachment that crossed it.)"""
        most = self.attachments_max * self.attachment_bytes
        return (
            self.request_body_max_bytes
            + 4 * -(-most // 3)
            + ATTACHMENT_OVERHEAD_BYTES * self.attachments_max
        )

    @property
    def embedded(self) -> bool:
        """No broker configured: deliveries run in-process through the local dispatcher."""
        return not self.broker_url


class SettingsError(Exception):
    """A setting could not be read; ``str()`` is one line naming it."""


def load_settings(**overrides: object) -> Settings:
    """Build settings from the environment, turning validation errors into one clear line."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = err.get("loc") or ()
        message = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
        if loc:
            field = str(loc[0])
        else:  # a rule between settings: the message starts with the one to change
            field, _, message = message.partition(": ")
        raise SettingsError(f"bad setting INBOTS_{field.upper()}: {message}") from None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, for the entry points that are not the CLI (uvicorn's app factory,
    the Celery app): a bad setting ends the process with one line on stderr naming it, exit
    status 2, instead of a traceback."""
    try:
        return load_settings()
    except SettingsError as exc:
        print(f"inbots: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
