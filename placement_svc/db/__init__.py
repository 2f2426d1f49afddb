"""Database access: tables, engines and transactions, one module per entity."""
