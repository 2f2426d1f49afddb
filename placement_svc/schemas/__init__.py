"""JSON schemas, one module per resource family; each version's schema reads whole."""
