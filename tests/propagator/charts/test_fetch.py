"""Fetching charts from registries and repositories that answer over real sockets (local
HTTP servers of the test's, some of them hostile): versions resolved, digests checked,
credentials answered and kept to their host, every answer bounded in size and time."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import pytest

from api.charts import ChartSource
from propagator.charts.allowed import Allowed, SourceNotAllowed, parse_sources
from propagator.charts.fetch import ChartFetcher, Credentials, FetchError, Located

Route = Callable[[BaseHTTPRequestHandler], None]


class Server:
    """A local HTTP server answering by path (``routes``), recording each request's path and
    Authorization header."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.seen: list[tuple[str, str | None]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.seen.append((self.path, self.headers.get("Authorization")))
                route = server.routes.get(self.path.split("?")[0])
                if route is None:
                    self.send_error(404)
                    return
                route(self)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.close()


def answer(status: int, body: bytes = b"", **headers: str) -> Route:
    def route(h: BaseHTTPRequestHandler) -> None:
        h.send_response(status)
        for k, v in headers.items():
            h.send_header(k.replace("_", "-"), v)
        if "Content_Length" not in headers:
            h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    return route


def chart_archive(name: str = "web", version: str = "1.2.0") -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        meta = f"apiVersion: v2\nname: {name}\nversion: {version}\n".encode()
        info = tarfile.TarInfo(f"{name}/Chart.yaml")
        info.size = len(meta)
        tar.addfile(info, io.BytesIO(meta))
    return gzip.compress(raw.getvalue())


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def publish(server: Server, tags: list[str], layer: bytes, *, repo: str = "charts/web") -> bytes:
    """An OCI registry of one chart: its tags, a manifest per tag, the layer."""
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "layers": [
                {
                    "mediaType": "application/vnd.cncf.helm.chart.content.v1.tar+gzip",
                    "digest": sha(layer),
                    "size": len(layer),
                }
            ],
        }
    ).encode()
    server.routes[f"/v2/{repo}/tags/list"] = answer(200, json.dumps({"tags": tags}).encode())
    for tag in [*tags, sha(manifest)]:
        server.routes[f"/v2/{repo}/manifests/{tag}"] = answer(200, manifest)
    server.routes[f"/v2/{repo}/blobs/{sha(layer)}"] = answer(200, layer)
    return manifest


def fetcher(*prefixes: str, **options: Any) -> ChartFetcher:
    return ChartFetcher(Allowed(parse_sources(",".join(prefixes))), **options)


def oci(server: Server, **source: Any) -> ChartSource:
    return ChartSource(
        repository=server.base.replace("http://", "oci://") + "/charts", name="web", **source
    )


def run(coro: Callable[[], Any]) -> Any:
    return anyio.run(coro)


def test_a_range_resolves_to_the_newest_tag_and_the_archive_is_checked(server: Server) -> None:
    layer = chart_archive(version="1.3.0")
    manifest = publish(server, ["1.2.0", "1.3.0", "2.0.0", "latest", "1.4.0-rc.1"], layer)
    f = fetcher(server.base + "/charts")

    async def go() -> tuple[Located, bytes]:
        located = await f.locate(oci(server, version="^1.2"), None)
        return located, await f.archive(oci(server), located, None)

    located, data = run(go)
    assert located.version == "1.3.0"
    assert located.digest == sha(manifest)
    assert data == layer
    # a pinned digest the registry's manifest does not have is refused
    other = "sha256:" + "0" * 64
    server.routes[f"/v2/charts/web/manifests/{other}"] = answer(200, manifest)
    with pytest.raises(FetchError, match="not the pinned"):
        run(lambda: f.locate(oci(server, digest=other), None))


def test_an_archive_whose_content_differs_from_its_digest_is_refused(server: Server) -> None:
    layer = chart_archive()
    publish(server, ["1.2.0"], layer)
    server.routes[f"/v2/charts/web/blobs/{sha(layer)}"] = answer(
        200, chart_archive(version="6.6.6")
    )
    f = fetcher(server.base + "/charts")

    async def go() -> bytes:
        return await f.archive(
            oci(server), await f.locate(oci(server, version="1.2.0"), None), None
        )

    with pytest.raises(FetchError, match=f"has digest .*, not {sha(layer)}") as refused:
        run(go)
    assert not refused.value.retry


def test_a_token_service_is_answered_and_credentials_stay_on_their_host(server: Server) -> None:
    layer = chart_archive()
    publish(server, ["1.2.0"], layer)
    elsewhere = Server()
    try:
        registry_routes = dict(server.routes)
        token_route = answer(200, json.dumps({"token": "tok-123", "expires_in": 300}).encode())
        basic = "Basic " + base64.b64encode(b"robot:pw").decode()

        def guarded(route: Route) -> Route:
            def wrapped(h: BaseHTTPRequestHandler) -> None:
                if h.headers.get("Authorization") != "Bearer tok-123":
                    realm = (
                        f'Bearer realm="{server.base}/token",service="reg",scope="repo:web:pull"'
                    )
                    answer(401, WWW_Authenticate=realm)(h)
                else:
                    route(h)

            return wrapped

        def token(h: BaseHTTPRequestHandler) -> None:
            (token_route if h.headers.get("Authorization") == basic else answer(401))(h)

        server.routes = {path: guarded(route) for path, route in registry_routes.items()}
        server.routes["/token"] = token
        # the blob lives on another (allowed) host, as registries send blobs to storage
        server.routes[f"/v2/charts/web/blobs/{sha(layer)}"] = guarded(
            answer(307, Location=f"{elsewhere.base}/blob")
        )
        elsewhere.routes["/blob"] = answer(200, layer)
        f = fetcher(server.base + "/charts", server.base + "/token", elsewhere.base)

        async def go() -> bytes:
            creds = Credentials("robot", "pw")
            located = await f.locate(oci(server, version="1.2.0"), creds)
            return await f.archive(oci(server), located, creds)

        assert run(go) == layer
        assert ("/token?service=reg&scope=repo%3Aweb%3Apull", basic) in server.seen
        # the token is kept for those credentials only: the same user with another
        # password asks the token service again, and is refused
        with pytest.raises(FetchError, match=r"token service .* answered 401"):
            run(lambda: f.locate(oci(server, version="1.2.0"), Credentials("robot", "guess")))
        assert elsewhere.seen == [("/blob", None)]  # no credential followed the redirect
        # without credentials the registry's refusal is said as such
        with pytest.raises(FetchError, match="answered 401 \\(credentials refused or missing\\)"):
            run(lambda: fetcher(server.base + "/charts").locate(oci(server, version="1.2.0"), None))
    finally:
        elsewhere.close()


def test_a_redirect_or_token_service_outside_the_allowed_sources_is_refused(server: Server) -> None:
    layer = chart_archive()
    publish(server, ["1.2.0"], layer)
    server.routes[f"/v2/charts/web/blobs/{sha(layer)}"] = answer(
        302, Location="http://169.254.169.254/latest/meta-data"
    )
    f = fetcher(server.base + "/charts")

    async def go() -> bytes:
        return await f.archive(
            oci(server), await f.locate(oci(server, version="1.2.0"), None), None
        )

    with pytest.raises(
        SourceNotAllowed, match=r"a redirect to http://169.254.169.254/latest/meta-data"
    ):
        run(go)
    realm = 'Bearer realm="http://169.254.169.254/token"'
    server.routes["/v2/charts/web/manifests/1.2.0"] = answer(401, WWW_Authenticate=realm)
    with pytest.raises(SourceNotAllowed, match="the registry's token service"):
        run(lambda: f.locate(oci(server, version="1.2.0"), None))
    assert all("169.254" not in path for path, _ in server.seen)


def test_answers_that_never_end_or_never_come_are_cut_off(server: Server) -> None:
    def endless(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.end_headers()
        try:
            for _ in range(100_000):  # bounded: the test's own server stops by itself
                h.wfile.write(b"x" * 65536)
        except OSError:
            pass

    def slow(h: BaseHTTPRequestHandler) -> None:
        time.sleep(3)
        answer(200, b"{}")(h)

    server.routes["/v2/charts/web/manifests/1.2.0"] = endless
    with pytest.raises(FetchError, match="the manifest is larger than 1048576 bytes"):
        run(lambda: fetcher(server.base + "/charts").locate(oci(server, version="1.2.0"), None))
    server.routes["/v2/charts/web/manifests/1.2.0"] = answer(200, Content_Length="999999999")
    with pytest.raises(FetchError, match="the manifest has 999999999 bytes; at most 1048576"):
        run(lambda: fetcher(server.base + "/charts").locate(oci(server, version="1.2.0"), None))
    server.routes["/v2/charts/web/manifests/1.2.0"] = slow
    quick = fetcher(server.base + "/charts", timeout_s=0.5)
    with pytest.raises(FetchError, match=r"took longer than 0.5s") as late:
        run(lambda: quick.locate(oci(server, version="1.2.0"), None))
    assert late.value.retry


def test_a_registry_that_does_not_answer_is_worth_retrying() -> None:
    with pytest.raises(FetchError) as refused:
        run(
            lambda: fetcher("http://127.0.0.1:9").locate(
                ChartSource(repository="oci://127.0.0.1:9", name="web", version="1.0.0"), None
            )
        )
    assert refused.value.retry
    assert "ConnectError" in str(refused.value)


def test_a_chart_repository_resolves_from_its_index_and_checks_the_archive(server: Server) -> None:
    old, new = chart_archive(version="1.0.0"), chart_archive(version="1.1.0")
    index = {
        "apiVersion": "v1",
        "entries": {
            "web": [
                {"version": "1.1.0", "urls": ["web-1.1.0.tgz"], "digest": sha(new)[7:]},
                {
                    "version": "1.0.0",
                    "urls": [f"{server.base}/web-1.0.0.tgz"],
                    "digest": sha(old)[7:],
                },
                {"version": "not-a-version", "urls": ["x"]},
            ]
        },
    }
    server.routes["/index.yaml"] = answer(200, json.dumps(index).encode())
    server.routes["/web-1.1.0.tgz"] = answer(200, new)
    server.routes["/web-1.0.0.tgz"] = answer(200, chart_archive(version="9.9.9"))
    f = fetcher(server.base)
    repo = ChartSource(repository=server.base, name="web", version="1.x")

    async def go(source: ChartSource) -> tuple[Located, bytes]:
        located = await f.locate(source, None)
        return located, await f.archive(source, located, None)

    located, data = run(lambda: go(repo))
    assert (located.version, located.digest, data) == ("1.1.0", sha(new), new)
    with pytest.raises(FetchError, match=f"has digest .*, not {sha(old)}"):
        run(lambda: go(repo.model_copy(update={"version": "1.0.0"})))
    with pytest.raises(FetchError, match="it has no chart other"):
        run(lambda: go(repo.model_copy(update={"name": "other"})))
