"""A scheduler plugin from another package (examples/scheduler-plugin), installed the way
pip installs one (a distribution on the path with its entry points), found by the plugin
registry and scheduling with the built-ins."""

from __future__ import annotations

import tomllib
from decimal import Decimal
from pathlib import Path

import pytest

from api.placement import Placement
from fleet.snapshot import build_snapshot
from propagator.scheduler import Scheduler
from propagator.scheduler.pluginregistry import DEFAULT_PLUGINS, GROUP, build_profile
from propagator.scheduler.plugins.protocol import ColumnarScore, Memoized, ScorePlugin
from propagator.scheduler.types import Demand
from tests.propagator.scheduler.test_scheduler import cluster
from tests.root import ROOT

EXAMPLE = ROOT / "examples" / "scheduler-plugin"


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The example on the path with a dist-info made from its own pyproject."""
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
    info = tmp_path / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n"
    )
    points = project["entry-points"][GROUP]
    (info / "entry_points.txt").write_text(
        f"[{GROUP}]\n" + "".join(f"{k} = {v}\n" for k, v in points.items())
    )
    monkeypatch.syspath_prepend(str(EXAMPLE))
    monkeypatch.syspath_prepend(str(tmp_path))


@pytest.mark.usefixtures("installed")
def test_an_installed_plugin_is_found_checked_and_weighted() -> None:
    from propagator_cost.plugin import Cost

    plugin: ScorePlugin = Cost()  # (mypy checks the example against the protocol)
    assert isinstance(plugin, ScorePlugin)
    assert isinstance(plugin, Memoized)
    assert not isinstance(plugin, ColumnarScore)  # asked cluster by cluster
    profile = build_profile(f"{DEFAULT_PLUGINS},Cost=3")
    assert profile.names[-1] == "Cost=3"
    assert [type(s).__name__ for s, _ in profile.scores][-1] == "Cost"


@pytest.mark.usefixtures("installed")
def test_an_installed_plugin_moves_the_placement() -> None:
    tiers = {"a": "premium", "b": "spot", "c": "standard"}
    clusters = [cluster(n, labels={"cost.example.com/tier": t}) for n, t in tiers.items()]
    snapshot = build_snapshot(clusters, {"f": list(tiers)}, generation=1)
    one = Placement.model_validate({"maxClusters": 1})
    demand = Demand(1, {"cpu": Decimal(1), "memory": Decimal(1), "pods": Decimal(1)})

    def placed(plugins: str) -> list[str]:
        scheduler = Scheduler(build_profile(plugins))
        return scheduler.schedule(snapshot, "f", one, demand, age_s=0, explain=True).clusters

    assert placed(DEFAULT_PLUGINS) == ["a"]  # the built-ins tie: the first by name
    assert placed(f"{DEFAULT_PLUGINS},Cost=3") == ["b"]  # the spot cluster
    verdicts = Scheduler(build_profile(f"{DEFAULT_PLUGINS},Cost=3")).schedule(
        snapshot, "f", one, demand, age_s=0, explain=True
    )
    assert {c: v.scores["Cost"] for c, v in verdicts.verdicts.items()} == {
        "a": 0.0,
        "b": 100.0,
        "c": 50.0,
    }


def test_without_the_package_the_plugin_is_unknown() -> None:
    with pytest.raises(ValueError, match="unknown scheduler plugin 'Cost'"):
        build_profile(f"{DEFAULT_PLUGINS},Cost=3")
