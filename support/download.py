"""
Getting the data: a GLUE task's archive is downloaded and unpacked into the data folder the first time a run needs
it (MRPC, which has no archive, is built from Microsoft's files as GLUE's script builds it); CoNLL-2003 and PAWS
have no stable download, so for them a missing file is only explained (where to put it). The tests fetch over
file:// URLs."""
import os
import shutil
import tempfile
import urllib.request
import zipfile
from pathlib import Path

import data

GLUE_URL = "https://dl.fbaipublicfiles.com/glue/data/"  # GLUE's archives
# Where ensure_task downloads each task from: the per-task archives of GLUE's download_glue_data.py.
# This table is the place to change a URL; ensure_task(url=...) overrides it for one call.
URLS = {"sst2": GLUE_URL + "SST-2.zip", "mnli": GLUE_URL + "MNLI.zip", "qnli": GLUE_URL + "QNLIv2.zip",
        "qqp": GLUE_URL + "QQP-clean.zip", "cola": GLUE_URL + "CoLA.zip", "stsb": GLUE_URL + "STS-B.zip",
        "rte": GLUE_URL + "RTE.zip", "wnli": GLUE_URL + "WNLI.zip"}
# MRPC has no archive: GLUE's script builds it from Microsoft's two files (SentEval's copies) and GLUE's list of
# the pairs that make dev, as _build_mrpc does. A zip that holds MRPC/train.tsv and dev.tsv works too (url=...).
URLS["mrpc"] = {"train": "https://dl.fbaipublicfiles.com/senteval/senteval_data/msr_paraphrase_train.txt",
                "test": "https://dl.fbaipublicfiles.com/senteval/senteval_data/msr_paraphrase_test.txt",
                "dev_ids": "https://firebasestorage.googleapis.com/v0/b/mtl-sentence-representations.appspot.com/o/"
                           "data%2Fmrpc_dev_ids.tsv?alt=media&token=ec5c0836-31d5-48f4-b431-7480817f1adc"}


def ensure_task(task_name, data_dir, url=None):
    """Download and unpack a task's GLUE archive (MRPC: build it) unless its train and dev files are already
    there. CoNLL-2003 has no stable download: its files are only looked for, and a clear error says where."""
    task, data_dir = data.get_task(task_name), Path(data_dir)
    if task.token_level:
        return _token_task_folder(task, data_dir)
    # training needs train and dev; the test files come in the same archive, and load_test looks for them
    labelled = {s: p for s, p in data.split_paths(task, data_dir).items() if s in ("train", "dev")}
    folder, needed = data_dir / task.folder, list(labelled.values())
    for p in (data_dir, folder):
        if p.exists() and not p.is_dir():
            raise data.DataError(f"{p}: is a file, not a folder; the data dir holds one folder per task ({task.folder}/)")
    for split, p in labelled.items():
        if p.is_dir():
            raise data.DataError(f"{p}: is a folder, not the {task.name} {split} file")
    if all(p.is_file() for p in needed):
        return folder
    url = url or URLS[data._key(task_name)]
    reason = _download(url, data_dir, folder)
    missing = [p for p in needed if not p.is_file()]
    if missing:
        lacking = " and ".join(f"{task.folder}/{p.name}" for p in missing)
        reason = reason or f"the archive from {url} did not contain {lacking}"
        raise data.DataError(f"{task.name} data missing: expected {' and '.join(map(str, missing))}; {reason}. "
                             f"Get the GLUE data (e.g. with GLUE's download_glue_data.py) and pass --data-dir or "
                             f"set GLUE_DIR to the folder that holds {task.folder}/")
    return folder


def _token_task_folder(task, data_dir):
    """CoNLL-2003's folder, if its train and dev files are there; else why not and where to put them."""
    paths = data.split_paths(task, data_dir)
    missing = [str(p) for s, p in paths.items() if s != "test" and not p.is_file()]  # test is read only if asked
    if missing:
        raise data.DataError(f"{task.name} data missing: {' and '.join(missing)} not found. It cannot be downloaded "
                             f"(there is no stable URL): put train.txt, dev.txt and test.txt (4 space-separated "
                             f"columns, word POS chunk NER, IOB2 tags) in {data_dir / task.folder}/ or in "
                             f"{data_dir.parent / task.folder}/ (the folder beside the GLUE data dir)")
    return paths["train"].parent


def _download(url, data_dir, folder):
    """Fetch url (an archive, or MRPC's dict of files) into folder, through a temporary folder in data_dir, so
    that an interrupted download is never taken for data; a data_dir made here and left empty is removed.
    Returns why it failed, or None."""
    created = not data_dir.exists()
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=data_dir) as tmp:  # on the data dir's own disk: moves are renames
            got = _build_mrpc(url, Path(tmp)) if isinstance(url, dict) else _unzip(url, Path(tmp))
            if got is not None:
                folder.mkdir(exist_ok=True)
                for p in got.iterdir():
                    if not (folder / p.name).exists():
                        os.replace(p, folder / p.name)
    except FetchError as e:
        return str(e)
    except (OSError, ValueError, zipfile.BadZipFile) as e:  # a bad archive, or a source file that does not parse
        return f"getting {url if isinstance(url, str) else 'MRPC from ' + ', '.join(url.values())} failed ({e})"
    finally:
        if created and data_dir.is_dir() and not any(data_dir.iterdir()):
            data_dir.rmdir()  # a mistyped --data-dir leaves nothing behind
    return None


class FetchError(OSError):
    """A download that failed: the message names the URL and the cause."""


def _fetch(url, path):
    print(f"downloading {url}")
    try:
        with urllib.request.urlopen(url, timeout=60) as response, open(path, "wb") as f:
            shutil.copyfileobj(response, f)
    except (OSError, ValueError) as e:  # ValueError: a string that is no URL
        raise FetchError(f"getting {url} failed ({e})") from e


def _unzip(url, tmp):
    """The archive at url unpacked in tmp; returns the folder of its shallowest train.tsv (the archive's folder
    is not always named like the task: QNLIv2.zip), or None if it has none."""
    _fetch(url, tmp / "archive.zip")
    with zipfile.ZipFile(tmp / "archive.zip") as z:
        z.extractall(tmp / "unpacked")
    found = sorted((tmp / "unpacked").rglob("train.tsv"), key=lambda p: len(p.parts))
    return found[0].parent if found else None


def _build_mrpc(urls, tmp):
    """MRPC as GLUE's download_glue_data.py makes it, in tmp/MRPC: dev.tsv is the pairs of Microsoft's training
    file that GLUE's list names (408), train.tsv the rest (3668), both with the file's header and its rows as
    they are; test.tsv is Microsoft's test file (1725 pairs) with an index in place of the label."""
    for name, url in urls.items():
        _fetch(url, tmp / name)
    dev_ids = {tuple(line.strip().split("\t")[:2]) for line in (tmp / "dev_ids").read_text(encoding="utf-8").split("\n")
               if line.strip()}
    header, *rows = [r for r in (tmp / "train").read_text(encoding="utf-8").split("\n") if r.strip()]
    out = tmp / "MRPC"
    out.mkdir()
    split = {"dev.tsv": [], "train.tsv": []}
    for r in rows:
        label, id1, id2, s1, s2 = _fields(r)
        split["dev.tsv" if (id1, id2) in dev_ids else "train.tsv"].append("\t".join((label, id1, id2, s1, s2)))
    found = {tuple(r.split("\t")[1:3]) for r in split["dev.tsv"]}
    if found != dev_ids:  # a page served in place of the list, or a changed file
        raise ValueError(f"only {len(found)} of the {len(dev_ids)} dev pairs that {urls['dev_ids']} lists are in "
                         f"{urls['train']}")
    for name, kept in split.items():
        (out / name).write_text("\n".join([header.rstrip("\r"), *kept]) + "\n", encoding="utf-8")
    _, *tests = [r for r in (tmp / "test").read_text(encoding="utf-8").split("\n") if r.strip()]
    lines = ["index\t#1 ID\t#2 ID\t#1 String\t#2 String"] + [
        "\t".join([str(i), *_fields(r)[1:]]) for i, r in enumerate(tests)]
    (out / "test.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def _fields(row):
    """A row of Microsoft's files: quality (the label), the two ids and the two sentences."""
    fields = row.strip().split("\t")
    if len(fields) != 5:
        raise ValueError(f"a row of {len(fields)} tab-separated fields, not 5: {row[:60]!r}")
    return fields
