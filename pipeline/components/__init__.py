"""Components: the typed registry (`@REG.register("name")`), one frozen settings dataclass
per registered part, and the decision methods declared once."""
