"""The admission policy that puts Propagator's cleanup finalizer on every new
ApplicationPropagation as the hub's API server creates it.

With it, the controller's first reconcile of an application writes nothing to the hub
before it reaches the members; without it (a hub older than Kubernetes 1.36, or an install
that left it out) the controller adds the finalizer itself, one hub write and one round
trip more per new application. Either way the finalizer holds an application's deletion
until the controller has removed what it propagated, so an application created while no
controller runs waits for one to be deleted.
"""

from __future__ import annotations

from typing import Any

from api.common import GROUP, VERSION

FINALIZER = f"{GROUP}/cleanup"
"""Held on an ApplicationPropagation until its objects are gone from every member."""

POLICY_NAME = "propagator-cleanup-finalizer"
POLICY_API_VERSION = "admissionregistration.k8s.io/v1"
"""Served by default since Kubernetes 1.36."""
PLURALS = {
    "MutatingAdmissionPolicy": "mutatingadmissionpolicies",
    "MutatingAdmissionPolicyBinding": "mutatingadmissionpolicybindings",
}
"""The resource (URL) name of each kind :func:`cleanup_finalizer_policy` returns."""

_ADD = (
    "has(object.metadata.finalizers)"
    f' ? [JSONPatch{{op: "add", path: "/metadata/finalizers/-", value: "{FINALIZER}"}}]'
    f' : [JSONPatch{{op: "add", path: "/metadata/finalizers", value: ["{FINALIZER}"]}}]'
)


def cleanup_finalizer_policy() -> list[dict[str, Any]]:
    """The MutatingAdmissionPolicy and its binding: on CREATE of an
    ApplicationPropagation without :data:`FINALIZER`, add it (after any the request
    carries). A failure of the policy lets the create through unchanged (the controller
    adds the finalizer then)."""
    policy = {
        "apiVersion": POLICY_API_VERSION,
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": POLICY_NAME},
        "spec": {
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [GROUP],
                        "apiVersions": [VERSION],
                        "operations": ["CREATE"],
                        "resources": ["applicationpropagations"],
                    }
                ]
            },
            "matchConditions": [
                {
                    "name": "without-the-cleanup-finalizer",
                    "expression": "!has(object.metadata.finalizers) || "
                    f"!object.metadata.finalizers.exists(f, f == '{FINALIZER}')",
                }
            ],
            "failurePolicy": "Ignore",
            "reinvocationPolicy": "Never",
            "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": _ADD}}],
        },
    }
    binding = {
        "apiVersion": POLICY_API_VERSION,
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": POLICY_NAME},
        "spec": {"policyName": POLICY_NAME},
    }
    return [policy, binding]
