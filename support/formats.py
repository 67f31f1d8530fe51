"""
The files of the tasks, read row by row: GLUE's TSV files (and PAWS', in the same format) and CoNLL-2003's
`word POS chunk NER` lines, into data.Example lists.

Each reader follows the file exactly as GLUE's download script wrote it: split on '\t' with no CSV quote handling
(MNLI and QNLI text holds stray quote characters), a header looked up by column name where there is one, and a
DataError naming the file and line for any row that does not fit: a wrong column count, an unknown label, a score
off STS-B's scale, bytes that are not UTF-8, a blank line inside the file. data.py says which file each split is.
"""
import math
from pathlib import Path
from typing import NamedTuple


class DataError(ValueError):
    """Anything wrong with the data on disk: a missing file, a malformed row, an unknown task or label."""


class Example(NamedTuple):
    text_a: str | tuple[str, ...]  # a token task's sentence is its tuple of words
    text_b: str | None
    label: int | float | tuple[int, ...] | None  # index into task.labels, the score for STS-B, or one tag index
    #                                               per word; None in GLUE's unlabelled test sets (load_test)


def _rows(path):
    """(where, cells) for each line of a TSV file that is not blank, where = 'PATH line N'. Blank lines at the end
    of the file (editors add them, '\n' or '\r\n') are skipped; a blank line with rows after it is an error, as
    it may stand where a row was lost."""
    try:
        f = open(path, "rb")
    except OSError as e:
        raise DataError(f"{path}: cannot read it ({e.strerror})") from None
    # bytes, split on b'\n' only, so that a stray '\r' inside a sentence cannot split a row, and each line is
    # decoded alone, so that bytes which are not UTF-8 are reported with their line
    with f:
        blank = None  # the first of the blank lines since the last row
        for lineno, raw_line in enumerate(f, start=1):
            where = f"{path} line {lineno}"
            try:
                line = raw_line.decode("utf-8")
            except UnicodeDecodeError as e:
                if lineno == 1 and raw_line.startswith((b"\xff\xfe", b"\xfe\xff")):
                    raise DataError(f"{path}: the file is UTF-16; GLUE files are UTF-8: save it as UTF-8") from None
                raise DataError(f"{where}: not UTF-8 text (byte 0x{raw_line[e.start]:02x} at byte {e.start + 1} of the "
                                "line); GLUE files are UTF-8: re-download the file or save it as UTF-8") from None
            if lineno == 1:
                line = line.removeprefix("\ufeff")  # MRPC's byte-order mark
            line = line.removesuffix("\n").removesuffix("\r")
            if not line.strip():
                blank = blank or lineno
                continue
            if blank:
                raise DataError(f"{path} line {blank} is blank; only the end of a file may have blank lines (a row "
                                f"follows at line {lineno}): delete the line, or put back the row that was there")
            yield where, line.split("\t")


def _header(where, names, needed):
    """Column name -> position, from a header line that must have the needed columns."""
    missing = [c for c in needed if c and c not in names]
    if missing:
        raise DataError(f"{where}: header lacks column(s) {missing}; it has {names}")
    return {n: i for i, n in enumerate(names)}


def _no_rows(path, header_read):
    if header_read:
        return "below the header"
    return "(the file is empty)" if Path(path).stat().st_size == 0 else "(the file has only blank lines)"


SCORE_RANGE = (0.0, 5.0)  # STS-B's similarity scale: 0 (unrelated) to 5 (the same meaning)


def read_tsv(path, task):
    """One task file -> list[Example]. Every row must have exactly as many columns as the header."""
    names, examples = task.columns, []  # names stays None until the header line is read
    col = None if names is None else {n: i for i, n in enumerate(names)}
    for where, row in _rows(path):
        if names is None:  # this is the header line
            names, col = row, _header(where, row, (task.text_a, task.text_b, task.label_col))
            continue
        if len(row) != len(names):
            raise DataError(f"{where}: expected {len(names)} tab-separated columns, got {len(row)}")
        raw = row[col[task.label_col]].strip()
        if task.labels is None:
            try:
                label = float(raw)
            except ValueError:
                raise DataError(f"{where}: cannot parse score {raw!r} as a float") from None
            if not math.isfinite(label):
                raise DataError(f"{where}: score {raw!r} is not a finite number")
            if not SCORE_RANGE[0] <= label <= SCORE_RANGE[1]:
                raise DataError(f"{where}: score {raw!r} is outside {task.name}'s range [0, 5]")
        elif raw in task.labels:
            label = task.labels.index(raw)
        else:
            raise DataError(f"{where}: unknown label {raw!r}; expected one of {task.labels}")
        examples.append(Example(row[col[task.text_a]], row[col[task.text_b]] if task.text_b else None, label))
    if not examples:
        raise DataError(f"{path}: no examples " + _no_rows(path, names is not None and task.columns is None))
    return examples


def read_test_tsv(path, task):
    """A GLUE test file -> (indices, examples), each example's label None: test files hold no labels. Every test
    file has a header, CoLA's too (its train and dev files have none), and an index column that numbers the rows
    for the submission file ('id' in QQP's); the text columns are named as in the task's train file."""
    names, indices, examples = None, [], []
    for where, row in _rows(path):
        if names is None:
            index = "id" if "id" in row and "index" not in row else "index"
            names, col = row, _header(where, row, (index, task.text_a, task.text_b))
            continue
        if len(row) != len(names):
            raise DataError(f"{where}: expected {len(names)} tab-separated columns, got {len(row)}")
        raw = row[col[index]].strip()
        if not raw.isdigit():
            raise DataError(f"{where}: {index} {raw!r} is not a whole number")
        indices.append(int(raw))
        examples.append(Example(row[col[task.text_a]], row[col[task.text_b]] if task.text_b else None, None))
    if not examples:
        raise DataError(f"{path}: no examples " + _no_rows(path, names is not None))
    return indices, examples


def read_conll(path, tag_names):
    """A CoNLL-2003 file -> list[Example], one per sentence: text_a the words, label their NER tag indices.
    Each line is `word POS chunk NER`; a blank line ends a sentence, and so does a -DOCSTART- line, which is
    skipped (as Hugging Face's loader does). POS and chunk are read past: the paper's NER runs use only the words.
    Tags must be IOB2 names from tag_names (data.CONLL_TAGS); an I-X that opens an entity is a valid tag
    (conlleval scores it)."""
    index = {t: i for i, t in enumerate(tag_names)}
    examples, words, tags, lineno = [], [], [], 0
    try:
        f = open(path, "rb")
    except OSError as e:
        raise DataError(f"{path}: cannot read it ({e.strerror})") from None
    with f:
        for lineno, raw_line in enumerate(f, start=1):
            where = f"{path} line {lineno}"
            try:
                line = raw_line.decode("utf-8").removesuffix("\n").removesuffix("\r")  # LF or CRLF
                line = line.removeprefix("\ufeff") if lineno == 1 else line  # a byte-order mark, as _rows allows
            except UnicodeDecodeError as e:
                raise DataError(f"{where}: not UTF-8 text (byte 0x{raw_line[e.start]:02x} at byte {e.start + 1} of the "
                                "line); the CoNLL-2003 files are ASCII: save it as UTF-8") from None
            cols = line.split(" ")
            if not line.strip() or cols[0] == "-DOCSTART-":
                if words:
                    examples.append(Example(tuple(words), None, tuple(tags)))
                words, tags = [], []
                continue
            if len(cols) != 4:
                raise DataError(f"{where}: expected 4 space-separated columns (word POS chunk NER), got {len(cols)}")
            if cols[3] not in index:
                raise DataError(f"{where}: unknown NER tag {cols[3]!r}; expected O, B-X or I-X with X one of "
                                f"PER, ORG, LOC, MISC ({', '.join(tag_names)})")
            words.append(cols[0])
            tags.append(index[cols[3]])
    if words:  # the last sentence of a file that does not end with a blank line
        examples.append(Example(tuple(words), None, tuple(tags)))
    if not examples:
        raise DataError(f"{path}: no sentences " + ("(the file is empty)" if lineno == 0 else
                                                    "(only blank and -DOCSTART- lines)"))
    return examples
