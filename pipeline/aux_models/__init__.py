"""The auxiliary models (embedder, equivalence judge, COMET / AlignScore, label-match judge):
built in one place for every stage after generate."""
