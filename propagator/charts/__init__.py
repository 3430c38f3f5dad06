"""Helm charts as a source: where they may come from, fetching, checking and caching them."""
