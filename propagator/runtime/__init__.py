"""The controller runtime: work queue, workers, leader election, the garbage collector's
tuning."""
