"""
Getting the data: a GLUE task's archive is downloaded and unpacked into the data folder the first time a run needs
it; CoNLL-2003 and PAWS have no stable download, so for them a missing file is only explained (where to put it).
"""
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
# MRPC is the exception: GLUE never published an MRPC zip (its script builds train/dev from Microsoft's
# msr_paraphrase_*.txt), so the URL below only follows the others' pattern and is unverified. Point it at any
# zip that holds MRPC/train.tsv and MRPC/dev.tsv (a file:// URL works too).
URLS = {"sst2": GLUE_URL + "SST-2.zip", "mnli": GLUE_URL + "MNLI.zip", "qnli": GLUE_URL + "QNLIv2.zip",
        "qqp": GLUE_URL + "QQP-clean.zip", "cola": GLUE_URL + "CoLA.zip", "stsb": GLUE_URL + "STS-B.zip",
        "mrpc": GLUE_URL + "MRPC.zip", "rte": GLUE_URL + "RTE.zip", "wnli": GLUE_URL + "WNLI.zip"}


def ensure_task(task_name, data_dir, url=None):
    """Download and unpack a task's GLUE archive unless its train and dev files are already there.
    CoNLL-2003 has no stable download: its files are only looked for, and a clear error says where to put them."""
    task, data_dir = data.get_task(task_name), Path(data_dir)
    if task.token_level:
        paths = data.split_paths(task, data_dir)
        missing = [str(p) for s, p in paths.items() if s != "test" and not p.is_file()]  # test is read only if asked
        if missing:
            raise data.DataError(f"{task.name} data missing: {' and '.join(missing)} not found. It cannot be downloaded "
                            f"(there is no stable URL): put train.txt, dev.txt and test.txt (4 space-separated columns, "
                            f"word POS chunk NER, IOB2 tags) in {data_dir / task.folder}/ or in "
                            f"{data_dir.parent / task.folder}/ (the folder beside the GLUE data dir)")
        return paths["train"].parent
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
    archive, part = data_dir / f"{task.folder}.zip", data_dir / f"{task.folder}.zip.part"
    reason = None
    created = not data_dir.exists()
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        print(f"downloading {url} -> {archive}")
        with urllib.request.urlopen(url, timeout=60) as response, open(part, "wb") as f:
            shutil.copyfileobj(response, f)
        os.replace(part, archive)  # named .zip only once complete: an interrupted download is never taken for one
        with tempfile.TemporaryDirectory(dir=data_dir) as tmp, zipfile.ZipFile(archive) as z:
            z.extractall(tmp)  # into the data dir's own disk, so the moves below are plain renames
            # the archive's folder is not always named like the task (QNLIv2.zip): take the shallowest train.tsv
            for src in sorted(Path(tmp).rglob("train.tsv"), key=lambda p: len(p.parts))[:1]:
                folder.mkdir(exist_ok=True)
                for p in src.parent.iterdir():
                    if not (folder / p.name).exists():
                        os.replace(p, folder / p.name)
    except (OSError, ValueError, zipfile.BadZipFile) as e:
        reason = f"getting {url} failed ({e})"
    finally:
        if data_dir.is_dir():
            part.unlink(missing_ok=True)
            archive.unlink(missing_ok=True)
            if created and not any(data_dir.iterdir()):
                data_dir.rmdir()  # a mistyped --data-dir leaves nothing behind
    if not all(p.is_file() for p in needed):
        lacking = " and ".join(f"{task.folder}/{p.name}" for p in needed if not p.is_file())
        reason = reason or f"the archive from {url} did not contain {lacking}"
        raise data.DataError(f"{task.name} data missing: expected {' and '.join(map(str, needed))}; {reason}. "
                        f"Get the GLUE data (e.g. with GLUE's download_glue_data.py) and pass --data-dir or "
                        f"set GLUE_DIR to the folder that holds {task.folder}/")
    return folder
