"""Verilog mutants: operator swaps, constants moved by one, inverted ``if`` conditions, stuck register bits.

A small tokenizer (comments and strings stripped correctly; preprocessor conditionals evaluated against the
build's defines) and a recursive-descent walk over module items and procedural statements find the sites:

* binary operators swapped (``+``/``-``, ``*``->``+``, ``<<``/``>>``, ``&``/``|``, ``^``->``|``, ``&&``/``||``,
  ``<``/``<=``, ``>``/``>=``, ``==``/``!=``) where both operands are simple (an identifier or macro with
  selects, a literal, a parenthesised group, a concatenation, a function call) and bind to the operator
  (the neighbouring operators bind less tightly), so the site is exactly ``L op R``;
* unary ``!`` and ``~`` deleted, reductions ``&``/``|`` swapped (simple operand);
* literals moved by one (``Const_Inc``/``Const_Dec``; a 1-bit literal flips), never inside ``[...]``
  (widths, selects), replication counts, delays or case labels;
* whole ``if (...)`` conditions inverted;
* stuck bits of registers (``Stuck0``/``Stuck1`` at the lsb and the msb of a ``reg`` assigned by nonblocking
  assignments to its plain name or a select of it): every such assignment is followed by ``x[b] <= v``.

Never mutated: ``define``/``include`` lines and code under a false (or, for NVDLA, undecidable)
conditional, module headers, port/parameter/net/variable declarations (the expression initialising a
``wire`` is), ``initial`` blocks, tasks, system task calls, generate-loop/-if headers, ``for`` headers, case
labels, sensitivity lists, and the reset branch of an always block (``if (!rstn)`` first in a block
sensitive to a reset edge: values nothing reads before the first enable, a different campaign).

A mutant applies in two ways: ``mutated_source`` (the file with that one change, line numbers kept) and
``schemata`` (the file with many mutants, each guarded by ``mut_id == K``, where ``mut_id`` comes from the
``+mut=K`` plusarg, ``0``: the original design), so one build serves a whole campaign.
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from regressions.mutate.mutants import Mutant

# ---- tokens ------------------------------------------------------------------------------------------------


@dataclass
class Tok:
    kind: str  # id, sys, num, op, macro, str
    text: str
    start: int
    end: int
    line: int
    col: int
    mutable: bool = True


_OPS = sorted(["<<<", ">>>", "===", "!==", "==", "!=", "<=", ">=", "&&", "||", "<<", ">>", "**", "~&", "~|",
               "~^", "^~", "->", "+:", "-:", "+", "-", "*", "/", "%", "<", ">", "=", "!", "~", "&", "|", "^",
               "?", ":", ";", ",", ".", "#", "@", "(", ")", "[", "]", "{", "}", "'"], key=len, reverse=True)
_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
_NUM = re.compile(r"(?:\d[\d_]*\s*)?'[sS]?[bBoOdDhH]\s*[0-9a-fA-FxXzZ?_]+|\d[\d_]*(?:\.\d[\d_]*)?(?:[eE][+-]?\d+)?"
                  r"|'[01xXzZ](?![A-Za-z0-9_])")
_CONDITIONALS = {"ifdef", "ifndef", "elsif", "else", "endif"}
_LINE_DIRECTIVES = {"include", "timescale", "default_nettype", "line", "resetall", "celldefine", "endcelldefine",
                    "nounconnected_drive", "unconnected_drive", "pragma", "begin_keywords", "end_keywords"}


class Preprocessor:
    """Conditional-compilation state: ``known`` names defined on the command line (True) or known to be
    undefined (False); names in ``maybe`` (defined by some other file or only in some builds) are undecidable.
    A name neither known nor ``maybe`` is undefined unless the file defines it."""

    def __init__(self, known: dict[str, bool] | None, maybe: frozenset[str] = frozenset(),
                 includes: tuple[Path, ...] = (), maybe_mutable: bool = False) -> None:
        self.all_mutable = known is None  # every branch kept and mutable
        self.defined = {k: v for k, v in (known or {}).items()}
        self.maybe = set(maybe)
        self.includes = includes
        #: code under an undecidable conditional is mutated too (our rtl/: the tests build every variant)
        self.maybe_mutable = maybe_mutable

    def state(self, name: str) -> bool | None:
        if name in self.defined:
            return self.defined[name]
        return None if name in self.maybe else False

    def include(self, name: str, seen: set[str]) -> None:
        """Defines of an included file (its conditionals evaluated too)."""
        if name in seen:
            return
        seen.add(name)
        for d in self.includes:
            p = d / name
            if p.is_file():
                tokenize(p.read_text(errors="replace"), self, seen)
                return


def tokenize(src: str, pp: Preprocessor | None = None, _seen: set[str] | None = None
             ) -> tuple[list[Tok], list[tuple[int, int]]]:
    """Tokens of ``src`` in active code, and the barriers: character spans a site must not cross (directive
    lines, dropped code). With ``pp`` None every conditional branch is kept."""
    pp = pp or Preprocessor(None)
    seen = _seen if _seen is not None else set()
    toks: list[Tok] = []
    barriers: list[tuple[int, int]] = []
    # stack of [parent active, parent mutable, state]
    stack: list[list] = []
    active, mutable = True, True
    line_starts = [0] + [m.end() for m in re.finditer(r"\n", src)]
    i, n = 0, len(src)
    drop_from: int | None = None

    def pos(k: int) -> tuple[int, int]:
        ln = bisect.bisect_right(line_starts, k)
        return ln, k - line_starts[ln - 1] + 1

    def set_branch(cond: bool | None) -> None:
        """Enter the next branch of the innermost conditional, whose condition is ``cond`` (None: undecidable).
        The entry's state: "open" (every earlier branch false), "unknown" (an earlier one undecidable, none
        true), "taken" (an earlier one true or undecidable-then-true: this one is dead)."""
        nonlocal active, mutable
        top = stack[-1]
        if pp.all_mutable:
            active, mutable = top[0], top[1]
            return
        state = top[2]
        if state == "taken" or cond is False:
            b_active, b_mut = False, False
        elif state == "open" and cond is True:
            b_active, b_mut, top[2] = True, True, "taken"
        elif cond is True:  # true after undecidable branches: live only if they were all false
            b_active, b_mut, top[2] = True, False, "taken"
        else:  # undecidable
            b_active, b_mut, top[2] = True, False, "unknown"
        if pp.maybe_mutable:
            b_mut = b_active
        active, mutable = top[0] and b_active, top[1] and b_mut

    while i < n:
        c = src[i]
        if c in " \t\r\n\f\v":
            i += 1
            continue
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
            continue
        if src.startswith("/*", i):
            j = src.find("*/", i + 2)
            i = n if j < 0 else j + 2
            continue
        if c == "`":
            m = _ID.match(src, i + 1)
            name = m.group(0) if m else ""
            if name in _CONDITIONALS or name in ("define", "undef") or name in _LINE_DIRECTIVES:
                start = i
                j = m.end()
                if name == "define":  # to the end of the line, with backslash continuations
                    while True:
                        k = src.find("\n", j)
                        if k < 0:
                            j = n
                            break
                        if src[j:k].rstrip().endswith("\\"):
                            j = k + 1
                            continue
                        j = k
                        break
                    body = src[m.end():j]
                    dm = _ID.search(body)
                    if active and dm and (pp.all_mutable or mutable):
                        pp.defined[dm.group(0)] = True
                    elif active and dm:
                        pp.maybe.add(dm.group(0))
                elif name in ("ifdef", "ifndef", "elsif", "undef"):
                    am = _ID.search(src, j)
                    arg = am.group(0) if am else ""
                    j = am.end() if am else j
                    st = pp.state(arg)
                    if name == "undef":
                        if active and mutable:
                            pp.defined[arg] = False
                    elif name in ("ifdef", "ifndef"):
                        cond = st if name == "ifdef" or st is None else not st
                        stack.append([active, mutable, "open"])
                        set_branch(cond)
                    else:  # elsif
                        if stack:
                            set_branch(st)
                elif name == "else":
                    if stack:
                        set_branch(True)
                elif name == "endif":
                    if stack:
                        top = stack.pop()
                        active, mutable = top[0], top[1]
                elif name == "include":
                    k = src.find("\n", j)
                    j = n if k < 0 else k
                    im = re.search(r'"([^"]+)"', src[m.end():j])
                    if im and active:
                        pp.include(im.group(1), seen)
                else:
                    k = src.find("\n", j)
                    j = n if k < 0 else k
                barriers.append((start, j))
                i = j
                # code in a false branch is dropped: one barrier from here to the next directive
                if not active and drop_from is None:
                    drop_from = i
                elif active and drop_from is not None:
                    barriers.append((drop_from, start))
                    drop_from = None
                continue
        if not active:  # skip a token of dropped code (keep strings/comments consistent)
            if c == '"':
                j = i + 1
                while j < n and src[j] != '"':
                    j += 2 if src[j] == "\\" else 1
                i = j + 1
            else:
                i += 1
            continue
        ln, col = pos(i)
        if c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            toks.append(Tok("str", src[i:j + 1], i, j + 1, ln, col, mutable))
            i = j + 1
            continue
        if c == "`":
            m = _ID.match(src, i + 1)
            j = m.end() if m else i + 1
            toks.append(Tok("macro", src[i:j], i, j, ln, col, mutable))
            i = j
            continue
        if c == "\\":  # escaped identifier
            j = i
            while j < n and not src[j].isspace():
                j += 1
            toks.append(Tok("id", src[i:j], i, j, ln, col, mutable))
            i = j
            continue
        if c == "$":
            m = _ID.match(src, i + 1)
            j = m.end() if m else i + 1
            toks.append(Tok("sys", src[i:j], i, j, ln, col, mutable))
            i = j
            continue
        if c.isdigit() or c == "'":
            m = _NUM.match(src, i)
            if m and m.end() > i:
                toks.append(Tok("num", m.group(0), i, m.end(), ln, col, mutable))
                i = m.end()
                continue
        m = _ID.match(src, i)
        if m:
            toks.append(Tok("id", m.group(0), i, m.end(), ln, col, mutable))
            i = m.end()
            continue
        for op in _OPS:
            if src.startswith(op, i):
                toks.append(Tok("op", op, i, i + len(op), ln, col, mutable))
                i += len(op)
                break
        else:
            toks.append(Tok("op", c, i, i + 1, ln, col, mutable))
            i += 1
    if drop_from is not None:
        barriers.append((drop_from, n))
    return toks, barriers


# ---- sites -------------------------------------------------------------------------------------------------

#: binary operator -> (precedence, {mutated operator: operator name})
_PREC = {"*": 11, "/": 11, "%": 11, "+": 10, "-": 10, "<<": 9, ">>": 9, "<<<": 9, ">>>": 9,
         "<": 8, "<=": 8, ">": 8, ">=": 8, "==": 7, "!=": 7, "===": 7, "!==": 7, "&": 6, "~&": 6,
         "^": 5, "^~": 5, "~^": 5, "|": 4, "~|": 4, "&&": 3, "||": 2}
_SWAPS = {"+": ("-", "Add_Sub"), "-": ("+", "Sub_Add"), "*": ("+", "Mul_Add"),
          "<<": (">>", "Shl_Shr"), ">>": ("<<", "Shr_Shl"), "<<<": (">>>", "AShl_AShr"), ">>>": ("<<<", "AShr_AShl"),
          "<": ("<=", "Lt_LtE"), "<=": ("<", "LtE_Lt"), ">": (">=", "Gt_GtE"), ">=": (">", "GtE_Gt"),
          "==": ("!=", "Eq_NotEq"), "!=": ("==", "NotEq_Eq"), "===": ("!==", "Eq_NotEq"), "!==": ("===", "NotEq_Eq"),
          "&": ("|", "BitAnd_BitOr"), "|": ("&", "BitOr_BitAnd"), "^": ("|", "BitXor_BitOr"),
          "&&": ("||", "And_Or"), "||": ("&&", "Or_And")}
_UNARY = {"+", "-", "!", "~", "&", "|", "^", "~&", "~|", "~^", "^~"}
_UNARY_SITES = {"!": (None, "Delete_Not"), "~": (None, "Delete_Invert"), "&": ("|", "RedAnd_RedOr"),
                "|": ("&", "RedOr_RedAnd")}
_DECL = {"input", "output", "inout", "parameter", "localparam", "defparam", "reg", "integer", "genvar", "real",
         "realtime", "time", "event", "specparam", "supply0", "supply1", "logic", "bit", "byte", "int"}
_NETS = {"wire", "tri", "wand", "wor", "tri0", "tri1", "triand", "trior", "trireg", "uwire"}
_RESET = re.compile(r"rst|reset", re.I)
#: operators of the stuck-bit kinds
STUCK = ("Stuck0_Lsb", "Stuck1_Lsb", "Stuck0_Msb", "Stuck1_Msb")


@dataclass
class Edit:
    """Replace ``src[start:end]`` by ``fn(hole)``, ``hole(k, flat)`` rendering hole ``k`` (a span inside, with
    the edits nested there applied; ``flat``: on one line, comments dropped)."""

    start: int
    end: int
    holes: list[tuple[int, int]]
    fn: Callable[[Callable[[int, bool], str], str], str]  # (hole, selector or "" for the plain mutant)
    seq: int = 0


@dataclass
class Site:
    operator: str
    line: int
    col: int
    edit: Edit
    describe: str = ""
    #: stuck-bit sites: one edit per nonblocking assignment of the register
    more: list[Edit] = field(default_factory=list)


def _operand_end(word: str) -> bool:
    return word not in _OPS or word in (")", "]", "}")


class _Walker:
    """Finds the sites of one file's token list."""

    def __init__(self, src: str, toks: list[Tok], barriers: list[tuple[int, int]]) -> None:
        self.src, self.t = src, toks
        merged: list[tuple[int, int]] = []
        for a, b in sorted(barriers):
            if merged and a <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], b))
            else:
                merged.append((a, b))
        self.barriers = merged
        self.n = len(toks)
        self.match: dict[int, int] = {}
        stack: list[int] = []
        pairs = {")": "(", "]": "[", "}": "{"}
        for k, tok in enumerate(toks):
            if tok.kind != "op":
                continue
            if tok.text in "([{":
                stack.append(k)
            elif tok.text in pairs:
                while stack and toks[stack[-1]].text != pairs[tok.text]:
                    stack.pop()  # unbalanced (should not happen): resynchronise
                if stack:
                    o = stack.pop()
                    self.match[o], self.match[k] = k, o
        self.sites: list[Site] = []
        self.modules: list[tuple[int, int]] = []  # (header end char, module end char)
        self._module_sites_from = 0
        #: name -> ((msb text, lsb text) or None for a scalar, declaring token)
        self._regs: dict[str, tuple[tuple[str, str] | None, int]] = {}
        self._bad_regs: set[str] = set()
        self._nbas: dict[str, list[tuple[int, int, bool]]] = {}  # name -> (first tok, last tok, in reset)

    # -- helpers
    def txt(self, k: int) -> str:
        return self.t[k].text if 0 <= k < self.n else ""

    def is_op(self, k: int, *ops: str) -> bool:
        return 0 <= k < self.n and self.t[k].kind == "op" and self.t[k].text in ops

    def is_kw(self, k: int, *words: str) -> bool:
        return 0 <= k < self.n and self.t[k].kind == "id" and self.t[k].text in words

    def operand_end(self, k: int) -> bool:
        tok = self.t[k]
        return tok.kind in ("id", "num", "macro", "str", "sys") or (tok.kind == "op" and tok.text in (")", "]", "}"))

    def skip_to_semi(self, k: int, end: int | None = None) -> int:
        """Index after the ``;`` ending the construct at ``k`` (groups skipped)."""
        end = self.n if end is None else end
        while k < end:
            if self.is_op(k, "(", "[", "{"):
                k = self.match.get(k, k) + 1
                continue
            if self.is_op(k, ";"):
                return k + 1
            k += 1
        return end

    def clean(self, a: int, b: int) -> bool:
        """Tokens a..b-1 all mutable and no barrier inside their character span."""
        if a >= b:
            return False
        if not all(self.t[k].mutable for k in range(a, b)):
            return False
        s, e = self.t[a].start, self.t[b - 1].end
        i = bisect.bisect_left(self.barriers, (s, -1))
        if i > 0 and self.barriers[i - 1][1] > s:
            return False
        return not (i < len(self.barriers) and self.barriers[i][0] < e)

    # -- operands
    def fwd_operand(self, k: int, end: int) -> int | None:
        """End (exclusive) of the simple operand starting at ``k``, or None."""
        while k < end and self.t[k].kind == "op" and self.t[k].text in _UNARY:
            k += 1
        if k >= end:
            return None
        tok = self.t[k]
        if tok.kind in ("id", "macro", "sys"):
            k += 1
            if k < end and self.is_op(k, "(") and tok.kind in ("id", "macro", "sys"):
                k = self.match.get(k, end) + 1
            elif tok.kind == "id" and self.is_op(k, "."):
                return None  # hierarchical name
        elif tok.kind == "num":
            k += 1
        elif self.is_op(k, "(", "{"):
            k = self.match.get(k, end) + 1
        else:
            return None
        while k < end and self.is_op(k, "["):
            k = self.match.get(k, end) + 1
        return k if k <= end else None

    def back_operand(self, k: int, start: int) -> int | None:
        """Start of the simple operand ending at token ``k`` (inclusive), or None."""
        while k >= start and self.is_op(k, "]"):
            k = self.match.get(k, -1) - 1
        if k < start:
            return None
        tok = self.t[k]
        if tok.kind in ("id", "macro", "num", "sys"):
            if tok.kind == "id" and k - 1 >= start and self.is_op(k - 1, "."):
                return None
        elif self.is_op(k, ")", "}"):
            k = self.match.get(k, -1)
            if k < start:
                return None
            if self.is_op(k, "(") and k - 1 >= start and self.t[k - 1].kind in ("id", "sys", "macro"):
                k -= 1
        else:
            return None
        while k - 1 >= start and self.t[k - 1].kind == "op" and self.t[k - 1].text in _UNARY and \
                (k - 2 < start or not self.operand_end(k - 2)):
            k -= 1
        return k

    # -- expressions
    def expression(self, a: int, b: int, on: bool) -> None:
        """Sites in the expression tokens a..b-1."""
        if not on:
            return
        k = a
        while k < b:
            tok = self.t[k]
            if self.is_op(k, "["):  # selects and widths: nothing inside
                k = self.match.get(k, b) + 1
                continue
            if self.is_op(k, "{"):  # a replication's count (up to the inner '{') is a constant: skipped
                c, close = k + 1, self.match.get(k, b)
                while c < close and not self.is_op(c, "{", ","):
                    c = self.match.get(c, c) + 1 if self.is_op(c, "(", "[") else c + 1
                if c > k + 1 and c < close and self.is_op(c, "{"):
                    k = c
                    continue
            if tok.kind == "num":
                if not self.is_op(k + 1, "{") and not self.is_op(k - 1, "#", "'"):
                    self.constant(k)
            elif tok.kind == "op" and (tok.text in _PREC or tok.text in _UNARY_SITES):
                binary = k > a and self.operand_end(k - 1)
                if binary and tok.text in _SWAPS:
                    self.binary(k, a, b)
                elif not binary and tok.text in _UNARY_SITES:
                    self.unary(k, b)
            k += 1

    def binary(self, k: int, a: int, b: int) -> None:
        op = self.t[k].text
        prec = _PREC[op]
        ls = self.back_operand(k - 1, a)
        re_ = self.fwd_operand(k + 1, b)
        if ls is None or re_ is None:
            return
        before = ls - 1
        if before >= a:
            bt = self.t[before]
            if not (bt.kind == "op" and (bt.text in ("(", "[", "{", ",", "?", ":") or
                                         (bt.text in _PREC and _PREC[bt.text] < prec and self.operand_end(before - 1)))):
                return
        if re_ < b:
            at = self.t[re_]
            if not (at.kind == "op" and (at.text in (")", "]", "}", ",", "?", ":", ";") or
                                         (at.text in _PREC and _PREC[at.text] <= prec))):
                return
        if not self.clean(ls, re_):
            return
        new, name = _SWAPS[op]
        lspan = (self.t[ls].start, self.t[k - 1].end)
        rspan = (self.t[k + 1].start, self.t[re_ - 1].end)

        g1, g2 = self.src[lspan[1]:self.t[k].start], self.src[self.t[k].end:rspan[0]]  # kept: lines stay put

        def fn(hole, sel, new=new, op=op, g1=g1, g2=g2):
            if not sel:
                return f"({hole(0, False)}{g1}{new}{g2}{hole(1, False)})"
            return f"(({sel}) ? ({hole(0, True)} {new} {hole(1, True)}) : ({hole(0, False)}{g1}{op}{g2}{hole(1, False)}))"

        self.add(name, k, Edit(lspan[0], rspan[1], [lspan, rspan], fn), f"{op} -> {new}")

    def unary(self, k: int, b: int) -> None:
        op = self.t[k].text
        e = self.fwd_operand(k + 1, b)
        if e is None or not self.clean(k, e) or (k + 1 < self.n and self.t[k + 1].kind == "op"
                                                  and self.t[k + 1].text in _UNARY):
            return
        new, name = _UNARY_SITES[op]
        span = (self.t[k + 1].start, self.t[e - 1].end)
        rep = "" if new is None else new

        gap = self.src[self.t[k].end:span[0]]

        def fn(hole, sel, op=op, rep=rep, gap=gap):
            if not sel:
                return f"({rep}{gap}{hole(0, False)})"
            return f"(({sel}) ? ({rep}{hole(0, True)}) : ({op}{gap}{hole(0, False)}))"

        self.add(name, k, Edit(self.t[k].start, span[1], [span], fn), f"{op}x -> {rep}x")

    def constant(self, k: int) -> None:
        tok = self.t[k]
        if not self.clean(k, k + 1):
            return
        for delta, name in ((1, "Const_Inc"), (-1, "Const_Dec")):
            new = moved(tok.text, delta)
            if new is None:
                continue

            def fn(hole, sel, new=new):  # the hole is the literal (the other move of it may be nested there)
                return new if not sel else f"(({sel}) ? {new} : {hole(0, False)})"

            self.add(name, k, Edit(tok.start, tok.end, [(tok.start, tok.end)], fn), f"{tok.text} -> {new}")

    def add(self, name: str, k: int, edit: Edit, describe: str) -> None:
        tok = self.t[k]
        self.sites.append(Site(name, tok.line, tok.col, edit, describe))

    # -- module items
    def walk(self) -> list[Site]:
        k = 0
        while k < self.n:
            if self.is_kw(k, "module", "macromodule"):
                k = self.module(k)
            else:
                k += 1
        return self.sites

    def module(self, k: int) -> int:
        self._regs, self._bad_regs, self._nbas = {}, set(), {}
        head_end = self.skip_to_semi(k + 1)
        self.declarations(k + 1, head_end)
        k = self.items(head_end, ("endmodule",), True)
        self.stuck_sites()
        end_char = self.t[k].end if k < self.n else len(self.src)
        self.modules.append((self.t[head_end - 1].end, end_char))
        return k + 1

    def declarations(self, a: int, b: int) -> None:
        """Record ``reg`` declarations in tokens a..b-1 (a header or a declaration statement)."""
        k = a
        while k < b:
            if self.is_kw(k, "reg", "logic"):
                k += 1
                if self.is_kw(k, "signed", "unsigned"):
                    k += 1
                rng = None
                if self.is_op(k, "["):
                    close = self.match.get(k, k)
                    colon, j = None, k + 1
                    while j < close:
                        if self.is_op(j, "(", "[", "{"):
                            j = self.match.get(j, j) + 1
                            continue
                        if self.is_op(j, ":"):
                            colon = j
                            break
                        j += 1
                    if colon is None:
                        k = close + 1
                        continue
                    rng = (self.text(k + 1, colon), self.text(colon + 1, close))
                    k = close + 1
                while k < b and self.t[k].kind == "id":
                    name = self.t[k].text
                    if name in _DECL or name in _NETS:
                        break
                    k += 1
                    if self.is_op(k, "["):  # an array: not a plain register
                        self._bad_regs.add(name)
                        k = self.match.get(k, k) + 1
                    else:
                        self._regs[name] = (rng, k - 1)
                    if self.is_op(k, "="):
                        k = self.skip_expr(k + 1, b)
                    if self.is_op(k, ","):
                        k += 1
                        continue
                    break
            else:
                k += 1

    def skip_expr(self, k: int, b: int) -> int:
        while k < b and not self.is_op(k, ",", ";", ")"):
            k = self.match.get(k, k) + 1 if self.is_op(k, "(", "[", "{") else k + 1
        return k

    def text(self, a: int, b: int) -> str:
        return " ".join(self.t[j].text for j in range(a, b))

    def items(self, k: int, stop: tuple[str, ...], on: bool) -> int:
        """Module items from ``k`` up to the token in ``stop`` (returned)."""
        while k < self.n and not self.is_kw(k, *stop):
            k = self.item(k, on)
        return k

    def item(self, k: int, on: bool) -> int:
        tok = self.t[k]
        w = tok.text if tok.kind == "id" else None
        if w in _DECL or (w == "signed"):
            end = self.skip_to_semi(k)
            self.declarations(k, end)
            return end
        if w in _NETS:
            end = self.skip_to_semi(k)
            j = k
            while j < end:  # wire x = expr, y = expr;
                if self.is_op(j, "(", "[", "{"):
                    j = self.match.get(j, j) + 1
                    continue
                if self.is_op(j, "="):
                    e = self.skip_expr(j + 1, end)
                    self.expression(j + 1, e, on)
                    j = e
                    continue
                j += 1
            return end
        if w == "assign":
            end = self.skip_to_semi(k)
            j = k + 1
            while j < end:
                if self.is_op(j, "#"):  # delay
                    j += 2 if not self.is_op(j + 1, "(") else 1
                    if self.is_op(j, "("):
                        j = self.match.get(j, j) + 1
                    continue
                if self.is_op(j, "(", "[", "{"):
                    j = self.match.get(j, j) + 1
                    continue
                if self.is_op(j, "="):
                    e = self.skip_expr(j + 1, end)
                    self.expression(j + 1, e, on)
                    j = e
                    continue
                j += 1
            return end
        if w == "always" or w in ("always_ff", "always_comb", "always_latch"):
            j = k + 1
            resets: set[str] = set()
            if self.is_op(j, "@"):
                if self.is_op(j + 1, "("):
                    close = self.match.get(j + 1, j + 1)
                    for x in range(j + 2, close):
                        if self.is_kw(x, "negedge", "posedge") and x + 1 < close and self.t[x + 1].kind == "id":
                            if self.is_kw(x, "negedge") or _RESET.search(self.t[x + 1].text):
                                resets.add(self.t[x + 1].text)
                    j = close + 1
                else:
                    j += 2
            return self.statement(j, on, resets=resets, first=True)
        if w == "initial" or w == "final":
            return self.statement(k + 1, False)
        if w == "function":
            end = k
            while end < self.n and not self.is_kw(end, "endfunction"):
                end += 1
            head = self.skip_to_semi(k + 1, end)
            j = head
            while j < end:
                if self.t[j].kind == "id" and self.t[j].text in _DECL:
                    j = self.skip_to_semi(j, end)
                else:
                    j = self.statement(j, on)
            return end + 1
        if w == "task":
            while k < self.n and not self.is_kw(k, "endtask"):
                k += 1
            return k + 1
        if w == "specify":
            while k < self.n and not self.is_kw(k, "endspecify"):
                k += 1
            return k + 1
        if w == "generate":
            k = self.items(k + 1, ("endgenerate",), on)
            return k + 1
        if w == "for":  # generate loop: header skipped
            j = self.match.get(k + 1, k + 1) + 1 if self.is_op(k + 1, "(") else k + 1
            return self.gen_block(j, on)
        if w == "if":  # generate if: constant condition, never inverted
            j = self.match.get(k + 1, k + 1) + 1 if self.is_op(k + 1, "(") else k + 1
            j = self.gen_block(j, on)
            if self.is_kw(j, "else"):
                j = self.gen_block(j + 1, on)
            return j
        if w == "case":
            depth, j = 0, k
            while j < self.n:
                if self.is_kw(j, "case", "casez", "casex"):
                    depth += 1
                elif self.is_kw(j, "endcase"):
                    depth -= 1
                    if depth == 0:
                        return j + 1
                j += 1
            return j
        if w == "begin":
            return self.gen_block(k, on)
        if tok.kind == "op" and tok.text == ";":
            return k + 1
        if w in ("endmodule", "endgenerate", "end"):
            return k + 1
        if tok.kind == "id":  # module instance: Name [#(...)] inst (...) {, inst (...)} ;
            end = self.skip_to_semi(k)
            j = k + 1
            if self.is_op(j, "#"):
                j = self.match.get(j + 1, j + 1) + 1 if self.is_op(j + 1, "(") else j + 2
            while j < end:
                if self.is_op(j, "("):
                    close = self.match.get(j, end)
                    self.connections(j + 1, close, on)
                    j = close + 1
                    continue
                if self.is_op(j, "["):
                    j = self.match.get(j, j) + 1
                    continue
                j += 1
            return end
        return self.skip_to_semi(k)

    def connections(self, a: int, b: int, on: bool) -> None:
        """Port connections ``.p(expr)`` or positional ``expr, expr`` in tokens a..b-1."""
        j = a
        while j < b:
            if self.is_op(j, "."):
                if j + 2 < b and self.is_op(j + 2, "("):
                    close = self.match.get(j + 2, b)
                    self.expression(j + 3, close, on)
                    j = close + 1
                else:
                    j += 2
            elif self.is_op(j, ","):
                j += 1
            else:
                e = self.skip_expr(j, b)
                self.expression(j, e, on)
                j = max(e, j + 1)

    def gen_block(self, k: int, on: bool) -> int:
        if self.is_kw(k, "begin"):
            j = k + 1
            if self.is_op(j, ":"):
                j += 2
            j = self.items(j, ("end",), on)
            return j + 1
        return self.item(k, on)

    # -- statements
    def statement(self, k: int, on: bool, resets: set[str] | None = None, first: bool = False,
                  in_reset: bool = False) -> int:
        if k >= self.n:
            return k
        tok = self.t[k]
        w = tok.text if tok.kind == "id" else None
        if w in ("begin", "fork"):
            j = k + 1
            if self.is_op(j, ":"):
                j += 2
            closer = "end" if w == "begin" else ("join", "join_any", "join_none")
            closer = (closer,) if isinstance(closer, str) else closer
            firsts = first
            while j < self.n and not self.is_kw(j, *closer):
                if self.t[j].kind == "id" and self.t[j].text in _DECL:
                    j = self.skip_to_semi(j)
                    continue
                j = self.statement(j, on, resets, firsts, in_reset)
                firsts = False
            return j + 1
        if w == "if":
            if not self.is_op(k + 1, "("):
                return self.skip_to_semi(k)
            close = self.match.get(k + 1, k + 1)
            is_reset = bool(first and resets and self.reset_condition(k + 2, close, resets))
            if not is_reset:
                self.if_condition(k + 1, close, on)
                self.expression(k + 2, close, on)
            j = self.statement(close + 1, on and not is_reset, in_reset=in_reset or is_reset)
            if self.is_kw(j, "else"):
                j = self.statement(j + 1, on, in_reset=in_reset)
            return j
        if w in ("case", "casez", "casex"):
            j = self.match.get(k + 1, k + 1) + 1 if self.is_op(k + 1, "(") else k + 1
            while j < self.n and not self.is_kw(j, "endcase"):
                if self.is_kw(j, "default"):
                    j += 1
                    if self.is_op(j, ":"):
                        j += 1
                else:  # labels up to ':' at depth 0
                    while j < self.n and not self.is_op(j, ":"):
                        j = self.match.get(j, j) + 1 if self.is_op(j, "(", "[", "{") else j + 1
                    j += 1
                j = self.statement(j, on, in_reset=in_reset)
            return j + 1
        if w in ("for", "while", "repeat"):
            j = self.match.get(k + 1, k + 1) + 1 if self.is_op(k + 1, "(") else k + 1
            return self.statement(j, on, in_reset=in_reset)
        if w == "forever":
            return self.statement(k + 1, on, in_reset=in_reset)
        if w == "wait":
            j = self.match.get(k + 1, k + 1) + 1 if self.is_op(k + 1, "(") else k + 1
            return self.statement(j, on, in_reset=in_reset)
        if tok.kind == "op" and tok.text == "#":
            j = k + 1
            j = self.match.get(j, j) + 1 if self.is_op(j, "(") else j + 1
            return self.statement(j, on, in_reset=in_reset)
        if tok.kind == "op" and tok.text == "@":
            j = k + 1
            j = self.match.get(j, j) + 1 if self.is_op(j, "(") else j + 1
            return self.statement(j, on, in_reset=in_reset)
        if tok.kind == "op" and tok.text == ";":
            return k + 1
        if tok.kind == "sys" or w in ("disable", "release", "force", "deassign") or self.is_op(k, "->"):
            return self.skip_to_semi(k)
        if w in ("end", "endcase", "endfunction", "endmodule", "join", "else"):
            return k  # malformed: let the caller stop
        # assignment (or a task call)
        end = self.skip_to_semi(k)
        j = k
        while j < end - 1:
            if self.is_op(j, "(", "[", "{"):
                j = self.match.get(j, j) + 1
                continue
            if self.is_op(j, "=", "<="):
                rhs = j + 1
                if self.is_op(rhs, "#"):
                    rhs = self.match.get(rhs + 1, rhs + 1) + 1 if self.is_op(rhs + 1, "(") else rhs + 2
                self.expression(rhs, end - 1, on)
                if self.t[j].text == "<=":
                    self.nba(k, j, end - 1, in_reset)
                else:
                    self.blocking(k, j)
                break
            j += 1
        return end

    def reset_condition(self, a: int, b: int, resets: set[str]) -> bool:
        ids = [self.t[j].text for j in range(a, b) if self.t[j].kind == "id"]
        return bool(ids) and all(i in resets or _RESET.search(i) for i in ids)

    def if_condition(self, lp: int, rp: int, on: bool) -> None:
        if not on or rp <= lp + 1 or not self.clean(lp, rp + 1):
            return
        span = (self.t[lp + 1].start, self.t[rp - 1].end)

        def fn(hole, sel):
            return f"!({hole(0, False)})" if not sel else f"(({sel}) ? !({hole(0, True)}) : ({hole(0, False)}))"

        self.sites.append(Site("Invert_If", self.t[lp - 1].line, self.t[lp - 1].col,
                               Edit(span[0], span[1], [span], fn), "if (c) -> if (!c)"))

    def _lvalue_names(self, a: int, b: int) -> tuple[str | None, list[str]]:
        """(the register an lvalue a..b-1 assigns: a name with selects, or None; the names of any other lvalue)"""
        j = a + 1
        while j < b and self.is_op(j, "["):
            j = self.match.get(j, b) + 1
        if self.t[a].kind == "id" and j == b:
            return self.t[a].text, []
        return None, [self.t[x].text for x in range(a, b) if self.t[x].kind == "id"]

    def nba(self, a: int, op: int, semi: int, in_reset: bool) -> None:
        name, others = self._lvalue_names(a, op)
        if name is None:
            self._bad_regs.update(others)
            return
        if not self.clean(a, semi + 1):
            self._bad_regs.add(name)
            return
        self._nbas.setdefault(name, []).append((a, semi, in_reset))

    def blocking(self, a: int, op: int) -> None:
        name, others = self._lvalue_names(a, op)
        self._bad_regs.update([name] if name else others)

    def stuck_sites(self) -> None:
        for name, nbas in self._nbas.items():
            if name in self._bad_regs or name not in self._regs:
                continue
            rng, decl_k = self._regs[name]
            decl = self.t[decl_k]
            bits = [("Lsb", rng[1] if rng else None)] + ([("Msb", rng[0])] if rng and rng[0] != rng[1] else [])
            for label, bit in bits:
                for value in (0, 1):
                    target = f"{name}[{bit}]" if bit is not None else name
                    op = f"Stuck{value}_{label}"
                    edits = []
                    for a, semi, _ in nbas:
                        span = (self.t[a].start, self.t[semi].end)

                        def fn(hole, sel, target=target, value=value):
                            force = f"{target} <= 1'b{value};"
                            guard = f"if ({sel}) {force}" if sel else force
                            return f"begin {hole(0, False)} {guard} end"

                        edits.append(Edit(span[0], span[1], [span], fn))
                    self.sites.append(Site(op, decl.line, decl.col, edits[0], f"{target} stuck at {value}",
                                           more=edits[1:]))


def moved(literal: str, delta: int) -> str | None:
    """``literal`` plus ``delta``, in the same size and base, or None (x/z digits, real, out of range)."""
    text = literal.replace("_", "")
    m = re.fullmatch(r"(\d+)?\s*'([sS]?)([bBoOdDhH])\s*([0-9a-fA-F]+)", text)
    if m:
        size = int(m.group(1)) if m.group(1) else None
        base = {"b": 2, "o": 8, "d": 10, "h": 16}[m.group(3).lower()]
        try:
            value = int(m.group(4), base) + delta
        except ValueError:
            return None
        if value < 0 or (size is not None and value >= 1 << size) or (size is None and value >= 1 << 32):
            return None
        digits = {2: "b", 8: "o", 10: "d", 16: "x"}[base]
        body = format(value, digits) if base != 10 else str(value)
        return f"{m.group(1) or ''}'{m.group(2)}{m.group(3)}{body}"
    if re.fullmatch(r"\d+", text):
        value = int(text) + delta
        return str(value) if value >= 0 else None
    return None


# ---- files, configs ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """How one target's files are preprocessed."""

    known: tuple[tuple[str, bool], ...] | None  # None: every branch kept and mutable
    maybe: frozenset[str] = frozenset()
    includes: tuple[Path, ...] = ()
    maybe_mutable: bool = False

    def preprocessor(self) -> Preprocessor:
        return Preprocessor(dict(self.known) if self.known is not None else None, self.maybe, self.includes,
                            self.maybe_mutable)


def filelist_defines(filelist: Path) -> dict[str, bool]:
    out: dict[str, bool] = {}
    for line in filelist.read_text().splitlines():
        for word in line.split("//", 1)[0].split():
            if word.startswith("-D"):
                out[word[2:].split("=", 1)[0]] = True
            elif word.startswith("+define+"):
                for d in word[len("+define+"):].split("+"):
                    if d:
                        out[d.split("=", 1)[0]] = True
    return out


def defined_anywhere(files: Iterable[Path]) -> frozenset[str]:
    names = set()
    for p in files:
        names.update(re.findall(r"`define\s+([A-Za-z_][A-Za-z0-9_$]*)", p.read_text(errors="replace")))
    return frozenset(names)


_CONFIGS: dict[Path, Config] = {}


#: Defines our rtl/ tests build with besides the configs' dla_config.vh (tests/rtl/test_engine_sim.py).
RTL_TEST_DEFINES = ("DLA_TEST_ENGINE", "DLA_SDP_PDP_FLYING")


def rtl_config(root: Path) -> Config:
    """Our ``rtl/``: a macro every preset's ``dla_config.vh`` defines is defined; one some preset or test
    defines (or an rtl file ``define``s) is undecidable but its code mutated (some test builds it); any other
    is undefined (dead code, not mutated)."""
    try:
        import tempfile

        from golden.config import PRESETS
        from tb import rtl_headers as gen
    except ImportError:
        return Config(None)
    sets = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, hw in PRESETS.items():
            d = Path(tmp) / name
            gen.write_config(hw, d)
            sets.append(set(re.findall(r"`define\s+(\w+)", (d / gen.CONFIG_HEADER).read_text())))
    always = set.intersection(*sets) if sets else set()
    maybe = set.union(*sets) - always if sets else set()
    rtl = Path(root) / "rtl"
    maybe |= set(RTL_TEST_DEFINES) | defined_anywhere(p for p in rtl.rglob("*") if p.suffix in (".v", ".vh"))
    return Config(tuple(sorted((n, True) for n in always)), frozenset(maybe - always), (), maybe_mutable=True)


def config_for(root: Path) -> Config:
    """The preprocessing of a target by its root: NVDLA's tree (a ``nv_small.f`` there) evaluates its
    conditionals with the file list's defines (undecidable ones: not mutated); our ``rtl/`` with the presets'
    and tests' defines (``rtl_config``); anything else keeps every branch."""
    root = Path(root).resolve()
    if root not in _CONFIGS:
        lists = sorted(root.glob("*.f"))
        if lists and (root / "vmod").is_dir():
            vmod = root / "vmod"
            maybe = defined_anywhere(p for p in vmod.rglob("*") if p.suffix in (".v", ".vh", ".vlib", ".sv"))
            _CONFIGS[root] = Config(tuple(sorted(filelist_defines(lists[0]).items())), maybe,
                                    (vmod / "include",))
        elif (root / "rtl" / "rtl.f").is_file():
            _CONFIGS[root] = rtl_config(root)
        else:
            _CONFIGS[root] = Config(None)
    return _CONFIGS[root]


def file_sites(root: Path, rel: str) -> tuple[str, list[Site], _Walker]:
    src = (Path(root) / rel).read_text(errors="replace")
    toks, barriers = tokenize(src, config_for(root).preprocessor())
    w = _Walker(src, toks, barriers)
    sites = w.walk()
    return src, sites, w


def site_table(root: Path, rel: str) -> list[tuple[Mutant, Site]]:
    """Every mutant of ``rel`` with its site; ``occurrence`` counts the operator's sites in file order."""
    _, sites, _ = file_sites(root, rel)
    counts: dict[str, int] = {}
    out = []
    for s in sorted(sites, key=lambda s: (s.line, s.col, s.operator)):
        occ = counts.get(s.operator, 0)
        counts[s.operator] = occ + 1
        out.append((Mutant(rel, s.operator, occ, s.line, s.col, unit_of(rel)), s))
    return out


def unit_of(rel: str) -> str:
    """NVDLA: the directory under ``vmod/nvdla`` (``pdp``); ours: the file's stem (``dla_pdp``)."""
    parts = Path(rel).parts
    if "nvdla" in parts[:-1] and parts[0] == "vmod":
        return parts[parts.index("nvdla") + 1]
    return Path(rel).stem


def enumerate_mutants(root: Path, paths: list[str]) -> list[Mutant]:
    return [m for rel in paths for m, _ in site_table(root, rel)]


def _find(root: Path, m: Mutant) -> tuple[str, Site, _Walker] | None:
    src, sites, w = file_sites(root, m.path)
    counts: dict[str, int] = {}
    for s in sorted(sites, key=lambda s: (s.line, s.col, s.operator)):
        occ = counts.get(s.operator, 0)
        counts[s.operator] = occ + 1
        if s.operator == m.operator and occ == m.occurrence and (s.line, s.col) == (m.line, m.col):
            return src, s, w
    return None


# ---- rendering ---------------------------------------------------------------------------------------------


class _Renderer:
    def __init__(self, src: str, toks: list[Tok]) -> None:
        self.src = src
        self.toks = toks
        self.starts = [t.start for t in toks]

    def raw(self, a: int, b: int, flat: bool) -> str:
        if a >= b:
            return ""
        if not flat:
            return self.src[a:b]
        i = bisect.bisect_left(self.starts, a)
        words = []
        while i < len(self.toks) and self.toks[i].end <= b:
            words.append(self.toks[i].text)
            i += 1
        return " " + " ".join(words) + " " if words else " "

    def render(self, edits: list[tuple[Edit, str]], lo: int, hi: int, flat: bool) -> str:
        """``src[lo:hi]`` with ``edits`` (sorted by start, then widest first; nested or disjoint) applied."""
        out, pos, i = [], lo, 0
        while i < len(edits):
            e, sel = edits[i]
            j = i + 1
            while j < len(edits) and edits[j][0].start < e.end:
                if edits[j][0].end > e.end:
                    raise ValueError(f"overlapping mutation sites at {e.start} and {edits[j][0].start}")
                j += 1
            children = edits[i + 1:j]
            out.append(self.raw(pos, e.start, flat))

            def hole(k: int, flat_h: bool, e=e, children=children) -> str:
                s, t = e.holes[k]
                inner = [c for c in children if c[0].start >= s and c[0].end <= t]
                return self.render(inner, s, t, flat or flat_h)

            for c in children:
                if not any(c[0].start >= s and c[0].end <= t for s, t in e.holes):
                    raise ValueError("a mutation site inside another's operator")
            out.append(e.fn(hole, sel))
            pos, i = e.end, j
        out.append(self.raw(pos, hi, flat))
        return "".join(out)


def _sorted(edits: list[tuple[Edit, str]]) -> list[tuple[Edit, str]]:
    return sorted(edits, key=lambda es: (es[0].start, es[0].end > es[0].start, -es[0].end, es[0].seq))


def mutated_source(root: Path, m: Mutant) -> str | None:
    """The file with mutant ``m`` applied (line numbers unchanged), or None when it no longer exists."""
    found = _find(root, m)
    if found is None:
        return None
    src, site, w = found
    edits = [(e, "") for e in [site.edit, *site.more]]
    return _Renderer(src, w.t).render(_sorted(edits), 0, len(src), False)


def describe(root: Path, m: Mutant) -> tuple[str, str]:
    """(the line before, after) for a report; a stuck bit as ``x[b] stuck at v``."""
    found = _find(root, m)
    before = (Path(root) / m.path).read_text(errors="replace").splitlines()[m.line - 1].strip()
    if found is None:
        return before, "(not applicable)"
    if m.operator in STUCK:
        return before, found[1].describe
    after = mutated_source(root, m)
    return before, after.splitlines()[m.line - 1].strip() if after else ""


#: Declared in every module holding a mutant of a schemata file: ``+mut=K`` picks mutant K, 0 none.
MUT_DECL = ' integer mut_id; initial begin if (!$value$plusargs("mut=%d", mut_id)) mut_id = 0; end'


def schemata(root: Path, rel: str, chosen: dict[Mutant, int]) -> str:
    """``rel`` with every mutant of ``chosen`` (mutant -> selector K >= 1) guarded by ``mut_id == K``."""
    src, sites, w = file_sites(root, rel)
    by_key = {(m.operator, m.occurrence, m.line, m.col): k for m, k in chosen.items() if m.path == rel}
    counts: dict[str, int] = {}
    edits: list[tuple[Edit, str]] = []
    for seq, s in enumerate(sorted(sites, key=lambda s: (s.line, s.col, s.operator))):
        occ = counts.get(s.operator, 0)
        counts[s.operator] = occ + 1
        k = by_key.pop((s.operator, occ, s.line, s.col), None)
        if k is None:
            continue
        for e in [s.edit, *s.more]:
            e.seq = seq
            edits.append((e, f"mut_id == {k}"))
    if by_key:
        raise ValueError(f"{rel}: {len(by_key)} mutants not found (file changed?)")
    for head, end in w.modules:  # declare mut_id in each module holding a mutant
        if any(head <= e.start < end for e, _ in edits):
            edits.append((Edit(head, head, [], lambda hole, sel: MUT_DECL, seq=-1), ""))
    return _Renderer(src, w.t).render(_sorted(edits), 0, len(src), False)
