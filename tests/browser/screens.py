"""What the browser tests of #28 measure on: the two widths, the two schemes, where their
screenshots go, and how a background's lightness is read."""

from __future__ import annotations

from pathlib import Path

import pytest

SHOTS = Path("/tmp/thalamus-shots")
WIDE = {"width": 1400, "height": 900}
PHONE = {"width": 390, "height": 844}
SCREENS = [
    pytest.param(WIDE, "light", id="wide-light"),
    pytest.param(WIDE, "dark", id="wide-dark"),
    pytest.param(PHONE, "light", id="phone-light"),
    pytest.param(PHONE, "dark", id="phone-dark"),
]

# The luminance (0 dark to 1 light) of an element's computed background colour.
LUMINANCE = """el => {
  const [r, g, b] = getComputedStyle(el).backgroundColor.match(/[\\d.]+/g).map(Number);
  return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
}"""
