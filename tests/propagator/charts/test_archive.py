"""A chart archive is checked before Helm reads it: every bound and rule, each refused with
what it breaks."""

from __future__ import annotations

import gzip
import io
import tarfile

import pytest

from propagator.charts.archive import (
    MAX_FILE_BYTES,
    MAX_FILES,
    MAX_NESTING,
    MAX_UNPACKED_BYTES,
    ArchiveError,
    check_archive,
)

CHART_YAML = b"apiVersion: v2\nname: web\nversion: 1.2.3\nappVersion: '2.0'\n"


def archive(files: dict[str, bytes], extra: list[tarfile.TarInfo] | None = None) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, content in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
        for info in extra or []:
            tar.addfile(info)
    return gzip.compress(raw.getvalue())


def test_a_chart_reads_as_its_chart_yaml_says_with_its_hooks_named() -> None:
    hook = b"metadata:\n  annotations:\n    helm.sh/hook: pre-install\n"
    meta = check_archive(
        archive(
            {
                "web/Chart.yaml": CHART_YAML,
                "web/templates/deploy.yaml": b"kind: Deployment\n",
                "web/templates/job.yaml": hook,
            }
        )
    )
    assert (meta.name, meta.version, meta.app_version) == ("web", "1.2.3", "2.0")
    assert meta.hooks == ("web/templates/job.yaml",)


def test_an_archive_that_unpacks_past_the_bound_is_refused_as_it_is_read() -> None:
    # a 40 MiB file declared as such: refused for its size before it is read
    with pytest.raises(ArchiveError, match=f"at most {MAX_FILE_BYTES} per file"):
        check_archive(
            archive({"web/Chart.yaml": CHART_YAML, "web/big": b"\0" * (MAX_FILE_BYTES + 1)})
        )
    # many files each within the per-file bound, together past the total
    many = {f"web/f{i}": b"\0" * (MAX_FILE_BYTES - 1024) for i in range(9)}
    with pytest.raises(ArchiveError, match=f"unpacks to more than {MAX_UNPACKED_BYTES} bytes"):
        check_archive(archive({"web/Chart.yaml": CHART_YAML, **many}))


def test_too_many_files_or_subcharts_nested_too_deep_are_refused() -> None:
    files = {"web/Chart.yaml": CHART_YAML, **{f"web/t/{i}": b"" for i in range(MAX_FILES)}}
    with pytest.raises(ArchiveError, match=f"more than {MAX_FILES} files"):
        check_archive(archive(files))
    inner = archive({"web/Chart.yaml": CHART_YAML})
    for _ in range(MAX_NESTING + 1):
        inner = archive({"web/Chart.yaml": CHART_YAML, "web/charts/sub.tgz": inner})
    with pytest.raises(ArchiveError, match=f"nest more than {MAX_NESTING} levels"):
        check_archive(inner)


@pytest.mark.parametrize(
    ("files", "links", "says"),
    [
        ({"web/../etc/passwd": b"x"}, [], "leaves the chart's directory"),
        ({"/abs/Chart.yaml": CHART_YAML}, [], "leaves the chart's directory"),
        ({"web/Chart.yaml": CHART_YAML, "other/x": b""}, [], "more than one top directory"),
        ({"web/values.yaml": b""}, [], "no Chart.yaml"),
        ({"web/Chart.yaml": b"- a list"}, [], "Chart.yaml is not a map"),
        ({"web/Chart.yaml": CHART_YAML}, ["web/link"], "is a link or a special file"),
        ({"web/" + "d/" * 40 + "x": b""}, [], "longer or deeper than allowed"),
    ],
)
def test_unsafe_archives_are_refused(files: dict[str, bytes], links: list[str], says: str) -> None:
    infos = []
    for name in links:
        info = tarfile.TarInfo(name)
        info.type = tarfile.SYMTYPE
        info.linkname = "/etc/shadow"
        infos.append(info)
    with pytest.raises(ArchiveError, match=says):
        check_archive(archive(files, infos))


def test_what_is_no_gzipped_tar_is_refused() -> None:
    with pytest.raises(ArchiveError, match="not a gzipped tar archive"):
        check_archive(b"<html>not found</html>")
