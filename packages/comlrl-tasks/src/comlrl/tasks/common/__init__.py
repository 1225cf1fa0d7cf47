"""Building blocks shared by the task environments: data loading, prompts, rewards, hooks."""
