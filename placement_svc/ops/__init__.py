"""Named units of work: plain functions of a connection and plain data that
hold the business rules and upstream's check order (404, then the body's
schema, then the generation, ...). Handlers in ``api/`` run one of them in
one transaction; tests call them directly on a real database."""
