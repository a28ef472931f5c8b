"""A tiny drawing model for the report's pictures: rectangles, lines and text with tooltips, written as
SVG (inline in self-contained HTML, native hover tooltips) or as PNG with Pillow (the ``report`` extra).
Both backends draw the same scene, so the HTML and the PNG show the same picture."""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape

from vllm_otel_startup.model.errors import ReportError

FONT = "DejaVu Sans, Verdana, Arial, sans-serif"
CHAR_EM = 0.6  # average advance of DejaVu Sans, in em: label fitting uses it on both backends


def text_width(text: str, size: float) -> float:
    return len(text) * size * CHAR_EM


def fit(text: str, size: float, room: float) -> str:
    """The text, shortened with an ellipsis to fit ``room`` pixels, or '' when not even 4 characters fit."""
    if text_width(text, size) <= room:
        return text
    n = int(room / (size * CHAR_EM)) - 1
    return text[:n] + "…" if n >= 4 else ""


@dataclass
class Rect:
    x: float
    y: float
    w: float
    h: float
    fill: str
    stroke: str | None = None
    stroke_width: float = 1.0
    hatch: str | None = None  # color of diagonal hatching over the fill
    title: str | None = None
    dash: bool = False


@dataclass
class Text:
    x: float
    y: float  # baseline middle: the text is vertically centred on y
    text: str
    size: float = 12
    color: str = "#222"
    anchor: str = "start"  # start | middle | end
    bold: bool = False
    title: str | None = None


@dataclass
class Line:
    x1: float
    y1: float
    x2: float
    y2: float
    color: str = "#999"
    width: float = 1.0
    dash: bool = False


@dataclass
class Scene:
    width: float
    height: float
    background: str = "#ffffff"
    items: list[Rect | Text | Line] = field(default_factory=list)
    layers: list[int] = field(default_factory=list)

    def add(self, item: Rect | Text | Line, layer: int = 2) -> None:
        """Draw order: by layer (0 backgrounds, 1 grid, 2 marks), then in the order added."""
        self.items.append(item)
        self.layers.append(layer)

    def ordered(self) -> list[Rect | Text | Line]:
        return [i for _, _, i in sorted(zip(self.layers, range(len(self.items)), self.items, strict=True),
                                        key=lambda t: (t[0], t[1]))]

    def svg(self) -> str:
        hatches = sorted({i.hatch for i in self.items if isinstance(i, Rect) and i.hatch})
        out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width:.0f}" height="{self.height:.0f}" '
               f'viewBox="0 0 {self.width:.0f} {self.height:.0f}" font-family="{FONT}" role="img">']
        if hatches:
            out.append("<defs>")
            for n, color in enumerate(hatches):
                out.append(f'<pattern id="hatch{n}" patternUnits="userSpaceOnUse" width="6" height="6" '
                           f'patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="6" stroke="{color}" '
                           f'stroke-width="2"/></pattern>')
            out.append("</defs>")
        out.append(f'<rect x="0" y="0" width="100%" height="100%" fill="{self.background}"/>')
        for i in self.ordered():
            if isinstance(i, Rect):
                stroke = (f' stroke="{i.stroke}" stroke-width="{i.stroke_width}"' if i.stroke else "") + (
                    ' stroke-dasharray="3,2"' if i.dash else "")
                body = f'<rect x="{i.x:.1f}" y="{i.y:.1f}" width="{max(i.w, 0.5):.1f}" height="{i.h:.1f}" ' \
                       f'fill="{i.fill}"{stroke}/>'
                if i.hatch:
                    body += f'<rect x="{i.x:.1f}" y="{i.y:.1f}" width="{max(i.w, 0.5):.1f}" height="{i.h:.1f}" ' \
                            f'fill="url(#hatch{hatches.index(i.hatch)})"/>'
                out.append(_titled(body, i.title, "bar"))
            elif isinstance(i, Text):
                weight = ' font-weight="bold"' if i.bold else ""
                body = (f'<text x="{i.x:.1f}" y="{i.y:.1f}" font-size="{i.size}" fill="{i.color}" '
                        f'text-anchor="{i.anchor}" dominant-baseline="central"{weight}>{escape(i.text)}</text>')
                out.append(_titled(body, i.title, "label"))
            else:
                dash = ' stroke-dasharray="4,3"' if i.dash else ""
                out.append(f'<line x1="{i.x1:.1f}" y1="{i.y1:.1f}" x2="{i.x2:.1f}" y2="{i.y2:.1f}" '
                           f'stroke="{i.color}" stroke-width="{i.width}"{dash}/>')
        out.append("</svg>")
        return "\n".join(out)

    def png(self, path: str, scale: float = 2.0) -> None:
        try:
            from PIL import Image, ImageDraw, ImageFont
        except ImportError:
            raise ReportError("PNG output needs Pillow: pip install 'vllm-otel-startup[report]'") from None
        img = Image.new("RGB", (int(self.width * scale), int(self.height * scale)), self.background)
        draw = ImageDraw.Draw(img)
        fonts: dict[tuple[float, bool], object] = {}

        def font(size: float, bold: bool):
            key = (size, bold)
            if key not in fonts:
                name = "DejaVuSans-Bold.ttf" if bold else "DejaVuSans.ttf"
                try:
                    fonts[key] = ImageFont.truetype(name, int(size * scale))
                except OSError:
                    try:
                        fonts[key] = ImageFont.load_default(size=int(size * scale))
                    except TypeError:  # Pillow < 10.1
                        fonts[key] = ImageFont.load_default()
            return fonts[key]

        def s(v: float) -> float:
            return v * scale

        for i in self.ordered():
            if isinstance(i, Rect):
                box = [s(i.x), s(i.y), s(i.x + max(i.w, 0.5)), s(i.y + i.h)]
                draw.rectangle(box, fill=i.fill)
                if i.hatch:
                    _hatch(draw, box, i.hatch, s(6), max(1, int(s(1.2))))
                if i.stroke:
                    width = max(1, int(s(i.stroke_width)))
                    if i.dash:
                        _dashed_rect(draw, box, i.stroke, width, s(3))
                    else:
                        draw.rectangle(box, outline=i.stroke, width=width)
            elif isinstance(i, Text):
                anchor = {"start": "lm", "middle": "mm", "end": "rm"}[i.anchor]
                draw.text((s(i.x), s(i.y)), i.text, fill=i.color, font=font(i.size, i.bold), anchor=anchor)
            else:
                if i.dash:
                    _dashed(draw, s(i.x1), s(i.y1), s(i.x2), s(i.y2), i.color, max(1, int(s(i.width))), s(4))
                else:
                    draw.line([s(i.x1), s(i.y1), s(i.x2), s(i.y2)], fill=i.color, width=max(1, int(s(i.width))))
        try:
            img.save(path, "PNG", optimize=True)
        except OSError as exc:
            raise ReportError(f"{path}: cannot write ({exc})") from None


def _titled(body: str, title: str | None, cls: str) -> str:
    if not title:
        return body
    return f'<g class="{cls}"><title>{escape(title)}</title>{body}</g>'


def _hatch(draw, box: list[float], color: str, step: float, width: int) -> None:
    x0, y0, x1, y1 = box
    h = y1 - y0
    k = x0 - h
    while k < x1:
        # the 45-degree line from (k, y1) to (k + h, y0), clipped to the box
        ax, ay, bx, by = k, y1, k + h, y0
        if ax < x0:
            ay -= x0 - ax
            ax = x0
        if bx > x1:
            by += bx - x1
            bx = x1
        if bx > ax:
            draw.line([ax, ay, bx, by], fill=color, width=width)
        k += step


def _dashed(draw, x1: float, y1: float, x2: float, y2: float, color: str, width: int, dash: float) -> None:
    length = max(((x2 - x1) ** 2 + (y2 - y1) ** 2) ** 0.5, 1e-9)
    dx, dy = (x2 - x1) / length, (y2 - y1) / length
    pos = 0.0
    while pos < length:
        end = min(pos + dash, length)
        draw.line([x1 + dx * pos, y1 + dy * pos, x1 + dx * end, y1 + dy * end], fill=color, width=width)
        pos += 2 * dash


def _dashed_rect(draw, box: list[float], color: str, width: int, dash: float) -> None:
    x0, y0, x1, y1 = box
    for a, b, c, d in ((x0, y0, x1, y0), (x1, y0, x1, y1), (x1, y1, x0, y1), (x0, y1, x0, y0)):
        _dashed(draw, a, b, c, d, color, width, dash)
