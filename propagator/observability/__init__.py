"""Metrics, health endpoints and logs of the controller."""
