"""The layering rules of docs/architecture.md, checked by parsing every module's imports."""

from __future__ import annotations

import ast
import itertools
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "dsctl"
DOMAIN_PACKAGES = ["topology", "eplb", "health", "storage", "launch", "model", "trace", "cluster", "steptime"]
# The shared cluster model (plan.json, ranks.csv) is read by every group, so it may import only these.
LOW_FLOOR_ALLOWED = {"dsctl.errors", "dsctl.textjson", "dsctl.names", "numpy"}
FORBIDDEN_IN_DOMAIN = {"typer", "rich", "pynvml", "yaml", "click"}
# The hardware seam: only the NVML backend may import pynvml (it is not a domain module).
PYNVML_ALLOWED = {"health/backends/nvml.py"}
FILE_METHODS = {"read_text", "read_bytes", "write_text", "write_bytes"}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names



def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def module_name(path: Path, root: Path) -> str:
    """``dsctl/health/model.py`` -> ``dsctl.health.model``; a package's ``__init__.py`` is the package."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def runtime_imports(path: Path, root: Path) -> list[tuple[str, str, int]]:
    """Every import that can run: (module, imported name or "", line), at module level or inside functions and
    classes, relative ones resolved; not those under ``if TYPE_CHECKING:`` (they never run)."""
    found: list[tuple[str, str, int]] = []
    package = module_name(path, root) if path.name == "__init__.py" else module_name(path, root).rpartition(".")[0]

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend((alias.name, "", node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            found.extend((base, alias.name, node.lineno) for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
    return found


def import_graph(root: Path) -> dict[str, dict[str, int]]:
    """Module -> {module of the same package it imports: line of the first such import}. ``from pkg import x``
    counts as importing ``pkg.x`` where that is a module, else ``pkg``."""
    files = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    graph: dict[str, dict[str, int]] = {}
    for name, path in files.items():
        edges: dict[str, int] = {}
        for module, imported, line in runtime_imports(path, root):
            target = f"{module}.{imported}" if f"{module}.{imported}" in files else module
            if target in files and target != name:
                edges.setdefault(target, line)
        graph[name] = edges
    return graph


def find_cycle(graph: Mapping[str, Mapping[str, object]]) -> list[str]:
    """One cycle as [a, b, ..., a] (depth-first, in sorted order), or [] when the graph has none."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    path: list[str] = []

    def walk(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, {})):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (cycle := walk(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return []

    for start in sorted(graph):
        if start not in state and (cycle := walk(start)):
            return cycle
    return []


def cycle_text(cycle: list[str], graph: Mapping[str, Mapping[str, object]]) -> str:
    """``a (line 3) -> b (line 9) -> a``: each step with where it imports the next (a line, or a module and line)."""
    where = {True: "line {}", False: "{}"}
    steps = [f"{a} ({where[isinstance(graph[a][b], int)].format(graph[a][b])}) -> "
             for a, b in itertools.pairwise(cycle)]
    return "".join(steps) + cycle[-1]


def package_graph(graph: dict[str, dict[str, int]]) -> dict[str, dict[str, str]]:
    """The module graph folded to dsctl's top-level packages and modules (``dsctl.eplb``, ``dsctl.errors``); an edge
    says which module imports across, and where (``dsctl.eplb.move_time line 30``)."""
    folded: dict[str, dict[str, str]] = {}
    for module, edges in graph.items():
        unit = ".".join(module.split(".")[:2])
        for target, line in edges.items():
            if (other := ".".join(target.split(".")[:2])) != unit:
                folded.setdefault(unit, {}).setdefault(other, f"{module} line {line}")
    return folded


def domain_files() -> list[Path]:
    files = []
    for package in DOMAIN_PACKAGES:
        files.extend(sorted((PACKAGE / package).rglob("*.py")))
    return [f for f in files if str(f.relative_to(PACKAGE)) not in PYNVML_ALLOWED and "backends" not in f.parts]


@pytest.mark.parametrize("path", domain_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_domain_modules_do_not_import_ui_or_hardware_libraries(path: Path) -> None:
    roots = {name.split(".")[0] for name in imported_modules(path)}
    bad = roots & FORBIDDEN_IN_DOMAIN
    assert not bad, f"{path.relative_to(PACKAGE)} imports {sorted(bad)}; domain code must stay pure"


@pytest.mark.parametrize("path", domain_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_domain_modules_do_not_import_the_command_or_output_layers(path: Path) -> None:
    layered = {n for n in imported_modules(path) if n.startswith(("dsctl.commands", "dsctl.output", "dsctl.cli"))}
    assert not layered, f"{path.relative_to(PACKAGE)} imports {sorted(layered)}"


def test_domain_modules_do_not_print_read_the_environment_or_touch_files() -> None:
    offenders = []
    for path in domain_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in {"print", "input"}:
                offenders.append(f"{path.name}:{node.lineno} calls {node.func.id}()")
            if isinstance(node, ast.Attribute) and node.attr in {"environ", "getenv"}:
                offenders.append(f"{path.name}:{node.lineno} reads os.{node.attr}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
                offenders.append(f"{path.name}:{node.lineno} opens a file (the command layer reads files)")
            if isinstance(node, ast.Attribute) and node.attr in FILE_METHODS:
                offenders.append(f"{path.name}:{node.lineno} does file I/O ({node.attr})")
    assert not offenders, offenders


def test_only_the_nvml_backend_imports_pynvml() -> None:
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE))
        if "pynvml" in {n.split(".")[0] for n in imported_modules(path)}:
            assert rel in PYNVML_ALLOWED, f"{rel} imports pynvml"


def test_yaml_is_imported_only_by_profiles_and_output() -> None:
    """Commands read YAML through dsctl.profiles.textyaml and write it through dsctl.output.yamltext."""
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if "yaml" in {n.split(".")[0] for n in imported_modules(path)}:
            assert rel.parts[0] in {"profiles", "output"}, f"{rel} imports yaml"


COMMAND_FILES = sorted((PACKAGE / "commands").glob("*.py"))


@pytest.mark.parametrize("path", COMMAND_FILES, ids=lambda p: p.name)
def test_command_modules_import_neither_yaml_nor_hardware_backends(path: Path) -> None:
    """Commands are wiring: backends are chosen by dsctl.health.source, records validated beside their format."""
    bad = {name.split(".")[0] for name in imported_modules(path)} & {"yaml", "pynvml"}
    assert not bad, f"commands/{path.name} imports {sorted(bad)}"
    backends = {n for n in imported_modules(path) if n.startswith("dsctl.health.backends.")
                and n not in {"dsctl.health.backends.source", "dsctl.health.backends.base"}}
    assert not backends, f"commands/{path.name} opens backends itself ({sorted(backends)}); use open_source"


def top_level_imports(path: Path) -> set[str]:
    """Modules imported when ``path`` is imported (module body, not inside functions)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8"), filename=str(path)).body:
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", COMMAND_FILES, ids=lambda p: p.name)
def test_command_modules_read_yaml_and_numpy_only_inside_their_commands(path: Path) -> None:
    """dsctl.profiles.textyaml imports yaml, so a command module that imported it (or numpy) at its top would
    load them for every --help of its group (tests/unit/test_startup.py measures that)."""
    bad = {n for n in top_level_imports(path) if n.split(".")[0] in {"yaml", "numpy"} or n == "dsctl.profiles.textyaml"}
    assert not bad, f"commands/{path.name} imports {sorted(bad)} at module level; import it inside the command"


def test_the_rule_checker_catches_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import rich.table\nfrom yaml import safe_load\n\ndef f():\n    import numpy\n")
    assert {"rich.table", "yaml", "numpy"} <= imported_modules(bad)
    assert top_level_imports(bad) == {"rich.table", "yaml"}


def test_no_assert_statements_in_the_package() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Assert):
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not offenders, f"use explicit errors, not assert: {offenders}"


@pytest.mark.parametrize("path", sorted((PACKAGE / "cluster").rglob("*.py")), ids=lambda p: p.name)
def test_the_cluster_model_stays_low_floor(path: Path) -> None:
    """dsctl.cluster imports no domain package: every group may import it without reaching into another."""
    stdlib = set(sys.stdlib_module_names)
    outside = {n for n in imported_modules(path)
               if n.split(".")[0] not in stdlib and not n.startswith("dsctl.cluster") and n not in LOW_FLOOR_ALLOWED}
    assert not outside, f"cluster/{path.name} imports {sorted(outside)}"


def test_modules_over_500_lines_say_why() -> None:
    """Files are split by job before 500 lines; one that is not says why in its docstring ("over 500 lines")."""
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > 500 and "over 500 lines" not in (ast.get_docstring(ast.parse(text)) or ""):
            long.append(f"{path.relative_to(PACKAGE)} ({text.count(chr(10))} lines)")
    assert not long, f"split these by job or say why in the module docstring: {long}"


def test_the_module_import_graph_has_no_cycle() -> None:
    """Imports inside functions count: one that closes a cycle only hides it (and runs on first call)."""
    graph = import_graph(PACKAGE)
    cycle = find_cycle(graph)
    assert not cycle, f"import cycle: {cycle_text(cycle, graph)}; move the shared fact down into its own module"


#: package pairs that still import each other; launch.plan predicts with steptime, whose model reads launch's layout
#: and stage rules (issue 31: steptime belongs under launch, or the plan's prediction above both)
KNOWN_PACKAGE_CYCLES = [["dsctl.launch", "dsctl.steptime", "dsctl.launch"]]


def test_top_level_packages_import_each_other_only_where_listed() -> None:
    """Package level: ``eplb`` -> ``topology.sim`` -> ``eplb`` made every rebalance load the fabric simulator."""
    graph = package_graph(import_graph(PACKAGE))
    cycles = []
    while cycle := find_cycle(graph):
        cycles.append(cycle)
        text = cycle_text(cycle, graph)
        assert cycle in KNOWN_PACKAGE_CYCLES, f"package import cycle: {text}"
        del graph[cycle[-2]][cycle[-1]]  # drop the closing edge, look for another
    assert cycles == KNOWN_PACKAGE_CYCLES, f"no longer a cycle, remove it from KNOWN_PACKAGE_CYCLES: {cycles}"


def test_the_cycle_rule_sees_imports_inside_functions_and_skips_type_checking(tmp_path: Path) -> None:
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "a.py").write_text("from pkg.b import helper\n")
    (root / "b.py").write_text("def helper():\n    from pkg import a\n    return a\n")
    (root / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import x\n")
    (root / "d.py").write_text("from . import c\n")
    graph = import_graph(root)
    assert graph["pkg.b"] == {"pkg.a": 2} and graph["pkg.c"] == {} and graph["pkg.d"] == {"pkg.c": 1}
    cycle = find_cycle(graph)
    assert cycle == ["pkg.a", "pkg.b", "pkg.a"]
    assert cycle_text(cycle, graph) == "pkg.a (line 1) -> pkg.b (line 2) -> pkg.a"
    (root / "b.py").write_text("def helper():\n    return 1\n")
    assert find_cycle(import_graph(root)) == []


def test_public_class_names_are_unique_across_the_package() -> None:
    """One class per concept name: two public classes of one name (four ``Finding``s once) make a reader open the
    import to know which one a function takes."""
    owners: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                owners.setdefault(node.name, []).append(str(path.relative_to(PACKAGE)))
    assert {name: where for name, where in owners.items() if len(where) > 1} == {}


def private_uses(path: Path) -> list[str]:
    """``from dsctl.x import _name`` and ``module._name`` (``module`` imported from dsctl) in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    modules: set[str] = set()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dsctl"):
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"line {node.lineno}: from {node.module} import {alias.name}")
                modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            modules.update((a.asname or a.name).split(".")[0] for a in node.names if a.name.startswith("dsctl"))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_no_module_uses_another_modules_private_names() -> None:
    """A name with a leading underscore is its module's own: a second module that needs it gets a public name."""
    used = {str(p.relative_to(PACKAGE)): found for p in sorted(PACKAGE.rglob("*.py")) if (found := private_uses(p))}
    assert used == {}


def test_the_private_name_rule_catches_both_forms(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from dsctl.cluster import hostlist\nfrom dsctl.launch.schedule.timed import _x, y\n"
                   "hostlist._split('a')\nhostlist.expand('a')\n", encoding="utf-8")
    assert private_uses(bad) == ["line 2: from dsctl.launch.schedule.timed import _x", "line 3: hostlist._split"]


def _public(package: str) -> set[str]:
    tree = ast.parse((PACKAGE / package / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return {str(ast.literal_eval(e)) for e in node.value.elts}  # type: ignore[attr-defined]
    return set()


def test_other_packages_import_a_domain_package_only_through_its_public_surface() -> None:
    """Each domain package lists in ``__all__`` the modules and names others may use; an import of anything else
    from outside the package (commands, output, runners, other domain packages, benchmarks) fails here."""
    surfaces = {p: _public(p) for p in DOMAIN_PACKAGES}
    assert all(surfaces.values()), [p for p, s in surfaces.items() if not s]
    outside: list[str] = []
    files = [*PACKAGE.rglob("*.py"), *(PACKAGE.parent / "benchmarks").rglob("*.py")]
    for path in files:
        rel = path.relative_to(PACKAGE.parent).as_posix()
        for module, name, line in runtime_imports(path, PACKAGE):
            parts = module.split(".")
            if len(parts) < 2 or parts[0] != "dsctl" or parts[1] not in surfaces:
                continue
            if rel.startswith(f"dsctl/{parts[1]}/"):
                continue
            used = parts[2] if len(parts) > 2 else name
            if used and used not in surfaces[parts[1]]:
                outside.append(f"{rel}:{line} uses dsctl.{parts[1]}.{used}")
    assert outside == []
