"""A small document model, rendered to Markdown, HTML and LaTeX from the same blocks.

Hand-written rather than a Markdown converter because the report needs all three
formats with the same tables and figures, and LaTeX output with balanced environments;
a block list renders to each in a few lines with no extra dependency.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field


@dataclass
class Doc:
    blocks: list[tuple] = field(default_factory=list)

    def h(self, level: int, text: str) -> None:
        self.blocks.append(("h", level, text))

    def p(self, text: str) -> None:
        self.blocks.append(("p", text))

    def items(self, items: list[str]) -> None:
        self.blocks.append(("list", items))

    def table(self, header: list[str], rows: list[list[str]]) -> None:
        self.blocks.append(("table", header, rows))

    def image(self, path: str, caption: str) -> None:
        self.blocks.append(("img", path, caption))


def to_markdown(doc: Doc) -> str:
    out = []
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


def _inline_html(text: str) -> str:
    t = html.escape(text)
    return re.sub(
        r"\*\*(.+?)\*\*", r"<strong>\1</strong>", re.sub(r"`(.+?)`", r"<code>\1</code>", t)
    )


def to_html(doc: Doc, title: str) -> str:
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>",
        "<style>body{font-family:sans-serif;max-width:70em;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.25em .5em;"
        "text-align:left;vertical-align:top}img{max-width:100%}</style>",
        "</head><body>",
    ]
    for b in doc.blocks:
        if b[0] == "h":
            out.append(f"<h{b[1]}>{_inline_html(b[2])}</h{b[1]}>")
        elif b[0] == "p":
            out.append(f"<p>{_inline_html(b[1])}</p>")
        elif b[0] == "list":
            out.append("<ul>" + "".join(f"<li>{_inline_html(i)}</li>" for i in b[1]) + "</ul>")
        elif b[0] == "table":
            head = "".join(f"<th>{_inline_html(str(c))}</th>" for c in b[1])
            body = "".join(
                "<tr>" + "".join(f"<td>{_inline_html(str(c))}</td>" for c in r) + "</tr>"
                for r in b[2]
            )
            out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        elif b[0] == "img":
            cap = _inline_html(b[2])
            out.append(
                f'<figure><img src="{html.escape(b[1])}" alt="{cap}"><figcaption>{cap}</figcaption></figure>'
            )
    out.append("</body></html>")
    return "\n".join(out) + "\n"


_TEX_ESCAPES = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def tex_escape(text: str) -> str:
    t = "".join(_TEX_ESCAPES.get(c, c) for c in str(text))
    t = re.sub(r"\*\*(.+?)\*\*", r"\\textbf{\1}", t)
    return re.sub(r"`(.+?)`", r"\\texttt{\1}", t)


def to_latex(doc: Doc, title: str) -> str:
    out = [
        r"\documentclass{article}",
        r"\usepackage[margin=2cm]{geometry}",
        r"\usepackage{graphicx}",
        r"\usepackage{longtable}",
        r"\title{" + tex_escape(title) + "}",
        r"\begin{document}",
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
            cols = "|" + "p{%.2f\\linewidth}|" % (0.9 / len(b[1])) * len(b[1])
            out += [
                r"\begin{longtable}{" + cols + "}",
                r"\hline",
                " & ".join(tex_escape(c) for c in b[1]) + r" \\ \hline",
            ]
            out += [" & ".join(tex_escape(c) for c in r) + r" \\ \hline" for r in b[2]]
            out.append(r"\end{longtable}")
        elif b[0] == "img":
            pdf = re.sub(r"\.png$", ".pdf", b[1])
            out += [
                r"\begin{figure}[h]",
                r"\centering",
                r"\includegraphics[width=0.9\linewidth]{" + pdf + "}",
                r"\caption*{" + tex_escape(b[2]) + "}",
                r"\end{figure}",
            ]
    out.append(r"\end{document}")
    return "\n".join(out) + "\n"
