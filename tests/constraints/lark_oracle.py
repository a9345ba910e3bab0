#!/usr/bin/python3
"""Lark's verdict on texts under Lark grammars: the reference of tests/constraints/lark_grammar_test.cc.

Input: a JSON Lines file, each line {"grammar": PATH, "text": TEXT, "ours": VERDICT}. For every
line this prints a disagreement when Lark's verdict differs, then one summary line:
  checked N texts, M disagree (complete C, prefix P, rejected R)
Lark (Debian python3-lark) parses with parser='earley', lexer='dynamic', as llguidance does.
Verdicts:
  complete  Lark parses the text.
  prefix    the text can be continued into one Lark parses: Lark ran out of input
            (UnexpectedEOF), or the text ends inside a terminal: for some position q at or
            before where Lark stopped, Lark's run over the text reaches q (every terminal
            ending by q matched against the whole text, so that none would have taken more of
            it, then a character no grammar uses at q stops it exactly there) and the rest of
            the text begins a terminal Lark expects at q, or an %ignore terminal, that some
            continuation completes (covers() below). The terminal may start before the stop: Lark's
            lexer reads "1." as the number "1" and stops at ".", though "1.5" is a number.
  rejected  otherwise.
"""
import json
import sys

import lark
import regex

_RE_FLAGS = {"i": regex.I, "m": regex.M, "s": regex.S, "x": regex.X, "u": 0, "l": 0}


def covers(pattern, flags, rest):
    """Whether some continuation makes Lark's match of the terminal take all of `rest`.

    That `rest` begins a string of the pattern's language (python3-regex's partial fullmatch)
    is not enough: a lazy pattern (common.lark's ESCAPED_STRING, C_COMMENT) matches only up to
    its first close, so '"a" b' never continues one string. So a continuation is searched for,
    shortest first (SEARCH_BUDGET regex calls at most), from the pattern's own characters and a
    few others, each step still a prefix of the language; Lark's match of `rest` and the
    continuation (then a character no grammar uses) must reach the end of `rest`.
    """
    compiled = regex.compile(pattern, flags)
    alphabet = sorted(set(pattern) | set("0a "))
    frontier = [""]
    budget = SEARCH_BUDGET
    while frontier and budget > 0:
        extended = []
        for more in frontier:
            m = compiled.match(rest + more + SENTINEL)
            if m and m.end() >= len(rest):
                return True
            budget -= len(alphabet)
            extended += [more + a for a in alphabet if compiled.fullmatch(rest + more + a, partial=True)]
        frontier = extended
    return False


def continues_a_terminal(parser, names, rest):
    for name in names:
        terminal = parser.get_terminal(name)
        flags = 0
        for f in terminal.pattern.flags:
            flags |= _RE_FLAGS[f]
        pattern = terminal.pattern.to_regexp()
        if regex.fullmatch(pattern, rest, flags, partial=True) and covers(pattern, flags, rest):
            return True
    return False


SENTINEL = "\U0010fffd"
LONGEST_TERMINAL = 64
SEARCH_BUDGET = 20000


def expected_at(parser, text, q):
    """The terminals Lark expects at q on its run over `text`, or None when it never gets there.

    Lark matches each terminal against the rest of the input (the longest match, for these
    grammars), so the run over text[:q] + SENTINEL would end a terminal at q that the whole text
    extends; matching against the whole text, and dropping matches that pass q, keeps it exact.
    """
    earley = parser.parser.parser
    own = earley.term_matcher

    def match_in_text(term, _stream, index=0):
        m = own(term, text, index)
        return m if m and m.end() <= q else None

    earley.term_matcher = match_in_text
    try:
        parser.parse(text[:q] + SENTINEL)
    except lark.exceptions.UnexpectedCharacters as e:
        if e.pos_in_stream == q:
            return set(e.allowed or ()) | set(parser.ignore_tokens)
    except lark.exceptions.LarkError:
        pass
    finally:
        earley.term_matcher = own
    return None


def ends_inside_a_terminal(parser, text, stop):
    for q in range(stop, max(-1, stop - LONGEST_TERMINAL), -1):
        names = expected_at(parser, text, q)
        if names and continues_a_terminal(parser, names, text[q:]):
            return True
    return False


def verdict(parser, text):
    try:
        parser.parse(text)
        return "complete"
    except lark.exceptions.UnexpectedEOF:
        return "prefix"
    except lark.exceptions.UnexpectedCharacters as e:
        return "prefix" if ends_inside_a_terminal(parser, text, e.pos_in_stream) else "rejected"


def main(path):
    parsers = {}
    counts = {"complete": 0, "prefix": 0, "rejected": 0}
    checked = disagree = 0
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            case = json.loads(line)
            grammar = case["grammar"]
            if grammar not in parsers:
                with open(grammar, encoding="utf-8") as f:
                    parsers[grammar] = lark.Lark(f.read(), parser="earley", lexer="dynamic")
            theirs = verdict(parsers[grammar], case["text"])
            counts[theirs] += 1
            checked += 1
            if theirs != case["ours"]:
                disagree += 1
                if disagree <= 30:
                    print(f"{grammar}: {case['text']!r}: ours {case['ours']}, lark {theirs}")
    print(f"checked {checked} texts, {disagree} disagree "
          f"(complete {counts['complete']}, prefix {counts['prefix']}, rejected {counts['rejected']})")
    return 1 if disagree else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
