"""Rollouts: prompt formatting and chat templates, the rollout backends (`backends/`),
decoding, and the rollout tree."""
