"""The service's one settings object, read from the environment (prefix ``BIND_``) or a ``.env`` file."""

from __future__ import annotations

import secrets
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


class Settings(BaseSettings):
    """Configuration shared by the API and the worker.

    With no environment at all the service runs embedded on one machine: SQLite under ``./var`` and a
    Celery transport kept in a SQLite file (kombu's SQLAlchemy transport), so no server is needed.
    ``BIND_DATABASE_URL=postgresql+psycopg://...`` and ``BIND_BROKER_URL=redis://...`` switch to servers.
    """

    model_config = SettingsConfigDict(env_prefix="BIND_", env_file=".env", extra="ignore")

    environment: Literal["development", "production"] = "development"
    """``production``: the API refuses to start on SQLite, without a console secret of its own, with private webhook
    targets allowed, CORS ``*`` or ``/metrics`` without a key (``app/core/production.py``)."""
    database_url: str = "sqlite:///./var/bind.db"
    broker_url: str = "sqla+sqlite:///./var/broker.db"
    result_backend: str | None = None
    """Celery's result backend; unused by default, since the audit row in the database is the truth."""

    data_root: Path | None = None
    """Folder of built-in datasets (``bind_core.data.datasets.available``); ``None`` means none are offered."""

    mlflow_tracking_uri: str | None = None
    """MLflow tracking URI; when set, workers log each succeeded audit there (needs the ``mlflow`` extra)."""
    mlflow_experiment: str = "bind-audit"
    """The MLflow experiment audits are logged under."""

    max_upload_bytes: int = Field(default=50 * 1024 * 1024, gt=0)
    model_artifact_max_bytes: int = Field(default=50 * 1024 * 1024, ge=0)
    """Largest retrained model's weights an audit keeps to take away (each debiasing budget's); a larger one keeps
    only its config and says why (0: none kept)."""
    max_nodes: int = Field(default=2_000_000, gt=0)
    max_edges: int = Field(default=20_000_000, gt=0)
    max_columns: int = Field(default=10_000, gt=0)
    max_unpacked_bytes: int = Field(default=2 * 1024**3, gt=0)
    """Most bytes an uploaded ``.npz`` may unpack to (its arrays' declared sizes summed): zip bombs get a 422."""
    rate_limit_per_minute: int = Field(default=600, ge=0)
    """Requests per minute per API key (a token bucket holding as many); 0 turns rate limiting off."""
    auth_failure_limit_per_minute: int = Field(default=30, ge=0)
    """Failed authentications (missing, unknown or revoked key) per minute per client address; past them every
    request from that address that needs a key gets a 429 until the bucket refills. 0 turns it off."""
    tenant_max_queued: int = Field(default=50, ge=0)
    """Most queued audits one tenant may have; ``POST /v1/audits`` past it is a 429 ``tenant-queue-full`` with
    ``Retry-After``, and the scheduler skips the tenant's slots until the queue shrinks. 0 turns it off."""
    tenant_max_running: int = Field(default=0, ge=0)
    """Most audits of one tenant that run at once (workers leave the rest queued and take other tenants'
    audits); 0: no limit beyond the number of workers. Claiming rotates between tenants either way."""
    schedule_min_interval: int = Field(default=60, ge=1)
    """Shortest time between two runs of a schedule, in seconds (``interval_seconds`` or a cron expression's
    gaps); a schedule below it is a 422 ``schedule-too-frequent``."""
    log_format: Literal["json", "text"] = "json"
    """``json``: one JSON object per log line (with request and audit ids); secrets are redacted either way."""
    metrics_enabled: bool = True
    """Serve Prometheus metrics at ``/metrics`` (the API) and on ``worker_metrics_port`` (each worker)."""
    metrics_key: SecretStr | None = Field(default=None, min_length=16)
    """When set, ``/metrics`` answers only ``Authorization: Bearer <metrics_key>`` (else a 401 problem). Unset:
    ``/metrics`` is open in ``development``; in ``production`` the API refuses to start unless metrics are off."""
    worker_metrics_port: int | None = Field(default=None, ge=0, le=65535)
    """Port of a worker's own Prometheus endpoint (stage durations, outcomes); unset: none."""

    audit_max_memory: int = Field(default=8 * 1024**3, ge=0)
    """Most bytes an audit's estimated peak memory may reach (`bind_core.pipeline.budget`: graph, parameters, the L-BFGS
    history, activations × layers × heads, a dense Hessian when one is formed); past it ``POST /v1/audits`` answers
    422 ``resource-limit`` before queueing (and the worker refuses it before training). 0: no limit."""
    audit_max_work: float = Field(default=1e16, ge=0)
    """Most floating-point operations an audit's estimate may reach (`bind_core.pipeline.budget`); as above. 0: none."""

    retention_days: int = Field(default=0, ge=0)
    """Days finished audits and uploaded graphs are kept: the workers' sweeper erases older ones, with everything
    derived from them, and records each erasure in the audit trail (``app/erasure/retention.py``). 0: forever."""

    # Worker-only settings (read by `worker/`; the API ignores them).
    audit_memory_guard: int = Field(default=16 * 1024**3, ge=0)
    """Most bytes a running audit may add to its worker process: a watchdog samples the resident memory and the
    audit stops at its next progress report once past it, and on the CPU the address space is capped at the
    worker's size plus this much while the audit runs (an allocation past it fails at once); either way the
    audit fails with a ``resource-limit`` problem and the worker takes the next one. 0: no guard."""
    audit_max_seconds: float = Field(default=86_400.0, ge=0)
    """Wall-clock seconds one attempt at an audit may run; past them it stops at its next progress report and
    fails with a ``resource-limit`` problem. 0: no limit."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Torch device of this worker: ``auto`` takes CUDA when ``torch.cuda.is_available()``, else the CPU."""
    torch_threads: int = Field(default=1, ge=0)
    """CPU threads torch may use in a worker (0: torch's default, one per core). One suits the paper's small
    models and keeps a worker from fighting the API and other workers for cores."""
    deletion_threads: int = Field(default=1, ge=1)
    """CPU threads that share out an audit's independent pieces of work: a multi-layer model's deletions, its Hessians'
    rows, the validation's re-optimisations (each runs ``torch_threads`` of its own, so keep their product within the
    cores a worker has); Adam's epochs run on ``torch_threads`` times this. The results do not depend on it; on a
    2-core machine two threads settle a 20,000-node two-layer GCN's deletions about 1.4–1.5 times as fast. A worker
    runs them on threads, not forked processes as ``bind-audit run`` does (its heartbeat thread makes forking unsafe,
    :func:`bind_core.forks.fork_is_safe`), so its check against chance retrains one model at a time."""
    progress_interval: float = Field(default=0.5, ge=0)
    """Least seconds between two progress writes to an audit row."""
    heartbeat_interval: float = Field(default=5.0, gt=0)
    """Seconds between heartbeats of a running audit (written even while a stage runs long)."""
    heartbeat_timeout: float = Field(default=60.0, gt=0)
    """A running audit whose heartbeat is older than this is presumed dead and queued again."""
    queued_timeout: float = Field(default=300.0, gt=0)
    """A queued audit untouched for this long gets its task sent again (lost message, crash before send)."""
    sweep_interval: float = Field(default=15.0, gt=0)
    """Seconds between two sweeps for stuck audits, in each worker."""
    max_attempts: int = Field(default=3, ge=1)
    """An audit whose worker died this many times (killed, out of memory) is failed instead of retried."""
    influence_chunks: int = Field(default=0, ge=0)
    """Split the per-training-node part of each audit's influence estimate into this many chunks, computed by
    every worker that is free (the Hessian solve is done once, by the audit's worker); 0 or 1: off."""
    influence_chunk_min_train: int = Field(default=5000, ge=1)
    """Only audits with at least this many training nodes are split (below it a chunk is not worth a message)."""
    scheduler_interval: float = Field(default=1.0, ge=0)
    """Seconds between two ticks of the scheduler (the thread in each worker, or ``bind-audit scheduler``);
    0 turns a worker's scheduler thread off (a standalone scheduler needs it above 0)."""
    webhook_max_attempts: int = Field(default=8, ge=1)
    """Attempts at one webhook delivery before it is marked failed."""
    webhook_retry_base: float = Field(default=10.0, gt=0)
    """Seconds before the first retry of a failed delivery; doubled for each later one."""
    webhook_retry_max: float = Field(default=3600.0, gt=0)
    """Longest wait between two attempts of a delivery."""
    webhook_timeout: float = Field(default=10.0, gt=0)
    """Seconds a receiver has to answer one delivery."""
    webhook_allow_private: bool = False
    """Allow webhook URLs whose host is or resolves to a private, loopback, link-local, multicast or reserved
    address (checked when subscribing, by the API, and before every delivery, by the worker). Off by default
    (server-side request forgery); a receiver on this machine or the LAN needs it on in the API and workers."""

    console_secret: SecretStr = Field(default_factory=lambda: SecretStr(secrets.token_urlsafe(32)), min_length=32)
    """The key that signs the console's session cookies (HMAC-SHA256). Unset: a random secret made when the
    settings are read, so sessions end when the process restarts and are not shared between API processes; set
    it (32+ characters, the same in every API process) to keep them."""
    console_session_seconds: int = Field(default=8 * 3600, ge=60, le=7 * 86400)
    """How long a console sign-in lasts (the cookie's ``Max-Age`` and the expiry inside its signed value)."""

    cors_origins: Annotated[list[str], NoDecode] = []
    """Origins allowed by CORS (comma-separated in the environment); empty turns CORS off."""

    @property
    def metrics_served(self) -> bool:
        """Whether the API mounts ``/metrics``: enabled, and keyed or in development (the secure default)."""
        return self.metrics_enabled and (self.metrics_key is not None or self.environment == "development")

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _split_origins(cls, value: object) -> object:
        if isinstance(value, str):
            return [v.strip() for v in value.split(",") if v.strip()]
        return value


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings, read once (the app factory and the worker call this)."""
    return Settings()
