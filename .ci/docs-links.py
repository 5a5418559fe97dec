#!/usr/bin/env python3
"""Checks the manual's links and the code's citations of it (docs/contributing.md "Citing the docs").

(a) Every relative link in README.md and docs/**/*.md reaches an existing file and, with a
    `#anchor`, a heading of it (GitHub's slugs: lowercase, punctuation other than `-` and `_`
    dropped, spaces as `-`, a repeated heading numbered `-1`, `-2`, ...).
(b) Every citation in the source tree (.rs, .py, .js, .toml, .sh, .md, .wit and .service files
    outside target/ and node_modules/), `README` or `docs/<page>.md` and then a heading in double
    quotes, names a page that exists and a heading of it: some `#` line of the page, stripped of
    its `#`s and backticks, equals the cited text. A cited "A › B" is a heading B under a heading
    A; a page and then "A", "B" cites both headings of that page. A citation may run onto the
    next line.

Exits 1 with a list of what does not resolve, file:line each; prints one line when all does.
Python 3 standard library only.
"""

import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SKIP_DIRS = {"target", "node_modules", ".git"}
CITING = (".rs", ".py", ".js", ".toml", ".sh", ".md", ".wit", ".service")

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_CODE = re.compile(r"`[^`]*`")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
CITATION = re.compile(r'(?<![\w/.-])(README|docs/[\w./-]+?\.md)\s+"([^"]+)"((?:\s*,\s*"[^"]+")*)')
MORE = re.compile(r'"([^"]+)"')
COMMENT_LEAD = re.compile(r"^\s*(//[!/]?|#+|\*|/\*\*?|--)?\s*")


def headings(path):
    """The page's headings in order: (level, text stripped of `#`s and backticks, line)."""
    out, fence = [], False
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if FENCE.match(line):
                fence = not fence
                continue
            if fence:
                continue
            m = HEADING.match(line.rstrip("\n"))
            if m:
                out.append((len(m.group(1)), m.group(2).replace("`", "").strip(), n))
    return out


def slug(text):
    """GitHub's anchor of a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link counts by its text
    text = text.replace("`", "").replace("**", "").strip().lower()
    kept = "".join(c for c in text if c.isalnum() or c in "-_ ")
    return kept.replace(" ", "-")


def anchors(path):
    seen, out = {}, set()
    for _, text, _ in headings(path):
        base = slug(text)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


_pages = {}


def page(path):
    """(headings, anchors) of a markdown page, read once."""
    if path not in _pages:
        _pages[path] = (headings(path), anchors(path))
    return _pages[path]


def rel(path):
    return os.path.relpath(path, ROOT)


def check_links(problems):
    """(a): the relative links of README.md and docs/**/*.md."""
    files = [os.path.join(ROOT, "README.md")]
    for d, dirs, names in os.walk(os.path.join(ROOT, "docs")):
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS)
        files += [os.path.join(d, x) for x in sorted(names) if x.endswith(".md")]
    count = 0
    for md in files:
        fence = False
        with open(md, encoding="utf-8") as f:
            lines = f.read().split("\n")
        for n, line in enumerate(lines, 1):
            if FENCE.match(line):
                fence = not fence
                continue
            if fence:
                continue
            text = INLINE_CODE.sub("", line)
            targets = [m.group(1) for m in LINK.finditer(text)]
            m = REF_DEF.match(text)
            if m:
                targets.append(m.group(1))
            for target in targets:
                if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):
                    continue  # http:, https:, mailto:, ...
                count += 1
                where = f"{rel(md)}:{n}"
                path, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
                if not os.path.exists(dest):
                    problems.append(f"{where}: link to {target}: no file {rel(dest)}")
                    continue
                if anchor:
                    if not dest.endswith(".md") or os.path.isdir(dest):
                        problems.append(f"{where}: link to {target}: an anchor into a file that is not a page")
                    elif anchor not in page(dest)[1]:
                        problems.append(f"{where}: link to {target}: {rel(dest)} has no heading #{anchor}")
    return len(files), count


def cited(path, text):
    """Why `text` is not a heading of the page at `path`, or None when it is."""
    hs = page(path)[0]
    parts = [p.strip() for p in text.split("›")]
    start, floor = 0, 0
    for k, p in enumerate(parts):
        found = None
        for i in range(start, len(hs)):
            level, h, _ = hs[i]
            if floor and level <= floor:
                break  # past the end of the section of the heading before
            if h == p:
                found = i
                break
        if found is None:
            return f'no heading "{p}"' + (f' under "{parts[k - 1]}"' if k else "")
        floor, start = hs[found][0], found + 1
    return None


def check_citations(problems):
    """(b): citations of README.md and docs/ pages anywhere in the source tree."""
    count, files = 0, 0
    for d, dirs, names in os.walk(ROOT):
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS)
        for name in sorted(names):
            if not name.endswith(CITING):
                continue
            path = os.path.join(d, name)
            try:
                with open(path, encoding="utf-8") as f:
                    lines = f.read().split("\n")
            except (UnicodeDecodeError, OSError):
                continue
            found = 0
            for i, line in enumerate(lines):
                nxt = COMMENT_LEAD.sub("", lines[i + 1], count=1) if i + 1 < len(lines) else ""
                joined = line + " " + nxt
                for m in CITATION.finditer(joined):
                    if m.start() >= len(line):
                        continue  # the next line's own, found there
                    found += 1
                    where = f"{rel(path)}:{i + 1}"
                    target = "README.md" if m.group(1) == "README" else m.group(1)
                    dest = os.path.join(ROOT, target)
                    heads = [m.group(2)] + MORE.findall(m.group(3))
                    if not os.path.isfile(dest):
                        problems.append(f'{where}: {m.group(1)} "{m.group(2)}": no page {target}')
                        continue
                    for h in heads:
                        h = " ".join(h.split())
                        why = cited(dest, h)
                        if why:
                            problems.append(f'{where}: {m.group(1)} "{h}": {target} has {why}')
            if found:
                files += 1
                count += found
    return files, count


def main():
    problems = []
    pages, links = check_links(problems)
    files, citations = check_citations(problems)
    if problems:
        print(f"docs-links: {len(problems)} link(s) or citation(s) do not resolve:")
        for p in problems:
            print(f"  {p}")
        sys.exit(1)
    print(f"docs-links: {links} relative links in {pages} pages and {citations} citations in {files} files all resolve")


if __name__ == "__main__":
    main()
