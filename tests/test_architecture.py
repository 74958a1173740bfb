"""The package's import structure, read from its source: layers only import downwards, no module imports
another in a loop, no private name crosses a module boundary, no module outgrows 400 lines, and the light
entry points load no heavy dependency. `docs/architecture.md` explains the layers."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "recovery"

# Bottom to top; a module may import from its own layer or any layer below. A name is a module or a
# package (all its modules). Mirrors docs/architecture.md.
LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "recovery",
        "recovery.types",
        "recovery.ids",
        "recovery.configs",
        "recovery.generation",
        "recovery.store",
        "recovery.process_guard",
        "recovery.library_bars",
        "recovery.prefetch",
        "recovery.doubt",
        "recovery.protocol",
        "recovery.registry",
        "recovery.recipe_parser",
    ),
    ("recovery.segment", "recovery.metrics", "recovery.parallel", "recovery.models"),
    (
        "recovery.prompt_building",
        "recovery.model_config",
        "recovery.run_sections",
        "recovery.run_filters",
        "recovery.backends.settings",
    ),
    ("recovery.run_config",),
    ("recovery.interventions",),
    ("recovery.plan",),
    ("recovery.grading", "recovery.backends", "recovery.run_dir"),
    ("recovery.data", "recovery.toy", "recovery.rewards", "recovery.integrations"),
    ("recovery.report",),
    ("recovery.pipeline",),
    ("recovery.training_data", "recovery.analysis", "recovery.viewer"),
    ("recovery.training",),
    ("recovery.demo", "recovery.cli", "recovery.user_errors", "recovery.__main__"),
)
MAX_LINES = 400


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES: dict[str, Path] = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def layer_of(module: str) -> int:
    """The layer of the longest listed name that ``module`` is or lies in."""
    best, depth = None, -1
    for index, names in enumerate(LAYERS):
        for name in names:
            inside = module == name or (name != "recovery" and module.startswith(name + "."))
            if inside and name.count(".") > depth:
                best, depth = index, name.count(".")
    if best is None:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS and docs/architecture.md")
    return best


def _imports(tree: ast.AST):
    """Every import statement, at any depth: inside functions and under ``if TYPE_CHECKING:`` too (an import
    for annotations only is still a link between two modules; a cycle or an upward link hidden there counts)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _existing(name: str) -> str:
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def imports_of(module: str) -> list[tuple[str, str | None, int]]:
    """(imported module, imported name or None, line) for every in-package import of ``module``."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in _imports(tree):
        if isinstance(node, ast.Import):
            out += [(_existing(a.name), None, node.lineno) for a in node.names if a.name.split(".")[0] == "recovery"]
            continue
        if node.level:
            base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
            base = base[: len(base) - node.level + 1]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        if source.split(".")[0] != "recovery":
            continue
        for alias in node.names:
            submodule = f"{source}.{alias.name}"
            if submodule in MODULES:
                out.append((submodule, None, node.lineno))
            else:
                out.append((_existing(source), alias.name, node.lineno))
    return out


# A string that is a module's dotted path (or ``module:attribute``): a link made at run time (a lazy export, a
# plug-in path, a worker's preload list) that the import statements do not show.
_MODULE_STRING = re.compile(r"^(recovery(?:\.\w+)+)(?::(\w+))?$")


def string_links(module: str) -> list[tuple[str, str | None, int]]:
    """(module, attribute or None, line) for every string in ``module``'s code, docstrings aside, that names an
    in-package module."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    links = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            match = _MODULE_STRING.match(node.value.strip())
            if match and _existing(match.group(1)) != "recovery":
                links.append((_existing(match.group(1)), match.group(2), node.lineno))
    return links


GRAPH = {module: imports_of(module) + string_links(module) for module in MODULES}


def test_every_module_has_a_layer():
    for module in MODULES:
        layer_of(module)


def test_no_module_imports_upwards():
    upward = [
        f"{module}:{line} imports {target} (layer {layer_of(target)} above {layer_of(module)})"
        for module, targets in GRAPH.items()
        for target, _, line in targets
        if layer_of(target) > layer_of(module)
    ]
    assert not upward, "\n".join(upward)


def test_no_import_cycles():
    edges = {m: {t for t, _, _ in targets if t != m and t in MODULES} for m, targets in GRAPH.items()}
    # A package imports its own modules to export them; a module importing its package's face is the
    # loop that counts, so the face's own edges are left out.
    for module, path in MODULES.items():
        if path.name == "__init__.py":
            edges[module] = {t for t in edges[module] if not t.startswith(module + ".")}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for module in sorted(edges):
        if module not in index:
            visit(module)
    assert not cycles, "import cycles:\n" + "\n".join(" ↔ ".join(c) for c in cycles)


def test_no_private_name_crosses_a_module():
    crossing = [
        f"{module}:{line} imports {name} from {target}"
        for module, targets in GRAPH.items()
        for target, name, line in targets
        if name and name.startswith("_") and not name.startswith("__") and target != module
    ]
    assert not crossing, "\n".join(crossing)


def _module_aliases(module: str, tree: ast.AST) -> set[str]:
    """Local names bound to an in-package module (``import recovery.x as y``, ``from recovery import x``)."""
    aliases = set()
    for node in _imports(tree):
        if isinstance(node, ast.Import):
            aliases |= {a.asname for a in node.names if a.asname and a.name in MODULES}
        elif node.module and not node.level:
            aliases |= {a.asname or a.name for a in node.names if f"{node.module}.{a.name}" in MODULES}
    return aliases


def test_no_private_attribute_of_another_module_is_used():
    used = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        aliases = _module_aliases(module, tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                used.append(f"{module}:{node.lineno} uses {node.value.id}.{node.attr}")
    assert not used, "\n".join(used)


def test_no_module_over_the_line_limit():
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, long


def test_the_graph_holds_links_named_in_strings():
    """A module named in a string (a lazy export) is a link like an import: an upward one hidden there fails
    `test_no_module_imports_upwards`, a loop `test_no_import_cycles`."""
    assert "recovery.backends.hf" in {t for t, _, _ in GRAPH["recovery.backends"]}
    assert all(t.startswith("recovery.") for t, _, _ in string_links("recovery.training"))


def test_the_graph_holds_imports_inside_functions():
    """Backends are imported lazily, inside functions; the graph must see those too, or a lazy upward
    import would pass unnoticed."""
    assert "recovery.backends.hf" in {target for target, _, _ in GRAPH["recovery.backends.registry"]}


@pytest.mark.parametrize(
    "entry",
    ["recovery", "recovery.pipeline", "recovery.models", "recovery.generation", "recovery.run_dir", "recovery.cli"],
)
def test_light_entry_points_load_no_torch(entry):
    code = f"import sys, {entry}; heavy = [m for m in ('torch', 'transformers', 'trl', 'ray') if m in sys.modules]; print(heavy)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def _inside_run_dir(module: str) -> bool:
    return module == "recovery.run_dir" or module.startswith("recovery.run_dir.")


def _names_a_table(node: ast.AST) -> str | None:
    """What names a run-directory table in ``node``: an imported or used ``*_TABLE`` constant, or a
    ``.table(...)`` call given a literal name (or a ``*_TABLE``); None otherwise."""
    if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "recovery":
        names = [a.name for a in node.names if a.name.endswith("_TABLE")]
        return f"imports {', '.join(names)}" if names else None
    if isinstance(node, ast.Attribute) and node.attr.endswith("_TABLE") and node.attr.isupper():
        return f"uses {node.attr}"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "table" and node.args:
        arg = node.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            return f"calls .table({arg.value!r})"
        name = arg.attr if isinstance(arg, ast.Attribute) else arg.id if isinstance(arg, ast.Name) else ""
        if name.endswith("_TABLE"):
            return f"calls .table({name})"
    return None


def test_no_table_is_named_outside_run_dir():
    """The run directory has one door (`recovery.run_dir.open`): readers use a `Run`'s records and rows, and
    writers its tables by attribute (``run.tables.chains``), so table names stay inside `recovery.run_dir`."""
    named = [
        f"{module}:{node.lineno} {what}"
        for module, path in MODULES.items()
        if not _inside_run_dir(module) and module != "recovery.store"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if (what := _names_a_table(node))
    ]
    assert not named, "\n".join(named)


def test_the_table_check_sees_each_way_of_naming_a_table():
    code = (
        "from recovery.run_dir import CHAINS_TABLE\n"
        "from recovery.run_dir import records\n"
        "run.table(records.GRADES_TABLE)\n"
        "run.table('kept')\n"
        "run.tables.chains.count()\n"
    )
    found = [what for node in ast.walk(ast.parse(code)) if (what := _names_a_table(node))]
    assert sorted(found) == sorted(
        ["imports CHAINS_TABLE", "uses GRADES_TABLE", "calls .table(GRADES_TABLE)", "calls .table('kept')"]
    )


# Third-party packages heavy enough that a light entry point (the CLI, `import recovery.pipeline`) must not load
# them at import: the only reason an import of the package's own module may sit inside a function.
HEAVY_PACKAGES = frozenset(
    {
        "torch",
        "transformers",
        "trl",
        "ray",
        "vllm",
        "matplotlib",
        "datasets",
        "peft",
        "accelerate",
        "deepspeed",
        "wandb",
        "sklearn",
        "spacy",
        "fastapi",
        "uvicorn",
        "openai",
        "httpx",
        "math_verify",
        "sympy",
        "pandas",
        "scipy",
        "huggingface_hub",
        "verl",
        "openrlhf",
        "tensordict",
        "latex2sympy2_extended",
    }
)


def _module_level_links(module: str) -> tuple[set[str], set[str]]:
    """(in-package modules, heavy third-party packages) that ``module`` imports at module level."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    own, heavy = set(), set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                root = name.split(".")[0]
                if root in HEAVY_PACKAGES:
                    heavy.add(root)
    own = {t for t, _, line in imports_of(module) if _at_module_level(tree, line)}
    return own, heavy


def _at_module_level(tree: ast.Module, line: int) -> bool:
    return any(
        node.lineno <= line <= node.end_lineno for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))
    )


def _heavy_on_import(module: str, memo: dict[str, set[str]], seen: frozenset = frozenset()) -> set[str]:
    """The heavy packages importing ``module`` loads (its package faces and module-level imports, transitively)."""
    if module in memo:
        return memo[module]
    if module in seen:
        return set()
    seen = seen | {module}
    own, heavy = _module_level_links(module)
    parts = module.split(".")
    faces = {".".join(parts[:i]) for i in range(1, len(parts))} & set(MODULES)
    for target in (own | faces) - {module}:
        heavy |= _heavy_on_import(target, memo, seen)
    memo[module] = heavy
    return heavy


def test_imports_inside_functions_keep_a_heavy_dependency_out_and_say_so():
    """An own module is imported inside a function only when importing it loads a heavy package (so a light
    entry point stays light), with a comment on the import saying so (``# lazy: loads torch``)."""
    memo: dict[str, set[str]] = {}
    wrong = []
    for module, path in MODULES.items():
        lines = path.read_text(encoding="utf-8").splitlines()
        tree = ast.parse("\n".join(lines))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for inner in ast.walk(node):
                if not isinstance(inner, (ast.Import, ast.ImportFrom)):
                    continue
                targets = {t for t, _, line in imports_of(module) if inner.lineno <= line <= inner.end_lineno}
                if not targets:
                    continue
                heavy = set().union(*(_heavy_on_import(t, memo) for t in targets))
                commented = any("#" in lines[i] for i in range(inner.lineno - 1, inner.end_lineno))
                if not heavy:
                    wrong.append(
                        f"{module}:{inner.lineno} imports {sorted(targets)} in a function; it loads nothing heavy"
                    )
                elif not commented:
                    wrong.append(f"{module}:{inner.lineno} imports {sorted(targets)} in a function without saying why")
    assert not wrong, "\n".join(wrong)


# -- each rule once, at its owner (issue 38) ---------------------------------------------------------------------


# What only the door through which a run is written calls (`recovery.run_dir.writing`).
_RUN_WRITING = {"exclusive_writer", "write_manifest", "write_summary", "mark_writing", "mark_finished"}


def _rule_breaks(module: str, tree: ast.AST) -> list[str]:
    """What ``module`` does that belongs to another owner: the request seed mask (`recovery.ids`), a run's
    config read from its directory (`recovery.run_dir`), a run's lock, manifest, marks or summary written
    (`recovery.run_dir.writing`), the verdict's part (`recovery.grading.verdict`: a
    think-closer regex, `answer_section`, a closure read off `split_reasoning`), a problem's user turn made into a message (`recovery.prompt_building`)."""
    found = []
    calls = {getattr(n.func, "attr", getattr(n.func, "id", None)) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    if "split_reasoning" in calls and module != "recovery.segment":
        closed = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "closed"]
        found.extend(
            f"{module}:{n.lineno} decides closure itself (use recovery.segment.answer_after_reasoning)" for n in closed
        )
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value == 0x7FFFFFFF and module != "recovery.ids":
            found.append(f"{module}:{node.lineno} masks a seed to 31 bits (use recovery.ids.request_seed)")
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        if name == "load_run_config_from_dir" and not _inside_run_dir(module):
            found.append(f"{module}:{node.lineno} reads a run's config itself (use recovery.run_dir.open(path).config)")
        if name in _RUN_WRITING and module not in ("recovery.run_dir.writing", "recovery.run_dir"):
            found.append(f"{module}:{node.lineno} writes a run's {name} itself (use recovery.run_dir.writing)")
        if name == "answer_section" and not module.startswith("recovery.grading"):
            found.append(f"{module}:{node.lineno} cuts a verdict's part itself (use recovery.grading.verdict)")
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and "(?" in node.value
            and re.search(r"</think>|</thought>", node.value)
            and module not in ("recovery.grading.verdict", "recovery.segment")
        ):
            found.append(f"{module}:{node.lineno} has its own think-closer regex (use recovery.grading.verdict)")
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", None) == "Message"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value == "user"
            and any("user_prompt" in ast.dump(arg) or "template_prompt" in ast.dump(arg) for arg in node.args[1:])
            and not module.startswith("recovery.prompt_building")
        ):
            found.append(f"{module}:{node.lineno} builds a problem's user turn (use recovery.prompt_building)")
    return found


#: The built-in styles' names (`recovery.protocol.STYLES`), as a module outside the styles would spell them.
_STYLE_NAMES = ("default", "reference")
#: Modules where those words name the entries of another registry, not a protocol style: the sentence
#: splitters, the judge prompts, the interventions' rule sets, a table column of human labels.
_OTHER_NAMES = {
    "recovery.doubt": "sentence splitters",
    "recovery.analysis.doubt_section": "sentence splitters' descriptions",
    "recovery.grading.judge": "judge prompts",
    "recovery.run_config": "judge prompts (GradingConfig.judge_prompt)",
    "recovery.interventions.reference": "the authors' interventions' rule set",
    "recovery.analysis.agreement": "the column of reference labels",
}


def _is_reference(node: ast.AST) -> bool:
    """``"reference"``, a name for it (``REFERENCE``), or a collection holding one."""
    if isinstance(node, ast.Constant):
        return node.value == "reference"
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_is_reference(item) for item in node.elts)
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return name in ("REFERENCE", "_REFERENCE")


def _style_literals(node: ast.AST) -> list[ast.Constant]:
    """The style names spelled as string literals in a key, a comparison or a subscript at ``node``."""
    if isinstance(node, ast.Dict):
        keys = [key for key in node.keys if key is not None]
    elif isinstance(node, ast.Compare):
        keys = [node.left, *node.comparators]
    elif isinstance(node, ast.Subscript):
        keys = [node.slice]
    else:
        return []
    items = [item for key in keys for item in (key.elts if isinstance(key, (ast.Tuple, ast.List, ast.Set)) else [key])]
    return [item for item in items if isinstance(item, ast.Constant) and item.value in _STYLE_NAMES]


def _protocol_tests(module: str, tree: ast.AST) -> list[str]:
    """Where ``module`` asks which protocol a part runs in: a call of ``style(...)`` or ``part_style(...)``, a
    comparison with ``"reference"``, or a style's name as a literal key, comparand or subscript (a table of
    per-style values). Only the plan asks (`recovery.plan`), and only the styles' own modules
    (`recovery.plan.styles`) spell a style's name; `recovery.protocol` names the default one."""
    if module == "recovery.plan" or module.startswith("recovery.plan."):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in ("style", "part_style"):
                found.append(f"{module}:{node.lineno} calls {name}(...) (read the run's plan: recovery.plan)")
        if module in _OTHER_NAMES or module == "recovery.protocol":
            continue
        if isinstance(node, ast.Compare) and any(_is_reference(side) for side in (node.left, *node.comparators)):
            found.append(f"{module}:{node.lineno} compares with 'reference' (read the run's plan: recovery.plan)")
        elif _style_literals(node):
            found.append(
                f"{module}:{node.lineno} keys or compares by a style's name (take the part's object from the run's "
                "plan, or recovery.protocol.DEFAULT_STYLE)"
            )
    return found


def test_only_the_plan_asks_which_protocol_a_part_runs():
    """A run's protocol is resolved once, into its plan (`recovery.plan`); no other module tests it or keys a
    table by a style's name (issues 38 and 46)."""
    found = [
        line
        for module, path in MODULES.items()
        for line in _protocol_tests(module, ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert not found, "\n".join(found)


def test_the_protocol_check_sees_each_way_of_asking():
    code = (
        "if config.style('length') == 'reference': pass\n"
        "style = part_style(protocol, parts, 'doubt')\n"
        "authors = request.prompt_style in ('reference',)\n"
        "if rules != REFERENCE: pass\n"
        "caption = {'reference': 'theirs'}.get(length, 'ours')\n"
        "if config.protocol != 'default': pass\n"
        "tokens = JUDGE_TOKENS['default']\n"
        "if splitter is None: pass\n"
    )
    assert len(_protocol_tests("recovery.elsewhere", ast.parse(code))) == 8
    assert _protocol_tests("recovery.plan.run_plan", ast.parse(code)) == []
    assert _protocol_tests("recovery.plan.styles.authors", ast.parse(code)) == []


def test_the_modules_exempt_from_the_style_names_rule_still_spell_them():
    """Each module exempt from the style-name rule because the words name something else still uses them (an
    exemption left behind after a module stopped needing it would hide a style test added later)."""
    for module, reason in _OTHER_NAMES.items():
        tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
        spelled = any(isinstance(node, ast.Constant) and node.value == "reference" for node in ast.walk(tree))
        assert spelled, f"{module} is exempt for {reason} but spells no such name"


def test_each_rule_has_one_owner():
    """Seeds, the run's config, writing a run, the verdict and the user turn each live in one module (issue 38,
    issue 46)."""
    found = {
        module: _rule_breaks(module, ast.parse(path.read_text(encoding="utf-8"))) for module, path in MODULES.items()
    }
    wrong = [line for lines in found.values() for line in lines]
    assert not wrong, "\n".join(wrong)


def test_the_owner_check_sees_each_rule_broken():
    code = (
        "seed = item_seed(0, 'x') & 0x7FFFFFFF\n"
        "config = load_run_config_from_dir(path)\n"
        "AFTER = r'(?s)</think>(?P<answer>.*)'\n"
        "part = verdict.answer_section(text)\n"
        "messages = (Message('user', self.user_prompt(problem)),)\n"
        "with exclusive_writer(path):\n    run_dir.mark_finished(run)\n"
        "part = split.answer_text if (split := split_reasoning(text)).closed else text\n"
    )
    assert len(_rule_breaks("recovery.elsewhere", ast.parse(code))) == 8
    assert _rule_breaks("recovery.run_dir.writing", ast.parse("mark_finished(run)")) == []
