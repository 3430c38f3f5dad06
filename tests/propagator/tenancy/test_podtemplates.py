from __future__ import annotations

from typing import Any

from propagator.interpreter.registry import Interpreters
from propagator.tenancy.podtemplates import pod_security_problem

PRIVILEGED_POD = {
    "metadata": {"labels": {"app": "w"}},
    "spec": {
        "hostPID": True,
        "containers": [{"name": "app", "image": "x", "securityContext": {"privileged": True}}],
    },
}


def _pool() -> dict[str, Any]:
    return {
        "apiVersion": "apps.example.com/v1",
        "kind": "WorkerPool",
        "metadata": {"name": "p"},
        "spec": {"workers": 2, "template": PRIVILEGED_POD},
    }


def test_a_custom_workloads_pods_are_checked_where_its_rules_say_they_are() -> None:
    rules = Interpreters()
    # no rule: the member's own Pod Security Admission is left to refuse its pods
    assert pod_security_problem(_pool(), "baseline", rules) is None
    compiled = rules.set(
        {
            "metadata": {"name": "workerpool.apps.example.com"},
            "spec": {
                "target": {"group": "apps.example.com", "kind": "WorkerPool"},
                "replicas": {"count": "self.spec.workers", "podTemplate": "/spec/template"},
            },
        }
    )
    assert compiled.error is None
    problem = pod_security_problem(_pool(), "baseline", rules)
    assert problem is not None
    assert problem.startswith("spec.template breaks Pod Security level baseline")
    assert "privileged" in problem
    assert "hostPID" in problem
