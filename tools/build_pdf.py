"""Print the whole book to one PDF with the headless Chromium the browser tests use.

Usage: python tools/build_pdf.py [--no-execute]

The book's sources are staged as for the HTML book (tools/build_book.py, from
the executed chapters), built with Sphinx's single-page builder, opened in
Chromium through Playwright, and printed once MathJax has typeset every
formula. Before printing, each chapter starts a new page, its headings are
promoted so that the PDF's outline lists the chapters and their sections, and
a printed table of contents is put after the title. Interactive figures print
at their default frame with their controls as labels. Nothing is downloaded:
MathJax is served from the build (sphinx-mathjax-offline) and Chromium is the
Debian package. The PDF lands in _build/pdf/.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import build_book  # noqa: E402

import executed  # noqa: E402

ROOT = executed.ROOT
PDF = ROOT / "_build" / "pdf" / "deep-learning-by-experiment.pdf"
#: Flags for a quiet, offline headless Chromium inside containers and CI.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]

#: Print layout: no navigation, each chapter on a new page, figures and code kept whole.
PRINT_CSS = """
@page { size: A4; }
html, body { margin: 0 !important; padding: 0 !important; background: #fff !important; }
body { font-size: 10pt; }
article.dlbook-print { display: block; width: 100%; max-width: none; margin: 0; padding: 0; }
.headerlink, .toctree-wrapper, .dlbook-pdf-hide { display: none !important; }
.dlbook-chapter { break-before: page; }
img, .cell_output, .dlbook-interact, table, mjx-container[display="true"] { break-inside: avoid; }
img { max-width: 100% !important; height: auto; }
pre { white-space: pre-wrap !important; word-break: break-word; }
div.cell_output, div.highlight { overflow: visible !important; }
h1, h2, h3, h4 { break-after: avoid; }
.dlbook-pdf-toc { break-after: page; }
.dlbook-pdf-toc li { margin: 0.2em 0; }
"""

#: Runs in the page before printing: mark chapters, promote headings, add the contents.
PREPARE_JS = """
(css) => {
  const style = document.createElement('style');
  style.textContent = css;
  document.head.appendChild(style);
  const article = document.querySelector('article.bd-article') || document.querySelector('article');
  article.classList.add('dlbook-print');
  document.body.replaceChildren(article);   // the content alone: no navigation, header or sidebars
  const starts = [...document.querySelectorAll('span[id^="document-book/"]')];
  const chapters = [];
  for (const start of starts) {
    const section = start.nextElementSibling;
    if (!section || section.tagName !== 'SECTION') continue;
    section.classList.add('dlbook-chapter');
    article.appendChild(section);   // out of the intro's contents list, in book order
    const shift = parseInt(section.querySelector('h1,h2,h3,h4,h5').tagName[1]) - 1;
    for (const heading of [...section.querySelectorAll('h1,h2,h3,h4,h5,h6')]) {
      const level = Math.max(1, Math.min(6, parseInt(heading.tagName[1]) - shift));
      const promoted = document.createElement('h' + level);
      promoted.innerHTML = heading.innerHTML;
      for (const attribute of heading.attributes) promoted.setAttribute(attribute.name, attribute.value);
      heading.replaceWith(promoted);
    }
    chapters.push([start.id.replace('document-', ''), section.querySelector('h1').firstChild.textContent.trim()]);
  }
  document.querySelectorAll('.toctree-wrapper').forEach(node => node.remove());
  // Checkpoint marks in glyphs every print font has (the emoji are missing from most).
  const walker = document.createTreeWalker(article, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    node.nodeValue = node.nodeValue.replace(/\u2705/g, '\u2713').replace(/\u274c/g, '\u2717');
  }
  const toc = document.createElement('section');
  toc.className = 'dlbook-pdf-toc';
  toc.innerHTML = '<h2>Contents</h2><ol style="list-style:none;padding-left:0">' + chapters.map(
      ([doc, title]) => `<li><a href="#${CSS.escape('document-' + doc)}">${title}</a></li>`).join('') + '</ol>';
  const title = article.querySelector('h1');
  title.parentNode.insertBefore(toc, title.nextSibling);
  return chapters.map(([, title]) => title);
}
"""


def chromium_path() -> str:
    for candidate in (os.environ.get("DLBOOK_CHROMIUM"), shutil.which("chromium"), "/usr/bin/chromium"):
        if candidate and Path(candidate).exists():
            return candidate
    raise SystemExit("build_pdf: no Chromium found (install Debian's chromium or set DLBOOK_CHROMIUM)")


def single_page(source: Path) -> Path:
    """Build the staged book as one HTML page (warnings are errors); return the page."""
    env = dict(os.environ, **executed.ENVIRONMENT)
    command = [str(Path(sys.executable).parent / "jupyter-book"), "build", str(source), "--builder", "singlehtml",
               "--warningiserror", "--keep-going", "--quiet"]
    subprocess.run(command, check=True, env=env, cwd=source)
    # Sphinx writes the page under book/ but makes its links relative to the output's root.
    built = source / "_build" / "singlehtml"
    page = built / "book.html"
    shutil.copy(built / "book" / "intro.html", page)
    return page


def print_pdf(page_path: Path, target: Path) -> list[str]:
    """Print the single page to ``target``; return the chapter titles in the order printed."""
    from playwright.sync_api import sync_playwright

    target.parent.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS, headless=True)
        page = browser.new_page()
        page.goto(page_path.resolve().as_uri(), wait_until="load", timeout=300_000)
        page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                               timeout=120_000)
        page.evaluate("() => MathJax.startup.promise")
        titles = page.evaluate(PREPARE_JS, PRINT_CSS)  # page.pdf lays the page out for print media itself
        footer = ('<div style="font-size:8pt;width:100%;text-align:center;color:#555">'
                  '<span class="pageNumber"></span> / <span class="totalPages"></span></div>')
        page.pdf(path=str(target), format="A4", print_background=True, outline=True, tagged=True,
                 display_header_footer=True, header_template="<span></span>", footer_template=footer,
                 margin={"top": "16mm", "bottom": "18mm", "left": "14mm", "right": "14mm"})
        browser.close()
    return titles


def build(allow_execute: bool) -> Path:
    """The PDF, rebuilt only when the staged sources changed since the last one."""
    source = build_book.stage("pdf", build_book.ensure_executed(allow_execute))
    stamp = PDF.with_suffix(".sources-hash")
    current = build_book.sources_hash(source)
    if PDF.exists() and stamp.exists() and stamp.read_text() == current:
        print("build_pdf: sources unchanged, PDF kept", flush=True)
        return PDF
    start = time.perf_counter()
    page = single_page(source)
    built = time.perf_counter()
    titles = print_pdf(page, PDF)
    stamp.write_text(current)
    print(f"build_pdf: printed {len(titles)} chapters and appendices (single-page build "
          f"{built - start:.0f} s, Chromium {time.perf_counter() - built:.0f} s)", flush=True)
    return PDF


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-execute", action="store_true",
                        help="fail instead of executing chapters whose executed copy is stale")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    build(allow_execute=not args.no_execute)
    size = PDF.stat().st_size / 2**20
    print(f"build_pdf: {size:.1f} MiB in {PDF.relative_to(ROOT)} ({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
