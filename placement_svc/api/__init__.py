"""HTTP handlers, one module per URL family. Routes live in app.py."""
