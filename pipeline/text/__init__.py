"""Answer text: the normal forms shared by the mappers and the quality metrics, and the
lexicon of names that hold "and" (stdlib only)."""
