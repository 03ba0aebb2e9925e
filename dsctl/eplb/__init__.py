"""Expert-parallel load balancing: where each MoE expert's replicas live, from routing statistics."""
