"""Reading ``helm template``'s output: each object annotated with its template, hooks left
out, and what is no object refused naming the template."""

from __future__ import annotations

import pytest

from api.charts import TEMPLATE_ANNOTATION
from propagator.render.helm import parse_output
from propagator.render.manifests import ChartRenderError

OUTPUT = """---
# Source: web/templates/cm.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: web
data: {a: "1"}
---
# Source: web/templates/tests/test.yaml
apiVersion: v1
kind: Pod
metadata:
  name: web-test
  annotations:
    "helm.sh/hook": test
---
# Source: web/templates/empty.yaml
"""


def test_objects_carry_their_template_and_hooks_are_left_out() -> None:
    [cm] = parse_output(OUTPUT)
    assert cm["metadata"]["name"] == "web"
    assert cm["metadata"]["annotations"] == {TEMPLATE_ANNOTATION: "web/templates/cm.yaml"}


@pytest.mark.parametrize(
    ("document", "says"),
    [
        ("- a\n- b\n", "web/templates/x.yaml: renders a list, not a Kubernetes object"),
        ("kind: ConfigMap\n", "web/templates/x.yaml: the object has no metadata"),
        ("a: &x [1]\nb: *x\nmetadata: {}\n", "aliases \\(\\*name\\) are not allowed"),
        ("a: [\n", "web/templates/x.yaml: the rendered YAML does not parse"),
        ("metadata:\n  annotations: [1]\n", "metadata.annotations is not a map"),
    ],
)
def test_what_is_no_object_is_refused_naming_its_template(document: str, says: str) -> None:
    with pytest.raises(ChartRenderError, match=says):
        parse_output(f"---\n# Source: web/templates/x.yaml\n{document}")
