"""One frame for every SVG picture: dsctl/svgdoc.py is the only place that opens an <svg> element, and its frame
is well-formed XML whatever the title holds."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from dsctl.svgdoc import SVG_END, svg_head

DSCTL = Path(__file__).resolve().parents[2] / "dsctl"


def test_no_writer_opens_its_own_svg_element() -> None:
    owners = sorted(str(p.relative_to(DSCTL)) for p in DSCTL.rglob("*.py") if "<svg " in p.read_text())
    assert owners == ["svgdoc.py"]


def test_frame_is_well_formed_with_a_hostile_title() -> None:
    title = 'plane <0> & "x" \x01\x1b[31m'
    root = ET.fromstring("\n".join([*svg_head(812.5, 300, title), SVG_END]))
    assert root.get("width") == "812.5" and root.get("viewBox") == "0 0 812.5 300"
    assert root.find("{http://www.w3.org/2000/svg}title").text.startswith('plane <0> & "x"')  # type: ignore[union-attr]
