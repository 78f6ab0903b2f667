"""The guide builds as a site with `mkdocs build --strict`: no broken link or anchor, no page
left out of the navigation (issue 29). CI installs the `docs` extra (.ci/run), so there a missing
MkDocs is a failure, not a skip."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support.guide import DOCS, README, ROOT

MKDOCS_YML = ROOT / "mkdocs.yml"


def require_mkdocs() -> None:
    if importlib.util.find_spec("mkdocs") and importlib.util.find_spec("material"):
        return
    reason = "mkdocs-material is not installed (pip install -e '.[docs]')"
    if os.environ.get("LOOPCTL_REQUIRE_REAL_CLIS") == "1" or os.environ.get("CI") == "true":
        pytest.fail(reason + " (CI or LOOPCTL_REQUIRE_REAL_CLIS=1)")
    pytest.skip(reason)


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )


def nav_pages() -> list[str]:
    config = yaml.safe_load(MKDOCS_YML.read_text(encoding="utf-8"))
    return [next(iter(entry.values())) for entry in config["nav"]]


def test_every_page_is_in_the_navigation_and_every_nav_entry_is_a_page() -> None:
    assert sorted(nav_pages()) == sorted(path.name for path in DOCS.glob("*.md"))


def test_the_guide_builds_strict_with_no_broken_link(tmp_path: Path) -> None:
    require_mkdocs()
    site = tmp_path / "site"

    done = build(MKDOCS_YML, site)

    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    for name in nav_pages():
        stem = name.removesuffix(".md")
        built = site / ("index.html" if stem == "index" else f"{stem}/index.html")
        assert built.is_file(), built
    # Nothing of the build lands in the checkout.
    assert not (ROOT / "site").exists()


def test_a_broken_anchor_or_link_fails_the_build(tmp_path: Path) -> None:
    """The strict build really checks anchors and links (a config that only warned would pass)."""
    require_mkdocs()
    copy = tmp_path / "copy"
    shutil.copytree(DOCS, copy / "docs")
    shutil.copy(MKDOCS_YML, copy / "mkdocs.yml")
    for broken in ("[x](sandbox.md#no-such-heading)", "[x](no-such-page.md)"):
        page = copy / "docs" / "index.md"
        page.write_text((DOCS / "index.md").read_text(encoding="utf-8") + f"\n{broken}\n")

        done = build(copy / "mkdocs.yml", tmp_path / "site")

        assert done.returncode != 0, broken
        assert "no-such" in done.stderr, done.stderr


def test_readme_links_into_the_guide_and_every_link_resolves() -> None:
    import re

    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert {f"docs/{name}" for name in nav_pages()} <= set(targets)
    for target in targets:
        assert (ROOT / target).exists(), target
