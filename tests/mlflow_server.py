"""A real MLflow tracking server for tests: ``mlflow server`` on 127.0.0.1, its runs in a
PostgreSQL database of the session's server (tests/pg_server.py), its artifacts in a temporary
folder it serves itself, no job runner (``MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false``).

With ``auth=True`` it is MLflow's basic-auth app (``--app-name basic-auth``): an admin whose
password is made here, every other user created by the admin, each with EDIT on every
experiment (``default_permission``), so that a review queue knows who answered.

Started in a session of its own (``setsid``) and stopped by its process id, the group it leads
with it (the server's workers).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from katan import free_port

ADMIN = "admin"


@dataclass
class MlflowServer:
    folder: Path
    url: str
    pid: int
    admin_password: str = ""
    users: dict[str, str] = field(default_factory=dict)

    def env(self, user: str | None = None) -> dict[str, str]:
        """The variables a client of this server sets: its URI and, on an authenticated
        server, ``user``'s credentials (the admin's by default)."""
        out = {"MLFLOW_TRACKING_URI": self.url}
        if self.admin_password:
            name = user or ADMIN
            out["MLFLOW_TRACKING_USERNAME"] = name
            out["MLFLOW_TRACKING_PASSWORD"] = (
                self.admin_password if name == ADMIN else self.users[name]
            )
        return out

    def add_user(self, name: str, password: str = "") -> str:
        """A new user of an authenticated server (made by the admin), with ``password`` or a
        new one; their password."""
        from mlflow.server.auth.client import AuthServiceClient

        password = password or "pw-" + secrets.token_hex(8)
        # The auth client reads the admin's credentials from the environment alone.
        with _environment(self.env()):
            AuthServiceClient(self.url).create_user(name, password)
        self.users[name] = password
        return password


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """``values`` in this process's environment for a block, the variables as they were after."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def start_mlflow_server(backend: str, auth: bool = False, timeout_s: float = 120.0) -> MlflowServer:
    """A server on ``backend`` (a PostgreSQL URL), ready to answer, or an error with its log."""
    folder = Path(tempfile.mkdtemp(prefix="syps-mlflow-", dir="/tmp"))
    port = free_port()
    store = backend.replace("postgresql://", "postgresql+psycopg://", 1)
    cmd = [
        sys.executable, "-m", "mlflow", "server", "--backend-store-uri", store,
        "--artifacts-destination", str(folder / "artifacts"), "--host", "127.0.0.1",
        "--port", str(port), "--workers", "1",
    ]  # fmt: skip
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    for var in ("MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
        env.pop(var, None)
    admin_password = ""
    if auth:
        admin_password = "admin-" + secrets.token_hex(8)
        ini = folder / "auth.ini"
        ini.write_text(
            "[mlflow]\n"
            "default_permission = EDIT\n"
            f"database_uri = sqlite:///{folder / 'auth.db'}\n"
            f"admin_username = {ADMIN}\n"
            f"admin_password = {admin_password}\n"
            "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
        )
        env["MLFLOW_AUTH_CONFIG_PATH"] = str(ini)
        env["MLFLOW_FLASK_SERVER_SECRET_KEY"] = secrets.token_hex(16)
        cmd += ["--app-name", "basic-auth"]
    log = open(folder / "server.log", "w")  # noqa: SIM115 - the server writes it while it runs
    proc = subprocess.Popen(
        cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=folder, start_new_session=True
    )
    server = MlflowServer(folder, f"http://127.0.0.1:{port}", proc.pid, admin_password)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            with urllib.request.urlopen(f"{server.url}/health", timeout=2) as r:
                if r.status == 200:
                    return server
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.3)
    stop_mlflow_server(server, keep=True)
    raise RuntimeError(f"mlflow server did not start:\n{(folder / 'server.log').read_text()}")


def stop_mlflow_server(server: MlflowServer, keep: bool = False) -> None:
    """SIGTERM to the server's process group (its id the server's pid), SIGKILL after 20 s."""
    for sig, wait in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.killpg(server.pid, 0)
            except ProcessLookupError:
                break
            with contextlib.suppress(ChildProcessError):
                os.waitpid(server.pid, os.WNOHANG)
            time.sleep(0.1)
        else:
            continue
        break
    if not keep:
        shutil.rmtree(server.folder, ignore_errors=True)
