"""One redaction layer for every text that leaves the process: logs, events, status and
metric labels.

The hub holds credentials to every member; an error can carry one back — a member (or a
proxy) echoing request headers, a kubeconfig quoted in a YAML error, a token in a server
URL's userinfo, a credential plugin's arguments. :func:`redact` blanks what looks like a
secret and :func:`capped` bounds what a member can make us store.
"""

from __future__ import annotations

import functools
import re

REDACTED = "[redacted]"
MAX_MESSAGE = 1024
"""Characters of a message kept (member error bodies, plugin output)."""

_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # PEM private keys (any kind), whole
    (
        re.compile(
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(-----END [A-Z ]*PRIVATE KEY-----|$)", re.S
        ),
        REDACTED,
    ),
    # Authorization headers and bearer/basic credentials
    (
        re.compile(r"(?i)(authorization\s*[:=]\s*)(\"?)[^\s\",}]+(?:\s+[^\s\",}]+)?"),
        rf"\1\2{REDACTED}",
    ),
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"), rf"\1 {REDACTED}"),
    # JWTs (service-account and OIDC tokens) wherever they appear
    (re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"), REDACTED),
    # userinfo in URLs
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@:]*(:[^/\s@]*)?@"), rf"\1{REDACTED}@"),
    # YAML or JSON fields that hold secrets: token, password, client-key(-data), secret...
    # (keys as kubeconfigs, ExecCredentials and JSON write them: case-sensitive, so that
    # prose such as "Secret: ..." is left alone)
    (
        re.compile(
            r"([\"']?\b(?:token|id-token|refresh-token|access-token|access_token|password|"
            r"passwd|secret|client-key-data|client-key|clientKeyData|private-key|apiKey|"
            r"api-key)\b[\"']?\s*[:=]\s*)"
            r"(\"[^\"]*\"?|'[^']*'?|[^\s,}\]]+)"
        ),
        rf"\1{REDACTED}",
    ),
]


@functools.lru_cache(maxsize=1024)
def redact(text: str) -> str:
    """``text`` with anything that looks like a credential replaced by ``[redacted]``.
    (Kept for the last thousand texts: every plan redacts its conditions' messages, which
    seldom change, and their six scans each showed in a plan that changes nothing.)"""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def capped(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text`` redacted and cut to ``limit`` characters (saying how much was cut)."""
    total = len(text)
    text = redact(text[: limit * 4])  # a 5 MB body is not scanned whole
    if total <= limit and len(text) <= limit:
        return text
    return f"{text[:limit]}… ({max(total, len(text)) - limit} more characters)"


def unforeseen(exc: BaseException, limit: int = 300) -> str:
    """An error nobody foresaw, as a status or a message may show it: its type and what
    it says, redacted and capped."""
    return capped(f"{type(exc).__name__}: {exc}", limit)
