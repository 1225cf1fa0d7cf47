"""The documentation site builds from docs/ with ``mkdocs build --strict`` (what CI checks)."""

import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


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
    on_disk = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert listed == on_disk


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
    assert "Declare that" in api and "reward_range" in api
