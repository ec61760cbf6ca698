"""The import graph shows the design: no cycle between modules, and no import that goes up a layer.

Every module of flight_server/, producers/, spark_reader/, flight_cli/, chaos/ and scripts/ is
parsed with `ast` (nothing is imported). Every `import` and `from ... import` statement is an
edge, wherever it stands: module level, inside a function (the lazy imports that keep
`flight_cli --version` light) or under `if TYPE_CHECKING` alike, since each is a dependency a
reader has to follow. `from pkg import name` is an edge to the module `pkg.name` when there is
one, else to `pkg`; a package's own `__init__` is not an edge of its submodules' imports (Python
runs it first whatever imports them, so such an edge would make every package that re-exports a
submodule a cycle). Imports by name at run time (`importlib.import_module`: flight_cli/main.py
running the command the parser chose, all in the CLI's own layer; wire/errors.py reaching
pyarrow; raw_grpc's generated stubs) are not edges.

The packages, lowest first; each imports only the packages below it that its row names:

| package       | what it is                                   | may import |
|---------------|----------------------------------------------|------------|
| flight_server | the server, and the wire (`flight_server.wire`) | - |
| producers     | the client                                   | flight_server (its wire alone) |
| spark_reader  | the Spark data source, a client              | flight_server (its wire alone), producers |
| flight_cli    | the command line: client commands and `serve` | flight_server, producers |
| chaos/scripts | the tools                                    | anything |

Within them, the layers, lowest first; an area may import its own modules and the areas in its
last column, all of them lower, and nothing else:

| layer | area         | modules                                                        | may import |
|-------|--------------|----------------------------------------------------------------|------------|
| 0     | wire         | flight_server/wire/ (the protocol, pyarrow alone)              | - |
| 1     | core         | flight_server/ `__init__` `source` `tickets` `status` `polling` `limits` `auth` `auth_file` `processes` | wire |
| 1     | producers    | producers/ (the client package)                                | wire |
| 2     | push         | flight_server/push/                                            | wire, core |
| 2     | paimon       | flight_server/paimon/ (compat/: pypaimon's internals)          | wire, core |
| 2     | spark_reader | spark_reader/ (a client)                                       | wire, producers |
| 3     | ingest       | flight_server/ingest/                                          | wire, core, paimon |
| 4     | maintenance  | flight_server/maintenance/                                     | wire, core, paimon, ingest |
| 5     | front        | flight_server/ `server` `actions` `middleware` `metrics`       | wire, core, push, paimon, ingest, maintenance |
| 6     | cli          | flight_cli/                                                    | wire, producers, and the server (`serve` runs one) |
| 7     | tools        | chaos/, scripts/                                               | anything |

So the server never imports a client, the CLI or the tools; clients import only the wire (and
spark_reader the client package); push and paimon, areas of one layer, never import each other.

The CLI is a client that also starts the server: issue 39 lets it "import the client package from
a place above both", its own package flight_cli/ (issue 49), above the server and producers, with
nothing but the tools importing it. Its client commands keep to the wire and the client: every
CLI module but `flight_cli/serve.py` imports of the server only `flight_server.limits`
(`serve_args.py` shows the `--max-*` defaults in `--help`; limits.py imports the stdlib and the
wire), as test_cli_startup.py checks of real runs.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("flight_server", "producers", "spark_reader", "flight_cli", "chaos", "scripts")

CORE = ("__init__", "source", "tickets", "status", "polling", "limits", "auth", "auth_file", "processes")
FRONT = ("server", "actions", "middleware", "metrics")
SERVER = ("core", "push", "paimon", "ingest", "maintenance", "front")

# area: (layer, the areas it may import)
LAYERS: dict[str, tuple[int, tuple[str, ...]]] = {
    "wire": (0, ()),
    "core": (1, ("wire",)),
    "producers": (1, ("wire",)),
    "push": (2, ("wire", "core")),
    "paimon": (2, ("wire", "core")),
    "spark_reader": (2, ("wire", "producers")),
    "ingest": (3, ("wire", "core", "paimon")),
    "maintenance": (4, ("wire", "core", "paimon", "ingest")),
    "front": (5, ("wire", "core", "push", "paimon", "ingest", "maintenance")),
    "cli": (6, ("wire", "producers", *SERVER)),
    "tools": (7, ("wire", "producers", "spark_reader", "cli", *SERVER)),
}

# package: the packages it may import, all of them lower (the docstring's first table)
PACKAGE_IMPORTS: dict[str, tuple[str, ...]] = {
    "flight_server": (),
    "producers": ("flight_server",),
    "spark_reader": ("flight_server", "producers"),
    "flight_cli": ("flight_server", "producers"),
    "tools": ("flight_server", "producers", "spark_reader", "flight_cli"),
}

# what the CLI's client commands (every CLI module but serve.py) may import of the server
CLI_CLIENT_SERVER_IMPORTS = {"flight_server.limits"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if not {"_generated", "node_modules", "__pycache__"} & set(path.parts):
                found[_module_name(path)] = path
    return found


def area(module: str) -> str:
    parts = module.split(".")
    if parts[0] in ("chaos", "scripts"):
        return "tools"
    if parts[0] in ("producers", "spark_reader"):
        return parts[0]
    if parts[0] == "flight_cli":
        return "cli"
    if len(parts) == 1 or (len(parts) == 2 and parts[1] in CORE):
        return "core"
    if len(parts) == 2 and parts[1] in FRONT:
        return "front"
    return parts[1]  # wire, push, paimon, ingest, maintenance


def package(module: str) -> str:
    top = module.split(".")[0]
    return "tools" if top in ("chaos", "scripts") else top


def import_graph() -> dict[str, dict[str, int]]:
    """module -> {imported module of the project: the line of its first import}."""
    mods = modules()

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, dict[str, int]] = {}
    for module, path in mods.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        edges = graph.setdefault(module, {})
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1])
                    source = f"{base}.{node.module}" if node.module else base
                else:
                    source = node.module or ""
                targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in mods else source for a in node.names]
            else:
                continue
            for target in targets:
                resolved = resolve(target)
                if resolved and resolved != module:
                    edges.setdefault(resolved, node.lineno)
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, {})))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _edge(graph, a: str, b: str) -> str:
    return f"{a} -> {b} ({modules()[a].relative_to(ROOT)}:{graph[a][b]})"


def test_the_layer_table_only_points_down():
    for name, (layer, may) in LAYERS.items():
        up = [m for m in may if LAYERS[m][0] >= layer]
        assert not up, f"{name} (layer {layer}) may import {up}, which are not below it"


def test_every_module_has_an_area():
    mods = modules()
    assert len(mods) > 100, sorted(mods)  # the walk really found the tree
    assert {m for m in mods if area(m) not in LAYERS} == set()


def test_no_import_cycle():
    graph = import_graph()
    found = cycles(graph)
    described = [f"{' <-> '.join(c)}: " + "; ".join(_edge(graph, a, b) for a in c for b in graph[a] if b in c)
                 for c in found]
    assert not found, "import cycles:\n" + "\n".join(described)


def test_the_package_table_only_points_down():
    order = list(PACKAGE_IMPORTS)
    up = {name: [m for m in may if order.index(m) >= order.index(name)] for name, may in PACKAGE_IMPORTS.items()}
    assert {name: m for name, m in up.items() if m} == {}


def test_no_package_imports_one_above_it():
    """The server imports no client and no CLI; a client no CLI; the CLI no tool."""
    graph = import_graph()
    assert {package(m) for m in graph} == set(PACKAGE_IMPORTS)  # every package was walked
    up = [f"{package(a)} -> {package(b)}: {_edge(graph, a, b)}"
          for a in sorted(graph) for b in sorted(graph[a])
          if package(a) != package(b) and package(b) not in PACKAGE_IMPORTS[package(a)]]
    assert not up, "imports of a package above (or beside) the importer's:\n" + "\n".join(up)


def test_no_import_goes_up_a_layer():
    graph = import_graph()
    up = [f"{area(a)} -> {area(b)}: {_edge(graph, a, b)}"
          for a in sorted(graph) for b in sorted(graph[a])
          if area(a) != area(b) and area(b) not in LAYERS[area(a)][1]]
    assert not up, "imports that go up a layer (or sideways):\n" + "\n".join(up)


def test_the_clis_client_commands_import_only_the_wire_and_the_client():
    graph = import_graph()
    server = [_edge(graph, a, b) for a in sorted(graph) for b in sorted(graph[a])
              if area(a) == "cli" and a != "flight_cli.serve"
              and area(b) in SERVER and b not in CLI_CLIENT_SERVER_IMPORTS]
    assert not server, "CLI modules besides serve.py that import the server:\n" + "\n".join(server)


def test_the_graph_sees_lazy_and_relative_imports():
    graph = import_graph()
    assert "flight_cli.main" in graph["flight_cli"]  # inside main(), after the malloc set-up
    assert "flight_server.server" in graph["flight_cli.serve"]
    assert graph["producers"]  # producers/__init__.py's imports
    edges = defaultdict(set)
    for a, targets in graph.items():
        edges[area(a)].update(area(b) for b in targets)
    assert "wire" in edges["producers"] and "producers" in edges["spark_reader"]
