"""docs/howto/settings.md, "Which process reads which setting", names every setting once, in agreement with
docs/SERVICE.md's configuration table (its "Used by" column)."""

from __future__ import annotations

import re
from pathlib import Path

from app.core.settings import Settings

ROOT = Path(__file__).resolve().parents[3]
GROUPS = {"API and workers": "both", "API only": "api", "Workers only": "worker"}


def listed_groups() -> dict[str, str]:
    """``{BIND_NAME: "both" | "api" | "worker"}`` from docs/howto/settings.md's list."""
    text = (ROOT / "docs" / "howto" / "settings.md").read_text(encoding="utf-8")
    section = text.split("# Which process reads which setting", 1)[1].split("\n#", 1)[0]
    found: dict[str, str] = {}
    for item in re.split(r"\n- ", section)[1:]:
        group = next(g for label, g in GROUPS.items() if item.startswith(f"**{label}**"))
        listed = item.split(":", 1)[1]  # after the label (a parenthesis before it may name other settings)
        for name in re.findall(r"`(BIND_[A-Z_]+)`", listed):
            assert name not in found, f"{name} is listed twice"
            found[name] = group
    return found


def service_groups() -> dict[str, str]:
    """The same from docs/SERVICE.md's table: ``all`` and ``API, worker`` are both, the scheduler is a worker."""
    found = {}
    for line in (ROOT / "docs" / "SERVICE.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 4 and cells[1].startswith("`BIND_"):
            users = {u.strip().replace("scheduler", "worker").replace("all", "API") for u in cells[3].split(",")}
            users |= {"worker"} if cells[3] == "all" else set()
            group = "both" if users == {"API", "worker"} else "api" if users == {"API"} else "worker"
            for name in re.findall(r"`(BIND_[A-Z_]+)`", cells[1]):
                found[name] = group
    return found


def test_readme_lists_every_setting_once() -> None:
    assert set(listed_groups()) == {f"BIND_{name.upper()}" for name in Settings.model_fields}


def test_readme_and_service_doc_agree_on_who_reads_each_setting() -> None:
    readme, service = listed_groups(), service_groups()
    assert set(service) == set(readme)
    assert {name: (readme[name], service[name]) for name in readme if readme[name] != service[name]} == {}
