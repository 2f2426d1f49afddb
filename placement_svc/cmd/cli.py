"""``placement-svc``: the command line.

    placement-svc db sync       bring the schema to the latest revision and add
                                the standard resource classes and traits (a
                                database upstream Placement made is adopted)
    placement-svc db version    print the schema revision of the database
    placement-svc db hand-back  make the database one upstream Placement serves
    placement-svc serve         answer the API under gunicorn
    placement-svc status upgrade check
                                is the database ready for this release?
    placement-svc policy show   print the effective policy
    placement-svc explain QUERY why an allocation candidates query has the
                                candidates it has (or none)
    placement-svc capacity QUERY
                                how many copies of the query fit, per tree

This module is the entry point only: the grammar is arguments.py's
(argparse, nothing else of the service, so ``--version`` and ``--help``
answer at once), what each command does is commands.py's, imported once a
command is to run; ``serve`` and its gunicorn are in serving.py; what the
commands share with the WSGI module (configuration, database,
application) is in bootstrap.
``explain`` and ``capacity`` answer what GET /allocation_candidates/explain
and /capacity answer (api/allocation_candidates.py), from the configured
database, for an operator on a host the API cannot be reached from: the
same query string, the same checks and words, the same units of work.

Every failure an operator can cause (a missing or unparsable configuration
file, a bad value in it, a bad or unreachable database URL, an out-of-date
schema, a query the API would answer with 400) ends with one line on
stderr, ``placement-svc: error: ...``, and exit status 1. ``--debug`` adds
the traceback.
"""

from __future__ import annotations

import sys

from placement_svc.cmd.arguments import build_parser, common_args


def main(argv=None) -> int:
    args = common_args(build_parser().parse_args(argv))
    # The service's modules, once a command is to run: most of a second,
    # which --version, --help and a mistyped command do not pay.
    from placement_svc.cmd import commands

    return commands.run(args)


if __name__ == "__main__":
    sys.exit(main())
