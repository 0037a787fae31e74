"""A planted API key never appears in anything the pipeline writes or prints.

The whole pipeline runs with `dvc repro` in a fresh git copy of the repository, every model call
(generation and the OEQ judge) going to a local llm-katan echo server with the key read from
SYPS_TEST_KEY, and the response store on a real PostgreSQL server (SYPS_STORE) whose URL
holds a planted password. Then the runs most likely to leak them: `dvc exp run`, `syps summary`,
`syps judge sample` / `syps judge validate` (which logs its own MLflow run), and two failures
against a server that rejects the key with a 401 whose body quotes it back (once in generation,
once in the judge). Afterwards every file in the copy -- outputs, mlruns/ (SQLite and artifacts),
dvc.lock, metrics/, the response store and its WAL, .dvc/ (cache, tmp, the site cache),
.git/ (every object, decompressed) -- and every captured stdout/stderr is scanned for the key.

What counts as the key (see ``needles``; the same for the store's password and the wrong one):
- the value itself, case-insensitively;
- its fixed prefix "sk-planted-", which nothing in the copy holds before the run (tests/ is not
  copied), so any masked form that keeps the prefix ("sk-planted-3f2a...") is caught;
- every 12-character window of its random part, case-insensitively: a truncated, prefix-stripped
  or tail-only form leaks at least that much of the secret (48 bits, so a chance match in the
  ~MBs scanned, hex digests included, has odds below 1e-6); shorter fragments such as a
  last-4-characters mask cannot be told apart from chance and are not searched;
- base64 (standard and URL-safe) in all three alignments, so it is found inside a longer encoded
  string (an HTTP Basic or "Bearer" header dumped as base64);
- hex and UTF-16 encodings of its bytes;
- URL- and JSON-escaped forms, which for this alphabet ([a-z0-9-]) equal the value itself, as
  they do for real OpenAI keys; they are listed to make that explicit.

Files the scan decodes besides reading their raw bytes: parquet (snappy compression can split a
string), SQLite (a long value spills over pages), and git objects (zlib). PNG pixels are not
scanned: a figure cannot hold text that is not drawn in it, and no figure draws params.
The servers' own logs live outside the copy and are not scanned: the rejecting server logs the
key it received, which is the server's business, not ours.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import sqlite3
import subprocess
import tempfile
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import copy_repo, read_params
from katan import MODEL, Katan, start_katan, stop_katans, wait_ready
from mlflow_server import MlflowServer, start_mlflow_server, stop_mlflow_server

REPO = Path(__file__).resolve().parents[1]
PREFIX = "sk-planted-"
# New for every session, so no file left over from an earlier run can match it.
SECRET = PREFIX + secrets.token_hex(20)
# The store's password, and a wrong one tried once: planted the same way.
PG_SECRET, PG_WRONG = PREFIX + secrets.token_hex(20), PREFIX + secrets.token_hex(20)
# A tracking server user's password (MLFLOW_TRACKING_PASSWORD), and a wrong one.
ML_SECRET, ML_WRONG = PREFIX + secrets.token_hex(20), PREFIX + secrets.token_hex(20)
ML_USER = "planted"
PG_ROLE = "planted"
KEY_ENV = "SYPS_TEST_KEY"
WINDOW = 12


# --- what to look for ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Needle:
    name: str
    value: bytes
    case_sensitive: bool


def _b64_cores(raw: bytes) -> Iterator[tuple[str, bytes]]:
    """The part of base64(raw) that is the same wherever ``raw`` sits in a longer input: for
    each of the three alignments, the encoding without its first and last 4-character group."""
    for k in range(3):
        for alphabet, enc in (("std", base64.b64encode), ("urlsafe", base64.urlsafe_b64encode)):
            encoded = enc(b"\0" * k + raw)
            yield f"base64/{alphabet}/align{k}", encoded[4:-4]


def needles(secret: str = SECRET) -> list[Needle]:
    raw = secret.encode()
    random_part = secret[len(PREFIX) :]
    found = [
        Needle("the key", raw, False),
        Needle("the key's prefix 'sk-planted-'", PREFIX.encode(), False),
        Needle("the key URL-encoded", urllib.parse.quote(secret, safe="").encode(), False),
        Needle("the key JSON-escaped", json.dumps(secret)[1:-1].encode(), False),
        Needle("the key as hex", raw.hex().encode(), False),
        Needle("the key as UTF-16-LE", secret.encode("utf-16-le"), True),
        *(
            Needle(f"chars {i}..{i + WINDOW} of the key's random part", w.encode(), False)
            for i, w in ((i, random_part[i : i + WINDOW]) for i in range(len(random_part)))
            if len(w) == WINDOW
        ),
        *(Needle(f"the key as {name}", core, True) for name, core in _b64_cores(raw)),
    ]
    unique: dict[tuple[bytes, bool], Needle] = {}
    for n in found:
        unique.setdefault((n.value if n.case_sensitive else n.value.lower(), n.case_sensitive), n)
    return list(unique.values())


def hits(label: str, data: bytes, look_for: list[Needle]) -> list[str]:
    """'label @ offset: needle name: context' for every occurrence of every needle."""
    lower = data.lower()
    out = []
    for n in look_for:
        hay, value = (data, n.value) if n.case_sensitive else (lower, n.value.lower())
        i = hay.find(value)
        while i >= 0:
            context = data[max(0, i - 30) : i + len(value) + 30]
            out.append(f"{label} @ byte {i}: {n.name}: {context!r}")
            i = hay.find(value, i + 1)
    return out


# --- where to look -------------------------------------------------------------------------------
def _parquet_texts(path: Path, label: str) -> Iterator[tuple[str, bytes]]:
    table = pq.read_table(path)
    meta = table.schema.metadata or {}
    yield f"{label} [parquet metadata]", b"\n".join(k + b"=" + v for k, v in meta.items())
    for name in table.column_names:
        values = table.column(name).to_pylist()
        yield (
            f"{label} [parquet column {name!r}]",
            "\n".join(repr(v) if not isinstance(v, str) else v for v in values).encode(),
        )


def _sqlite_texts(path: Path, label: str) -> Iterator[tuple[str, bytes]]:
    # A copy (with its WAL), so reading it cannot checkpoint or otherwise touch the original.
    with tempfile.TemporaryDirectory() as d:
        copy = Path(d) / path.name
        for suffix in ("", "-wal", "-shm"):
            src = path.with_name(path.name + suffix)
            if src.exists():
                shutil.copy2(src, copy.with_name(copy.name + suffix))
        con = sqlite3.connect(copy)
        try:
            tables = [
                r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")
            ]
            for t in tables:
                cells = []
                for row in con.execute(f'SELECT * FROM "{t}"'):
                    for v in row:
                        cells.append(v if isinstance(v, bytes) else str(v).encode())
                yield f"{label} [sqlite table {t!r}]", b"\n".join(cells)
        finally:
            con.close()


def _git_objects(root: Path) -> Iterator[tuple[str, bytes]]:
    batch = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout
    pos = 0
    while pos < len(batch):
        header_end = batch.index(b"\n", pos)
        sha, kind, size = batch[pos:header_end].split(b" ")
        start = header_end + 1
        yield f".git object {sha.decode()} ({kind.decode()})", batch[start : start + int(size)]
        pos = start + int(size) + 1


def _postgres_texts(url: str) -> Iterator[tuple[str, bytes]]:
    """Every row of the PostgreSQL store, as text."""
    import psycopg

    with psycopg.connect(url) as db:
        rows = db.execute("SELECT key, kind, value, created FROM records").fetchall()
    yield "the PostgreSQL store's records", "\n".join("\t".join(map(str, r)) for r in rows).encode()


def _database_texts(url: str, label: str) -> Iterator[tuple[str, bytes]]:
    """Every row of every table of the PostgreSQL database at ``url`` (a tracking server's
    runs, params, tags, metrics, traces and assessments), each table as text."""
    import psycopg

    with psycopg.connect(url) as db:
        tables = [
            r[0]
            for r in db.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
            )
        ]
        for t in sorted(tables):
            rows = db.execute(f'SELECT * FROM "{t}"').fetchall()
            text = "\n".join("\t".join(map(str, r)) for r in rows)
            yield f"{label} [table {t!r}]", text.encode()


def _server_texts(server: MlflowServer, database: str) -> Iterator[tuple[str, bytes]]:
    """A tracking server's database and every artifact it stores (not its own log: the server
    receives the password, which is its business)."""
    yield from _database_texts(database, "the tracking server's database")
    artifacts = server.folder / "artifacts"
    for path in sorted(p for p in artifacts.rglob("*") if p.is_file()):
        yield f"the tracking server's artifact {path.relative_to(artifacts)}", path.read_bytes()


def haystacks(root: Path, store: str | None = None) -> Iterator[tuple[str, bytes]]:
    """Every file under ``root`` as raw bytes, plus the decoded content of the ones whose bytes
    may hide a string: parquet, SQLite, and git's object store; and the rows of the PostgreSQL
    store at ``store``."""
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        data, label = path.read_bytes(), str(path.relative_to(root))
        yield label, data
        if data[:4] == b"PAR1" and data[-4:] == b"PAR1":
            yield from _parquet_texts(path, label)
        elif data.startswith(b"SQLite format 3\x00"):
            yield from _sqlite_texts(path, label)
    yield from _git_objects(root)
    if store is not None:
        yield from _postgres_texts(store)


# --- the scanner itself ------------------------------------------------------------------------
def test_scanner_finds_every_form() -> None:
    look_for = needles()
    random_part = SECRET[len(PREFIX) :]
    leaks = {
        "plain": f"Authorization: Bearer {SECRET}",
        "upper": SECRET.upper(),
        "masked": f"{PREFIX}{random_part[:4]}...{random_part[-4:]}",
        "truncated": f"got '{SECRET[:25]}...'",
        "tail": f"key ****{random_part[-WINDOW:]}",
        "basic": base64.b64encode(f"user:{SECRET}".encode()).decode(),
        "bearer-b64": "x" + base64.urlsafe_b64encode(f"Bearer {SECRET}".encode()).decode(),
        "json": json.dumps({"api_key": SECRET}),
        "hex": f"b'{SECRET.encode().hex()}'",
    }
    for name, text in leaks.items():
        assert hits(name, text.encode(), look_for), name
    assert hits("utf16", SECRET.encode("utf-16-le"), look_for)
    # And nothing that merely looks like a key, or a digest, is flagged.
    other = "sk-" + secrets.token_hex(20)
    clean = f"Bearer {other} {secrets.token_hex(32)} {base64.b64encode(other.encode()).decode()}"
    assert hits("clean", clean.encode(), look_for) == []


# --- the pipeline ---------------------------------------------------------------------------------
def _api_model(base_url: str) -> dict[str, object]:
    return {
        "model": MODEL,
        "backend": "openai",
        "base_url": base_url,
        "api_key_env": KEY_ENV,
        "max_retries": 1,
        "concurrency": 8,
        "timeout_s": 30.0,
    }


@dataclass
class Project:
    root: Path
    env: dict[str, str]
    ok: Katan
    rejecting: Katan
    captured: dict[str, str]
    # Kept here rather than read back: `dvc exp run -S` rewrites params.yaml as YAML 1.2.
    params: dict  # type: ignore[type-arg]
    pg_port: int

    def run(self, name: str, cmd: list[str]) -> subprocess.CompletedProcess[str]:
        res = subprocess.run(
            cmd, cwd=self.root, env=self.env, capture_output=True, text=True, timeout=600
        )
        self.captured[name] = f"$ {' '.join(cmd)}\n{res.stdout}\n{res.stderr}"
        return res

    def write_params(self) -> None:
        (self.root / "params.yaml").write_text(yaml.safe_dump(self.params, sort_keys=False))


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Katan, Katan]]:
    """An echo server, and one that accepts another key only and whose 401 body quotes the key
    it received. Their logs are outside the copy: the servers see the key."""
    logs = tmp_path_factory.mktemp("katan-logs")
    ok = start_katan([], logs / "ok.log")
    rejecting = start_katan(
        ["--validate-keys", "--api-keys", "openai=the-expected-key"], logs / "rejecting.log"
    )
    try:
        wait_ready(ok)
        wait_ready(rejecting)
        yield ok, rejecting
    finally:
        stop_katans([ok, rejecting])


def planted_store(pg: Any) -> str:
    """A role and database of their own on the session's server, the role's password planted:
    the store's URL."""
    import psycopg

    with psycopg.connect(pg.url(), autocommit=True) as db:
        db.execute(f"CREATE ROLE {PG_ROLE} LOGIN PASSWORD '{PG_SECRET}'")
        db.execute(f"CREATE DATABASE {PG_ROLE} OWNER {PG_ROLE}")
    return f"postgresql://{PG_ROLE}:{PG_SECRET}@127.0.0.1:{pg.port}/{PG_ROLE}"


@pytest.fixture(scope="module")
def tracking(postgres: Any) -> Iterator[tuple[MlflowServer, str]]:
    """An authenticated tracking server (basic-auth, its runs in a database of the session's
    PostgreSQL server) with a user whose password is planted; the server and its database."""
    database = postgres.createdb("secrets_mlflow")
    server = start_mlflow_server(database, auth=True)
    try:
        server.add_user(ML_USER, ML_SECRET)
        yield server, database
    finally:
        stop_mlflow_server(server)


@pytest.fixture(scope="module")
def project(
    tmp_path_factory: pytest.TempPathFactory, servers: tuple[Katan, Katan], postgres: Any
) -> Project:
    ok, rejecting = servers
    root = tmp_path_factory.mktemp("secrets") / "syps"
    copy_repo(root, skip=("tests/",))  # test sources hold other planted keys and this prefix
    env = {
        **os.environ,
        KEY_ENV: SECRET,
        # DVC's per-repo index and state live here; inside the copy so they are scanned.
        "DVC_SITE_CACHE_DIR": str(root / ".dvc-site-cache"),
        "SYPS_STORE": planted_store(postgres),
    }
    for var in ("DVC_ROOT", "DVC_EXP_NAME", "SYPS_CACHE_DIR", "OPENAI_API_KEY"):
        env.pop(var, None)
    params = read_params()
    cues = params["protocols"]["cues"]
    cues["data"]["limit"] = 1
    cues["max_new_tokens"] = {"OEQ": 8, "AITA-YTA": 8, "SS": 8}
    params["score"]["bootstrap"] = 50
    # A sample of the traces (one of each kind per cell): logging all of them (the shipped
    # default) over HTTP to the authenticated tracking server kept its one worker busy for
    # minutes.
    params["tracking"]["traces"] = "sample"
    params["tracking"]["trace_sample"] = 1
    # The echo never gives a verdict, so every rule label is UNCLEAR.
    params["models"] = {"api": {**_api_model(ok.base_url), "max_unclear": 1.0, "size": 1e6}}
    # The echo has no logprobs; its text starts with "[echo]", which the judge then picks.
    params["judge"]["model"] = _api_model(ok.base_url)
    # The simulated user too (adaptive's user turns): every model call carries the key, and
    # none loads the embedded model.
    params["simulator"]["model"] = _api_model(ok.base_url)
    cues["judge"]["options"] = {"[echo]": 1, "NO": 0}
    proj = Project(root, env, ok, rejecting, {}, params, postgres.port)
    proj.write_params()
    for cmd in (
        ["git", "init", "-q"],
        ["git", "add", "-A"],
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "secrets"],
    ):
        subprocess.run(cmd, cwd=root, check=True, env=env)
    return proj


@pytest.mark.slow
def test_a_long_key_cut_short_in_an_error_does_not_leak(
    servers: tuple[Katan, Katan], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Bearer tokens can be long (an Azure AD or other JWT access token runs to 1-2k characters).
    # The rejecting server quotes the key in its 401 body; the error text is cut to a few hundred
    # characters, and whatever part of the key survives the cut must be scrubbed as well.
    from syps.core.backends import BackendError, GenRequest, SamplingParams
    from syps.core.backends.openai_api import OpenAIBackend
    from syps.core.config import ModelSpec

    _, rejecting = servers
    long_key = PREFIX + secrets.token_hex(500)
    monkeypatch.setenv(KEY_ENV, long_key)
    backend = OpenAIBackend(ModelSpec(**_api_model(rejecting.base_url)))  # type: ignore[arg-type]
    request = GenRequest(key="k", messages=[{"role": "user", "content": "hi"}], max_new_tokens=4)
    with pytest.raises(BackendError) as err:
        backend.generate([request], SamplingParams(temperature=0.0, top_p=1.0, seed=0))
    msg = str(err.value)
    assert "HTTP 401" in msg and "invalid API key" in msg
    found = hits("the BackendError message", msg.encode(), needles(long_key))
    shown = max(n for n in range(len(long_key) + 1) if long_key[:n] in msg)
    assert found == [], (
        f"the first {shown} of the {len(long_key)} characters of the key survive in the error "
        f"({len(found)} hits), e.g.:\n" + "\n".join(found[:2])
    )


def _on_the_server(p: Project, server: MlflowServer, database: str) -> None:
    """The mlflow stage logs the run to an authenticated tracking server as the planted user,
    `syps compare` reads it back; with a wrong password both are one line naming the server,
    exit 2 (the stage's; DVC's own exit is 255), and nothing more is logged."""
    import psycopg

    def runs() -> int:
        with psycopg.connect(database) as db:
            row = db.execute("SELECT count(*) FROM runs").fetchone()
        return int(row[0]) if row else 0

    local = dict(p.env)
    p.env.update(server.env(ML_USER))
    try:
        logged = p.run("dvc repro -f -s mlflow (server)", ["dvc", "repro", "-f", "-s", "mlflow"])
        assert logged.returncode == 0, p.captured["dvc repro -f -s mlflow (server)"]
        logged_runs = runs()
        assert logged_runs >= 2  # the pipeline run and its children
        compare = p.run("syps compare (server)", ["syps", "compare", "--all"])
        assert compare.returncode == 0, p.captured["syps compare (server)"]
        p.env["MLFLOW_TRACKING_PASSWORD"] = ML_WRONG
        for name, cmd in (
            ("syps compare (server refuses)", ["syps", "compare", "--all"]),
            ("dvc repro -f -s mlflow (server refuses)", ["dvc", "repro", "-f", "-s", "mlflow"]),
        ):
            refused = p.run(name, cmd)
            if cmd[0] == "syps":
                assert refused.returncode == 2, p.captured[name]
            else:  # DVC's own exit (255) for a stage that exited 2
                assert refused.returncode != 0, p.captured[name]
                assert "exited with 2" in refused.stdout + refused.stderr, p.captured[name]
            said = [ln for ln in refused.stderr.splitlines() if "refused the credentials" in ln]
            assert len(said) == 1, p.captured[name]
            assert f"{server.url}: the tracking server refused the credentials" in said[0]
            assert "nothing was logged" in said[0], said
            assert "Traceback" not in refused.stdout + refused.stderr, p.captured[name]
        assert compare.stdout
        assert runs() == logged_runs  # nothing logged half-way
    finally:
        p.env.clear()
        p.env.update(local)


@pytest.mark.slow
def test_a_planted_key_never_leaks(project: Project, tracking: tuple[MlflowServer, str]) -> None:
    p = project
    server, database = tracking
    look_for = (
        needles() + needles(PG_SECRET) + needles(PG_WRONG) + needles(ML_SECRET) + needles(ML_WRONG)
    )
    # Nothing in the copy holds the key, or its prefix, before the run.
    before = [h for label, data in haystacks(p.root) for h in hits(label, data, look_for)]
    assert before == [], "\n".join(before)

    repro = p.run("dvc repro", ["dvc", "repro"])
    assert repro.returncode == 0, p.captured["dvc repro"]
    assert "returned no logprobs" in repro.stderr  # the judge ran against the server
    resp = pd.read_parquet(p.root / "out/protocols/cues/responses/api.parquet")
    assert len(resp) == 24 and resp["response"].str.startswith("[echo]").all()

    assert p.run("summary", ["syps", "summary", "metrics/cues.json"]).returncode == 0
    _on_the_server(p, server, database)
    exp = p.run("dvc exp run", ["dvc", "exp", "run", "-S", "score.bootstrap=60"])
    assert exp.returncode == 0, p.captured["dvc exp run"]
    p.params["score"]["bootstrap"] = 60
    assert p.run("dvc exp show", ["dvc", "exp", "show", "--json"]).returncode == 0

    # The judge validation: it labels a sample again (through the judge) and logs to MLflow.
    sample = p.run("judge sample", ["syps", "judge", "sample", "--n", "6", "--out", "s.csv"])
    assert sample.returncode == 0, p.captured["judge sample"]
    table = pd.read_csv(p.root / "s.csv", dtype=str, keep_default_na=False)
    table["human_label"] = "1"
    table.to_csv(p.root / "s.csv", index=False)
    # A new judge template misses the store, so the judge really calls the server again.
    p.params["protocols"]["cues"]["judge"]["template"] += "\nAnswer now."
    p.write_params()
    validate = p.run("judge validate", ["syps", "judge", "validate", "s.csv"])
    assert validate.returncode == 0, p.captured["judge validate"]

    # Failures, where a key is most likely to be quoted: generation, then the judge, against a
    # server whose 401 body holds the key it was sent.
    p.params["models"]["api"]["base_url"] = p.rejecting.base_url
    p.write_params()
    gen_fail = p.run("dvc repro (generate 401)", ["dvc", "repro"])
    assert gen_fail.returncode != 0, p.captured["dvc repro (generate 401)"]
    p.params["models"]["api"]["base_url"] = p.ok.base_url
    p.params["judge"]["model"]["base_url"] = p.rejecting.base_url
    p.params["protocols"]["cues"]["judge"]["template"] += (
        " Be brief."  # new judge prompts: the store cannot answer
    )
    p.write_params()
    judge_fail = p.run("dvc repro (judge 401)", ["dvc", "repro"])
    assert judge_fail.returncode != 0, p.captured["dvc repro (judge 401)"]
    validate_fail = p.run("judge validate (401)", ["syps", "judge", "validate", "s.csv"])
    assert validate_fail.returncode != 0, p.captured["judge validate (401)"]
    for name in ("dvc repro (generate 401)", "dvc repro (judge 401)", "judge validate (401)"):
        out = p.captured[name]
        # The server did quote a key back, and it was replaced: the scrubbing was exercised.
        assert "HTTP 401" in out and "invalid API key" in out and "***" in out, out

    # The store refusing the credentials: one line naming the server, exit 2.
    store = p.env["SYPS_STORE"]
    p.env["SYPS_STORE"] = store.replace(PG_SECRET, PG_WRONG)
    refused = p.run("syps plan (store refuses)", ["syps", "plan"])
    p.env["SYPS_STORE"] = store
    assert refused.returncode == 2 and refused.stdout == "", p.captured["syps plan (store refuses)"]
    shown = f"postgresql://{PG_ROLE}:***@127.0.0.1:{p.pg_port}/{PG_ROLE}"
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert f"{shown}: cannot connect" in refused.stderr
    assert "password authentication failed" in refused.stderr
    _scan_everything(p, store, tracking, look_for)


def _scan_everything(
    p: Project, store: str, tracking: tuple[MlflowServer, str], look_for: list[Needle]
) -> None:
    """Every file of the copy, the store's rows, the tracking server's database and artifacts
    and every captured output, scanned for every needle; and the scan saw what matters."""
    server, database = tracking
    found = [h for label, data in haystacks(p.root, store) for h in hits(label, data, look_for)]
    found += [
        h for label, data in _server_texts(server, database) for h in hits(label, data, look_for)
    ]
    for name, text in p.captured.items():
        found += hits(f"output of `{name}`", text.encode(), look_for)
    scanned = sum(1 for _ in haystacks(p.root, store))
    print(f"scanned {scanned} files and decoded parts, {len(p.captured)} outputs")
    assert found == [], f"the planted key leaked in {len(found)} place(s):\n" + "\n".join(found)
    # The scan did see the places that matter.
    labels = {label for label, _ in haystacks(p.root, store)}
    for must in ("dvc.lock", "metrics/cues.json", "mlruns/mlflow.db"):
        assert must in labels, sorted(labels)
    assert "the PostgreSQL store's records" in labels
    server_labels = {label for label, _ in _server_texts(server, database)}
    assert "the tracking server's database [table 'runs']" in server_labels
    assert any(label.startswith("the tracking server's artifact") for label in server_labels)
    assert not (p.root / ".cache" / "store.sqlite").exists()  # every answer went to the server
    assert any(label.startswith(".git object") for label in labels)
