"""Parse class skeletons, split their methods between agents, and merge answers back."""

from __future__ import annotations

import ast
import copy
import re
import textwrap
from dataclasses import dataclass, field

from comlrl.tasks.common.code_text import extract_code, parse_code

ASSIGNMENT_MODES = ("arity", "round_robin")


def _class_node(tree: ast.Module, class_name: str | None) -> ast.ClassDef:
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    for node in classes:
        if class_name is None or node.name == class_name:
            return node
    raise ValueError(f"code_completion field 'skeleton' has no class {class_name!r}.")


def parse_skeleton(skeleton: str, class_name: str | None) -> tuple[ast.Module, ast.ClassDef]:
    """The skeleton's module tree and its target class; ValueError when it does not parse."""
    try:
        tree = ast.parse(skeleton)
    except SyntaxError as exc:
        raise ValueError(
            f"code_completion field 'skeleton' does not parse: {exc.msg} (line {exc.lineno})."
        ) from exc
    return tree, _class_node(tree, class_name)


def skeleton_methods(skeleton: str, class_name: str | None) -> list[ast.FunctionDef]:
    """The methods the agents must write: every method of the class except ``__init__``."""
    _, cls = parse_skeleton(skeleton, class_name)
    return [
        n
        for n in cls.body
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name != "__init__"
    ]


def assign_methods(methods: list[ast.FunctionDef], num_agents: int, mode: str) -> list[list[str]]:
    """Method names per agent.

    ``arity`` (two agents): methods that take only ``self`` go to agent 0, the rest to agent
    1; when that leaves an agent empty, methods alternate instead. ``round_robin``: method i goes
    to agent i mod N.
    """
    names = [m.name for m in methods]
    if mode == "arity" and num_agents == 2:
        simple = [m.name for m in methods if len(m.args.args) + len(m.args.kwonlyargs) <= 1]
        rest = [n for n in names if n not in simple]
        if simple and rest:
            return [simple, rest]
    return [
        [n for i, n in enumerate(names) if i % num_agents == agent] for agent in range(num_agents)
    ]


@dataclass
class AgentMethods:
    """What one agent delivered: parsed methods by name, and names whose code did not parse."""

    methods: dict[str, ast.FunctionDef] = field(default_factory=dict)
    broken: dict[str, str] = field(default_factory=dict)


def _defs_in(tree: ast.Module) -> list[ast.FunctionDef]:
    out = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append(node)
        elif isinstance(node, ast.ClassDef):
            out += [n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return out


def _chunks(code: str) -> list[str]:
    """Split code into blocks that each start at a ``def`` line of the outermost def indent."""
    lines = code.splitlines()
    starts = [i for i, ln in enumerate(lines) if re.match(r"^\s*(?:async\s+)?def\s", ln)]
    if not starts:
        return []
    indent = min(len(lines[i]) - len(lines[i].lstrip()) for i in starts)
    heads = [i for i in starts if len(lines[i]) - len(lines[i].lstrip()) == indent]
    bounds = heads + [len(lines)]
    return [textwrap.dedent("\n".join(lines[a:b])) for a, b in zip(bounds, bounds[1:])]


def parse_agent_methods(text: str) -> AgentMethods:
    """Methods found in one agent's answer (markdown fences and a class wrapper are allowed)."""
    code = textwrap.dedent(extract_code(text))
    found = AgentMethods()
    tree, _ = parse_code(code)
    if tree is not None:
        for node in _defs_in(tree):
            found.methods[node.name] = node
        return found
    for chunk in _chunks(code):
        name_match = re.match(r"\s*(?:async\s+)?def\s+(\w+)", chunk)
        chunk_tree, exc = parse_code(chunk)
        if chunk_tree is None:
            if name_match:
                found.broken[name_match.group(1)] = f"line {exc.lineno} of that method: {exc.msg}"
            continue
        defs = _defs_in(chunk_tree)
        for node in defs:
            found.methods[node.name] = node
    return found


def merge(item: dict, implementations: dict[str, ast.FunctionDef]) -> str:
    """The skeleton with each implemented method swapped in; unimplemented stubs stay."""
    tree, _ = parse_skeleton(item["skeleton"], item.get("class_name"))
    # Fresh parse per merge; the implementations are copied so the caller's trees stay intact.
    cls = _class_node(tree, item.get("class_name"))
    implementations = {name: copy.deepcopy(node) for name, node in implementations.items()}
    body = []
    for node in cls.body:
        if (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.name in implementations
        ):
            body.append(implementations[node.name])
        else:
            body.append(node)
    cls.body = body
    imports = "\n".join(item.get("import_statement") or [])
    merged = ast.unparse(tree)
    return (imports + "\n\n" + merged if imports else merged) + "\n"
