"""How a Kubernetes object and its kind are named in caches and tables."""

KindKey = tuple[str, str]
"""(apiVersion, kind)."""
ObjectKey = tuple[str, str, str, str]
"""(apiVersion, kind, namespace or "", name)."""
