"""The Pod Security Standards (privileged, baseline, restricted) as Pod Security Admission
checks them at its latest policy version (Kubernetes v1.37): one function per upstream
check, with the same reasons and details, so a verdict given on the hub is the one the
member's admission gives (``tests/propagator/tenancy/test_podsecurity.py`` compares them with the
``k8s.io/pod-security-admission`` module over generated pods).

Pure: pods and pod templates as the plain dictionaries an application renders. A field of
the wrong type counts as absent: the member's API server refuses such an object whole.

Over the size the codebase keeps to: one function per upstream check, side by side with
upstream's own, so a new Kubernetes release's checks are compared in one reading.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Level = Literal["privileged", "baseline", "restricted"]
LEVELS: tuple[Level, ...] = ("privileged", "baseline", "restricted")
"""From the most to the least permissive."""

Check = Callable[[Mapping[str, Any], Mapping[str, Any]], "Violation | None"]
"""check(pod metadata, pod spec)."""


@dataclass(frozen=True)
class Violation:
    """One failed check: its reason (``privileged``) and detail (which container, field
    and value), worded as Pod Security Admission words them."""

    reason: str
    detail: str

    def __str__(self) -> str:
        return f"{self.reason} ({self.detail})"


def violations(
    level: Level, metadata: Mapping[str, Any], spec: Mapping[str, Any]
) -> list[Violation]:
    """Every check of ``level`` the pod (its metadata and spec) fails; empty: allowed."""
    if level == "privileged":
        return []
    checks = BASELINE if level == "baseline" else RESTRICTED
    meta, pod_spec = _map(metadata), _map(spec)
    return [v for check in checks if (v := check(meta, pod_spec)) is not None]


# -- reading the pod as the API server decodes it -----------------------------------------


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _containers(spec: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """Init containers, containers, ephemeral containers: every one the kubelet runs."""
    for field in ("initContainers", "containers", "ephemeralContainers"):
        for container in _list(spec.get(field)):
            yield _map(container)


def _name(container: Mapping[str, Any]) -> str:
    return _str(container.get("name"))


def _security(owner: Mapping[str, Any]) -> Mapping[str, Any]:
    return _map(owner.get("securityContext"))


def _windows(spec: Mapping[str, Any]) -> bool:
    return _map(spec.get("os")).get("name") == "windows"


def _user_namespaced(spec: Mapping[str, Any]) -> bool:
    """``hostUsers: false``: the pod's root is not the node's (relaxes some checks)."""
    return spec.get("hostUsers") is False


# -- wording, as upstream's helpers -------------------------------------------------------


def _plural(singular: str, plural: str, count: int) -> str:
    return singular if count == 1 else plural


def _quoted(items: list[str]) -> str:
    return '"' + '", "'.join(items) + '"' if items else ""


def _containers_named(names: list[str]) -> str:
    return f"{_plural('container', 'containers', len(names))} {_quoted(names)}"


def _go_quote(text: str) -> str:
    """``text`` as Go's ``%q`` writes it."""
    out = ['"']
    escapes = {'"': '\\"', "\\": "\\\\", "\a": "\\a", "\b": "\\b", "\f": "\\f"}
    escapes |= {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}
    for char in text:
        if char in escapes:
            out.append(escapes[char])
        elif char.isprintable():
            out.append(char)
        elif ord(char) < 0x80:
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) < 0x10000:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    out.append('"')
    return "".join(out)


# -- baseline ------------------------------------------------------------------------------

_APPARMOR_ANNOTATION_PREFIX = "container.apparmor.security.beta.kubernetes.io/"


def _app_armor(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Violation | None:
    allowed_types = ("RuntimeDefault", "Localhost")
    setters: list[str] = []
    values: set[str] = set()
    profile = _security(spec).get("appArmorProfile")
    if isinstance(profile, Mapping) and _str(profile.get("type")) not in allowed_types:
        setters.append("pod")
        values.add(_str(profile.get("type")))
    bad = []
    for c in _containers(spec):
        profile = _security(c).get("appArmorProfile")
        if isinstance(profile, Mapping) and _str(profile.get("type")) not in allowed_types:
            bad.append(_name(c))
            values.add(_str(profile.get("type")))
    if bad:
        setters.append(_containers_named(bad))
    annotations = sorted(
        f"{k}={_go_quote(v)}"
        for k, v in _map(meta.get("annotations")).items()
        if isinstance(k, str)
        and k.startswith(_APPARMOR_ANNOTATION_PREFIX)
        and isinstance(v, str)
        and not (v in ("", "runtime/default") or v.startswith("localhost/"))
    )
    shown = sorted(values) + annotations
    if annotations:
        setters.append(_plural("annotation", "annotations", len(annotations)))
    if not setters:
        return None
    return Violation(
        _plural("forbidden AppArmor profile", "forbidden AppArmor profiles", len(shown)),
        f"{' and '.join(setters)} must not set AppArmor profile type to {_quoted(shown)}",
    )


_BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)


def _added(container: Mapping[str, Any]) -> list[str]:
    return [_str(c) for c in _list(_map(_security(container).get("capabilities")).get("add"))]


def _capabilities_baseline(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Violation | None:
    bad, extra = [], set()
    for c in _containers(spec):
        beyond = [cap for cap in _added(c) if cap not in _BASELINE_CAPABILITIES]
        if beyond:
            bad.append(_name(c))
            extra.update(beyond)
    if not bad:
        return None
    return Violation(
        "non-default capabilities",
        f"{_containers_named(bad)} must not include {_quoted(sorted(extra))} in "
        "securityContext.capabilities.add",
    )


def _host_namespaces(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Violation | None:
    found = [f"{f}=true" for f in ("hostNetwork", "hostPID", "hostIPC") if spec.get(f) is True]
    return Violation("host namespaces", ", ".join(found)) if found else None


def _volumes(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [_map(v) for v in _list(spec.get("volumes"))]


def _host_path_volumes(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Violation | None:
    names = [_str(v.get("name")) for v in _volumes(spec) if _present(v.get("hostPath"))]
    if not names:
        return None
    return Violation(
        "hostPath volumes", f"{_plural('volume', 'volumes', len(names))} {_quoted(names)}"
    )


def _present(value: Any) -> bool:
    """A pointer field Go decodes as set: any object (``{}`` too)."""
    return isinstance(value, Mapping)


def _host_ports(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Violation | None:
    bad: list[str] = []
    ports: set[str] = set()
    for c in _containers(spec):
        used = [
            p.get("hostPort")
            for p in map(_map, _list(c.get("ports")))
            if _int(p.get("hostPort")) not in (None, 0)
        ]
        if used:
            bad.append(_name(c))
            ports.update(str(_int(p)) for p in used)
    if not bad:
        return None
    shown = sorted(ports)
    return Violation(
        "hostPort",
        f"{_containers_named(bad)} {_plural('uses', 'use', len(bad))} "
        f"{_plural('hostPort', 'hostPorts', len(shown))} {', '.join(shown)}",
    )


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _hosts(handler: Any) -> list[str]:
    handler = _map(handler)
    return [
        host
        for action in ("httpGet", "tcpSocket")
        if (host := _str(_map(handler.get(action)).get("host")))
    ]


def _probe_hosts(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Violation | None:
    bad, hosts = set(), set()
    for c in _containers(spec):
        lifecycle = _map(c.get("lifecycle"))
        found = [
            *_hosts(c.get("livenessProbe")),
            *_hosts(c.get("readinessProbe")),
            *_hosts(c.get("startupProbe")),
            *_hosts(lifecycle.get("postStart")),
            *_hosts(lifecycle.get("preStop")),
        ]
        if found:
            bad.add(_name(c))
            hosts.update(found)
    if not bad:
        return None
    return Violation(
        "probe or lifecycle host",
        f"{_containers_named(sorted(bad))} {_plural('uses', 'use', len(bad))} "
        f"{_plural('probe or lifecycle host', 'probe or lifecycle hosts', len(hosts))} "
        f"{_quoted(sorted(hosts))}",
    )


def _privileged(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Violation | None:
    bad = [_name(c) for c in _containers(spec) if _security(c).get("privileged") is True]
    if not bad:
        return None
    return Violation(
        "privileged", f"{_containers_named(bad)} must not set securityContext.privileged=true"
    )


def _proc_mount(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Violation | None:
    bad, types = [], set()
    for c in _containers(spec):
        proc = _security(c).get("procMount")
        if isinstance(proc, str) and proc != "Default":
            bad.append(_name(c))
            types.add(proc)
    if not bad:
        return None
    return Violation(
        "procMount",
        f"{_containers_named(bad)} must not set securityContext.procMount to "
        f"{_quoted(sorted(types))}",
    )


def _proc_mount_baseline(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Violation | None:
    return None if _user_namespaced(spec) else _proc_mount(meta, spec)


_SELINUX_TYPES = frozenset(
    {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
)


def _se_linux(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Violation | None:
    setters: list[str] = []
    types: set[str] = set()
    user = role = False

    def valid(options: Mapping[str, Any]) -> bool:
        nonlocal user, role
        ok = True
        if (kind := _str(options.get("type"))) not in _SELINUX_TYPES:
            ok = False
            types.add(kind)
        if _str(options.get("user")):
            ok, user = False, True
        if _str(options.get("role")):
            ok, role = False, True
        return ok

    options = _security(spec).get("seLinuxOptions")
    if isinstance(options, Mapping) and not valid(options):
        setters.append("pod")
    bad = []
    for c in _containers(spec):
        options = _security(c).get("seLinuxOptions")
        if isinstance(options, Mapping) and not valid(options):
            bad.append(_name(c))
    if bad:
        setters.append(_containers_named(bad))
    if not setters:
        return None
    data = []
    if types:
        data.append(f"{_plural('type', 'types', len(types))} {_quoted(sorted(types))}")
    if user:
        data.append("user may not be set")
    if role:
        data.append("role may not be set")
    return Violation(
        "seLinuxOptions",
        f"{' and '.join(setters)} set forbidden securityContext.seLinuxOptions: {'; '.join(data)}",
    )


_SECCOMP_TYPES = ("RuntimeDefault", "Localhost")


def _seccomp_explicit(spec: Mapping[str, Any]) -> tuple[list[str], set[str], bool, list[str]]:
    """(setters of a forbidden type, the types, whether the pod sets an allowed type,
    containers that set none)."""
    setters: list[str] = []
    values: set[str] = set()
    pod_set = False
    profile = _security(spec).get("seccompProfile")
    if isinstance(profile, Mapping):
        if _str(profile.get("type")) not in _SECCOMP_TYPES:
            setters.append("pod")
            values.add(_str(profile.get("type")))
        else:
            pod_set = True
    bad, unset = [], []
    for c in _containers(spec):
        profile = _security(c).get("seccompProfile")
        if isinstance(profile, Mapping):
            if _str(profile.get("type")) not in _SECCOMP_TYPES:
                bad.append(_name(c))
                values.add(_str(profile.get("type")))
        else:
            unset.append(_name(c))
    if bad:
        setters.append(_containers_named(bad))
    return setters, values, pod_set, unset


def _seccomp_forbidden(setters: list[str], values: set[str]) -> Violation:
    return Violation(
        "seccompProfile",
        f"{' and '.join(setters)} must not set securityContext.seccompProfile.type to "
        f"{_quoted(sorted(values))}",
    )


def _seccomp_baseline(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Violation | None:
    setters, values, _, _ = _seccomp_explicit(spec)
    return _seccomp_forbidden(setters, values) if setters else None


_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
        "net.ipv4.tcp_rmem",
        "net.ipv4.tcp_wmem",
        "net.ipv4.tcp_slow_start_after_idle",
        "net.ipv4.tcp_notsent_lowat",
    }
)


def _sysctls(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Violation | None:
    names = [_str(_map(s).get("name")) for s in _list(_security(spec).get("sysctls"))]
    bad = [n for n in names if n not in _SYSCTLS]
    return Violation("forbidden sysctls", ", ".join(bad)) if bad else None


def _host_process(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Violation | None:
    def set_on(owner: Mapping[str, Any]) -> bool:
        return _map(_security(owner).get("windowsOptions")).get("hostProcess") is True

    bad = [_name(c) for c in _containers(spec) if set_on(c)]
    setters = (["pod"] if set_on(spec) else []) + ([_containers_named(bad)] if bad else [])
    if not setters:
        return None
    return Violation(
        "hostProcess",
        f"{' and '.join(setters)} must not set securityContext.windowsOptions.hostProcess=true",
    )


# -- restricted ----------------------------------------------------------------------------


def _privilege_escalation(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Violation | None:
    if _windows(spec):
        return None
    bad = [
        _name(c)
        for c in _containers(spec)
        if _security(c).get("allowPrivilegeEscalation") is not False
    ]
    if not bad:
        return None
    return Violation(
        "allowPrivilegeEscalation != false",
        f"{_containers_named(bad)} must set securityContext.allowPrivilegeEscalation=false",
    )


def _capabilities_restricted(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Violation | None:
    if _windows(spec):
        return None
    missing_drop, adding, forbidden = [], [], set()
    for c in _containers(spec):
        capabilities = _security(c).get("capabilities")
        if not isinstance(capabilities, Mapping):
            missing_drop.append(_name(c))
            continue
        if "ALL" not in _list(capabilities.get("drop")):
            missing_drop.append(_name(c))
        beyond = [cap for cap in _added(c) if cap != "NET_BIND_SERVICE"]
        if beyond:
            adding.append(_name(c))
            forbidden.update(beyond)
    details = []
    if missing_drop:
        details.append(
            f'{_containers_named(missing_drop)} must set securityContext.capabilities.drop=["ALL"]'
        )
    if adding:
        details.append(
            f"{_containers_named(adding)} must not include {_quoted(sorted(forbidden))} in "
            "securityContext.capabilities.add"
        )
    return Violation("unrestricted capabilities", "; ".join(details)) if details else None


_RESTRICTED_VOLUME_SOURCES = frozenset(
    {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "image",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
)
_OTHER_VOLUME_SOURCES = (
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "nfs",
    "iscsi",
    "glusterfs",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "fc",
    "azureFile",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "storageos",
)
"""In the order upstream names them (the first set wins)."""


def _restricted_volumes(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Violation | None:
    bad, types = [], set()
    for volume in _volumes(spec):
        if any(_present(volume.get(s)) for s in _RESTRICTED_VOLUME_SOURCES):
            continue
        bad.append(_str(volume.get("name")))
        types.add(next((s for s in _OTHER_VOLUME_SOURCES if _present(volume.get(s))), "unknown"))
    if not bad:
        return None
    return Violation(
        "restricted volume types",
        f"{_plural('volume', 'volumes', len(bad))} {_quoted(bad)} "
        f"{_plural('uses', 'use', len(bad))} "
        f"{_plural('restricted volume type', 'restricted volume types', len(types))} "
        f"{_quoted(sorted(types))}",
    )


def _run_as_non_root(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Violation | None:
    if _user_namespaced(spec):
        return None
    setters: list[str] = []
    pod = _security(spec).get("runAsNonRoot")
    if pod is False:
        setters.append("pod")
    explicit, implicit = [], []
    for c in _containers(spec):
        own = _security(c).get("runAsNonRoot")
        if isinstance(own, bool):
            if not own:
                explicit.append(_name(c))
        elif pod is not True:
            implicit.append(_name(c))
    if explicit:
        setters.append(_containers_named(explicit))
    if setters:
        return Violation(
            "runAsNonRoot != true",
            f"{' and '.join(setters)} must not set securityContext.runAsNonRoot=false",
        )
    if implicit:
        return Violation(
            "runAsNonRoot != true",
            f"pod or {_containers_named(implicit)} must set securityContext.runAsNonRoot=true",
        )
    return None


def _run_as_user(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Violation | None:
    if _user_namespaced(spec):
        return None
    setters = ["pod"] if _int(_security(spec).get("runAsUser")) == 0 else []
    bad = [_name(c) for c in _containers(spec) if _int(_security(c).get("runAsUser")) == 0]
    if bad:
        setters.append(_containers_named(bad))
    if not setters:
        return None
    return Violation("runAsUser=0", f"{' and '.join(setters)} must not set runAsUser=0")


def _seccomp_restricted(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Violation | None:
    if _windows(spec):
        return None
    setters, values, pod_set, unset = _seccomp_explicit(spec)
    if setters:
        return _seccomp_forbidden(setters, values)
    if unset and not pod_set:
        return Violation(
            "seccompProfile",
            f"pod or {_containers_named(unset)} must set securityContext.seccompProfile.type "
            'to "RuntimeDefault" or "Localhost"',
        )
    return None


BASELINE: tuple[Check, ...] = (
    _app_armor,
    _capabilities_baseline,
    _host_namespaces,
    _host_path_volumes,
    _host_ports,
    _probe_hosts,
    _privileged,
    _proc_mount_baseline,
    _se_linux,
    _seccomp_baseline,
    _sysctls,
    _host_process,
)
"""Pod Security Admission's baseline checks at the latest policy version."""
RESTRICTED: tuple[Check, ...] = (
    # Baseline, less the checks restricted replaces with stricter ones.
    _app_armor,
    _host_namespaces,
    _host_ports,
    _probe_hosts,
    _privileged,
    _se_linux,
    _sysctls,
    _host_process,
    _privilege_escalation,
    _capabilities_restricted,
    _proc_mount,
    _restricted_volumes,
    _run_as_non_root,
    _run_as_user,
    _seccomp_restricted,
)
"""Pod Security Admission's restricted checks at the latest policy version."""
