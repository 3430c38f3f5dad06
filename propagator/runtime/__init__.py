"""The controller runtime: work queues, the member registry, leader election, the event
loop and the garbage collector's tuning."""
