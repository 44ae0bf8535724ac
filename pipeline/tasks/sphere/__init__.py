"""The sphere task: Translation (WMT19 fi-en): sentence embeddings on the unit sphere, cosine distance."""
