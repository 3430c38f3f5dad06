"""propagator/tenancy/podsecurity.py against Pod Security Admission itself.

The oracle is ``k8s-semantics`` (hack/tools/k8s-semantics, built by hack/testbin.sh), which
evaluates a pod with the ``k8s.io/pod-security-admission`` module pinned in
hack/tools/go.mod at its latest policy version, as a member's admission does for a namespace
labelled ``pod-security.kubernetes.io/enforce-version: latest``. The hub's verdict must be
the member's: the same failed checks, with the same reasons and details, at every level.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleet.local import testbin
from propagator.tenancy.podsecurity import LEVELS, Level, violations

Verdict = list[tuple[str, str]]
Ask = Callable[[Level, dict[str, Any]], Verdict]


@pytest.fixture(scope="module")
def admission() -> Iterator[Ask]:
    """Pod Security Admission's verdict on a pod (one question per line, kept running)."""
    oracle = subprocess.Popen(
        [str(testbin.testbin_dir() / "k8s-semantics")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert oracle.stdin is not None
    assert oracle.stdout is not None

    def ask(level: Level, pod: dict[str, Any]) -> Verdict:
        assert oracle.stdin is not None
        assert oracle.stdout is not None
        oracle.stdin.write(json.dumps({"op": "pod-security", "level": level, "pod": pod}) + "\n")
        oracle.stdin.flush()
        answer = json.loads(oracle.stdout.readline())
        assert "error" not in answer, answer
        return sorted((v["reason"], v["detail"]) for v in answer.get("violations") or [])

    yield ask
    oracle.stdin.close()
    oracle.wait(timeout=10)


def ours(level: Level, pod: dict[str, Any]) -> Verdict:
    return sorted((v.reason, v.detail) for v in violations(level, pod["metadata"], pod["spec"]))


# -- generated pods ---------------------------------------------------------------------------

NAMES = st.sampled_from(["app", "side", "init", "debug", "a-b", "x"])
maybe = st.none() | st.booleans()
CAPABILITIES = st.sampled_from(
    ["ALL", "NET_BIND_SERVICE", "CHOWN", "SYS_ADMIN", "NET_RAW", "KILL", "BPF", "SYS_PTRACE"]
)
SECCOMP = st.sampled_from(["RuntimeDefault", "Localhost", "Unconfined", ""])
APPARMOR = st.sampled_from(["RuntimeDefault", "Localhost", "Unconfined", ""])
SELINUX = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["container_t", "spc_t", "container_engine_t", "", "unconfined_t"]),
        "user": st.sampled_from(["", "system_u"]),
        "role": st.sampled_from(["", "system_r"]),
        "level": st.just("s0:c123,c456"),
    },
)
USERS = st.sampled_from([0, 1000, 65534])


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def _profile(types: st.SearchStrategy[str]) -> st.SearchStrategy[dict[str, Any] | None]:
    return st.none() | types.map(
        lambda t: {"type": t, "localhostProfile": "p"} if t == "Localhost" else {"type": t}
    )


container_security = st.builds(
    lambda privileged, escalation, caps, proc, non_root, user, seccomp, armor, selinux, host: (
        _drop_none(
            {
                "privileged": privileged,
                "allowPrivilegeEscalation": escalation,
                "capabilities": caps,
                "procMount": proc,
                "runAsNonRoot": non_root,
                "runAsUser": user,
                "seccompProfile": seccomp,
                "appArmorProfile": armor,
                "seLinuxOptions": selinux,
                "windowsOptions": host,
            }
        )
    ),
    maybe,
    maybe,
    st.none()
    | st.fixed_dictionaries(
        {},
        optional={
            "add": st.lists(CAPABILITIES, max_size=3),
            "drop": st.lists(CAPABILITIES, max_size=2),
        },
    ),
    st.none() | st.sampled_from(["Default", "Unmasked"]),
    maybe,
    st.none() | USERS,
    _profile(SECCOMP),
    _profile(APPARMOR),
    st.none() | SELINUX,
    st.none() | maybe.map(lambda v: None if v is None else {"hostProcess": v}),
)

HOSTS = st.sampled_from(["", "", "10.0.0.1", "localhost"])


def _handler(kind: str, host: str) -> dict[str, Any]:
    action = {"port": 8080, **({"host": host} if host else {})}
    return {kind: action}


handler = st.builds(_handler, st.sampled_from(["httpGet", "tcpSocket"]), HOSTS)

container = st.builds(
    lambda name, security, ports, probes, lifecycle: _drop_none(
        {
            "name": name,
            "image": "registry.example/app:1",
            "securityContext": security,
            "ports": ports or None,
            **probes,
            "lifecycle": lifecycle,
        }
    ),
    NAMES,
    st.none() | container_security,
    st.lists(
        st.fixed_dictionaries(
            {"containerPort": st.sampled_from([80, 8080])},
            optional={"hostPort": st.sampled_from([0, 80, 9090, 10250])},
        ),
        max_size=2,
    ),
    st.fixed_dictionaries(
        {},
        optional={"livenessProbe": handler, "readinessProbe": handler, "startupProbe": handler},
    ),
    st.none() | st.fixed_dictionaries({}, optional={"postStart": handler, "preStop": handler}),
)

VOLUME_SOURCES = {
    "emptyDir": {},
    "configMap": {"name": "c"},
    "secret": {"secretName": "s"},
    "projected": {"sources": []},
    "downwardAPI": {},
    "persistentVolumeClaim": {"claimName": "data"},
    "ephemeral": {"volumeClaimTemplate": {"spec": {}}},
    "csi": {"driver": "csi.example"},
    "image": {"reference": "registry.example/data:1"},
    "hostPath": {"path": "/"},
    "nfs": {"server": "nfs.example", "path": "/"},
    "iscsi": {"targetPortal": "t", "iqn": "i", "lun": 0},
    "gitRepo": {"repository": "https://git.example/r"},
    "rbd": {"monitors": ["m"], "image": "i"},
    "flexVolume": {"driver": "d"},
    "cephfs": {"monitors": ["m"]},
    "fc": {},
    "azureFile": {"secretName": "s", "shareName": "x"},
}
volume = st.builds(
    lambda name, source: {"name": name, source: VOLUME_SOURCES[source]},
    st.sampled_from(["data", "root", "cache", "v"]),
    st.sampled_from(sorted(VOLUME_SOURCES)),
)
SYSCTLS = st.sampled_from(
    ["kernel.shm_rmid_forced", "net.ipv4.tcp_rmem", "kernel.msgmax", "net.core.somaxconn"]
)

pod_security = st.builds(
    lambda non_root, user, seccomp, armor, selinux, sysctls, host: _drop_none(
        {
            "runAsNonRoot": non_root,
            "runAsUser": user,
            "seccompProfile": seccomp,
            "appArmorProfile": armor,
            "seLinuxOptions": selinux,
            "sysctls": [{"name": n, "value": "1"} for n in sysctls] or None,
            "windowsOptions": host,
        }
    ),
    maybe,
    st.none() | USERS,
    _profile(SECCOMP),
    _profile(APPARMOR),
    st.none() | SELINUX,
    st.lists(SYSCTLS, max_size=2),
    st.none() | maybe.map(lambda v: None if v is None else {"hostProcess": v}),
)

ANNOTATIONS = st.dictionaries(
    st.sampled_from(
        [
            "container.apparmor.security.beta.kubernetes.io/app",
            "container.apparmor.security.beta.kubernetes.io/side",
            "seccomp.security.alpha.kubernetes.io/pod",
            "example.com/other",
        ]
    ),
    st.sampled_from(["runtime/default", "localhost/p", "unconfined", "", 'quote"d\ttab']),
    max_size=2,
)

pods = st.builds(
    lambda annotations, spec: {"metadata": {"annotations": annotations}, "spec": spec},
    ANNOTATIONS,
    st.builds(
        lambda base, inits, containers, ephemeral, volumes, security: _drop_none(
            {
                **base,
                "initContainers": inits or None,
                "containers": containers,
                "ephemeralContainers": ephemeral or None,
                "volumes": volumes or None,
                "securityContext": security,
            }
        ),
        st.fixed_dictionaries(
            {},
            optional={
                "hostNetwork": st.booleans(),
                "hostPID": st.booleans(),
                "hostIPC": st.booleans(),
                "hostUsers": st.booleans(),
                "os": st.sampled_from([{"name": "linux"}, {"name": "windows"}]),
            },
        ),
        st.lists(container, max_size=2),
        st.lists(container, min_size=1, max_size=3),
        st.lists(container, max_size=1),
        st.lists(volume, max_size=3),
        st.none() | pod_security,
    ),
)


# -- every way a pod can ask for the node -------------------------------------------------------

COMPLIANT: dict[str, Any] = {
    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
    "containers": [
        {
            "name": "app",
            "image": "registry.example/app:1",
            "securityContext": {
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]},
            },
        }
    ],
}


def _with(**spec: Any) -> dict[str, Any]:
    return {"metadata": {}, "spec": {**COMPLIANT, **spec}}


def _container(**security: Any) -> list[dict[str, Any]]:
    base = COMPLIANT["containers"][0]
    return [{**base, "securityContext": {**base["securityContext"], **security}}]


def _annotated(annotations: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"annotations": annotations}, "spec": COMPLIANT}


HOSTILE: list[tuple[str, dict[str, Any], Level]] = [
    # (what it asks for, the pod, the least strict level that refuses it)
    ("privileged container", _with(containers=_container(privileged=True)), "baseline"),
    (
        "privileged init container",
        _with(initContainers=_container(privileged=True)),
        "baseline",
    ),
    (
        "privileged ephemeral container",
        _with(ephemeralContainers=_container(privileged=True)),
        "baseline",
    ),
    ("host network", _with(hostNetwork=True), "baseline"),
    ("host PID", _with(hostPID=True), "baseline"),
    ("host IPC", _with(hostIPC=True), "baseline"),
    ("hostPath of /", _with(volumes=[{"name": "root", "hostPath": {"path": "/"}}]), "baseline"),
    (
        "host port",
        _with(containers=[{**_container()[0], "ports": [{"containerPort": 80, "hostPort": 80}]}]),
        "baseline",
    ),
    (
        "host port of an init container",
        _with(initContainers=[{**_container()[0], "ports": [{"containerPort": 1, "hostPort": 1}]}]),
        "baseline",
    ),
    ("SYS_ADMIN", _with(containers=_container(capabilities={"add": ["SYS_ADMIN"]})), "baseline"),
    (
        "NET_RAW (baseline lets default capabilities be added, restricted does not)",
        _with(containers=_container(capabilities={"drop": ["ALL"], "add": ["NET_RAW"]})),
        "baseline",
    ),
    (
        "CHOWN added",
        _with(containers=_container(capabilities={"drop": ["ALL"], "add": ["CHOWN"]})),
        "restricted",
    ),
    ("capabilities not dropped", _with(containers=_container(capabilities={})), "restricted"),
    ("unmasked /proc", _with(containers=_container(procMount="Unmasked")), "baseline"),
    (
        "seccomp Unconfined on the pod",
        _with(securityContext={"runAsNonRoot": True, "seccompProfile": {"type": "Unconfined"}}),
        "baseline",
    ),
    (
        "seccomp Unconfined on a container",
        _with(containers=_container(seccompProfile={"type": "Unconfined"})),
        "baseline",
    ),
    ("no seccomp profile", _with(securityContext={"runAsNonRoot": True}), "restricted"),
    (
        "AppArmor unconfined by field",
        _with(containers=_container(appArmorProfile={"type": "Unconfined"})),
        "baseline",
    ),
    (
        "AppArmor unconfined by annotation",
        _annotated({"container.apparmor.security.beta.kubernetes.io/app": "unconfined"}),
        "baseline",
    ),
    ("SELinux spc_t", _with(containers=_container(seLinuxOptions={"type": "spc_t"})), "baseline"),
    (
        "SELinux user on the pod",
        _with(
            securityContext={
                **COMPLIANT["securityContext"],
                "seLinuxOptions": {"user": "system_u"},
            }
        ),
        "baseline",
    ),
    (
        "unsafe sysctl",
        _with(
            securityContext={
                **COMPLIANT["securityContext"],
                "sysctls": [{"name": "kernel.core_pattern", "value": "|/x"}],
            }
        ),
        "baseline",
    ),
    (
        "Windows host process",
        _with(containers=_container(windowsOptions={"hostProcess": True})),
        "baseline",
    ),
    (
        "probe to another host",
        _with(
            containers=[
                {**_container()[0], "livenessProbe": {"httpGet": {"host": "10.0.0.1", "port": 1}}}
            ]
        ),
        "baseline",
    ),
    (
        "lifecycle hook to another host",
        _with(
            containers=[
                {
                    **_container()[0],
                    "lifecycle": {
                        "preStop": {"tcpSocket": {"host": "169.254.169.254", "port": 80}}
                    },
                }
            ]
        ),
        "baseline",
    ),
    (
        "privilege escalation",
        _with(containers=_container(allowPrivilegeEscalation=True)),
        "restricted",
    ),
    ("runs as root", _with(containers=_container(runAsUser=0)), "restricted"),
    ("runAsNonRoot false", _with(containers=_container(runAsNonRoot=False)), "restricted"),
    (
        "NFS volume",
        _with(volumes=[{"name": "n", "nfs": {"server": "nfs.example", "path": "/"}}]),
        "restricted",
    ),
    (
        "gitRepo volume",
        _with(volumes=[{"name": "g", "gitRepo": {"repository": "https://git.example/r"}}]),
        "restricted",
    ),
]


@pytest.mark.parametrize(("case", "pod", "refused_from"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_every_way_to_ask_for_the_node_is_refused_as_admission_refuses_it(
    admission: Ask, case: str, pod: dict[str, Any], refused_from: Level
) -> None:
    for level in LEVELS:
        verdict = ours(level, pod)
        assert verdict == admission(level, pod), level
        refused = LEVELS.index(level) >= LEVELS.index(refused_from)
        assert bool(verdict) == refused, (level, verdict)


def test_a_compliant_pod_passes_every_level(admission: Ask) -> None:
    pod = {"metadata": {}, "spec": COMPLIANT}
    for level in LEVELS:
        assert ours(level, pod) == admission(level, pod) == []


def test_a_user_namespace_relaxes_what_admission_relaxes(admission: Ask) -> None:
    """hostUsers: false makes the pod's root not the node's: restricted then allows root
    users, but never an unmasked /proc."""
    pod = _with(hostUsers=False, containers=_container(runAsUser=0, procMount="Unmasked"))
    assert ours("baseline", pod) == admission("baseline", pod) == []
    assert [r for r, _ in ours("restricted", pod)] == ["procMount"]


def test_wrongly_typed_fields_do_not_crash_the_check() -> None:
    """The member's API server refuses such an object whole; the hub must not fail on it."""
    spec = {
        "containers": "app",
        "initContainers": [1, None, {"securityContext": "privileged"}],
        "volumes": {"a": 1},
        "securityContext": [],
        "hostPID": "true",
    }
    for level in LEVELS:
        violations(level, {"annotations": []}, spec)


def _near(base: dict[str, Any], security: dict[str, Any], volumes: list[Any]) -> dict[str, Any]:
    """A compliant pod with one generated change or a few: the checks' allowed side."""
    container = COMPLIANT["containers"][0]
    merged = {**container["securityContext"], **security}
    spec = {**COMPLIANT, **base, "containers": [{**container, "securityContext": merged}]}
    return {"metadata": {}, "spec": {**spec, **({"volumes": volumes} if volumes else {})}}


near_compliant = st.builds(
    _near,
    st.fixed_dictionaries(
        {},
        optional={
            "hostUsers": st.booleans(),
            "os": st.sampled_from([{"name": "linux"}, {"name": "windows"}]),
        },
    ),
    st.fixed_dictionaries(
        {},
        optional={
            "runAsUser": USERS,
            "procMount": st.sampled_from(["Default", "Unmasked"]),
            "capabilities": st.fixed_dictionaries(
                {"drop": st.lists(CAPABILITIES, max_size=2)},
                optional={"add": st.lists(CAPABILITIES, max_size=2)},
            ),
            "seccompProfile": _profile(SECCOMP),
        },
    ),
    st.lists(volume, max_size=1),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pod=pods | near_compliant)
def test_the_hubs_verdict_is_pod_security_admissions_at_every_level(
    admission: Ask, pod: dict[str, Any]
) -> None:
    for level in LEVELS:
        assert ours(level, pod) == admission(level, pod), level
