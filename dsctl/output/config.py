"""Table view of ``dsctl config show``."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import RenderableType
from rich.table import Table

from dsctl.output.registry import table_renderer
from dsctl.siteconfig import SiteConfig


def _value(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "-"
    return str(value) if value != "" else '""'


@table_renderer(SiteConfig)
def config_view(config: SiteConfig) -> Iterable[RenderableType]:
    files = Table(title="Configuration files (first file that sets a key wins; command-line options win over all)",
                  title_justify="left")
    files.add_column("file", overflow="fold")
    files.add_column("role")
    files.add_column("found")
    for searched in config.files:
        files.add_row(searched.path, searched.why, "yes" if searched.found else "no")
    yield files
    table = Table(title="Settings", title_justify="left")
    table.add_column("key", no_wrap=True)
    table.add_column("value")
    table.add_column("source", overflow="fold")
    for setting in config.settings:
        table.add_row(setting.key, _value(setting.value), setting.source)
    yield table
