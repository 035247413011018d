"""The README stays true to the tree: its contents list every section, its links lead
somewhere, and its table of plugins names every built-in one with its arguments."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vscheduler.registry import ACTIONS_GROUP, PLUGINS_GROUP, installed

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _prose(text: str) -> str:
    """The text without its fenced code blocks (a `## ` there is not a heading)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)


def _slug(heading: str) -> str:
    """A heading's anchor, as GitHub makes it: lower case, punctuation dropped, spaces
    as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _headings(text: str, level: str = "#+") -> list[str]:
    return re.findall(rf"^{level} (.+)$", _prose(text), flags=re.M)


def test_the_contents_list_every_section_in_order():
    text = (ROOT / "README.md").read_text()
    listed = re.findall(r"^- \[(.+?)\]\(#(.+?)\)$", text, flags=re.M)
    sections = _headings(text, "##")
    assert [name for name, _ in listed] == sections
    assert [anchor for _, anchor in listed] == [_slug(name) for name in sections]


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_every_link_leads_somewhere(path: Path):
    text = path.read_text()
    anchors = {_slug(heading) for heading in _headings(text)}
    for target in re.findall(r"\]\(([^)\s]+)\)", _prose(text)):
        if re.match(r"[a-z]+://", target):
            continue
        place, _, anchor = target.partition("#")
        if place:
            linked = (path.parent / place).resolve()
            assert linked.exists(), f"{path.name}: link to a missing {place}"
            if anchor and linked.suffix == ".md":
                assert anchor in {_slug(h) for h in _headings(linked.read_text())}, (
                    f"{path.name}: no section #{anchor} in {place}")
        else:
            assert anchor in anchors, f"{path.name}: no section #{anchor}"


def test_the_plugin_table_names_every_built_in_with_its_arguments():
    text = (ROOT / "README.md").read_text()
    section = text.split("## Plugins and their arguments", 1)[1].split("\n## ", 1)[0]
    rows = {m.group(1): m.group(2) for m in re.finditer(
        r"^\| `([\w-]+)` \((?:action|plugin)\) \|[^|]*\| (.*) \|$", section, flags=re.M)}
    for group in (ACTIONS_GROUP, PLUGINS_GROUP):
        for name, point in installed(group).items():
            if not point.value.startswith("vscheduler."):  # (another package's)
                continue
            assert name in rows, f"{name} is missing from the README's plugin table"
            keys = re.findall(r"`([^`]+)`", rows[name])
            assert keys == [argument.key for argument in point.load().arguments], name


def test_the_conf_mistakes_shown_are_what_the_conf_shown_gives(tmp_path: Path, capsys):
    """The README's two `bad conf` lines come from its sample conf with one value and
    one name spoilt, as it says."""
    from vscheduler.cli import main

    text = (ROOT / "README.md").read_text()
    sample = text.split("The format is Volcano's `volcano-scheduler.conf`:\n\n```yaml\n", 1)[1]
    sample = sample.split("```", 1)[0]
    shown = re.findall(r"^    (vscheduler: bad conf: my\.conf: .+)$", text, flags=re.M)
    spoilt = [sample.replace("binpack.weight: 10", "binpack.weight: ten"),
              sample.replace("  - name: gang\n", "  - name: gnag\n")]
    assert len(shown) == len(spoilt) == 2
    for line, conf in zip(shown, spoilt, strict=True):
        path = tmp_path / "my.conf"
        path.write_text(conf)
        assert main(["simulate", str(ROOT / "examples" / "quickstart.yaml"),
                     "--conf", str(path)]) == 2
        assert capsys.readouterr().err == line.replace("my.conf", str(path)) + "\n"
