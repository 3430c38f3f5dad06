"""A broken member never stops the fleet: a running controller with three members, one
member's Secret replaced by each of a battery of broken kubeconfigs in turn. That member
goes NotReady saying why (never quoting a credential), the others keep propagating, and
the controller never exits."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from fleet.local import HUB
from tests.e2e import manifests
from tests.e2e.conftest import FLEET_NAME, Fleet
from tests.e2e.controller import Controller, http_get, running
from tests.e2e.fleet.test_fleet import NAMESPACE, get_mc, ready, wait_mc
from tests.e2e.propagation.test_propagation import ENV, create, delete_ap, update_spec
from tests.e2e.waiting import eventually

BROKEN = "member-3"
TOKEN = "Zq8pL3xW9vB2nK7mT4cR6yH1dF5gJ0sAe"
APP_NAMESPACE = "hostile-members"


@pytest.fixture(scope="module")
def controller(
    fleet: Fleet, joined: list[str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Controller]:
    with running(fleet, tmp_path_factory.mktemp("hostile-members"), ENV) as controller:
        yield controller


def _broken(good: dict[str, Any]) -> list[tuple[str, bytes, str]]:
    """(what, the Secret's kubeconfig, what the member's Ready condition must say)."""

    def but(change: Any) -> bytes:
        doc = yaml.safe_load(yaml.safe_dump(good))
        change(doc)
        return yaml.safe_dump(doc).encode()

    def user(value: Any) -> Any:
        return lambda doc: doc["users"][0].__setitem__("user", value)

    def cluster(key: str, value: Any) -> Any:
        return lambda doc: doc["clusters"][0]["cluster"].__setitem__(key, value)

    junk = base64.b64encode(b"junk, not PEM").decode()
    return [
        (
            "a client certificate that decodes to junk",
            but(user({"client-certificate-data": junk, "client-key-data": junk})),
            "client-certificate-data is not a PEM certificate",
        ),
        (
            "a YAML error on the token's line",
            f"users:\n- name: u\n  user:\n    token: [{TOKEN}\ncontexts: []\n".encode(),
            "not valid YAML at line 5, column 9",
        ),
        ("binary garbage", bytes(range(256)) * 8, "not"),
        (
            "an exec plugin given as a list",
            but(user({"exec": ["steal", TOKEN]})),
            "not a valid kubeconfig (a field of the wrong type",
        ),
        (
            "credentials in the server address",
            but(cluster("server", f"https://admin:{TOKEN}@127.0.0.1:6443")),
            "has credentials in its address",
        ),
        (
            "a CA that does not load",
            but(cluster("certificate-authority-data", junk)),
            "certificate-authority-data does not load",
        ),
        ("contexts that are no list", but(lambda d: d.__setitem__("contexts", "x")), "no contexts"),
        ("almost a Secret's whole size of text", b"a: " + b"x" * 900_000, "not a kubeconfig"),
    ]


def test_each_broken_secret_stops_its_member_only(fleet: Fleet, controller: Controller) -> None:
    for name in ("member-1", "member-2", BROKEN):
        wait_mc(fleet, name, "Ready", lambda m: ready(m) == "True")
    core = fleet.core(HUB)
    secret = f"{BROKEN}-kubeconfig"
    good = core.read_namespaced_secret(secret, NAMESPACE).data["kubeconfig"]
    app = manifests.application(
        "steady",
        APP_NAMESPACE,
        [manifests.config_map("steady", APP_NAMESPACE, turn="0")],
        FLEET_NAME,
        placement={"clusterNames": ["member-1", "member-2"]},
    )
    create(fleet, app)
    try:
        for turn, (what, kubeconfig, says) in enumerate(
            _broken(yaml.safe_load(base64.b64decode(good))), 1
        ):
            data = base64.b64encode(kubeconfig).decode()
            core.patch_namespaced_secret(secret, NAMESPACE, {"data": {"kubeconfig": data}})
            condition = _not_ready_saying(fleet, says, what)
            assert condition["status"] == "False", (what, condition)
            assert TOKEN[:8] not in str(get_mc(fleet, BROKEN)), what
            # Meanwhile the others propagate a change as ever.
            update_spec(
                fleet,
                APP_NAMESPACE,
                "steady",
                lambda spec, t=turn: spec["resources"]["manifests"][0]["data"].update(turn=str(t)),
            )
            for member in ("member-1", "member-2"):
                eventually(partial(_has_turn, fleet, member, str(turn)), f"{what}: on {member}")
            assert controller.proc is not None, what
            assert controller.proc.poll() is None, what
            assert http_get(controller.health_port, "/healthz")[0] == 200, what
    finally:
        core.patch_namespaced_secret(secret, NAMESPACE, {"data": {"kubeconfig": good}})
        delete_ap(fleet, APP_NAMESPACE, "steady")
    wait_mc(fleet, BROKEN, "Ready again", lambda m: ready(m) == "True")
    assert "Traceback" not in controller.log.read_text(errors="replace")


def _not_ready_saying(fleet: Fleet, says: str, what: str) -> dict[str, Any]:
    """The broken member's Ready condition once it says ``says`` about its kubeconfig."""

    def probe() -> dict[str, Any] | None:
        for c in (get_mc(fleet, BROKEN).get("status") or {}).get("conditions") or []:
            if c["type"] == "Ready" and c.get("reason") == "InvalidKubeconfig":
                return dict(c) if says in c.get("message", "") else None
        return None

    return eventually(probe, f"{BROKEN} NotReady saying {says!r} for {what}")


def _has_turn(fleet: Fleet, member: str, turn: str) -> bool:
    try:
        found = fleet.core(member).read_namespaced_config_map("steady", APP_NAMESPACE)
    except k8s.ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return bool((found.data or {}).get("turn") == turn)
