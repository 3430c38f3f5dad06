"""Rendering an application's manifests per cluster: templates in a sandbox, overrides,
in a bounded worker process, memoised by their inputs."""
