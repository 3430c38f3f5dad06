"""Input a careless operator or a hostile tenant gives: one clear line, never a traceback
or another exception type; fuzzed where the input is free-form."""

from __future__ import annotations

import base64
import contextlib
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.quantity import QuantityError, parse
from fleet.local.fleet import FleetState, LocalFleetError
from fleet.member import MemberMonitor
from fleet.readiness import HealthPolicy
from kube.kubeconfig import KubeconfigError, load_kubeconfig
from kube.session import ConnectionOptions
from propagator.cli.main import main
from propagator.cli.schedule import InputError, objects_in
from propagator.settings import SettingsError, load_settings

FILES = {
    "not UTF-8": (b"\xff\xfe bad", "not UTF-8 text"),
    "kind is a number": (b"kind: 5\n", "kind must be a string, got 5"),
    "a list of numbers": (b"kind: List\nitems: [1, 2]\n", "object 1 is not a mapping"),
    "no metadata": (b"kind: MemberCluster\n", "object 1 (MemberCluster) has no metadata.name"),
    "not YAML": (b"a: [\n", "while parsing"),
}


@pytest.mark.parametrize("case", FILES, ids=list(FILES))
def test_schedule_files_that_are_not_what_they_should_be(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, says = FILES[case]
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(data)
    with pytest.raises(InputError, match=re.escape(says)):
        objects_in(bad)
    assert main(["schedule", "-f", str(bad), "--fleet-file", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert says.split(",")[0] in err


def test_flags_are_never_abbreviated(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["crds", "--out", "somewhere"])
    assert exited.value.code == 2
    assert "unrecognized arguments: --out" in capsys.readouterr().err


def test_a_corrupt_local_state_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text("{corrupt")
    with pytest.raises(LocalFleetError, match=r"state\.json is not a local fleet's state"):
        FleetState.load(tmp_path)


def test_settings_that_name_kubernetes_objects_are_validated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PROPAGATOR_NAMESPACE", "../kube-system")
    with pytest.raises(SettingsError, match="PROPAGATOR_NAMESPACE"):
        load_settings(None)


def _kubeconfig(**cluster: object) -> dict[str, object]:
    return {
        "clusters": [{"name": "c", "cluster": {"server": "https://10.0.0.1:6443", **cluster}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }


def test_a_proxy_url_is_refused_not_dropped() -> None:
    with pytest.raises(KubeconfigError, match="sets proxy-url, which Propagator does not use"):
        load_kubeconfig(_kubeconfig(**{"proxy-url": "http://proxy:3128"}), source="k")


def test_a_ca_that_decodes_but_does_not_parse_is_that_members_invalid_kubeconfig() -> None:
    junk = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nnot a cert\n-----END CERTIFICATE-----")
    config = yaml.safe_dump(_kubeconfig(**{"certificate-authority-data": junk.decode()}))
    monitor = MemberMonitor.from_kubeconfig(
        "m1",
        config,
        "1",
        options=ConnectionOptions(),
        policy=HealthPolicy(),
        allow_exec=False,
        on_change=lambda: None,
    )
    assert monitor.connection is None
    assert monitor.config_error is not None
    assert "certificate-authority-data does not load" in monitor.config_error


# -- fuzz ----------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=40), st.integers(), st.floats(), st.booleans(), st.none()))
def test_a_quantity_parses_or_is_a_quantity_error(value: object) -> None:
    with contextlib.suppress(QuantityError):  # anything else fails the test
        parse(value)  # type: ignore[arg-type]


yaml_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=200), yaml_values.map(lambda v: yaml.safe_dump(v))))
def test_a_kubeconfig_loads_or_is_a_kubeconfig_error(text: str) -> None:
    with contextlib.suppress(KubeconfigError):
        load_kubeconfig(text, source="fuzz")


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.one_of(st.binary(max_size=200), yaml_values.map(lambda v: yaml.safe_dump(v).encode())))
def test_a_fleet_file_reads_or_is_an_input_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_bytes(data)
    with contextlib.suppress(InputError):
        objects_in(path)


def test_local_up_keeps_fake_nodes_to_real_sizes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["local", "up", "--node-cpu", "1e60", "--state-dir", str(tmp_path)])
    assert code == 1
    assert "--node-cpu='1e60': must be greater than zero and at most 10000" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "state.json").exists()  # nothing was started
