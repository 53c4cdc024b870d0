#!/usr/bin/env python3
"""Fails on any import circle between the modules of a workspace crate, and prints each crate's
layers (lowest first).

Why: a circle means no module of it can be understood, tested or replaced without all the others
(the proxy's `worker.rs` knot, issue 25). Layers make the rule "lower layers never name higher
ones" checkable by the test command.

How it reads the code (no compiler needed, so it runs before anything is built):
- a module is a file (`src/a.rs`, `src/a/mod.rs`) or an inline non-test `mod x { .. }`, kept in
  its file's module;
- an edge A -> B is a path in A's code (`use` trees, expressions, types) that resolves to an item
  of B: `crate::`, `super::`, `self::` and child-module paths, following `pub use` re-exports to
  the module that defines the item (a facade that only re-exports is not a layer of its own);
- `#[cfg(test)]` modules, comments and string literals are ignored, and so are `mod` declarations.

Usage: scripts/check-layers.py [--verbose] [crate-dir ...]   (default: every crates/* and fuzz/)
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Crates whose circle is known and being removed, with the issue that removes it. The check fails
# if such a crate has no circle any more, so the exemption cannot outlive the knot.
KNOWN_KNOTS = {}

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip_comments_and_strings(text):
    """Blanks comments, string and char literals (keeping newlines), so paths inside them don't count."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 260]) and not re.match(r"\w", text[i - 1:i] or " "):
            m = re.match(r'r(#*)"', text[i:])
            end = text.find('"' + m.group(1), i + len(m.group(0)))
            end = n if end < 0 else end + 1 + len(m.group(1))
            out.append('""' + "\n" * text.count("\n", i, end))
            i = end
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'":
            # A char literal ('a', '\n', '\u{..}') or a lifetime ('a): only literals are skipped.
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i:])
            if m:
                out.append("' '")
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def matching_brace(text, open_at):
    depth = 0
    for j in range(open_at, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(text) - 1


def split_inline_modules(text):
    """Returns (text without test modules, {inline module name: its text}); inline modules nest
    one level deep at most in this workspace, deeper ones stay with their parent."""
    inline = {}
    # Test modules: `#[cfg(test)]` (possibly with other attributes) before `mod name {`.
    while True:
        m = re.search(r"#\[cfg\((?:test|all\(test[^\]]*)\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+" + IDENT + r"\s*\{", text)
        if not m:
            break
        end = matching_brace(text, m.end() - 1)
        text = text[:m.start()] + "\n" * text.count("\n", m.start(), end + 1) + text[end + 1:]
    pos = 0
    while True:
        m = re.compile(r"(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*\{").search(text, pos)
        if not m:
            break
        end = matching_brace(text, m.end() - 1)
        inline[m.group(1)] = text[m.end():end]
        text = text[:m.start()] + "\n" * text.count("\n", m.start(), end + 1) + text[end + 1:]
        pos = m.start()
    return text, inline


def expand_use_tree(tree):
    """`a::{b, c::{d, e as f}, self}` -> [["a","b"], ["a","c","d"], ["a","c","e"], ["a"]]."""
    tree = re.sub(r"\s+as\s+" + IDENT, "", tree)
    tree = re.sub(r"\s+", "", tree)

    def parse(s):
        # Split at top-level commas.
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        if cur:
            parts.append(cur)
        paths = []
        for part in parts:
            if "{" in part:
                prefix, rest = part.split("{", 1)
                inner = rest[:rest.rfind("}")]
                base = [p for p in prefix.split("::") if p]
                for sub in parse(inner):
                    paths.append(base + [x for x in sub if x != "self"] if sub != ["self"] else base)
            else:
                paths.append([p for p in part.split("::") if p])
        return paths

    return parse(tree)


class Module:
    def __init__(self, path, file, text):
        self.path = path  # tuple of names from the crate root
        self.file = file
        self.text = text
        self.reexports = {}  # name -> absolute path (tuple) it re-exports
        self.globs = []  # absolute module paths glob re-exported
        self.refs = []  # absolute paths (tuples) this module names


def load_crate(src):
    modules = {}

    def add(path, file, text):
        text = strip_comments_and_strings(text)
        text, inline = split_inline_modules(text)
        modules[path] = Module(path, file, text)
        for name, body in inline.items():
            add(path + (name,), file, body)

    for file in sorted(src.rglob("*.rs")):
        rel = file.relative_to(src).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] in ("lib", "main", "mod") and (len(parts) == 1 or parts[-1] == "mod"):
            parts = parts[:-1]
        if parts and parts[0] == "bin":
            continue
        add(tuple(parts), file, file.read_text())
    return modules


def absolute(module, segs, modules):
    """The absolute path a path written in `module` names, or None when it is not this crate's."""
    if not segs:
        return None
    head, rest = segs[0], segs[1:]
    if head == "crate":
        return tuple(rest)
    if head == "self":
        return module.path + tuple(rest)
    if head == "super":
        base = module.path
        while segs and segs[0] == "super":
            base, segs = base[:-1], segs[1:]
        return base + tuple(segs)
    if module.path + (head,) in modules:
        return module.path + tuple(segs)
    return None


def collect(modules):
    use_re = re.compile(r"\b(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);")
    path_re = re.compile(r"(?<![A-Za-z0-9_:])((?:crate|super|self|" + IDENT + r")(?:::(?:" + IDENT + r"))+)")
    for module in modules.values():
        text = module.text
        for m in use_re.finditer(text):
            for segs in expand_use_tree(m.group(2)):
                target = absolute(module, [s for s in segs if s != "*"] if segs[-1:] != ["*"] else segs[:-1], modules)
                if target is None:
                    continue
                if m.group(1):  # a re-export: followed later, not an edge of its own
                    if segs[-1] == "*":
                        module.globs.append(target)
                    else:
                        module.reexports[segs[-1]] = target
                else:
                    module.refs.append(target)
        body = use_re.sub(lambda m: "\n" * m.group(0).count("\n"), text)
        for m in path_re.finditer(body):
            target = absolute(module, m.group(1).split("::"), modules)
            if target is not None:
                module.refs.append(target)


def resolve(path, modules, depth=0):
    """The module that defines what `path` names: the longest module prefix, through re-exports."""
    current = ()
    for i, seg in enumerate(path):
        if current + (seg,) in modules:
            current = current + (seg,)
            continue
        module = modules.get(current)
        if module is not None and seg in module.reexports and depth < 16:
            return resolve(module.reexports[seg] + tuple(path[i + 1:]), modules, depth + 1)
        if module is not None and depth < 16:
            for glob in module.globs:
                found = resolve(glob + (seg,) + tuple(path[i + 1:]), modules, depth + 1)
                if found != glob and found is not None:
                    return found
        return current
    return current


def file_key(module, modules):
    """Edges are between files: an inline module belongs to the file that holds it."""
    return modules[module].file


def sccs(nodes, edges):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out  # reverse topological order: dependencies first


def check(crate_dir, verbose):
    src = crate_dir / "src"
    modules = load_crate(src)
    collect(modules)
    files = {m.file for m in modules.values()}
    edges = {}
    for module in modules.values():
        for ref in module.refs:
            target = resolve(ref, modules)
            if target is None or target not in modules:
                continue
            a, b = module.file, modules[target].file
            if a != b:
                edges.setdefault(a, set()).add(b)
    comps = sccs(files, edges)
    name = crate_dir.name
    rel = lambda f: str(f.relative_to(src))
    # Layer = 1 + the highest layer of what the component names.
    layer_of = {}
    comp_of = {f: i for i, comp in enumerate(comps) for f in comp}
    for i, comp in enumerate(comps):
        deps = {comp_of[b] for a in comp for b in edges.get(a, ()) if comp_of[b] != i}
        layer_of[i] = 1 + max((layer_of[d] for d in deps), default=-1)
    circles = [comp for comp in comps if len(comp) > 1]
    print(f"== {name}: {len(files)} files, {sum(len(v) for v in edges.values())} edges, "
          f"{len(circles)} circle(s)")
    if verbose or circles:
        layers = {}
        for i, comp in enumerate(comps):
            layers.setdefault(layer_of[i], []).append(comp)
        for layer in sorted(layers):
            names = ["{" + ", ".join(rel(f) for f in c) + "}" if len(c) > 1 else rel(c[0]) for c in layers[layer]]
            print(f"  layer {layer}: " + " ".join(sorted(names)))
    for comp in circles:
        inside = set(comp)
        print(f"  circle of {len(comp)} files:")
        for a in comp:
            back = sorted(rel(b) for b in edges.get(a, ()) if b in inside)
            print(f"    {rel(a)} -> {', '.join(back)}")
    return name, bool(circles)


def main(argv):
    verbose = "--verbose" in argv
    dirs = [Path(a) for a in argv if not a.startswith("--")]
    if not dirs:
        dirs = sorted(p for p in (ROOT / "crates").iterdir() if (p / "src").is_dir())
        if (ROOT / "fuzz" / "src").is_dir():
            dirs.append(ROOT / "fuzz")
    failed = []
    for crate_dir in dirs:
        name, has_circle = check(crate_dir.resolve(), verbose)
        if has_circle and name not in KNOWN_KNOTS:
            failed.append(f"{name}: import circle (see above); break it by moving the shared part down a layer")
        elif has_circle:
            print(f"  (known knot, allowed until {KNOWN_KNOTS[name]})")
        elif name in KNOWN_KNOTS:
            failed.append(f"{name}: no circle any more; remove it from KNOWN_KNOTS in {Path(__file__).name}")
    for line in failed:
        print("check-layers: " + line, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
