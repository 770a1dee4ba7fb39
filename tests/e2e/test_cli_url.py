"""tcloud with a wrong or missing service URL: a clear message naming the URL, never a traceback.

The URLs a newcomer gets wrong: the service's own address with the hub's ``/services/tacc``
(or the hub's address without it), whose answers are a 404, the hub's HTML page or a redirect to
its login; a port nothing listens on; a URL that is not one. The hub is stood in for by a small
HTTP server that answers like JupyterHub does outside its API (an HTML page, a redirect).
"""

from __future__ import annotations

import http.server
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import BIN, ROOT, free_port, write_task

HINT = "http://HOST:8000/services/tacc under JupyterHub, http://HOST:8765 for the service alone"


def run(args: list[str], url: str | None, token: str = "t", config: Path | None = None,
        cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TACC_URL", "TACC_TOKEN", "COLUMNS")}
    env.update({"TACC_TOKEN": token, "TACC_CONFIG": str(config or "/nonexistent")})
    if url is not None:
        env["TACC_URL"] = url
    return subprocess.run([str(BIN / "tcloud"), *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=60)


def assert_explained(res: subprocess.CompletedProcess[str], *wanted: str) -> None:
    assert res.returncode == 1, res.stdout + res.stderr
    assert "Traceback" not in res.stderr and "JSONDecodeError" not in res.stderr, res.stderr
    assert res.stderr.startswith("error: "), res.stderr
    for text in wanted:
        assert text in res.stderr, res.stderr


class _HubLike(http.server.BaseHTTPRequestHandler):
    """Answers like JupyterHub outside its API: /hub/... gets the hub's HTML page, anything else a redirect."""

    def _answer(self) -> None:
        if self.path.startswith("/hub/"):
            body = b"<!DOCTYPE HTML>\n<html><head><title>JupyterHub</title></head><body>Home</body></html>\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            return
        self.send_response(302)
        self.send_header("Location", "/hub" + self.path)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = do_HEAD = do_PUT = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def hub_like() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _HubLike)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_the_service_alone_with_the_hubs_path_is_explained(service):
    url = service.url + "/services/tacc"
    res = run(["ps"], url, service.token("uma"))
    assert_explained(res, url, "does not answer as the tacc_hub API", "HTTP 404", HINT, "came from TACC_URL")


def test_the_hubs_html_page_is_recognised(service, hub_like, tmp_path):
    res = run(["ps"], hub_like + "/hub")
    assert_explained(res, "an HTML page titled 'JupyterHub'", HINT)
    res = run(["show", "1"], hub_like)  # the hub without /services/tacc: a redirect
    assert_explained(res, f"{hub_like} does not answer as the tacc_hub API", "a redirect to /hub/api/tasks/1", HINT)
    d = write_task(tmp_path / "t", "name: t\ncode: .\nentrypoint: echo hi\n")
    for args in (["submit", str(d)], ["submit", str(d), "--dry-run"], ["logs", "-f", "1"], ["logs", "1"],
                 ["cancel", "1"], ["download", "1", str(tmp_path / "dl")], ["cluster"], ["quota"]):
        assert_explained(run(args, hub_like), "does not answer as the tacc_hub API", HINT)


def test_nothing_listening_names_the_url_and_where_it_came_from(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    assert_explained(run(["ps"], url), f"cannot reach the tacc_hub service at {url}", "connection refused",
                     "came from TACC_URL", HINT)
    assert_explained(run(["--url", url, "logs", "-f", "3"], None), url, "connection refused", "came from --url")
    config = tmp_path / "config.yaml"
    config.write_text(f"url: {url}\ntoken: t\n")
    assert_explained(run(["ps"], None, config=config), url, f"came from `url` in {config}")


def test_a_url_that_is_not_one_is_explained():
    assert_explained(run(["ps"], "127.0.0.1:8765"), "not an http(s) URL", "'127.0.0.1:8765'", HINT)
    assert_explained(run(["ps"], "http://127.0.0.1:87x5"), "'http://127.0.0.1:87x5'", "port")


def test_without_any_url_the_message_says_the_default_was_used(monkeypatch, tmp_path):
    from tacc_hub.cli.settings import DEFAULT_URL, url_origin

    monkeypatch.delenv("TACC_URL", raising=False)
    config = tmp_path / "none.yaml"
    monkeypatch.setenv("TACC_CONFIG", str(config))
    assert url_origin(None) == f"the default ({DEFAULT_URL}: TACC_URL is not set, nor `url` in {config})"
    monkeypatch.setenv("TACC_URL", "http://x:1")
    assert url_origin(None) == "TACC_URL"
