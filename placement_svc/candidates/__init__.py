"""The allocation-candidates engine: request -> search (SQL) -> walk and merge -> render."""
