"""The sets_fbeta task: Multi-answer QA with the F-beta loss as the task's own: its Bayes action is the GFM action."""
