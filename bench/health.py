"""Health evaluation: the built-in interpreter rules (CEL) against the hand-written Python
health they replaced, on the same member objects.

Objects as a member's watch cache holds them (metadata with labels and annotations, a pod
template, a status with conditions) for the four kinds the hand-written health judged
(Deployment, StatefulSet, DaemonSet, Job), in every state (rolled out, progressing, a
spec not observed yet, failed). Each evaluation is timed alone: the rules with nothing
remembered (every object a new version: what a change on a member costs), the rules
again on the same versions (what a resync or a status refresh costs: the verdict
remembered by resourceVersion), and the baseline, the hand-written Python on the same
objects.

    python -m bench.health [--quick] [--json]
"""

from __future__ import annotations

import itertools
import time
from typing import Any

from bench.reference_health import health_of
from bench.report import arguments, emit, percentile
from propagator.interpreter.registry import Interpreters

KINDS = (
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet"),
    ("batch/v1", "Job"),
)


def objects(count: int) -> list[dict[str, Any]]:
    """``count`` member objects of the four kinds, in varied states."""
    out = []
    states = itertools.cycle([(3, 3, 2, 2), (3, 1, 2, 2), (3, 3, 3, 2), (0, 0, 1, 1)])
    for i, (ready, updated, generation, observed) in zip(range(count), states, strict=False):
        api_version, kind = KINDS[i % len(KINDS)]
        condition = {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}
        if i % 17 == 0:
            condition = {
                "type": "Progressing",
                "status": "False",
                "reason": "ProgressDeadlineExceeded",
            }
        if kind == "Job":
            condition = {"type": "Complete" if i % 2 else "Failed", "status": "True"}
        out.append(
            {
                "apiVersion": api_version,
                "kind": kind,
                "metadata": {
                    "name": f"w{i}",
                    "namespace": "shop",
                    "uid": f"uid-{i}",
                    "resourceVersion": str(1000 + i),
                    "generation": generation,
                    "labels": {"app": f"w{i}", "propagator.io/application": "shop.web"},
                    "annotations": {"propagator.io/revision": "ab0807dc73392c5d"},
                },
                "spec": {
                    "replicas": 3,
                    "template": {
                        "metadata": {"labels": {"app": f"w{i}"}},
                        "spec": {
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "nginx:1.27",
                                    "resources": {"requests": {"cpu": "100m"}},
                                }
                            ]
                        },
                    },
                },
                "status": {
                    "observedGeneration": observed,
                    "replicas": 3,
                    "updatedReplicas": updated,
                    "availableReplicas": ready,
                    "readyReplicas": ready,
                    "desiredNumberScheduled": 3,
                    "numberReady": ready,
                    "updatedNumberScheduled": updated,
                    "conditions": [condition, {"type": "Available", "status": "True"}],
                },
            }
        )
    return out


def _each(judge: Any, objs: list[dict[str, Any]]) -> list[float]:
    samples = []
    for obj in objs:
        start = time.perf_counter()
        judge(obj)
        samples.append((time.perf_counter() - start) * 1e6)
    return samples


def measure(count: int, rounds: int) -> list[dict[str, Any]]:
    objs = objects(count)
    python: list[float] = []
    fresh: list[float] = []
    remembered: list[float] = []
    for _ in range(rounds):
        rules = Interpreters()  # nothing remembered
        fresh += _each(rules.verdict, objs)
        remembered += _each(rules.verdict, objs)
        python += _each(health_of, objs)
    agree = sum(Interpreters().verdict(o).health == health_of(o) for o in objs)
    base = percentile(python, 50)
    rows = []
    for name, samples in (
        ("rules, each object new", fresh),
        ("rules, object unchanged", remembered),
        ("hand-written Python", python),
    ):
        rows.append(
            {
                "evaluation": name,
                "objects": len(samples),
                "p50_us": percentile(samples, 50),
                "p99_us": percentile(samples, 99),
                "per_s": 1e6 / percentile(samples, 50),
                "ratio_to_python": percentile(samples, 50) / base,
                "same_verdicts": f"{agree}/{len(objs)}",
            }
        )
    return rows


COLUMNS = [
    ("evaluation", "evaluation"),
    ("objects", "evaluations"),
    ("p50_us", "p50 µs"),
    ("p99_us", "p99 µs"),
    ("per_s", "per s (p50)"),
    ("ratio_to_python", "p50 / Python p50"),
    ("same_verdicts", "same verdict as Python"),
]


def main() -> None:
    args = arguments(__doc__)
    emit(measure(400, 5 if args.quick else 50), COLUMNS, args.json)


if __name__ == "__main__":
    main()
