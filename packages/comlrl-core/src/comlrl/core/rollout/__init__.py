"""Rollouts: prompt formatting and chat templates, decoding backends, and the rollout tree."""
