"""A Helm chart as a source of an application's objects (``spec.resources.charts``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, field_validator

from api.common import API_VERSION, DNS_LABEL_PATTERN, ObjectName
from api.model import KubeModel
from api.semver import RangeError, parse_range

CHART_REPOSITORY_PATTERN = r"^(oci|https|http)://[A-Za-z0-9.\-\[\]:]+(/[A-Za-z0-9._~\-/]*)?$"
"""A chart repository: ``oci://host[:port]/path`` or ``https://host[:port]/path``; no
user name or password in it (credentials come from a Secret), no query, no fragment."""
CHART_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$"
DIGEST_PATTERN = r"^sha256:[a-f0-9]{64}$"
CHART_RELEASE_KIND = "ChartRelease"
"""The kind of the object that stands for one chart among an application's objects (in
group propagator.io; never applied to a member: it is rendered into the chart's objects)."""
TEMPLATE_ANNOTATION = "propagator.io/chart-template"
"""On each object a chart renders: the chart template it came from."""
MAX_VALUES_CHARS = 256 * 1024
"""Characters of ``values`` (the whole application must fit in one etcd object)."""


class ValuesSource(KubeModel):
    """A values file kept in a ConfigMap or Secret of the application's namespace."""

    kind: Literal["ConfigMap", "Secret"]
    """ConfigMap or Secret."""
    name: ObjectName
    """Its name (in the application's namespace)."""
    key: str = Field(default="values.yaml", min_length=1, max_length=253)
    """The key holding the values (YAML)."""
    optional: bool = False
    """Go on without it when it or its key is missing (otherwise the application waits,
    saying so)."""


class ChartCredentials(KubeModel):
    """Where the registry's user name and password are kept."""

    secret_name: ObjectName
    """A Secret in the application's namespace with the keys ``username`` and ``password``
    (type ``kubernetes.io/basic-auth``, or Opaque)."""


class ChartSource(KubeModel):
    """One Helm chart rendered per cluster (``helm template``) into the objects to
    propagate, after the inline manifests."""

    repository: str = Field(min_length=1, max_length=512, pattern=CHART_REPOSITORY_PATTERN)
    """``oci://registry.example.com/charts`` (an OCI registry; the chart is
    ``<repository>/<name>``) or ``https://charts.example.com`` (a chart repository with an
    ``index.yaml``). The platform's PROPAGATOR_CHART_SOURCES says which may be used."""
    name: str = Field(min_length=1, max_length=128, pattern=CHART_NAME_PATTERN)
    """The chart's name."""
    version: str = Field(default="*", min_length=1, max_length=256)
    """A version (``1.2.3``) or a range (``^1.2``, ``~1.2.3``, ``>=1.2 <2``, ``1.x``,
    ``*``: the newest release); a range resolves to the newest version it admits, shown in
    the status."""
    digest: str | None = Field(default=None, pattern=DIGEST_PATTERN)
    """Pins the chart's content (``sha256:…``, of the OCI manifest or of the repository's
    archive): a chart whose content differs is refused, a moved tag is not followed."""
    values: str = Field(default="", max_length=MAX_VALUES_CHARS)
    """Helm values as YAML; Jinja2 expressions in it are rendered per cluster as in the
    manifests (``{{ cluster.name }}``, ``{{ cluster.labels.region }}``, ``{{ values.x }}``).
    It is given to Helm after ``valuesFrom`` (it wins)."""
    values_from: list[ValuesSource] = Field(default_factory=list, max_length=8)
    """Values files from ConfigMaps and Secrets of the application's namespace, in order
    (a later one wins); not templated."""
    release_name: str | None = Field(default=None, max_length=53, pattern=DNS_LABEL_PATTERN)
    """``.Release.Name`` (default: the application's name)."""
    namespace: str | None = Field(default=None, max_length=63, pattern=DNS_LABEL_PATTERN)
    """``.Release.Namespace`` (default: the application's namespace). Objects the chart
    renders without a namespace go to the application's namespace, as any manifest's do;
    charts that place their objects write ``namespace: {{ .Release.Namespace }}``."""
    include_crds: bool = False
    """Whether the CustomResourceDefinitions in the chart's ``crds/`` are propagated too."""
    credentials: ChartCredentials | None = None
    """The registry's credentials, for a private one."""

    @field_validator("version")
    @classmethod
    def _version(cls, value: str) -> str:
        try:
            parse_range(value)
        except RangeError as exc:
            raise ValueError(f"{value[:100]!r} is not a version or a version range: {exc}") from exc
        return value

    def reference(self) -> str:
        """The chart as Helm names it: ``oci://…/name`` or ``<repository URL> name``."""
        if self.repository.startswith("oci://"):
            return f"{self.repository.rstrip('/')}/{self.name}"
        return f"{self.repository.rstrip('/')} {self.name}"

    def release(self, application: str) -> str:
        """The release name, given or the application's."""
        return self.release_name or application[:53].rstrip("-")


def is_chart_release(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` stands for a chart among an application's objects."""
    return obj.get("apiVersion") == API_VERSION and obj.get("kind") == CHART_RELEASE_KIND
