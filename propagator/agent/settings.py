"""The agent's settings: the controller's (its member syncs are the controller's, tuned
the same way) and its own, ``PROPAGATOR_AGENT_*``."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import Field, model_validator

from api.common import DNS_LABEL, DNS_SUBDOMAIN_PATTERN
from api.work import pull_name_problem
from propagator.agent.allowlist import Allowlist, AllowlistError
from propagator.settings import Settings

DNS_SUBDOMAIN = re.compile(DNS_SUBDOMAIN_PATTERN)
AGENT_SETTINGS = [
    "agent_cluster",
    "agent_hub_kubeconfig",
    "agent_hub_secret",
    "agent_member_kubeconfig",
    "agent_state_dir",
    "agent_allow_namespaces",
    "agent_allow_kinds",
    "agent_lease_duration_s",
    "agent_token_ttl_s",
    "member_workers",
    "max_concurrency",
    "resync_period_s",
    "requeue_max_delay_s",
    "bind_address",
    "metrics_port",
    "health_port",
    "log_format",
    "log_level",
    "service_account_dir",
]
"""The settings ``propagator agent`` takes as flags."""


def _entries(text: str) -> list[str]:
    return [e.strip() for e in text.split(",") if e.strip()]


class AgentSettings(Settings):
    """The agent's settings (``propagator agent``)."""

    agent_cluster: str = ""
    """The MemberCluster this agent serves (its name on the hub)."""
    agent_hub_kubeconfig: Path | None = None
    """The hub kubeconfig ``propagator fleet join NAME --mode Pull`` printed: the hub's
    address and CA, and a bootstrap token the agent exchanges for its own."""
    agent_hub_secret: str = Field("", max_length=317)
    """Instead of a file: the member's Secret (namespace/name) whose key ``kubeconfig``
    holds that kubeconfig; the agent keeps each new token of its own there too (key
    ``token``), so a restarted pod goes on with it (the agent's chart uses this)."""
    agent_member_kubeconfig: Path | None = None
    """Kubeconfig of the member the agent serves (default: in-cluster, its
    ServiceAccount)."""
    agent_state_dir: Path = Path("/var/lib/propagator-agent")
    """Where the agent keeps its current hub token (readable by it only)."""
    agent_allow_namespaces: str = Field("", max_length=8192)
    """Member namespaces (comma-separated) the agent may write in, and the only ones its
    caches watch (empty: any, the whole cluster); a Work with an object elsewhere, or a
    cluster-scoped one, is refused whole."""
    agent_allow_kinds: str = Field("", max_length=8192)
    """Kinds (comma-separated Kind for the core group, Kind.group otherwise, e.g.
    ConfigMap,Deployment.apps) the agent may write (empty: any); a Work with another kind
    is refused whole."""
    agent_lease_duration_s: int = Field(40, ge=10, le=300)
    """Seconds the hub waits for a heartbeat before it takes the member as not ready (the
    agent renews its Lease every quarter of this)."""
    agent_token_ttl_s: int = Field(3600, ge=600, le=86400)
    """Lifetime of the hub tokens the agent asks for itself (replaced at half of it)."""

    @model_validator(mode="after")
    def _agent(self) -> AgentSettings:
        if self.agent_cluster and (problem := pull_name_problem(self.agent_cluster)):
            raise ValueError(f"PROPAGATOR_AGENT_CLUSTER / --agent-cluster: {problem}")
        if self.agent_hub_secret and self.hub_secret() is None:
            raise ValueError(
                f"PROPAGATOR_AGENT_HUB_SECRET / --agent-hub-secret: {self.agent_hub_secret!r} "
                "is not NAMESPACE/NAME"
            )
        if self.agent_hub_secret and self.agent_hub_kubeconfig is not None:
            raise ValueError(
                "PROPAGATOR_AGENT_HUB_KUBECONFIG and PROPAGATOR_AGENT_HUB_SECRET are both set: "
                "give the agent's hub kubeconfig one way"
            )
        try:
            self.allowlist()
        except AllowlistError as exc:
            raise ValueError(str(exc)) from None
        return self

    def hub_secret(self) -> tuple[str, str] | None:
        """``agent_hub_secret`` as (namespace, name), if it is one."""
        namespace, _, name = self.agent_hub_secret.partition("/")
        if DNS_LABEL.fullmatch(namespace) and name and DNS_SUBDOMAIN.fullmatch(name):
            return namespace, name
        return None

    def allowlist(self) -> Allowlist:
        """What the member lets the agent write."""
        return Allowlist.of(_entries(self.agent_allow_namespaces), _entries(self.agent_allow_kinds))
