"""The entry points: the command line, the WSGI module's bootstrap, the
status check, serving under gunicorn."""

# The command's name, as every entry point's messages say it.
PROG = "placement-svc"
