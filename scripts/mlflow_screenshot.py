"""Screenshot the MLflow UI: the child runs of the latest pipeline run compared, or one
conversation's trace with its label, for the docs.

    python scripts/mlflow_screenshot.py docs/mlflow-compare.png [--experiment syps] [--port 5055]
    python scripts/mlflow_screenshot.py docs/mlflow-trace.png --trace pushback
    python scripts/mlflow_screenshot.py docs/mlflow-review-queue.png --review-queue

``--trace <protocol>`` opens the trace of one conversation of that protocol's first child in the
latest pipeline run: a flagged follow-up (pushback: an answer that caved) if there is one, else
a later turn, the one with the most messages first. ``--review-queue`` opens the experiment's
review queues page (``syps judge sample --queue NAME`` fills one).

Starts ``mlflow ui`` on 127.0.0.1 over the repo's store (``<repo>/mlruns``, as ``syps compare``
reads it), opens its compare-runs page in headless Chromium and stops the server, by its process
group, when done. A documentation step, not a test: it needs Debian's ``chromium`` package
(``apt-get install chromium``), which setup.sh does not install.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote, urlencode

from syps.core.compare import find_runs
from syps.core.io import InputError, atomic_write
from syps.core.runs import repo_root
from syps.core.tracking import tracking_uri


def compare_url(base: str, run_ids: list[str], experiment_ids: list[str]) -> str:
    """The UI's compare-runs page; MLflow 3 builds the same route (getCompareRunPageRoute):
    ``#/compare-runs?runs=<JSON list>&experiments=<JSON list>``."""

    def js(ids: list[str]) -> str:
        return quote(json.dumps(ids, separators=(",", ":")), safe="")

    return f"{base}/#/compare-runs?runs={js(run_ids)}&experiments={js(experiment_ids)}"


def trace_url(base: str, mlruns: Path, experiment: str, protocol: str) -> tuple[str, str]:
    """The UI's page of one trace of ``protocol`` (see the module docstring), and what it is.
    MLflow 3 links a trace as ``#/experiments/<id>/traces?selectedEvaluationId=<trace id>``."""
    import mlflow

    runs = find_runs(tracking_uri(mlruns), experiment, {}, [], latest=True, protocol=protocol)
    run = sorted(runs, key=lambda r: (r.model, r.dataset))[0]
    client = mlflow.MlflowClient(tracking_uri=tracking_uri(mlruns))
    found = list(
        client.search_traces(
            locations=[run.experiment_id], run_id=run.run_id, max_results=500, include_spans=True
        )
    )
    if not found:
        raise SystemExit(f"error: child run {run.run_id} has no traces (tracking.traces: none?)")

    def rank(t: mlflow.entities.Trace) -> tuple[bool, bool, int]:
        tags = t.info.tags
        sent = (t.data.spans[0].inputs or {}).get("messages", []) if t.data.spans else []
        return (tags.get("syps.flagged") != "true", tags.get("syps.turn", "1") == "1", -len(sent))

    trace = min(found, key=rank)
    tid = trace.info.trace_id
    query = urlencode({"selectedEvaluationId": tid, "traceId": tid})
    name = trace.info.tags.get("mlflow.traceName", "")
    what = f"{run.parent_name}: {run.model}/{run.dataset} trace {tid} ({name})"
    return f"{base}/#/experiments/{run.experiment_id}/traces?{query}", what


def review_queue_url(base: str, mlruns: Path, experiment: str) -> str:
    """The MLflow UI's review queues page of ``experiment``."""
    import mlflow

    found = mlflow.MlflowClient(tracking_uri(mlruns)).get_experiment_by_name(experiment)
    if found is None:
        raise InputError(f"{mlruns}: no experiment {experiment!r}")
    return f"{base}/#/experiments/{found.experiment_id}/review-queue"


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _port_taken(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """End the process group ``proc`` leads (the server and any workers it forked)."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _blank(png: Path) -> bool:
    # A page the SPA never rendered into is one flat colour.
    import matplotlib.image

    return bool(matplotlib.image.imread(png).std() < 0.01)


def screenshot(
    out: Path,
    mlruns: Path,
    experiment: str,
    port: int,
    budget_ms: int,
    window: str,
    trace: str | None = None,
    review_queue: bool = False,
) -> list[str]:
    """Write the screenshot to ``out``; returns what it shows (the runs compared, or the
    trace of ``trace``'s protocol)."""
    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit(
            "error: chromium not found; install Debian's package: apt-get install -y chromium"
        )
    if not (mlruns / "mlflow.db").is_file():
        raise SystemExit(f"error: {mlruns}: no MLflow store (mlflow.db); run dvc repro first")
    if _port_taken(port):
        raise SystemExit(f"error: port {port} on 127.0.0.1 is in use; pass another --port")
    base = f"http://127.0.0.1:{port}"
    try:
        if trace:
            url, what = trace_url(base, mlruns, experiment, trace)
            shown = [what]
        elif review_queue:
            url = review_queue_url(base, mlruns, experiment)
            shown = [f"the review queues of experiment {experiment}"]
        else:
            runs = find_runs(tracking_uri(mlruns), experiment, {}, [], latest=True)
            ids = sorted({r.experiment_id for r in runs})
            url = compare_url(base, [r.run_id for r in runs], ids)
            shown = sorted(f"{r.parent_name}: {r.model}/{r.dataset}" for r in runs)
    except InputError as e:
        raise SystemExit(f"error: {e}") from None
    with tempfile.TemporaryDirectory() as tmp, open(Path(tmp) / "mlflow.log", "wb") as log:
        # cwd is the temp dir so the server leaves no stray files in the repo.
        server = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", tracking_uri(mlruns)]
            + ["--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
            cwd=tmp,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 120
            while not _answers(f"{base}/health"):
                if server.poll() is not None or time.monotonic() > deadline:
                    tail = (Path(tmp) / "mlflow.log").read_text(errors="replace")[-2000:]
                    raise SystemExit(f"error: mlflow ui did not come up on {base}:\n{tail}")
                time.sleep(0.5)
            shot = Path(tmp) / "shot.png"
            output = ""
            if trace:
                _trace_shot(chromium, url, shot, window, budget_ms)
            else:
                output = _page_shot(chromium, url, shot, window, budget_ms, Path(tmp))
        finally:
            _stop(server)
        if not shot.is_file():
            raise SystemExit(f"error: chromium wrote no screenshot:\n{output}")
        if _blank(shot):
            raise SystemExit(
                "error: the screenshot is blank; the page had no time to render: raise --budget"
            )
        # Only a good screenshot replaces the one there.
        atomic_write(out, lambda p: shutil.copyfile(shot, p))
    return shown


def _page_shot(chromium: str, url: str, shot: Path, window: str, budget_ms: int, tmp: Path) -> str:
    """Chromium's own --screenshot of ``url`` after ``budget_ms`` of virtual time; the end of
    what it printed."""
    browser = subprocess.Popen(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic"]
        + ["--no-first-run", "--disable-background-networking"]
        + ["--disable-component-update", "--disable-sync", "--hide-scrollbars"]
        + [f"--user-data-dir={tmp / 'chromium'}", f"--window-size={window}"]
        + [f"--virtual-time-budget={budget_ms}", f"--screenshot={shot}", url],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        raw, _ = browser.communicate(timeout=180)
    finally:
        _stop(browser)
    return raw.decode(errors="replace")[-2000:]


# The trace drawer's assessments pane opens on a click, so the trace page is driven with
# Playwright (the Python package; it drives the system chromium, no browser download).
_ASSESS = (
    "[...document.querySelectorAll('button')]"
    ".filter(b => b.textContent.trim().startsWith('Assess'))"
)


def _trace_shot(chromium: str, url: str, shot: Path, window: str, budget_ms: int) -> None:
    """Open the trace at ``url``, open its assessments pane, and screenshot the page."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        raise SystemExit("error: --trace needs Playwright: pip install playwright") from None
    width, height = (int(x) for x in window.split(","))
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=chromium,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"]
            + ["--disable-background-networking", "--disable-component-update", "--disable-sync"],
        )
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.goto(url)
            page.wait_for_function(f"() => {_ASSESS}.length > 0", timeout=max(budget_ms, 90000))
            page.evaluate(f"() => {_ASSESS}[0].click()")
            page.wait_for_timeout(3000)
            page.screenshot(path=str(shot))
        finally:
            browser.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="PNG to write")
    parser.add_argument("--experiment", default="syps", help="MLflow experiment")
    parser.add_argument("--port", type=int, default=5055, help="port for mlflow ui")
    parser.add_argument(
        "--mlruns", type=Path, default=None, help="MLflow store (default: <repo>/mlruns)"
    )
    parser.add_argument(
        "--budget", type=int, default=15000, help="ms of virtual time the page gets to render"
    )
    parser.add_argument("--window", default="1600,2000", help="browser window WIDTH,HEIGHT")
    parser.add_argument(
        "--trace", metavar="PROTOCOL", help="one trace of this protocol instead of the compare page"
    )
    parser.add_argument(
        "--review-queue", action="store_true", help="the review queues page instead"
    )
    args = parser.parse_args(argv)
    mlruns = args.mlruns or repo_root() / "mlruns"
    shown = screenshot(
        args.out,
        mlruns,
        args.experiment,
        args.port,
        args.budget,
        args.window,
        args.trace,
        args.review_queue,
    )
    page = "trace page of" if args.trace else "page of" if args.review_queue else "compare page of"
    print(f"wrote {args.out}: {page} {', '.join(shown)}")


if __name__ == "__main__":
    main()
