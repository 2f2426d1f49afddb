"""The modules of placement_svc import each other without a cycle.

A cycle hides in function-level imports until someone moves one to the top
and the import order breaks, so both count here: the graph is built from the
AST of every module, each ``import`` statement wherever it stands. Importing
``a.b.c`` runs the packages ``a`` and ``a.b`` first, so those are edges too
(except the importer's own packages, which have already run).
"""

from __future__ import annotations

import ast
import os
import pathlib
import subprocess
import sys

import placement_svc

PACKAGE = pathlib.Path(placement_svc.__file__).parent
ROOT = PACKAGE.name


def module_names(package: pathlib.Path = PACKAGE) -> dict[str, pathlib.Path]:
    """Every module of the package by its dotted name."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imported_names(module: str, path: pathlib.Path) -> set[str]:
    """Every dotted name an import statement in ``module`` may load."""
    is_package = path.name == "__init__.py"
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, is_package, node.module, node.level)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def _absolute(module: str, is_package: bool, name: str | None, level: int) -> str:
    if not level:
        return name or ""
    parts = module.split(".")
    anchor = parts if is_package else parts[:-1]
    anchor = anchor[: len(anchor) - (level - 1)]
    return ".".join([*anchor, name] if name else anchor)


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def import_graph(package: pathlib.Path = PACKAGE) -> dict[str, set[str]]:
    """module -> the modules of the package that importing it runs."""
    modules = module_names(package)
    graph = {}
    for module, path in modules.items():
        own = set(_ancestors(module))
        targets = set()
        for name in imported_names(module, path):
            targets.update(a for a in _ancestors(name) if a in modules and a not in own)
        graph[module] = targets
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path that returns to its start, or None."""
    state: dict[str, str] = {}  # "open" while on the path, then "done"
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                return path[path.index(target) :] + [target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        path.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_the_package_has_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_check_sees_a_cycle_through_a_function_level_import(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.sub import b\n")
    (package / "sub" / "b.py").write_text("def late():\n    from .. import a\n")
    (package / "c.py").write_text("import pkg.a\n")
    graph = import_graph(package)
    assert graph["pkg.c"] == {"pkg.a"}
    assert find_cycle(graph) == ["pkg.a", "pkg.sub.b", "pkg.a"]
    (package / "sub" / "b.py").write_text("def late():\n    return 1\n")
    assert find_cycle(import_graph(package)) is None


def test_the_graph_holds_the_entry_points_edges():
    graph = import_graph()
    assert f"{ROOT}.cmd.commands" in graph[f"{ROOT}.cmd.cli"]
    assert f"{ROOT}.cmd.bootstrap" in graph[f"{ROOT}.cmd.commands"]
    assert f"{ROOT}.cmd.bootstrap" in graph[f"{ROOT}.cmd.status"]
    assert f"{ROOT}.cmd.bootstrap" in graph[f"{ROOT}.wsgi"]
    assert f"{ROOT}.cmd.cli" not in graph[f"{ROOT}.cmd.status"]


def test_the_command_line_loads_the_service_only_to_run_a_command():
    """cli.py parses with arguments.py (the standard library alone) and
    imports commands.py, and with it the service, only once a command is to
    run: its one import inside a function, so --version and --help answer
    at once."""
    path = PACKAGE / "cmd" / "cli.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = {id(node) for node in tree.body}
    late = [
        imported_names("placement_svc.cmd.cli", path) & {f"{ROOT}.cmd.commands"}
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in top
    ]
    assert late == [{f"{ROOT}.cmd.commands"}]
    grammar = _imports(f"{ROOT}.cmd.arguments")[f"{ROOT}.cmd.arguments"]
    ours = {name for name in grammar if name.startswith(ROOT)}
    assert ours == {ROOT, f"{ROOT}.cmd", f"{ROOT}.cmd.PROG"}  # the package's name only
    assert {name.split(".")[0] for name in grammar - ours} <= {
        "__future__",
        "argparse",
        "importlib",
        "logging",
    }


# -- the arrows between layers (docs/architecture.rst) --------------------------


def _imports(prefix: str) -> dict[str, set[str]]:
    """Each module under ``prefix`` -> every dotted name it imports (external
    ones included), with their parent packages."""
    return {
        module: {a for name in imported_names(module, path) for a in _ancestors(name)}
        for module, path in module_names().items()
        if module == prefix or module.startswith(prefix + ".")
    }


def _offending(prefix: str, forbidden: set[str]) -> dict[str, set[str]]:
    found = {module: names & forbidden for module, names in _imports(prefix).items()}
    return {module: names for module, names in found.items() if names}


HTTP = {"falcon", f"{ROOT}.errors", f"{ROOT}.http", f"{ROOT}.api", f"{ROOT}.app"}
# The folders above the units of work (docs/architecture.rst): the request
# layers, the operating URLs, the entry points.
REQUEST_LAYERS, OPERATING, ENTRY_POINTS = f"{ROOT}.http", f"{ROOT}.operating", f"{ROOT}.cmd"


def test_the_request_layers_know_neither_the_entry_points_nor_the_routes():
    above = {
        ENTRY_POINTS,
        OPERATING,
        f"{ROOT}.app",
        f"{ROOT}.api",
        f"{ROOT}.wsgi",
        f"{ROOT}.routes",
    }
    assert _offending(REQUEST_LAYERS, above) == {}


def test_the_operating_urls_know_no_entry_point():
    assert _offending(OPERATING, {ENTRY_POINTS, f"{ROOT}.wsgi"}) == {}


def test_the_console_knows_only_the_error_format():
    """The console's files are served outside the API: its module reads no
    database, no handler, no route, no request layer but the request id
    and the ETag's making and matching."""
    allowed = {
        f"{ROOT}.errors",
        f"{ROOT}.http",
        f"{ROOT}.http.conditional",
        f"{ROOT}.http.middleware",
        f"{ROOT}.http.middleware.ENV_REQUEST_ID",
    }
    imported = {
        name
        for names in _imports(f"{ROOT}.console").values()
        for name in names
        if name.startswith(ROOT + ".")
    }
    assert imported == allowed


def test_only_the_entry_points_and_the_wsgi_module_import_the_entry_points():
    importers = {
        module
        for module, names in _imports(ROOT).items()
        if ENTRY_POINTS in names and not module.startswith(ENTRY_POINTS)
    }
    assert importers == {f"{ROOT}.wsgi"}


def test_below_the_routes_nothing_knows_the_folders_above():
    above = {REQUEST_LAYERS, OPERATING, ENTRY_POINTS, f"{ROOT}.app"}
    for layer in ("db", "ops", "candidates", "schemas", "policies"):
        assert _offending(f"{ROOT}.{layer}", above) == {}, layer


def test_the_data_layer_knows_no_http_and_nothing_above_it():
    above = {f"{ROOT}.ops", f"{ROOT}.candidates"}
    assert _offending(f"{ROOT}.db", HTTP | above) == {}


def test_the_units_of_work_know_no_http():
    assert _offending(f"{ROOT}.ops", HTTP) == {}


def test_the_capacity_rules_are_plain_data_in_a_fact_out():
    """ops/capacity.py checks figures the data layer read: no SQL of its own."""
    assert _offending(f"{ROOT}.ops.capacity", {"sqlalchemy"}) == {}


def test_the_candidate_rules_know_no_sql_and_no_web_framework():
    pure = ("model", "request", "rooms", "eligibility", "merge", "walk", "prune", "render")
    for name in (*pure, "subtree"):
        assert _offending(f"{ROOT}.candidates.{name}", {"sqlalchemy", "falcon"}) == {}


def test_the_eligibility_rules_import_only_the_model_and_the_request():
    graph = import_graph()
    own = {m for m in graph[f"{ROOT}.candidates.eligibility"] if m != f"{ROOT}.candidates"}
    assert own <= {f"{ROOT}.candidates.model", f"{ROOT}.candidates.request"}


def test_the_search_only_loads_and_raises_no_http_error():
    """search.py reads the database into a Found; a name it does not find
    is a domain fact (model.UnknownNames) the API words, not a 400 of its own.
    What it reads becomes a Found in rooms.py, pure: search.py asks no rule."""
    assert _offending(f"{ROOT}.candidates.search", HTTP) == {}
    graph = import_graph()
    own = {m for m in graph[f"{ROOT}.candidates.search"] if m.startswith(f"{ROOT}.candidates.")}
    assert own <= {f"{ROOT}.candidates.{name}" for name in ("model", "request", "world", "rooms")}


# -- the explanation beside the engine (docs/architecture.rst, candidates/) -------

CANDIDATES = f"{ROOT}.candidates"
EXPLAIN = f"{CANDIDATES}.explain"
# The units of work: the answer, the explanation and the capacity count, each
# one named function of a connection; above both the engine and explain/.
UNITS_OF_WORK = f"{CANDIDATES}.find"


def _engine_modules() -> set[str]:
    return {
        module
        for module in module_names()
        if module.startswith(CANDIDATES + ".")
        and not (module == EXPLAIN or module.startswith(EXPLAIN + "."))
        and module != UNITS_OF_WORK
    }


def test_the_engine_never_imports_the_explanation():
    """search, eligibility, rooms, walk, merge, render, ...: none of them
    knows that explain/ exists, nor the units of work that use both."""
    engine = _engine_modules()
    assert len(engine) > 10, engine
    imports = _imports(CANDIDATES)
    offending = {m: imports[m] & {EXPLAIN, UNITS_OF_WORK} for m in engine}
    assert {m: names for m, names in offending.items() if names} == {}


def test_the_explanation_imports_only_downward():
    """explain/* reads the engine's rules and data (and, for the few names
    and numbers only near misses need, the data layer): never the units of
    work, the HTTP layers, the entry points nor the business rules of ops/."""
    above = HTTP | {UNITS_OF_WORK, REQUEST_LAYERS, OPERATING, ENTRY_POINTS, f"{ROOT}.ops"}
    assert len(_imports(EXPLAIN)) > 5
    assert _offending(EXPLAIN, above) == {}


def test_the_route_declarations_are_plain_data_over_schemas_and_rule_names():
    """routes/ says what each operation is; it binds nothing (app.py does),
    so it imports no handler, no request layer, no unit of work."""
    allowed = {
        f"{ROOT}.microversion",
        f"{ROOT}.policies",
        f"{ROOT}.schemas",
        f"{ROOT}.routes",
        f"{ROOT}.uuidutil",  # schemas.common's format checker
    }
    for module, names in _imports(f"{ROOT}.routes").items():
        own = {name for name in names if name.startswith(ROOT + ".")}
        assert {
            name for name in own if not any(name == a or name.startswith(a + ".") for a in allowed)
        } == set(), module


def test_the_version_is_answered_without_the_service(tmp_path):
    """What `placement-svc --version` loads: no configuration library, no
    database library, no web framework (the start-up benchmark times it)."""
    probe = (
        "import sys, contextlib, io\n"
        "from placement_svc.cmd import cli\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "    cli.main(['--version'])\n"
        "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('sqlalchemy', 'oslo_config', 'falcon', 'gunicorn', 'alembic'))))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(PACKAGE.parent)},
    ).stdout.strip()
    assert loaded == ""
