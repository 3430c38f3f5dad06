"""Drift is judged on the fields Propagator sets, as the member gave them back."""

from __future__ import annotations

import copy
from typing import Any

from propagator.propagation.drift import fingerprint, in_line, matches, project
from tests.e2e.manifests import config_map, deployment


def _served(desired: dict[str, Any]) -> dict[str, Any]:
    """``desired`` as a member holds it: server fields, defaults and a status added."""
    live = copy.deepcopy(desired)
    live["metadata"].update(resourceVersion="7", uid="u", generation=1, managedFields=[])
    live["spec"]["strategy"] = {"type": "RollingUpdate"}
    live["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = "IfNotPresent"
    live["status"] = {"readyReplicas": 2}
    return live


def test_defaults_status_and_server_metadata_are_not_drift() -> None:
    desired = deployment("web", "shop", "nginx:1.27")
    live = _served(desired)
    assert matches(live, desired)
    recorded = fingerprint(live, desired)
    live["status"] = {"readyReplicas": 0}
    live["metadata"]["resourceVersion"] = "8"
    live["metadata"].setdefault("labels", {})["added-by-someone"] = "x"
    assert in_line(live, desired, recorded)


def test_the_version_the_apply_left_is_in_line_by_its_resource_version() -> None:
    desired = deployment("web", "shop", "nginx:1.27")
    live = _served(desired)
    assert in_line(live, desired, "not-its-fingerprint", version="7")
    edited = copy.deepcopy(live)
    edited["metadata"]["resourceVersion"] = "8"
    edited["spec"]["template"]["spec"]["containers"][0]["image"] = "evil:1"
    assert not in_line(edited, desired, fingerprint(live, desired), version="7")


def test_an_edited_image_a_removed_label_and_edited_data_are_drift() -> None:
    desired = deployment("web", "shop", "nginx:1.27")
    desired["metadata"]["labels"] = {"team": "a"}
    live = _served(desired)
    recorded = fingerprint(live, desired)

    edited = copy.deepcopy(live)
    edited["spec"]["template"]["spec"]["containers"][0]["image"] = "evil:1"
    assert not in_line(edited, desired, recorded)

    unlabelled = copy.deepcopy(live)
    del unlabelled["metadata"]["labels"]["team"]
    assert not in_line(unlabelled, desired, recorded)

    settings = config_map("settings", "shop", mode="a")
    changed = {**config_map("settings", "shop", mode="b"), "metadata": settings["metadata"]}
    assert not in_line(changed, settings, fingerprint(settings, settings))


def test_a_container_added_by_someone_else_is_drift_until_applied_again() -> None:
    desired = deployment("web", "shop", "nginx:1.27")
    live = _served(desired)
    recorded = fingerprint(live, desired)
    live["spec"]["template"]["spec"]["containers"].append({"name": "sidecar", "image": "x"})
    assert not in_line(live, desired, recorded)
    # Applied again, the member keeps the other manager's container: that is the new normal.
    assert in_line(live, desired, fingerprint(live, desired))


def test_a_value_the_server_normalised_is_in_line_once_recorded() -> None:
    desired = config_map("limits", "shop", cpu="1000m")
    live = config_map("limits", "shop", cpu="1")
    assert not matches(live, desired)  # after a restart: one no-op apply
    assert in_line(live, desired, fingerprint(live, desired))


def test_a_missing_object_is_never_in_line() -> None:
    desired = config_map("settings", "shop", mode="a")
    assert not in_line(None, desired, fingerprint(desired, desired))


def test_projection_keeps_only_the_desired_paths() -> None:
    assert project({"a": 1, "b": {"c": 2, "d": 3}}, {"b": {"c": 0}}) == {"b": {"c": 2}}
    assert project({"b": 1}, {"a": 0}) == {"a": {"$absent": True}}
    assert project([1, 2, 3], [0, 0]) == [1, 2, 3]
