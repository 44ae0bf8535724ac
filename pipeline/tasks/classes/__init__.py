"""The classes task: Single-answer QA (TriviaQA): responses clustered into classes, the 0-1 loss."""
