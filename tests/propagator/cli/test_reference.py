"""docs/reference/ is what ``propagator reference`` writes from the code: a field, a
setting, a metric or a command changed without `make reference` fails here."""

from __future__ import annotations

from propagator.cli.reference import PAGES, pages
from propagator.settings import Settings
from tests.root import ROOT

REFERENCE = ROOT / "docs" / "reference"


def test_the_reference_pages_are_what_the_code_says() -> None:
    written = pages()
    assert sorted(written) == sorted(PAGES)
    for name, text in written.items():
        stored = (REFERENCE / name).read_text(encoding="utf-8")
        assert stored == text, f"docs/reference/{name} is stale: run `make reference`"


def test_every_setting_and_every_field_is_in_the_reference() -> None:
    written = pages()
    for name in Settings.model_fields:
        assert f"`PROPAGATOR_{name.upper()}`" in written["settings.md"]
    resources = written["resources.md"]
    for field in ("spec.podSecurity.level", "spec.services.externalIPs", "spec.placement"):
        assert f"`{field}`" in resources
    assert "`propagator_tenant_quota_rejections_total`" in written["metrics.md"]
    assert "## `propagator reference`" in written["commands.md"]
