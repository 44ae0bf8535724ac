"""The graphs task: Summarisation (CNN/DM): knowledge graphs, the structural Hamming distance over edges."""
