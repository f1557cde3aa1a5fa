"""Reading Rust source as text, for the checks of `make lint`
(tests/module_graph.py, tests/structure.py): comments and test modules
left out, braces matched, the paths a file names."""
import re


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(line.split("//", 1)[0] for line in text.splitlines())


def block_end(src, j):
    """The index of the brace closing the one at `j` (strings, chars and
    comments skipped)."""
    depth, k = 0, j
    while k < len(src):
        c = src[k]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return k
        elif c == '"':
            k += 1
            while k < len(src) and src[k] != '"':
                k += 2 if src[k] == "\\" else 1
        elif src.startswith("//", k):
            k = src.find("\n", k)
            if k < 0:
                return len(src)
        elif c == "'" and src[k + 1 : k + 3] in ("{'", "}'", "\"'"):
            k += 2
        k += 1
    return k


def without_tests(text):
    """The text without its `#[cfg(test)]` modules (the code after one
    still counts)."""
    while True:
        m = re.search(r"(?m)^[ \t]*#\[cfg\(test\)\]\s*\n[ \t]*(?:pub\s+)?mod\s+\w+\s*\{", text)
        if not m:
            return text
        end = block_end(text, m.end() - 1)
        text = text[: m.start()] + text[end + 1 :]


def paths_after(prefix, text):
    """Every path a file names after `prefix` (`crate::`, `super::`), as
    lists of segments, grouped imports (`prefix{a::b, c::{d, e}}`)
    expanded."""
    out = []

    def expand(body, head):
        depth, start, parts = 0, 0, []
        for i, c in enumerate(body):
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
            elif c == "," and depth == 0:
                parts.append(body[start:i])
                start = i + 1
        parts.append(body[start:])
        for part in parts:
            part = part.strip()
            if not part:
                continue
            m = re.match(r"((?:\w+::)*)\{(.*)\}$", part, re.S)
            if m:
                expand(m.group(2), head + [x for x in m.group(1).split("::") if x])
            else:
                out.append(head + [x for x in re.split(r"\s*::\s*", part.split(" as ")[0]) if x])

    for m in re.finditer(re.escape(prefix) + r"(\{|\w+(?:::\w+)*(?:::\{)?)", text):
        tail = m.group(1)
        if tail.endswith("{"):
            end = block_end(text, m.end() - 1)
            head = [x for x in tail[:-1].split("::") if x]
            expand(text[m.end() : end], head)
        else:
            out.append(tail.split("::"))
    return out
