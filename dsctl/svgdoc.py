"""The one frame of every SVG picture dsctl writes: the root element (size, viewBox, the house font), a <title>
that viewers show and screen readers read, and a white background, so every picture opens and prints the same.
Text inside goes through :func:`dsctl.names.xml_text` (the one XML escaping rule)."""

from __future__ import annotations

from dsctl.names import xml_text

#: the font every picture asks for (any sans-serif where these are missing)
FONT_FAMILY = "Helvetica, Arial, sans-serif"
#: closes what :func:`svg_head` opened
SVG_END = "</svg>"


def _size(value: float) -> str:
    """A size in user units as SVG text: at most 2 decimals, no trailing zeros (``640``, ``812.5``)."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def svg_head(width: float, height: float, title: str, font_size: int = 11) -> list[str]:
    """The opening lines of a ``width`` x ``height`` picture (user units = pixels) titled ``title`` (plain
    text, escaped here); the caller appends its elements and then :data:`SVG_END`."""
    w, h = _size(width), _size(height)
    return [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
            f'font-family="{FONT_FAMILY}" font-size="{font_size}">',
            f"<title>{xml_text(title)}</title>",
            '<rect width="100%" height="100%" fill="white"/>']
