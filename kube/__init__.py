"""The Kubernetes client: one HTTP/2 connection per API server (calls and watches), the
REST verbs, credentials from kubeconfigs, informers, discovery, redaction and the retry
policy. Knows nothing of members or fleets."""
