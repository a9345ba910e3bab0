#!/usr/bin/python3
"""Assembles the plain-English training corpus for the project's small default model.

    tools/train/corpus.py OUT_DIR [--seed 0] [--valid-fraction 0.02] [--valid-cap 60000]

Sources (Debian packages, installed with apt-get when missing; needs root):
    bible-kjv-text + bible-kjv   the King James Bible (compressed data + the `bible` reader that decodes it)
    fortunes, fortunes-min       fortune cookie files (ascii-art and translate-me are left out)
    jargon-text                  the Jargon File 4.4.7 (lexicon entries and the appendices)

Cleaning: chapter headings, verse numbers, fortune '%' separators, Jargon headwords' markup
(':word: pron, n.'), {cross-reference} braces, sense numbers and cartoon notes are removed;
typographic quotes and dashes become ASCII; paragraphs with few letters (ASCII pictures, code)
are dropped; whitespace is collapsed. Each paragraph or verse is one line of prose.

A document (a Bible chapter, one fortune, one Jargon entry, one appendix section) is a run of
lines; documents are separated by one blank line. The split is by document: the documents are
shuffled with --seed and taken into valid.txt until it holds --valid-fraction of the corpus or
--valid-cap bytes, whichever is smaller; the rest, in their original order, is train.txt.
"""
import argparse
import gzip
import os
import random
import re
import subprocess
import sys
import unicodedata

PACKAGES = ("bible-kjv-text", "bible-kjv", "fortunes", "fortunes-min", "jargon-text")
FORTUNE_DIR = "/usr/share/games/fortunes"
FORTUNE_SKIP = {"ascii-art", "translate-me"}
JARGON = "/usr/share/doc/jargon-text/jargon.txt.gz"
ASCII_PUNCTUATION = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2014": " - ",
                                   "\u2013": "-", "\u2026": "...", "\u00a0": " "})


def install_packages():
    """apt-get installs whichever of PACKAGES dpkg does not report as installed."""
    missing = []
    for package in PACKAGES:
        status = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True)
        if status.returncode != 0 or "install ok installed" not in status.stdout:
            missing.append(package)
    if missing:
        print(f"corpus: apt-get install {' '.join(missing)}", file=sys.stderr)
        subprocess.run(["apt-get", "install", "-y", *missing], check=True, stdout=subprocess.DEVNULL)


def repair_mojibake(text):
    """Undoes UTF-8 read as Latin-1 (some fortunes have it, sometimes twice)."""
    for _ in range(3):
        if "\u00c3" not in text and "\u00e2" not in text:
            break
        try:
            text = text.encode("latin-1").decode("utf-8")
        except (UnicodeEncodeError, UnicodeDecodeError):
            break
    return text


def repair_mojibake_lines(text):
    return "\n".join(repair_mojibake(line) for line in text.split("\n"))


def clean_line(text):
    """ASCII punctuation, no control characters (fortunes' backspace overstrikes), collapsed whitespace."""
    text = "".join(c for c in text.translate(ASCII_PUNCTUATION)
                   if c.isspace() or not unicodedata.category(c).startswith("C"))
    return " ".join(text.split())


def is_prose(text, min_letter_share=0.7):
    """Drops ASCII art, code and tables: prose is mostly letters and spaces."""
    if not text:
        return False
    letters = sum(c.isalpha() or c == " " for c in text)
    return letters / len(text) >= min_letter_share


def paragraphs(block):
    """Blank-line separated paragraphs of a text block, each joined into one cleaned line."""
    result = []
    for chunk in re.split(r"\n\s*\n", block):
        line = clean_line(chunk)
        if is_prose(line):
            result.append(line)
    return result


def bible_documents():
    """One document per chapter, one line per verse (verse numbers and chapter headings dropped)."""
    text = subprocess.run(["bible", "-l100000", "gen1:1-rev22:21"], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, check=True).stdout
    documents, chapter = [], []
    for line in text.splitlines():
        verse = re.match(r"^\s+\d+ (.*)$", line)
        if verse:
            chapter.append(clean_line(verse.group(1)))
        elif line.strip():  # "Genesis 1": a new chapter
            if chapter:
                documents.append(chapter)
            chapter = []
    if chapter:
        documents.append(chapter)
    return documents


def fortune_documents():
    """One document per fortune; its paragraphs (lines joined) are its lines."""
    documents = []
    for name in sorted(os.listdir(FORTUNE_DIR)):
        path = os.path.join(FORTUNE_DIR, name)
        if "." in name or name in FORTUNE_SKIP or os.path.islink(path) or not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            for fortune in re.split(r"^%\s*$", repair_mojibake_lines(f.read()), flags=re.MULTILINE):
                lines = paragraphs(fortune)
                if lines:
                    documents.append(lines)
    return documents


_JARGON_HEADWORD = re.compile(r"^   :(.+?):(.*)$")
_JARGON_PRONUNCIATION = re.compile(r"/[^/]*/,?")


def _jargon_entry(headword, rest, body):
    """'headword: first paragraph', then the other paragraphs, without sense numbers or cartoon notes."""
    lines = []
    for line in paragraphs(body.replace("{", "").replace("}", "")):
        line = re.sub(r"^\d+\. ", "", line)
        if not re.match(r"^\((The next|The previous|This) cartoon", line):
            lines.append(line)
    if not lines:
        return None
    part_of_speech = clean_line(_JARGON_PRONUNCIATION.sub("", rest)).strip(" ,")
    label = f"{headword} ({part_of_speech})" if re.fullmatch(r"[a-z. ,]+", part_of_speech or "-") else headword
    lines[0] = f"{label}: {lines[0]}"
    return lines


def jargon_documents():
    """One document per lexicon entry, then one per appendix paragraph group (headings dropped)."""
    with gzip.open(JARGON, "rt", encoding="utf-8") as f:
        text = f.read()
    lexicon_start = re.search(r"^   :.+?:", text, flags=re.MULTILINE).start()
    appendix_start = re.search(r"^Appendix\sA\.\s", text, flags=re.MULTILINE).start()
    documents = []
    headword, rest, body = None, "", []
    for line in text[lexicon_start:appendix_start].splitlines():
        match = _JARGON_HEADWORD.match(line)
        if match:
            if headword is not None:
                documents.append(_jargon_entry(headword, rest, "\n".join(body)))
            headword, rest, body = match.group(1), match.group(2), []
        else:
            body.append(line)
    documents.append(_jargon_entry(headword, rest, "\n".join(body)))
    # Appendices: a section starts at an unindented heading; short heading-like paragraphs go.
    for section in re.split(r"^\S.*$", text[appendix_start:], flags=re.MULTILINE):
        lines = [p for p in paragraphs(section) if len(p) >= 60 or p[-1:] in ".?!\""]
        if lines:
            documents.append(lines)
    return [d for d in documents if d]


def split_documents(documents, seed, valid_fraction, valid_cap):
    """(train, valid): a seeded random subset of whole documents for validation, capped in bytes."""
    sizes = [len("\n".join(d).encode()) + 2 for d in documents]
    budget = min(valid_fraction * sum(sizes), valid_cap)
    order = list(range(len(documents)))
    random.Random(seed).shuffle(order)
    valid, used = set(), 0
    for index in order:
        if used + sizes[index] > budget:
            continue
        valid.add(index)
        used += sizes[index]
        if used > budget * 0.98:
            break
    train = [d for i, d in enumerate(documents) if i not in valid]
    return train, [documents[i] for i in order if i in valid]


def write_documents(path, documents):
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n\n".join("\n".join(lines) for lines in documents) + "\n")
    return os.path.getsize(path)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    p.add_argument("out_dir")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--valid-fraction", type=float, default=0.02)
    p.add_argument("--valid-cap", type=int, default=60000, help="most bytes valid.txt may hold")
    p.add_argument("--no-install", action="store_true", help="do not run apt-get (packages already present)")
    args = p.parse_args(argv)
    if not args.no_install:
        install_packages()
    sources = {"bible": bible_documents(), "fortunes": fortune_documents(), "jargon": jargon_documents()}
    documents = []
    for name, docs in sources.items():
        size = sum(len("\n".join(d)) for d in docs)
        print(f"corpus: {name}: {len(docs)} documents, {size / 1e6:.2f} MB")
        documents.extend(docs)
    train, valid = split_documents(documents, args.seed, args.valid_fraction, args.valid_cap)
    os.makedirs(args.out_dir, exist_ok=True)
    train_bytes = write_documents(os.path.join(args.out_dir, "train.txt"), train)
    valid_bytes = write_documents(os.path.join(args.out_dir, "valid.txt"), valid)
    print(f"corpus: train.txt {len(train)} documents {train_bytes} bytes; "
          f"valid.txt {len(valid)} documents {valid_bytes} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
