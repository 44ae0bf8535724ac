"""The simplex task: Ambiguous QA (MAQA*): answer distributions on the simplex, KL divergence."""
