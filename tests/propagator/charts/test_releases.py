"""An application's charts as chart release objects: what a revision keeps of them (never a
Secret's content), their values files and credentials read from the application's
namespace with clear refusals, and forged releases refused."""

from __future__ import annotations

import base64
from typing import Any

import anyio
import pytest

from api.charts import ChartSource, is_chart_release
from propagator.charts.fetch import Credentials, FetchError
from propagator.charts.releases import MAX_VALUES_BYTES, ChartError, ChartReleases
from propagator.charts.store import Found, Resolved, Who
from tests.fakes import FakeMember

RESOLVED = Resolved("1.2.0", "sha256:" + "a" * 64, "sha256:" + "b" * 64, "2.0", 0.0)


class FakeStore:
    """The store as the releases see it: one resolution, one archive, or a failure."""

    def __init__(self) -> None:
        self.failure: Exception | None = None
        self.asked: list[tuple[Credentials | None, Who]] = []

    async def resolve(self, source: ChartSource, creds: Credentials | None, who: Who) -> Found:
        self.asked.append((creds, who))
        if self.failure is not None:
            raise self.failure
        return Found(RESOLVED)

    async def archive(
        self, source: ChartSource, resolved: Resolved, creds: Credentials | None, who: Who
    ) -> bytes:
        self.asked.append((creds, who))
        return b"archive-bytes"


def hub() -> FakeMember:
    member = FakeMember("hub", namespaces=("shop",))
    member.put(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "db", "namespace": "shop"},
            "data": {"values.yaml": base64.b64encode(b"password: hunter2\n").decode()},
        }
    )
    member.put(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "common", "namespace": "shop"},
            "data": {"values.yaml": "replicaCount: 3\n", "list.yaml": "- 1\n"},
        }
    )
    member.put(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "registry", "namespace": "shop"},
            "data": {
                "username": base64.b64encode(b"robot").decode(),
                "password": base64.b64encode(b"pw").decode(),
            },
        }
    )
    return member


def source(**fields: Any) -> ChartSource:
    return ChartSource.model_validate(
        {"repository": "oci://r.example.com/charts", "name": "web", **fields}
    )


def releases(store: FakeStore, *charts: ChartSource, member: FakeMember | None = None) -> Any:
    return anyio.run(
        ChartReleases(store).releases,  # type: ignore[arg-type]
        list(charts),
        "shop-app",
        "shop",
        member or hub(),
    )


def test_a_release_holds_what_renders_it_and_no_secret_content() -> None:
    store = FakeStore()
    values_from = [{"kind": "ConfigMap", "name": "common"}, {"kind": "Secret", "name": "db"}]
    chart = source(values="a: '{{ cluster.name }}'\n", valuesFrom=values_from, releaseName="web")
    [obj], [resolution] = releases(store, chart)
    assert is_chart_release(obj)
    assert obj["metadata"] == {"name": "web"}
    assert obj["chart"]["version"] == "1.2.0"
    assert obj["chart"]["digest"] == RESOLVED.digest
    assert obj["values"] == "a: '{{ cluster.name }}'\n"
    assert "hunter2" not in str(obj)  # a revision keeps this object: readable by viewers
    assert "archive" not in obj
    assert resolution.release == "web"
    # a change of a values file is a new revision (its digest changes)
    changed = hub()
    changed.objects["v1", "ConfigMap", "shop", "common"]["data"]["values.yaml"] = (
        "replicaCount: 4\n"
    )
    [again], _ = releases(store, chart, member=changed)
    assert again["valuesDigest"] != obj["valuesDigest"]


def test_materialized_releases_get_their_archive_and_values_files() -> None:
    store = FakeStore()
    chart = source(
        valuesFrom=[{"kind": "Secret", "name": "db"}], credentials={"secretName": "registry"}
    )
    [obj], _ = releases(store, chart)
    manifest = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
    out = anyio.run(ChartReleases(store).materialize, [manifest, obj], "shop", hub())  # type: ignore[arg-type]
    assert out[0] is manifest
    assert base64.b64decode(out[1]["archive"]) == b"archive-bytes"
    assert out[1]["valuesFiles"] == ["password: hunter2\n"]
    creds, who = store.asked[-1]
    assert (creds.username if creds else None, who) == ("robot", ("shop", "registry"))


@pytest.mark.parametrize(
    ("fields", "reason", "says"),
    [
        (
            {"valuesFrom": [{"kind": "ConfigMap", "name": "nope"}]},
            "ValuesMissing",
            "it does not exist",
        ),
        (
            {"valuesFrom": [{"kind": "ConfigMap", "name": "common", "key": "other"}]},
            "ValuesMissing",
            "the key is missing",
        ),
        (
            {"valuesFrom": [{"kind": "ConfigMap", "name": "common", "key": "list.yaml"}]},
            "ChartRefused",
            "values must be a YAML map",
        ),
        ({"credentials": {"secretName": "nope"}}, "ChartRefused", "shop/nope does not exist"),
        (
            {"credentials": {"secretName": "db"}},
            "ChartRefused",
            "needs the keys username and password",
        ),
    ],
)
def test_values_and_credentials_that_cannot_be_used_are_refused_saying_why(
    fields: dict[str, Any], reason: str, says: str
) -> None:
    with pytest.raises(ChartError, match=says) as refused:
        releases(FakeStore(), source(**fields))
    assert refused.value.reason == reason
    assert "spec.resources.charts[0] (web)" in str(refused.value)


def test_optional_values_may_be_missing_and_all_values_files_are_bounded() -> None:
    optional = [{"kind": "ConfigMap", "name": "nope", "optional": True}]
    [obj], _ = releases(FakeStore(), source(valuesFrom=optional))
    assert obj["valuesFrom"][0]["optional"] is True
    member = hub()
    member.objects["v1", "ConfigMap", "shop", "common"]["data"]["values.yaml"] = (
        "a: " + "x" * MAX_VALUES_BYTES
    )
    with pytest.raises(ChartError, match=f"values files over {MAX_VALUES_BYTES} bytes"):
        releases(
            FakeStore(), source(valuesFrom=[{"kind": "ConfigMap", "name": "common"}]), member=member
        )


def test_a_registry_failure_is_a_chart_error_retried_only_when_it_may_help() -> None:
    store = FakeStore()
    store.failure = FetchError("r.example.com: ConnectError", retry=True)
    with pytest.raises(ChartError) as failed:
        releases(store, source())
    assert (failed.value.reason, failed.value.retry) == ("ChartUnavailable", True)
    store.failure = FetchError("no version matches '^9'", retry=False)
    with pytest.raises(ChartError) as failed:
        releases(store, source())
    assert (failed.value.reason, failed.value.retry) == ("ChartRefused", False)


def test_a_forged_release_from_a_revision_is_refused() -> None:
    forged = {
        "apiVersion": "propagator.io/v1alpha1",
        "kind": "ChartRelease",
        "metadata": {"name": "web"},
        "chart": {"repository": "file:///etc", "name": "web", "version": "1.0.0"},
        "archive": base64.b64encode(b"tenant bytes").decode(),
    }
    with pytest.raises(ChartError, match="chart release web: not a chart release"):
        anyio.run(ChartReleases(FakeStore()).materialize, [forged], "shop", hub())  # type: ignore[arg-type]
