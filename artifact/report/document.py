"""A small document model, rendered to Markdown, HTML and LaTeX from the same blocks.

Hand-written rather than a Markdown converter because the report needs all three
formats with the same tables and figures, and LaTeX output with balanced environments;
a block list renders to each in a few lines with no extra dependency.

- HTML is one self-contained file: every image is a data URI (appendix.html alone keeps
  its figures) and every table scrolls sideways instead of running past the page.
- LaTeX compiles under pdflatex with packages of texlive-latex-base and -recommended
  (geometry, graphicx, longtable, array, float, caption): sized, ragged-right columns
  (their widths follow the cells' lengths), captions through the caption package (the
  paper's figure names, no second numbering), `[H]` floats.
"""

from __future__ import annotations

import base64
import html
import math
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

# A cell counts at most this many characters when columns are sized (LaTeX), so one
# long reason does not squeeze every other column to nothing.
MAX_CELL_WEIGHT = 48
# Characters a table line holds on A4 with 2 cm margins, by the type size a table of
# its number of columns is set in (small up to 4, footnotesize up to 9).
LINE_CHARS = {"scriptsize": 136, "footnotesize": 118, "small": 100}
PAD_CHARS = 2.5  # a column's padding (2 x 3 pt) and a little slack, in characters
VERDICT_CLASSES = {
    "reproduced": "ok",
    "pass": "ok",
    "ran": "ok",
    "not reproduced": "bad",
    "FAIL": "bad",
    "failed": "bad",
    "inconclusive": "warn",
    "ran partly": "warn",
}


@dataclass
class Doc:
    title: str = ""
    date: str = ""
    blocks: list[tuple] = field(default_factory=list)

    def h(self, level: int, text: str) -> None:
        self.blocks.append(("h", level, text))

    def p(self, text: str) -> None:
        self.blocks.append(("p", text))

    def items(self, items: list[str]) -> None:
        self.blocks.append(("list", items))

    def table(self, header: list[str], rows: list[list[str]]) -> None:
        if any(len(r) != len(header) for r in rows):
            raise ValueError(f"a row of table {header} has another number of cells")
        self.blocks.append(("table", header, [[str(c) for c in r] for r in rows]))

    def image(self, path: str, caption: str) -> None:
        self.blocks.append(("img", path, caption))


def column_weights(header: list[str], rows: list[list[str]], budget: float) -> list[float]:
    """Relative column widths, summing to 1, for a line of `budget` characters: every
    column gets at least its longest unbreakable word (header words count bold: wider);
    the rest goes to the columns by how much more their longest cell (capped) needs."""
    least, want = [], []
    for i, head in enumerate(header):
        cells = [r[i] for r in rows if i < len(r)]
        words = [w for c in cells for w in re.split(r"[\s_/-]+", c)]
        word = max([len(w) for w in words] + [1.25 * len(w) for w in str(head).split()] + [2])
        least.append(word + PAD_CHARS)
        longest = min(max((len(c) for c in cells), default=0), MAX_CELL_WEIGHT)
        want.append(max(word, longest) + PAD_CHARS)
    spare, extra = budget - sum(least), sum(want) - sum(least)
    if sum(want) <= budget:
        widths = want
    elif spare <= 0 or extra <= 0:
        widths = least
    else:
        widths = [lo + spare * (w - lo) / extra for lo, w in zip(least, want, strict=True)]
    total = sum(widths) / 0.998  # a hair under the line: rounded widths never exceed it
    return [w / total for w in widths]


def to_markdown(doc: Doc) -> str:
    out = [f"# {doc.title}"] if doc.title else []
    for b in doc.blocks:
        if b[0] == "h":
            out.append("#" * b[1] + " " + b[2])
        elif b[0] == "p":
            out.append(b[1])
        elif b[0] == "list":
            out.append("\n".join(f"- {i}" for i in b[1]))
        elif b[0] == "table":
            cell = lambda s: str(s).replace("|", "\\|")  # noqa: E731
            lines = ["| " + " | ".join(map(cell, b[1])) + " |", "|" + "---|" * len(b[1])]
            lines += ["| " + " | ".join(map(cell, r)) + " |" for r in b[2]]
            out.append("\n".join(lines))
        elif b[0] == "img":
            out.append(f"![{b[2]}]({b[1]})\n\n*{b[2]}*")
    return "\n\n".join(out) + "\n"


def _inline_html(text: str, breaks: bool = False) -> str:
    """Escaped text with **bold** and `code`; `breaks`: breakable after '_' and '/' (long
    config ids and paths in table cells wrap there)."""
    t = html.escape(text)
    if breaks:
        t = re.sub(r"([_/])(?=\w)", r"\1<wbr/>", t)
    return re.sub(
        r"\*\*(.+?)\*\*", r"<strong>\1</strong>", re.sub(r"`(.+?)`", r"<code>\1</code>", t)
    )


CSS = (
    "body{font-family:system-ui,sans-serif;max-width:86em;margin:1.5em auto;padding:0 1em;"
    "line-height:1.4;color:#111}h1{font-size:1.6em}h2{margin-top:1.6em}"
    ".tbl{overflow-x:auto;margin:.8em 0}table{border-collapse:collapse;font-size:.88em}"
    "td,th{border:1px solid #ccc;padding:.15em .45em;text-align:left;vertical-align:top;"
    "overflow-wrap:break-word}th{background:#f2f2f2}td.ok{background:#e3f4e3}"
    "td.bad{background:#fbe3e3}td.warn{background:#fdf3d8}img{max-width:100%}"
    "figure{margin:1em 0}figcaption{font-size:.9em;color:#333}code{background:#f4f4f4}"
)


def _data_uri(path: Path) -> str | None:
    """The image as a data URI, so appendix.html needs no file beside it."""
    if not path.is_file():
        return None
    mime = {".png": "image/png", ".svg": "image/svg+xml"}.get(path.suffix, "image/png")
    return f"data:{mime};base64," + base64.b64encode(path.read_bytes()).decode()


def _html_cell(text: str) -> str:
    return _inline_html(text, breaks=True)


def _html_table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{_html_cell(c)}</th>" for c in header)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="{VERDICT_CLASSES[c]}">{_html_cell(c)}</td>'
            if c in VERDICT_CLASSES
            else f"<td>{_html_cell(c)}</td>"
            for c in r
        )
        + "</tr>"
        for r in rows
    )
    return (
        f'<div class="tbl"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'
    )


def to_html(doc: Doc, base: Path) -> str:
    """`base`: the folder image paths are relative to (their bytes are embedded)."""
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(doc.title)}</title>",
        f"<style>{CSS}</style>",
        "</head><body>",
    ]
    if doc.title:
        out.append(f"<h1>{_inline_html(doc.title)}</h1>")
    for b in doc.blocks:
        if b[0] == "h":
            out.append(f"<h{b[1] + 1}>{_inline_html(b[2])}</h{b[1] + 1}>")
        elif b[0] == "p":
            out.append(f"<p>{_inline_html(b[1])}</p>")
        elif b[0] == "list":
            out.append("<ul>" + "".join(f"<li>{_inline_html(i)}</li>" for i in b[1]) + "</ul>")
        elif b[0] == "table":
            out.append(_html_table(b[1], b[2]))
        elif b[0] == "img":
            cap, uri = _inline_html(b[2]), _data_uri(Path(base) / b[1])
            out.append(
                f'<figure><img src="{uri}" alt="{cap}"><figcaption>{cap}</figcaption></figure>'
                if uri
                else f"<p>(figure missing: {html.escape(b[1])})</p>"
            )
    out.append("</body></html>")
    return "\n".join(out) + "\n"


_TEX_ESCAPES = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_\allowbreak{}",  # long config ids break at their underscores
    "/": r"/\allowbreak{}",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
    # pdflatex's utf8 input knows few symbols: the ones the report writes, as LaTeX
    "±": r"$\pm$",
    "×": r"$\times$",
    "≥": r"$\geq$",
    "≤": r"$\leq$",
    "→": r"$\rightarrow$",
    "Δ": r"$\Delta$",
    "–": "--",
    "—": "---",
    "…": r"\dots{}",
    "µ": r"$\mu$",
    "\0": "{}",  # tex_escape's mark between two hyphens
}


def _tex_char(c: str) -> str:
    if c in _TEX_ESCAPES:
        return _TEX_ESCAPES[c]
    if c.isascii():
        return c
    # anything else (a host name, a CPU model): its ASCII letters, never an error
    return unicodedata.normalize("NFKD", c).encode("ascii", "ignore").decode() or "?"


def tex_escape(text: str) -> str:
    # "--" stays two hyphens (`--allow-power-cap`), never an en dash
    t = "".join(_tex_char(c) for c in re.sub(r"-(?=-)", "-\0", str(text)))
    t = re.sub(r"\*\*(.+?)\*\*", r"\\textbf{\1}", t)
    return re.sub(r"`(.+?)`", r"\\texttt{\1}", t)


LATEX_PREAMBLE = (
    r"\documentclass[10pt]{article}",
    r"\usepackage[a4paper,margin=2cm]{geometry}",
    r"\usepackage{graphicx}",
    r"\usepackage{longtable}",
    r"\usepackage{array}",
    r"\usepackage{float}",
    # captions name the paper's figure ("Fig. 6: ..."): a "Figure 3:" label would clash
    r"\usepackage[font=small,labelformat=empty]{caption}",
    r"\setlength{\parindent}{0pt}",
    r"\setlength{\parskip}{0.5em}",
    r"\setlength{\tabcolsep}{3pt}",
    r"\setlength{\emergencystretch}{3em}",
)


def _latex_table(header: list[str], rows: list[list[str]]) -> list[str]:
    size = "small" if len(header) <= 4 else "footnotesize" if len(header) <= 9 else "scriptsize"
    # each column w x linewidth in all, its padding included: the table is the text width
    cols = "".join(
        r">{\raggedright\arraybackslash}p{\dimexpr "
        + f"{math.floor(w * 1000) / 1000:.3f}"
        + r"\linewidth-2\tabcolsep\relax}"
        for w in column_weights(header, rows, LINE_CHARS[size])
    )
    return [
        "\\begingroup\\" + size,
        r"\begin{longtable}{" + cols + "}",
        r"\hline",
        " & ".join(r"\textbf{" + tex_escape(c) + "}" for c in header) + r" \\ \hline",
        r"\endhead",
        *[" & ".join(tex_escape(c) for c in r) + r" \\ \hline" for r in rows],
        r"\end{longtable}",
        r"\endgroup",
    ]


def to_latex(doc: Doc) -> str:
    out = [
        *LATEX_PREAMBLE,
        r"\title{" + tex_escape(doc.title) + "}",
        r"\author{}",
        r"\date{" + tex_escape(doc.date) + "}",
        r"\begin{document}",
        r"\raggedright",
        r"\maketitle",
    ]
    sections = {1: "section*", 2: "subsection*", 3: "subsubsection*"}
    for b in doc.blocks:
        if b[0] == "h":
            out.append("\\" + sections.get(b[1], "paragraph") + "{" + tex_escape(b[2]) + "}")
        elif b[0] == "p":
            out.append(tex_escape(b[1]) + "\n")
        elif b[0] == "list":
            out += [
                r"\begin{itemize}",
                *[r"\item " + tex_escape(i) for i in b[1]],
                r"\end{itemize}",
            ]
        elif b[0] == "table":
            out += _latex_table(b[1], b[2])
        elif b[0] == "img":
            pdf = re.sub(r"\.png$", ".pdf", b[1])
            out += [
                r"\begin{figure}[H]",
                r"\centering",
                r"\includegraphics[width=\linewidth,height=0.42\textheight,keepaspectratio]{"
                + pdf
                + "}",
                r"\caption{" + tex_escape(b[2]) + "}",
                r"\end{figure}",
            ]
    out.append(r"\end{document}")
    return "\n".join(out) + "\n"
