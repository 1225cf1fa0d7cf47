"""The documentation site builds from docs/ with ``mkdocs build --strict`` (what CI checks)."""

import ast
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from markdown.extensions.toc import slugify

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
# [text](target) links; images and URLs with a scheme are not checked
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)


def _nav_pages(nav) -> list[str]:
    pages = []
    for entry in nav:
        for value in entry.values() if isinstance(entry, dict) else [entry]:
            pages.extend(_nav_pages(value) if isinstance(value, list) else [value])
    return pages


def test_every_docs_page_is_in_the_nav():
    # mkdocs only mentions an unlisted page at INFO level, so --strict would not catch it.
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    listed = set(_nav_pages(config["nav"]))
    on_disk = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert "reference/config_reinforce.md" in on_disk
    assert listed == on_disk


def _anchors(text: str) -> set[str]:
    """The heading ids mkdocs gives a page (the toc extension's slugs, numbered on repeats)."""
    seen: dict[str, int] = {}
    out = set()
    for line in _FENCE.sub("", text).splitlines():
        match = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            slug = slugify(re.sub(r"[`*]", "", match.group(1)), "-")
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            out.add(slug if count == 0 else f"{slug}_{count}")
    return out


def dead_anchors(pages: dict[str, str]) -> list[str]:
    """``page: link`` for every link of ``pages`` (path -> Markdown, paths relative to docs/)
    whose ``#anchor`` is not a heading of the page it points at."""
    anchors = {name: _anchors(text) for name, text in pages.items()}
    dead = []
    for name, text in pages.items():
        for target in _LINK.findall(_FENCE.sub("", text)):
            if "://" in target or "#" not in target:
                continue
            path, anchor = target.split("#", 1)
            page = os.path.normpath(os.path.join(os.path.dirname(name), path)) if path else name
            if page in anchors and anchor not in anchors[page]:
                dead.append(f"{name}: {target}")
    return dead


def test_no_docs_link_points_at_a_missing_heading():
    pages = {p.relative_to(DOCS).as_posix(): p.read_text() for p in DOCS.rglob("*.md")}
    assert dead_anchors(pages) == []


def test_a_dead_anchor_is_caught():
    pages = {
        "a.md": "# Top\n\n## IPPO and MAPPO\n\nsee [x](#ippo--mappo) and [y](b.md#two)\n",
        "b.md": "## One\n\n```\n## Two\n```\n",  # a heading inside code is no heading
    }
    assert dead_anchors(pages) == ["a.md: #ippo--mappo", "a.md: b.md#two"]
    pages["a.md"] = "## IPPO and MAPPO\n\n[x](#ippo-and-mappo) [y](b.md#one)\n"
    assert dead_anchors(pages) == []


def test_the_strict_build_fails_on_dead_anchors():
    # mkdocs only logs a dead anchor at INFO level unless validation says otherwise.
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["strict"] is True and config["validation"]["anchors"] == "warn"


# Public methods and extension points the API page must show (rendered in the build test).
API_OBJECTS = {
    "comlrl.core.trainer.TrainerBase": ["train", "evaluate", "save_model"],
    "comlrl.core.rollout.backends.protocol.RolloutBackend": ["generate_ids", "on_weights_updated"],
    "comlrl.core.logging.sink.Sink": ["write", "close"],
}


def _api_directives() -> dict[str, list[str] | None]:
    """``::: object`` directives of docs/api.md with their ``members`` option (None: none)."""
    text = (DOCS / "api.md").read_text()
    found: dict[str, list[str] | None] = {}
    for match in re.finditer(r"^::: (\S+)\n((?:    .*\n)*)", text, re.M):
        options = yaml.safe_load(textwrap.dedent(match.group(2))) if match.group(2) else None
        found[match.group(1)] = ((options or {}).get("options") or {}).get("members")
    return found


def _register_helpers() -> set[str]:
    """``module.register_*`` functions defined in the packages' sources."""
    names = set()
    for src in ROOT.glob("packages/*/src"):
        for path in src.glob("comlrl/**/*.py"):
            parts = path.relative_to(src).with_suffix("").parts
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            names.update(
                f"{module}.{node.name}"
                for node in ast.parse(path.read_text()).body
                if isinstance(node, ast.FunctionDef) and node.name.startswith("register_")
            )
    return names


def test_the_api_page_shows_the_public_methods_and_every_register_helper():
    directives = _api_directives()
    for obj, methods in API_OBJECTS.items():
        assert obj in directives, obj
        assert set(methods) <= set(directives[obj] or []), (obj, directives[obj])
    helpers = _register_helpers()
    assert "comlrl.core.logging.sink.register_sink" in helpers
    missing = sorted(helpers - set(directives))
    assert not missing, f"register_* helpers missing from docs/api.md: {missing}"


@pytest.mark.parametrize("obj, methods", list(API_OBJECTS.items()))
def test_api_objects_and_methods_exist(obj, methods):
    import importlib

    module, name = obj.rsplit(".", 1)
    cls = getattr(importlib.import_module(module), name)
    for method in methods:
        assert callable(getattr(cls, method)) and getattr(cls, method).__doc__, (obj, method)


def test_site_builds_strictly_with_the_api_page(tmp_path):
    site = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (site / "installation" / "index.html").exists()
    api = (site / "api" / "index.html").read_text()
    # Rendered from the docstrings, not just the headings of the page.
    assert "Settings of MAGRPO" in api
    for obj, methods in API_OBJECTS.items():
        for method in methods:
            assert f'id="{obj}.{method}"' in api, (obj, method)  # a rendered method entry
    assert 'id="comlrl.core.logging.sink.register_sink"' in api
    assert "Declare that" in api and "reward_range" in api
