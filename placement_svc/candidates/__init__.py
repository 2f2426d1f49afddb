"""The allocation-candidates engine: request -> search (SQL) -> merge -> render."""
