"""Secrets never leave the process: the redaction layer, and the places a credential used
to slip through (a YAML error quoting a kubeconfig, userinfo in a URL, a member echoing
our headers, a 5 MB error body, a credential plugin's arguments and environment)."""

from __future__ import annotations

import io
import json
import logging
import sys
from pathlib import Path

import pytest

from kube.connection import KubeConnection
from kube.credentials import run_exec
from kube.errors import ApiError, error_for
from kube.kubeconfig import Credentials, ExecConfig, KubeconfigError, load_kubeconfig
from kube.redact import MAX_MESSAGE, capped, redact
from kube.session import ConnectionOptions
from propagator.conditions import condition
from propagator.observability import logs

TOKEN = "s3cr3t-t0ken-abcdefghijklmnop"
JWT = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2EifQ.c2lnbmF0dXJlLWJ5dGVz"


@pytest.mark.parametrize(
    "text",
    [
        f"Authorization: Bearer {TOKEN}",
        f'{{"headers": {{"Authorization": "Bearer {TOKEN}"}}}}',
        f"token: {TOKEN}",
        f'"token": "{TOKEN}"',
        f"client-key-data: {TOKEN}",
        f"https://admin:{TOKEN}@10.0.0.1:6443/api",
        f"https://{TOKEN}@10.0.0.1:6443/api",
        f"the service account said {JWT} was fine",
        f"-----BEGIN EC PRIVATE KEY-----\n{TOKEN}\n-----END EC PRIVATE KEY-----",
    ],
)
def test_what_looks_like_a_credential_is_redacted(text: str) -> None:
    out = redact(text)
    assert TOKEN not in out
    assert JWT not in out
    assert "[redacted]" in out


def test_prose_and_server_names_are_left_alone() -> None:
    text = "kubeconfig Secret: tokenFile points at a file; server https://10.0.0.1:6443 refused"
    assert redact(text) == text


def test_a_yaml_error_quoting_the_token_line_does_not_show_the_token() -> None:
    broken = f'users:\n- name: u\n  user:\n    token: "{TOKEN}\ncontexts: []\n'
    with pytest.raises(KubeconfigError) as caught:
        load_kubeconfig(broken, source="kubeconfig Secret of MemberCluster m1")
    assert TOKEN not in str(caught.value)


def test_a_member_echoing_our_headers_and_a_huge_body_are_capped_and_redacted() -> None:
    creds = Credentials(server="https://m1:6443", token=TOKEN)
    conn = KubeConnection("m1", creds, ConnectionOptions())
    body = json.dumps({"message": f"bad request; you sent Authorization: Bearer {TOKEN}"})
    error = error_for(conn.name, 400, body.encode(), None, "GET /api")
    assert TOKEN not in str(error)
    for data in (b"x" * 5_000_000, json.dumps({"message": "y" * 5_000_000}).encode()):
        huge = error_for(conn.name, 502, data, None, "GET /api")
        assert len(huge.message) < MAX_MESSAGE + 100


def test_status_conditions_and_logs_are_redacted() -> None:
    cond = condition("Ready", False, "ProbeFailed", f"GET: token: {TOKEN}", 1, None, "now")
    assert TOKEN not in cond["message"]
    stream = io.StringIO()
    for fmt in ("text", "json"):
        logs.configure(fmt, "info")
        handler = logging.getLogger().handlers[0]
        handler.setStream(stream)  # type: ignore[attr-defined]
        logging.getLogger("test").warning("member said Authorization: Bearer %s", TOKEN)
        try:
            raise ValueError(f"password: {TOKEN}")
        except ValueError:
            logging.getLogger("test").exception("failed")
    assert TOKEN not in stream.getvalue()
    assert "[redacted]" in stream.getvalue()


def test_a_credential_plugin_failure_names_the_command_not_its_arguments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROPAGATOR_SECRET_SETTING", TOKEN)
    script = tmp_path / "plugin.py"
    script.write_text(
        "import os, sys\n"
        "leaked = [k for k in os.environ if k.startswith('PROPAGATOR_')]\n"
        "sys.stderr.write(f'env: {leaked}\\n')\n"
        "sys.exit(3)\n"
    )
    spec = ExecConfig(command=sys.executable, args=(str(script), "--token", TOKEN))
    with pytest.raises(ApiError) as caught:
        run_exec(spec, "m1")
    message = str(caught.value)
    assert TOKEN not in message
    assert "exited 3" in message
    assert "env: []" in message  # the plugin did not inherit the controller's settings


def test_a_credential_plugin_token_a_header_cannot_carry_is_refused_unquoted(
    tmp_path: Path,
) -> None:
    script = tmp_path / "plugin.py"
    credential = {"kind": "ExecCredential", "status": {"token": TOKEN + "\nX-Injected: 1"}}
    script.write_text(f"import json\nprint(json.dumps({credential!r}))\n")
    with pytest.raises(ApiError, match="printed a token that cannot be used") as caught:
        run_exec(ExecConfig(command=sys.executable, args=(str(script),)), "m1")
    assert TOKEN not in str(caught.value)


def test_capped_says_how_much_was_cut() -> None:
    assert capped("a" * 10, 4) == "aaaa… (6 more characters)"
    assert capped("short") == "short"


def test_the_printed_forms_of_what_carries_a_credential_never_show_it() -> None:
    """Every object that holds a token prints without it (a log line or a traceback's
    locals may show any of them)."""
    import datetime as dt
    from typing import cast

    from kube.credentials import ExecToken
    from kube.http2 import Sent
    from kube.http2conn import Http2Connection, Stream

    secret = "s3cr3t-" + "x" * 30
    held = ExecToken(secret, (b"cert", secret.encode()), dt.datetime(2030, 1, 1, tzinfo=dt.UTC))
    sent = Sent(
        cast(Http2Connection, None),
        Stream(1),
        [(b"authorization", f"Bearer {secret}".encode())],
        b"",
    )
    for shown in (repr(held), str(held), repr(sent)):
        assert secret not in shown
