"""The controller runtime: work queue, workers, leader election."""
