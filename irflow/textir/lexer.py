"""The text IR's lexer: all of grammar.lark's terminals as one regex, bracketed tokens scanned to their close.

One `re.match` per token.  A word that could be two terminals (`index` as a
type or a key, `a.b` as an op name or a key) becomes the first kind the LALR
parser accepts in its state, as lark's contextual lexer would.  Tokens with a
bracketed body (`tensor<...>`, `dense<...>`, `loc(...)`, `#d.attr<...>`) are
matched by their prefix and ended by `balanced_end`, so they nest to any
depth up to `MAX_NESTING`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from lark import Token
from lark.exceptions import UnexpectedCharacters
from lark.lexer import Lexer, PatternStr

# Terminals tried in this order; words and punctuation come last.
_LEXER_ORDER = (
    "RESULTS", "VALUES", "STRING", "FLOAT", "INT", "SHAPED_TYPE", "DENSE", "DENSE_ARRAY", "LOC",
    "DIALECT_ATTR", "DIALECT_TYPE", "SYMBOL", "BLOCK_ID", "FUNC_TYPE", "BUILTIN_ATTR",
)  # fmt: skip
_SKIP = r"(?:[ \t\n\r\f\v]++|//[^\n]*+)*+"  # possessive: never give back part of a comment

# Bracketed tokens: the lexer matches the prefix, then scans to the balanced close.  The most common
# forms, a static shape of a scalar and `loc("file":line:col)`, are matched whole instead (no scan).
_PREFIX = {
    "SHAPED_TYPE": r"(?:tensor|memref)<(?:[0-9]+x)*[a-z][A-Za-z0-9_]*>(?![A-Za-z0-9_$.<>])|(?:tensor|memref|vector|complex|tuple)(?=<)",
    "DENSE": r"dense(?=<)",
    "DENSE_ARRAY": r"array(?=<)",
    "LOC": r'loc\("[^"\\\n]*+":[0-9]+:[0-9]+\)|loc(?=\()',
    "DIALECT_ATTR": r"#[A-Za-z_][A-Za-z0-9_$.]*",
    "DIALECT_TYPE": r"![A-Za-z_][A-Za-z0-9_$.]*",
    "BUILTIN_ATTR": r"(?!(?:tensor|memref|vector|complex|tuple|dense|array)<)[a-z_][A-Za-z0-9_]*(?=<)",
}
# Brackets deeper than this are an error: regions, arrays and dictionaries (`{`, `[`, `<`; parentheses
# do not count) and any bracket inside one token.  xDSL's verifier, printer and attribute parser
# recurse once or more per level.
MAX_NESTING = 64
_CLOSE = {"<": ">", "(": ")", "[": "]", "{": "}"}
# grammar.lark's STRING.  A body's strings must be whole and valid before xDSL reads the body: its string
# regex backtracks exponentially on an unclosed one (`loc("a.py:1:2)` took minutes).
_STRING = r'"[^"\\\n\v\f]*+(?:\\(?:["nt\\]|[0-9A-Fa-f]{2})[^"\\\n\v\f]*+)*+"'
# Outside its string literals a body is ASCII, as all IR text is: a character from \x80 up is an error.
_SCAN = re.compile(rf'[^<>()\[\]{{}}"\-\x80-\U0010ffff]++|{_STRING}|->|>=|.', re.S)


def shown(char: str) -> str:
    """A character as a message shows it: quoted, with its code point where it is not ASCII or not printable."""
    code = f"U+{ord(char):04X}"
    if not char.isprintable():
        return code
    return f"'{char}'" if char.isascii() else f"'{char}' ({code})"


def not_ascii(char: str) -> str:
    """The message for a character IR text cannot hold outside a string literal (or a comment)."""
    return f"unexpected character {shown(char)}: IR text outside string literals is ASCII"


class TokenError(Exception):
    """A token the lexer cannot finish (nesting too deep, a character not ASCII), at a text offset."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.message, self.offset = message, offset


class Unbalanced(TokenError):
    """A token's brackets that do not balance: reported at the token's start, with the offset in it."""


# A `<...>` body without strings or `-`, whose brackets nest two deep at most and balance: its end is
# where the scan below would find it, in one match (`array<i64: 1, 0>`, `#job.nd_sbp<[split(0)]>`).
_PLAIN = r'[^<>()\[\]{}"\-\x80-\U0010ffff]'
_FLAT = re.compile(rf"<(?:{_PLAIN}|\({_PLAIN}*+\)|\[(?:{_PLAIN}|\({_PLAIN}*+\))*+\])*+>")


def balanced_end(text: str, pos: int) -> int:
    """The offset just past the bracket that closes the one at `pos` (strings and `->` skipped)."""
    if m := _FLAT.match(text, pos):
        return m.end()
    stack: list[str] = []
    i = pos
    match = _SCAN.match
    while (m := match(text, i)) is not None:
        piece = m.group()
        if piece in _CLOSE:
            stack.append(_CLOSE[piece])
            if len(stack) > MAX_NESTING:
                raise TokenError(f"brackets nested deeper than {MAX_NESTING}", m.start())
        elif piece in (">", ")", "]", "}"):
            if not stack or stack.pop() != piece:
                raise Unbalanced(f"'{piece}' at offset {m.start() - pos} closes nothing opened here", m.start())
            if not stack:
                return m.end()
        elif piece == '"':  # not the start of a string literal
            raise TokenError(r'a string literal that is never closed, or holds an escape other than \n \t \" \\ \XX', m.start())
        elif len(piece) == 1 and not piece.isascii():  # a string literal may hold any character
            raise TokenError(not_ascii(piece), m.start())
        i = m.end()
    raise Unbalanced(f"the '{text[pos]}' is never closed", pos)


class TextIRLexer(Lexer):
    """All of grammar.lark's terminals as one compiled regex, one match per token.

    A word (`index`, `on`, `a.b`) may be a keyword, a type, an op name or a
    dictionary key; like lark's contextual lexer, it becomes the first of those
    the parser accepts in its current state.  A function-type token is only
    produced where the parser accepts one (`func.func @f(i32) -> i32` reads
    its argument list as `(` ...).
    """

    __future_interface__ = 2

    def __init__(self, conf: Any) -> None:
        terminals = {t.name: t for t in conf.terminals}
        self.literal = {t.pattern.value: t.name for t in conf.terminals if isinstance(t.pattern, PatternStr)}
        groups = [f"(?P<{name}>{_PREFIX.get(name) or terminals[name].pattern.to_regexp()})" for name in _LEXER_ORDER]
        groups += [r"(?P<WORD>[A-Za-z_][A-Za-z0-9_$.]*)", r"(?P<PUNCT>->|[(){}\[\]<>,:=])"]
        self.regex = re.compile(_SKIP + "(?:" + "|".join(groups) + ")")
        self.skip = re.compile(_SKIP)
        self.word_terminals = [
            (t.name, re.compile(t.pattern.to_regexp()))
            for t in conf.terminals
            if not isinstance(t.pattern, PatternStr) and t.name not in ("OP_NAME", "BARE_ID")
        ]
        self.word_kinds: dict[str, tuple[str, ...]] = {}
        # where a list of values is not accepted, the same text starts a shorter token
        self.shorter = {
            "RESULTS": [(k, re.compile(terminals[k].pattern.to_regexp())) for k in ("VALUES", "VALUE")],
            "VALUES": [("VALUE", re.compile(terminals["VALUE"].pattern.to_regexp()))],
        }
        self.last: Token | None = None  # where to blame an error raised outside the grammar

    def kinds(self, word: str) -> tuple[str, ...]:
        """The terminals a word could be, most specific first."""
        kinds = self.word_kinds.get(word)
        if kinds is None:
            first = [self.literal[word]] if word in self.literal else []
            first += [name for name, regex in self.word_terminals if regex.fullmatch(word)]
            kinds = self.word_kinds[word] = (*first, "OP_NAME" if "." in word else "BARE_ID", "BARE_ID")
        return kinds

    def lex(self, lexer_state: Any, parser_state: Any) -> Any:
        """lark's interface (the grammar run by lark's own LALR loop)."""
        text = lexer_state.text
        return self.tokens(text if isinstance(text, str) else text.text, parser_state)

    def tokens(self, text: str, parser_state: Any) -> Iterator[Token]:
        """The tokens of `text`; `parser_state.position` is the LALR state the parser is in."""
        states = parser_state.parse_conf.states
        literal_paren = self.literal["("]
        match, count, new = self.regex.match, text.count, str.__new__
        pos, line, line_start, depth = 0, 1, 0, 0
        self.last = None
        while True:
            m = match(text, pos)
            if m is None:
                start = self.skip.match(text, pos).end()
                line += count("\n", pos, start)
                if start >= len(text):
                    return
                line_start = text.rfind("\n", 0, start) + 1
                raise UnexpectedCharacters(
                    text,
                    start,
                    line,
                    start - line_start + 1,
                    allowed={s for s in states[parser_state.position] if s.isupper()},
                )
            kind = m.lastgroup
            start, end = m.span(kind)
            if start != pos and (n := count("\n", pos, start)):
                line += n
                line_start = text.rfind("\n", pos, start) + 1
            value = m.group(kind)
            if kind == "WORD":
                accepted = states[parser_state.position]
                kinds = self.kinds(value)
                kind = next((k for k in kinds if k in accepted), kinds[0])
            elif kind == "PUNCT":
                kind = self.literal[value]
                if value in "{[<":  # regions, arrays and dictionaries: what xDSL recurses on
                    depth += 1
                    if depth > MAX_NESTING:
                        raise TokenError(f"brackets nested deeper than {MAX_NESTING}", start)
                elif value in "}]>":
                    depth -= 1
            elif kind in _PREFIX:
                if text[end - 1] not in ">)" and end < len(text) and text[end] in "<(":  # a prefix: scan
                    try:
                        end = balanced_end(text, end)
                    except Unbalanced as e:
                        raise TokenError(f"'{value}{text[end]}': {e.message}", start) from None
                    value = text[start:end]
            elif kind == "FUNC_TYPE" and kind not in states[parser_state.position]:
                kind, value, end = literal_paren, "(", start + 1
            elif kind in self.shorter and kind not in (accepted := states[parser_state.position]):
                for shorter, regex in self.shorter[kind]:
                    if shorter in accepted and (short := regex.match(text, start)):
                        kind, value, end = shorter, short.group(), short.end()
                        break
            tok = new(Token, value)
            tok.type, tok.value, tok.start_pos = kind, value, start
            tok.line, tok.column = line, start - line_start + 1
            tok.end_line = tok.end_column = tok.end_pos = None
            self.last = tok
            yield tok
            if "\n" in value:
                line += value.count("\n")
                line_start = text.rfind("\n", start, end) + 1
            pos = end
